package lease

import "time"

// Tracker decides which leases of other workers have expired, without
// trusting anyone's wall clock (the way of the Kinesis Client Library): an
// owned lease is expired when its Counter has not changed for the lease
// duration, as measured by THIS process's monotonic clock since it first saw
// that counter value. A live owner renews more often than the duration, so
// its counter keeps changing; a dead or cut-off owner's does not.
//
// Feed a Tracker every lease read from the Store (Observe), then ask it
// (Expired). A lease seen for the first time is not expired until a whole
// duration has passed, so a worker that just started waits one duration
// before it takes leases that are owned.
//
// Worker rows (Heartbeat) are tracked the same way, apart from the leases:
// ObserveWorkers, WorkerExpired and ForgetWorker. A worker whose heartbeat
// counter stood still for the duration is dead, and its row may be removed
// (RemoveWorker) with the counter observed.
//
// A Tracker is not safe for concurrent use. It reads the time from
// time.Now, so tests drive it with testing/synctest.
type Tracker struct {
	duration time.Duration
	now      func() time.Time
	seen     map[Key]observation
	workers  map[workerID]observation // apart from seen: never confused with a lease
}

// observation is the counter value last seen for a lease or a worker and
// when it was first seen with that value.
type observation struct {
	counter int64
	since   time.Time // with a monotonic reading
}

// NewTracker returns a Tracker for leases of the given duration, which must
// be positive (it panics otherwise: a programmer error).
func NewTracker(duration time.Duration) *Tracker {
	if duration <= 0 {
		panic("lease: NewTracker with a non-positive duration")
	}
	return &Tracker{duration: duration, now: time.Now, seen: make(map[Key]observation), workers: make(map[workerID]observation)}
}

// Observe records the counters of ls. A lease not seen before, or seen with
// another counter, starts its timer now; a lease seen with the same counter
// keeps its timer running. Leases not in ls are left alone (see Forget).
func (t *Tracker) Observe(ls []Lease) {
	var now time.Time
	for _, l := range ls {
		if o, ok := t.seen[l.Key]; ok && o.counter == l.Counter {
			continue
		}
		if now.IsZero() {
			now = t.now()
		}
		t.seen[l.Key] = observation{counter: l.Counter, since: now}
	}
}

// Expired reports whether l may be taken without stealing it: true when l
// is free (Owner == ""), and for an owned lease when Observe last saw l's
// Key with l.Counter at least the lease duration ago and has not seen it
// change since. A lease whose counter Observe has not seen (not observed, or
// l is newer or older than the last observation) is not expired.
func (t *Tracker) Expired(l Lease) bool {
	if l.Owner == "" {
		return true
	}
	o, ok := t.seen[l.Key]
	if !ok || o.counter != l.Counter {
		return false
	}
	return t.now().Sub(o.since) >= t.duration
}

// Forget drops what the Tracker knows of k, for a lease that was deleted or
// that this process no longer watches. Forgetting an unknown key does
// nothing.
func (t *Tracker) Forget(k Key) {
	delete(t.seen, k)
}

// ObserveWorkers records the counters of ws, as Observe does for leases: a
// worker not seen before, or seen with another counter, starts its timer
// now; a worker seen with the same counter keeps its timer running. Workers
// not in ws are left alone (see ForgetWorker).
func (t *Tracker) ObserveWorkers(ws []Worker) {
	var now time.Time
	for _, w := range ws {
		id := workerID{stream: w.Stream, owner: w.Owner}
		if o, ok := t.workers[id]; ok && o.counter == w.Counter {
			continue
		}
		if now.IsZero() {
			now = t.now()
		}
		t.workers[id] = observation{counter: w.Counter, since: now}
	}
}

// WorkerExpired reports whether w looks dead: true when ObserveWorkers last
// saw the worker (w.Stream, w.Owner) with w.Counter at least the lease
// duration ago and has not seen it change since. A worker whose counter
// ObserveWorkers has not seen (not observed, or w is newer or older than the
// last observation) is not expired.
func (t *Tracker) WorkerExpired(w Worker) bool {
	o, ok := t.workers[workerID{stream: w.Stream, owner: w.Owner}]
	if !ok || o.counter != w.Counter {
		return false
	}
	return t.now().Sub(o.since) >= t.duration
}

// ForgetWorker drops what the Tracker knows of the worker owner of stream,
// for a worker row that was removed. Forgetting an unknown worker does
// nothing.
func (t *Tracker) ForgetWorker(stream, owner string) {
	delete(t.workers, workerID{stream: stream, owner: owner})
}
