package engine

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"
)

// turnLimit is how many records a lane handles of one key before it lets
// another ready key have the lane (a key that never runs dry must not keep
// a lane for ever).
const turnLimit = 64

// maxFreeKeys bounds keyScheduler.freeKeys.
const maxFreeKeys = 1024

// keyQueue is the records of one partition key waiting for a lane, oldest
// first.
type keyQueue struct {
	key         string
	head, tail  *Delivery
	active      bool      // a lane (or the batch) holds the key
	inReady     bool      // in keyScheduler.ready
	parkedUntil time.Time // the head waits for its retry until then; zero when not parked
	heapIdx     int
}

func (ks *keyQueue) dueAt() time.Time { return ks.parkedUntil }
func (ks *keyQueue) setHeapIdx(i int) { ks.heapIdx = i }

// laneWake is how a waiting lane is woken: a token on ch. woken (under the
// scheduler's lock) says a token was sent and the lane is counted in
// waking.
type laneWake struct {
	ch    chan struct{} // capacity 1
	woken bool
}

// schedConfig configures a keyScheduler.
type schedConfig struct {
	// keep keeps a key queue until the scheduler is dropped (Lambda mode:
	// the runner pushes an invocation a chunk at a time, and later records
	// of a key find its queue, so what the session allocates does not
	// depend on how fast the lanes ran); the map of key queues is then
	// guarded by keysMu instead of the lock (see lockQueuesOf). Without
	// keep, a key queue its lane lets go empty is forgotten (keys come and
	// go for ever) and kept for a new key.
	keep bool
	// batch: one lane, which waits on the broadcast as Submits do (see
	// wait), so a key made ready wakes every waiter instead of one idle
	// lane.
	batch bool
	// maxQueued, when positive, is how many queued records make waitRoom
	// wait.
	maxQueued int
	// parking: records may be parked for a retry (long-running mode), and
	// timer makes their keys ready when they are due.
	parking bool
}

// keyScheduler hands a session's records to its lanes by partition key.
// It keeps one queue per key, oldest record first; the keys ready for a
// lane, in the order they became ready; the keys whose first record waits
// for a retry (parked), by due time; and the lanes waiting for a ready key.
//
// A lane holds a key from take (or takeReady) until release, and no other
// lane gets it meanwhile, so the records of one key are handled one after
// another in the order they were pushed; a parked record keeps its place
// before the later records of its key, which wait for it. A ready key wakes
// one waiting lane, and a lane that takes a key wakes the next one while
// more are ready, so a burst of ready keys does not wake every lane at
// once.
//
// Its state is guarded by mu, its owner's lock (Session.mu): the caller
// holds it for every method but take, timer and kick, which take it
// themselves, and lockQueuesOf, which returns with it held.
type keyScheduler struct {
	mu *sync.Mutex
	schedConfig

	// keys is the queue of each partition key; in keep mode it is
	// guarded by keysMu instead of mu.
	keys    map[string]*keyQueue
	keysMu  sync.Mutex
	ready   []*keyQueue        // keys ready for a lane, in the order they became ready
	parked  dueHeap[*keyQueue] // keys waiting for a record's retry, by time
	queued  int                // records in key queues
	running int                // keys held by a lane (or the batch being handled)
	closed  bool               // nothing more is pushed; lanes end once nothing is left
	changed broadcast          // woken when waiters should look again
	// idle are the lanes waiting in take for a ready key, each on its own
	// channel, so that a key made ready wakes one lane, not all of them;
	// waking counts the lanes woken that have not taken the lock since.
	// While a woken lane is on its way, no other is woken: the lane that
	// takes a key wakes the next one if more are ready (takeReady).
	idle   []*laneWake
	waking int
	// freeKeys are key queues forgotten (without keep), for the next new
	// key (keys come and go with every record when they are random).
	freeKeys []*keyQueue
	// kicked wakes the timer when a key was parked.
	kicked chan struct{}
}

// init readies k for use under mu.
func (k *keyScheduler) init(mu *sync.Mutex, cfg schedConfig) {
	k.mu, k.schedConfig = mu, cfg
	if cfg.parking {
		k.kicked = make(chan struct{}, 1)
	}
}

