package engine

import "time"

// dueItem is what a dueHeap holds: something due at a time, that knows its
// index in the heap (for heap.Fix and heap.Remove; -1 when out of it).
type dueItem interface {
	dueAt() time.Time
	setHeapIdx(int)
}

// dueHeap orders items by the time they are due, earliest first; it is a
// container/heap.Interface. It holds the writes that are not due yet and
// the keys parked for a retry.
type dueHeap[T dueItem] []T

func (h dueHeap[T]) Len() int           { return len(h) }
func (h dueHeap[T]) Less(i, j int) bool { return h[i].dueAt().Before(h[j].dueAt()) }
func (h dueHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].setHeapIdx(i)
	h[j].setHeapIdx(j)
}

func (h *dueHeap[T]) Push(x any) {
	it := x.(T)
	it.setHeapIdx(len(*h))
	*h = append(*h, it)
}

func (h *dueHeap[T]) Pop() any {
	old := *h
	n := len(old) - 1
	it := old[n]
	var zero T
	old[n] = zero
	*h = old[:n]
	it.setHeapIdx(-1)
	return it
}
