package engine

import (
	"sync/atomic"
	"time"
)

// The inline path of Lambda mode. Handing every record to a lane costs more
// than a fast handler: the key queues' bookkeeping (a map look-up and a
// queue per record), and with two CPUs the cache lines of every record and
// of the lock going back and forth between the runner and the lanes. So a
// Lambda-mode session (with a per-record handler) first runs its records on
// one goroutine, the inline runner, one after another in the order they
// were submitted, which keeps every key's order, without key queues. The
// runner starts at Close, once the invocation is submitted; Wait, on the
// invoking goroutine, looks at it every inlineTick. As soon as the handlers
// prove slow — fewer records than one per inlineMaxAverage since the last
// look, which is also what a handler that blocks looks like — Wait hands the
// records the runner has not claimed to the lanes, as Submit would have, for
// the rest of the invocation; the key of the record the runner may still be
// handling stays held until the runner lets it go, so the later records of
// that key wait for it. Everything else is the lanes' code: handle, the
// settlements a lane holds (laneSettles), the cut-off (no record starts once
// the handlers' context ended), and Wait returning at the cut-off while a
// handler still runs.

// inlineTick is how often Wait looks at the inline runner's progress. An
// invocation of 10,000 records with a no-op handler runs inline in about
// 1 ms, before the first look. A look that comes more than two ticks late
// judges nothing: the process did not run, so the handlers' speed is
// unknown.
const inlineTick = 2 * time.Millisecond

// inlineMaxAverage is the most time a record may take on average, handler
// and engine, between two looks at the inline runner before the rest of the
// invocation goes to the lanes. With 16 lanes a handler that waits wins
// from them once it waits for more than about what the lanes cost per record
// (0.3–0.4 µs at 10,000 records on two CPUs); the engine's own work inline
// is 0.1–0.2 µs a record, and a look may see a collection's pause, so the
// bound leaves room for both.
const inlineMaxAverage = 2 * time.Microsecond

// inlineTaken, set in inlineRun.claimed, says Wait handed the records the
// runner had not claimed to the lanes.
const inlineTaken = int64(1) << 62

// inlineRun is the state of a session's inline runner.
type inlineRun struct {
	// parts are the deliveries submitted, in order (under Session.mu until
	// Close starts the runner; then read only).
	parts [][]Delivery
	n     int // the number of deliveries in parts
	// claimed counts the records the runner claimed (it handles the
	// claimed ones, in order; the last one may still be running), plus
	// inlineTaken once the rest went to the lanes.
	claimed atomic.Int64
	// over (under Session.mu) says the runner ended; nothing is handed
	// over any more.
	over bool
	// held (under Session.mu) is the key queue of the record the runner
	// was handling when the rest went to the lanes: held for the runner,
	// which lets it go when it ends.
	held *keyQueue
	// lb is the runner's settlements not yet on the watermark.
	lb laneSettles
}

// startInlineLocked starts the inline runner over what was submitted, as a
// lane that Wait counts (Close, under the lock).
func (s *Session) startInlineLocked() {
	s.started = true
	s.inlining = false // Submit refuses from now on (the scheduler is closed)
	if s.inl.n == 0 {
		close(s.lanesDone)
		return
	}
	s.watching = true
	s.lanes.Store(1)
	go func() {
		defer s.laneEnded()
		s.runInline()
	}()
}

// runInline handles the submitted records in order until every one was
// handled, the handlers' context ended, or Wait handed the rest to the
// lanes; then it lets go of the key Wait held for it. After a hand-over it
// goes on as one of the lanes: handOver started one fewer, so that no more
// keys are handled at once than the session has lanes (Config.Lanes; the
// record the runner was handling counts as one of them).
func (s *Session) runInline() {
	lb := &s.inl.lb
	if s.runInlineRecords(lb) {
		s.lane(lb) // Lambda mode, whose lanes hold their settlements (laneSettles)
	}
}

// runInlineRecords is runInline's own part: it reports whether the rest
// went to the lanes.
func (s *Session) runInlineRecords(lb *laneSettles) (handed bool) {
	defer func() {
		s.flushSettles(lb)
		s.mu.Lock()
		s.inl.over = true
		if ks := s.inl.held; ks != nil {
			s.inl.held = nil
			s.sched.release(ks)
		}
		s.mu.Unlock()
	}()
	for _, part := range s.inl.parts {
		for i := range part {
			if s.ctx.Err() != nil {
				return false // cut off: the rest is not started
			}
			if s.inl.claimed.Add(1)&inlineTaken != 0 {
				return true // the rest went to the lanes
			}
			d := &part[i]
			d.sess = s
			d.firstAttempt, d.uncounted = d.msg().Attempt, 0
			if s.e.written.take(d.msg()) {
				s.settleWritten(d)
				continue
			}
			s.handle(d, lb)
		}
	}
	return false
}

// watchInline (in Wait) watches the inline runner until it ends, the
// handlers' context ends, or the handlers prove slow: then it hands the
// rest of the invocation to the lanes.
func (s *Session) watchInline() {
	if !s.watching {
		return
	}
	t := time.NewTimer(inlineTick)
	defer t.Stop()
	last, lastAt := int64(0), time.Now()
	for {
		select {
		case <-s.lanesDone:
			return
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		done := s.inl.claimed.Load() &^ inlineTaken
		// A look that comes late says this goroutine did not run: the
		// process was likely not running either (a busy machine, a
		// function's CPU share used up), so the runner's slowness is not
		// its handlers'. The next look judges.
		if took := now.Sub(lastAt); took <= 2*inlineTick && time.Duration(done-last)*inlineMaxAverage < took {
			s.handOver()
			return
		}
		last, lastAt = done, now
		t.Reset(inlineTick)
	}
}

// handOver hands the records the inline runner has not claimed to the
// lanes, which it starts, holding the key of the record the runner may
// still be handling until the runner lets it go.
func (s *Session) handOver() {
	s.mu.Lock()
	if s.inl.over {
		s.mu.Unlock()
		return
	}
	claimed := s.inl.claimed.Or(inlineTaken)
	if claimed >= int64(s.inl.n) {
		s.mu.Unlock()
		return // nothing left to hand over
	}
	// The rest, from the first record not claimed; last is the last one
	// claimed.
	var rest [][]Delivery
	var last *Delivery
	off := 0
	for _, part := range s.inl.parts {
		lo := min(max(int(claimed)-off, 0), len(part))
		if lo > 0 {
			last = &part[lo-1]
		}
		if lo < len(part) {
			rest = append(rest, part[lo:])
		}
		off += len(part)
	}
	if last != nil {
		s.sched.keysMu.Lock()
		ks := s.sched.queueOf(last.msg().PartitionKey)
		s.sched.keysMu.Unlock()
		ks.active = true
		s.sched.running++
		s.inl.held = ks
	}
	// The scheduler is closed: counted as running while the rest goes in,
	// the hand-over keeps the lanes from ending before they have it. The
	// runner becomes the last lane once its record returns (runInline).
	s.sched.running++
	s.spawnLanesLocked(s.nlanes - 1)
	s.mu.Unlock()
	for _, part := range rest {
		_, _ = s.pushLambda(part, true)
	}
	s.mu.Lock()
	s.sched.running--
	s.sched.broadcast()
	s.mu.Unlock()
}