// push puts d into its key's queue: last, or first when it waits for a
// retry (it keeps its place before the later records of its key). It
// returns the key's queue.
func (k *keyScheduler) push(d *Delivery, first bool) *keyQueue {
	if k.keep {
		k.keysMu.Lock() // see keyScheduler.keys
		defer k.keysMu.Unlock()
	}
	ks := k.queueOf(d.msg().PartitionKey)
	k.pushTo(ks, d, first)
	return ks
}

// queueOf returns the queue of key, made (a forgotten one again, when
// there is one) when there is none.
func (k *keyScheduler) queueOf(key string) *keyQueue {
	if ks := k.keys[key]; ks != nil {
		return ks
	}
	if k.keys == nil {
		k.keys = map[string]*keyQueue{}
	}
	var ks *keyQueue
	if n := len(k.freeKeys); n > 0 {
		ks = k.freeKeys[n-1]
		k.freeKeys[n-1] = nil
		k.freeKeys = k.freeKeys[:n-1]
	} else {
		ks = &keyQueue{}
	}
	*ks = keyQueue{key: key, heapIdx: -1}
	k.keys[key] = ks
	return ks
}

// forget removes ks, which is empty, held by no lane, not ready and not
// parked, and keeps it for a new key.
func (k *keyScheduler) forget(ks *keyQueue) {
	delete(k.keys, ks.key)
	if len(k.freeKeys) < maxFreeKeys {
		*ks = keyQueue{}
		k.freeKeys = append(k.freeKeys, ks)
	}
}

// lockQueuesOf sets kss[i] to the key queue of ds[i], making the new ones
// from slab (allocated as needed, with room for the more deliveries to
// come), and returns what is left of slab, with the lock held. The caller
// must not hold the lock. In keep mode it finds the queues before it takes
// the lock, under keysMu, which keeps the lanes' waits for the lock short
// (kept queues stay valid); otherwise it finds them under the lock, and
// they are valid while the caller holds it.
func (k *keyScheduler) lockQueuesOf(ds []Delivery, kss []*keyQueue, slab []keyQueue, more int) []keyQueue {
	if k.keep {
		k.keysMu.Lock()
		slab = k.queuesOf(ds, kss, slab, more)
		k.keysMu.Unlock()
		k.mu.Lock()
		return slab
	}
	k.mu.Lock()
	return k.queuesOf(ds, kss, slab, more)
}

// queuesOf is lockQueuesOf once the lock that guards keys is held.
func (k *keyScheduler) queuesOf(ds []Delivery, kss []*keyQueue, slab []keyQueue, more int) []keyQueue {
	if k.keys == nil {
		k.keys = make(map[string]*keyQueue, min(len(ds)+more, 1024))
	}
	for i := range ds {
		key := ds[i].msg().PartitionKey
		ks := k.keys[key]
		if ks == nil {
			if len(slab) == 0 {
				slab = make([]keyQueue, min(len(ds)-i+more, 256))
			}
			ks = &slab[0]
			slab = slab[1:]
			ks.key, ks.heapIdx = key, -1
			k.keys[key] = ks
		}
		kss[i] = ks
	}
	return slab
}

// pushTo is push into ks, the queue of d's key.
func (k *keyScheduler) pushTo(ks *keyQueue, d *Delivery, first bool) {
	if first {
		d.next = ks.head
		ks.head = d
		if ks.tail == nil {
			ks.tail = d
		}
	} else {
		d.next = nil
		if ks.tail == nil {
			ks.head = d
		} else {
			ks.tail.next = d
		}
		ks.tail = d
	}
	k.queued++
	k.makeReady(ks)
}

// makeReady makes ks ready for a lane if it has records, is not held and
// is not waiting for a retry.
func (k *keyScheduler) makeReady(ks *keyQueue) {
	if ks.head == nil || ks.active || ks.inReady || !ks.parkedUntil.IsZero() {
		return
	}
	ks.inReady = true
	k.ready = append(k.ready, ks)
	if k.batch {
		k.broadcast() // the batch lane waits as the others do
	} else {
		k.wakeLane()
	}
}

// pop takes the first record of ks, which its lane holds.
func (k *keyScheduler) pop(ks *keyQueue) *Delivery {
	d := ks.head
	ks.head = d.next
	if ks.head == nil {
		ks.tail = nil
	}
	d.next = nil
	k.queued--
	if k.maxQueued > 0 {
		k.broadcast() // a Submit may go on
	}
	return d
}

