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
// A Tracker is not safe for concurrent use. It reads the time from
// time.Now, so tests drive it with testing/synctest.
type Tracker struct {
	duration time.Duration
	now      func() time.Time
	seen     map[Key]observation
}

// observation is the counter value last seen for a lease and when it was
// first seen with that value.
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
	return &Tracker{duration: duration, now: time.Now, seen: make(map[Key]observation)}
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
