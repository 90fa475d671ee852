package engine

import (
	"context"
	"log/slog"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/observe"
)

// Mode is what the engine does with a record that stays unsettled, and how
// it writes: the adapter's one mode type (observe.Mode, which the root
// package names lambdaadapter.Mode), "lambda" or "ecs", as logs and hooks
// show it.
type Mode = observe.Mode

const (
	// ModeLambda: an unsettled record is given up on (the invocation reports
	// it and Lambda delivers it again with every later record of its shard),
	// so no later record of its shard is started, and writes go out in shard
	// order.
	ModeLambda = observe.ModeLambda
	// ModeLongRunning: an unsettled record is delivered again in process
	// after a backoff (Message.Attempt counted up), while later records of
	// its partition key wait for it; writes are batched.
	ModeLongRunning = observe.ModeECS
)

// policy is everything a session's mode decides, chosen once when the
// session starts (policyOf): the code that handles records calls it and
// never looks at the mode. Its funcs take the session as their first
// argument; most are methods of Session.
type policy struct {
	// keepKeys and parking configure the key scheduler (see schedConfig):
	// Lambda mode keeps the key queues of its invocation; long-running
	// mode forgets empty ones and parks records for a retry.
	keepKeys, parking bool
	// orderedWrites makes the writer send each shard's writes in its
	// order, one round at a time (Lambda mode); otherwise they are
	// batched freely, several rounds at once (see writer).
	orderedWrites bool
	// laneSettles gives each lane (but a batch lane) its laneSettles, so
	// its settlements reach the watermarks together (Lambda mode).
	laneSettles bool
	// start starts what runs from the session's start to its end.
	start func(s *Session)
	// submit is Session.Submit.
	submit func(s *Session, ctx context.Context, ds []Delivery) (int, error)
	// runKey handles the records of ks, which the lane holds, and of the
	// keys the lane takes after it (see Session.runKeyLongRunning).
	runKey func(s *Session, ks *keyQueue, lb *laneSettles)
	// close runs in Close, under the session's lock.
	close func(s *Session)
	// leave handles a record that stays unsettled (see Session.leave).
	leave func(s *Session, d *Delivery, out message.Outcome, err error, parks *[]parked, counted bool)
	// gaveUp runs when d was given up on, before it is done.
	gaveUp func(s *Session, d *Delivery)
}

// lambdaPolicy is the policy of ModeLambda: a session is one invocation. An
// unsettled record is given up on: Lambda delivers it again with every
// later record of its shard, so none is started and the later records of
// its key wait for that delivery; writes go out in shard order. With a
// per-record handler the records run on the inline runner until its
// handlers prove slow, then on the lanes (see inline.go); with a
// BatchHandler the lanes start with the first records. Both watch the
// cut-off themselves.
var lambdaPolicy = policy{
	keepKeys:      true,
	orderedWrites: true,
	laneSettles:   true,
	start:         (*Session).startLambda,
	submit:        (*Session).submitLambda,
	runKey:        (*Session).runKeyLambda,
	close:         func(*Session) {},
	leave:         (*Session).giveUpUnsettled,
	gaveUp:        (*Session).deadKeyOf,
}

// longRunningPolicy is the policy of ModeLongRunning: a session is the life
// of a consumer. An unsettled record is delivered again in process after a
// backoff, while the later records of its key wait for it; writes are
// batched. The lanes and the retry timer run from the start; a
// cancellation wakes the waiting lanes and Submits so that they end.
var longRunningPolicy = policy{
	parking: true,
	start:   (*Session).startLongRunning,
	submit:  (*Session).submitLongRunning,
	runKey:  (*Session).runKeyLongRunning,
	close:   (*Session).stopRetriesLocked,
	leave:   (*Session).redeliver,
	gaveUp:  func(*Session, *Delivery) {},
}

// policyOf returns the policy of mode m. A mode that is neither is a
// programmer's error.
func policyOf(m Mode) *policy {
	switch m {
	case ModeLambda:
		return &lambdaPolicy
	case ModeLongRunning:
		return &longRunningPolicy
	}
	panic("engine: session without a mode")
}

// startLambda starts a Lambda-mode session: with a per-record handler, the
// records go to the inline runner first (see inline.go).
func (s *Session) startLambda() {
	s.stopWake = func() bool { return false }
	s.inlining = !s.e.Batch()
}

// startLongRunning starts the lanes, the retry timer, and the wake-up of
// waiting lanes and Submits at the session context's end (long-running
// mode).
func (s *Session) startLongRunning() {
	s.timerDone, s.quit = make(chan struct{}), make(chan struct{})
	s.startLanesLocked()
	go func() {
		defer close(s.timerDone)
		s.sched.timer(s.quit)
	}()
	// A cancellation wakes waiting lanes and Submits so they end. (In
	// Lambda mode a waiting lane watches the context itself.)
	s.stopWake = context.AfterFunc(s.ctx, func() {
		s.mu.Lock()
		s.sched.broadcast()
		s.mu.Unlock()
	})
}

// stopRetriesLocked (long-running mode) makes a record that stays
// unsettled from now on given up on, and gives up on those waiting for a
// retry now.
func (s *Session) stopRetriesLocked() {
	s.stopping = true
	s.releaseParkedLocked(nil)
}

// giveUpUnsettled gives up on d, which stays unsettled: it comes again from
// the next delivery of its shard (Lambda mode; in long-running mode, a
// record of a shard being handed over or of a session stopping).
func (s *Session) giveUpUnsettled(d *Delivery, out message.Outcome, err error, _ *[]parked, _ bool) {
	s.e.logRecord(s.ctx, slog.LevelWarn, s.cfg.Mode, "lambdaadapter: record left unsettled; it comes again", d.msg(), out, err)
	s.giveUp(d)
}

// redeliver (long-running mode) delivers d, which stays unsettled, again
// after a backoff: it parks d, or appends it to parks when not nil (a batch
// parks its records in order at its end). A record of a shard being handed
// over, or of a session stopping, is given up on instead.
func (s *Session) redeliver(d *Delivery, out message.Outcome, err error, parks *[]parked, counted bool) {
	if d.shard.quiescing.Load() || s.isStopping() {
		s.giveUpUnsettled(d, out, err, parks, counted)
		return
	}
	m := d.msg()
	n := max(m.Attempt-retryBase(d)+d.uncounted, 1)
	wait := s.cfg.Backoff(n)
	s.e.logRecord(s.ctx, slog.LevelWarn, s.cfg.Mode, "lambdaadapter: record left unsettled; it comes again", m, out, err,
		slog.Duration(AttrRetryIn, wait))
	if parks != nil {
		*parks = append(*parks, parked{d, wait, counted})
		return
	}
	s.park(d, wait, counted)
}

// deadKeyOf (Lambda mode) marks the partition key of d, given up on: the
// later records of the key are not started (see deadKey).
func (s *Session) deadKeyOf(d *Delivery) {
	s.mu.Lock()
	if s.deadKeys == nil {
		s.deadKeys = map[string]bool{}
	}
	s.deadKeys[d.msg().PartitionKey] = true
	s.ndead.Store(int32(len(s.deadKeys)))
	s.mu.Unlock()
}