// popRun takes up to n (≥ 1) records from the head of ks, which its lane
// holds and which has at least one, and returns the first; they stay
// linked through next.
func (k *keyScheduler) popRun(ks *keyQueue, n int) *Delivery {
	first, last := ks.head, ks.head
	i := 1
	for ; i < n && last.next != nil; i++ {
		last = last.next
	}
	ks.head = last.next
	if ks.head == nil {
		ks.tail = nil
	}
	last.next = nil
	k.queued -= i
	if k.maxQueued > 0 {
		k.broadcast() // a Submit may go on
	}
	return first
}

// unpopRun puts the records linked from d back at the head of ks.
func (k *keyScheduler) unpopRun(ks *keyQueue, d *Delivery) {
	last := d
	k.queued++
	for last.next != nil {
		last = last.next
		k.queued++
	}
	last.next = ks.head
	ks.head = d
	if ks.tail == nil {
		ks.tail = last
	}
}

// release gives ks back after a lane held it: it is ready again if it has
// records that do not wait for a retry; an empty one is forgotten, unless
// in keep mode.
func (k *keyScheduler) release(ks *keyQueue) {
	ks.active = false
	k.running--
	if ks.head == nil && ks.parkedUntil.IsZero() {
		if !k.keep {
			k.forget(ks)
		}
	} else {
		k.makeReady(ks)
	}
	k.broadcast()
}

// turnOver reports whether the lane holding ks, which handled turn records
// of it in a row, lets it go: its queue is empty, its head waits for a
// retry, ctx ended, or the lane has had its turn and another key is ready.
func (k *keyScheduler) turnOver(ctx context.Context, ks *keyQueue, turn int) bool {
	return ks.head == nil || !ks.parkedUntil.IsZero() || ctx.Err() != nil || (turn >= turnLimit && len(k.ready) > 0)
}

// switchKey releases ks and holds the next ready key, which it returns; nil
// when none is ready or ctx ended.
func (k *keyScheduler) switchKey(ctx context.Context, ks *keyQueue) *keyQueue {
	k.release(ks)
	return k.takeReady(ctx)
}

// takeReady holds the first ready key and returns it, or nil when none is
// ready or ctx ended.
func (k *keyScheduler) takeReady(ctx context.Context) *keyQueue {
	if len(k.ready) == 0 || ctx.Err() != nil {
		return nil
	}
	ks := k.ready[0]
	k.ready[0] = nil
	k.ready = k.ready[1:]
	ks.inReady = false
	ks.active = true
	k.running++
	if len(k.ready) > 0 {
		k.wakeLane() // one more lane may help
	}
	return ks
}

// take waits for a ready key and holds it; it takes the lock itself. It
// returns nil when the lane should end: k is closed and empty, or ctx
// ended. The lane waits on *wp, its own (see keyScheduler.idle), made when
// first needed. idle, when not nil, is called once, without the lock,
// before the lane first waits (a Lambda-mode lane hands its settlements
// to the watermarks then).
func (k *keyScheduler) take(ctx context.Context, wp **laneWake, idle func()) *keyQueue {
	k.mu.Lock()
	defer k.mu.Unlock()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if ks := k.takeReady(ctx); ks != nil {
			return ks
		}
		if k.closed && k.empty() {
			k.broadcast() // the other lanes end too
			return nil
		}
		if idle != nil {
			k.mu.Unlock()
			idle()
			k.mu.Lock()
			idle = nil
			continue // look again: the lock was let go
		}
		if *wp == nil {
			*wp = &laneWake{ch: make(chan struct{}, 1)}
		}
		w := *wp
		k.idle = append(k.idle, w)
		k.mu.Unlock()
		select {
		case <-w.ch:
		case <-ctx.Done(): // the cut-off (Lambda mode), or a cancellation
		}
		k.mu.Lock()
		if w.woken {
			w.woken = false
			k.waking--
			select {
			case <-w.ch: // woken, but the context's end came first
			default:
			}
		} else if i := slices.Index(k.idle, w); i >= 0 {
			k.idle = slices.Delete(k.idle, i, i+1)
		}
	}
}

// wakeLane wakes one waiting lane, unless one is already on its way.
func (k *keyScheduler) wakeLane() {
	if k.waking > 0 || len(k.idle) == 0 {
		return
	}
	w := k.idle[len(k.idle)-1]
	k.idle[len(k.idle)-1] = nil
	k.idle = k.idle[:len(k.idle)-1]
	k.signal(w)
}

