// Package pool keeps slices for reuse from one GetRecords answer to the
// next (long-running mode), with one rule for which pooled slice may serve
// which answer: one far larger than an answer needs is not used for it,
// because a record of the answer held for long (a retry) would hold it all.
package pool

import "sync"

// Oversized reports whether a pooled slice of capacity c is too large to
// serve n elements: more than four times n, and some. It is left to the
// garbage collector then (a burst is over); the pool takes the sizes in
// use.
func Oversized(c, n int) bool { return c > 4*n+64 }

// Slices is a pool of slices of T. The zero value is not usable: Max must
// be set.
type Slices[T any] struct {
	// Max is the largest capacity Put keeps.
	Max int
	// Reset makes a used slice (its length the part used) ready to be used
	// again; nil means clear. It must leave every element as Get may hand
	// it out: the part beyond the length is never touched.
	Reset func([]T)

	p sync.Pool
}

// Get returns an empty slice with room for at least n elements, each as
// Reset left it (zero for a new one): a pooled one unless it is smaller
// than n or Oversized for n.
func (s *Slices[T]) Get(n int) *[]T {
	sp, _ := s.p.Get().(*[]T)
	if sp == nil || Oversized(cap(*sp), n) {
		sp = new([]T)
	}
	if cap(*sp) < n {
		*sp = make([]T, 0, n)
	}
	*sp = (*sp)[:0]
	return sp
}

// Put gives back sp, whose elements up to its length were used and are
// no longer read: it resets them (so the pool keeps nothing they point to
// alive) and keeps the slice unless its capacity is above Max.
func (s *Slices[T]) Put(sp *[]T) {
	if cap(*sp) > s.Max {
		return
	}
	if s.Reset != nil {
		s.Reset(*sp)
	} else {
		clear(*sp)
	}
	*sp = (*sp)[:0]
	s.p.Put(sp)
}