// wakeAllLanes wakes every waiting lane (the session may be over).
func (k *keyScheduler) wakeAllLanes() {
	for i, w := range k.idle {
		k.signal(w)
		k.idle[i] = nil
	}
	k.idle = k.idle[:0]
}

func (k *keyScheduler) signal(w *laneWake) {
	w.woken = true
	k.waking++
	select {
	case w.ch <- struct{}{}:
	default: // a token from an earlier wake-up is still there
	}
}

// wait registers a waiter and returns the channel closed at the next
// broadcast.
func (k *keyScheduler) wait() <-chan struct{} { return k.changed.wait() }

// leave uncounts a waiter that stops waiting on ch before a broadcast
// closed it.
func (k *keyScheduler) leave(ch <-chan struct{}) { k.changed.leave(ch) }

// broadcast wakes every waiter, and every waiting lane once k is closed
// (they end once it is empty). The woken are no longer counted, so the next
// broadcasts (a Submit readies many keys under one lock) cost nothing until
// someone waits again.
func (k *keyScheduler) broadcast() {
	if k.closed {
		k.wakeAllLanes()
	}
	k.changed.wake()
}

// close marks k closed: the lanes end once it is empty.
func (k *keyScheduler) close() { k.closed = true }

// empty reports whether nothing is left for a lane to do.
func (k *keyScheduler) empty() bool {
	return k.queued == 0 && k.running == 0 && len(k.parked) == 0
}

// waitRoom waits, letting the lock go, while maxQueued records are queued
// and k is open, or until ctx ends (it then returns ctx's error).
func (k *keyScheduler) waitRoom(ctx context.Context) error {
	for k.maxQueued > 0 && k.queued >= k.maxQueued && !k.closed {
		ch := k.wait()
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			k.mu.Lock()
			k.leave(ch)
			return ctx.Err()
		}
		k.mu.Lock()
	}
	return nil
}

// park puts d back at the head of its key's queue, where it waits until
// until (wake it with kick); the later records of its key wait for it.
func (k *keyScheduler) park(d *Delivery, until time.Time) {
	ks := k.queueOf(d.msg().PartitionKey)
	if ks.inReady {
		// Not ready any more: its new head waits for its retry.
		for i, r := range k.ready {
			if r == ks {
				k.ready = append(k.ready[:i], k.ready[i+1:]...)
				break
			}
		}
		ks.inReady = false
	}
	ks.parkedUntil = until
	k.push(d, true)
	if ks.heapIdx >= 0 {
		heap.Fix(&k.parked, ks.heapIdx)
	} else {
		heap.Push(&k.parked, ks)
	}
}

// kick tells the timer that a key was parked; the caller need not hold
// the lock.
func (k *keyScheduler) kick() {
	select {
	case k.kicked <- struct{}{}:
	default:
	}
}

// unparkDue makes the parked keys due at now ready, and returns how long
// until the next one is due (-1: none is parked).
func (k *keyScheduler) unparkDue(now time.Time) time.Duration {
	for len(k.parked) > 0 {
		ks := k.parked[0]
		if wait := ks.parkedUntil.Sub(now); wait > 0 {
			return wait
		}
		heap.Pop(&k.parked)
		ks.parkedUntil = time.Time{}
		k.makeReady(ks)
	}
	return -1
}

// timer makes parked keys ready when they are due, until quit is closed;
// it takes the lock itself.
func (k *keyScheduler) timer(quit <-chan struct{}) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		k.mu.Lock()
		next := k.unparkDue(time.Now())
		k.mu.Unlock()
		t.Stop()
		if next >= 0 {
			t.Reset(next)
		}
		select {
		case <-t.C:
		case <-k.kicked:
		case <-quit:
			return
		}
	}
}

// unparkHeads takes the parked records that match (every one when match is
// nil) out of their queues, makes their keys ready again (or forgets the
// empty ones) and returns the records appended to given.
func (k *keyScheduler) unparkHeads(match func(*Delivery) bool, given []*Delivery) []*Delivery {
	for i := 0; i < len(k.parked); {
		ks := k.parked[i]
		if match != nil && !match(ks.head) {
			i++
			continue
		}
		heap.Remove(&k.parked, i)
		ks.parkedUntil = time.Time{}
		given = append(given, k.pop(ks))
		if ks.head == nil && !ks.active {
			k.forget(ks)
		} else {
			k.makeReady(ks)
		}
	}
	return given
}
