package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/retry"
	"github.com/shardsettle/lambdaadapter/observe"
)

// ErrMaxRecordAge is wrapped by the error of a record that was not handled
// because it was older than Config.MaxRecordAge.
var ErrMaxRecordAge = errors.New("lambdaadapter: record older than the maximum record age")

// observe reports what became of d to the record hooks.
func (s *Session) observe(d *Delivery, out message.Outcome, action observe.Action) {
	if d.obs == nil && !s.e.cfg.Hooks.WantsRecords() {
		return // nothing to tell (kept small: the lanes' stacks need not grow)
	}
	s.observeRecord(d, out, action)
}

// observeRecord is observe once there is something to tell.
func (s *Session) observeRecord(d *Delivery, out message.Outcome, action observe.Action) {
	h := &s.e.cfg.Hooks
	var end func(observe.Record)
	var handled time.Duration
	if o := d.obs; o != nil {
		end, handled = o.endSpan, o.handled
		o.endSpan, o.hctx = nil, nil
	}
	if !h.WantsRecords() && end == nil {
		return
	}
	m := d.msg()
	r := observe.Record{
		Mode: s.cfg.Mode, Stream: m.StreamARN, ShardID: m.ShardID, SequenceNumber: m.SequenceNumber,
		SubSequenceNumber: m.SubSequenceNumber, Aggregated: m.Aggregated, PartitionKey: m.PartitionKey,
		Outcome: out.Kind().String(), Action: action, Attempt: m.Attempt, Handled: handled, Err: out.Err(),
	}
	switch {
	case d.Poison != nil:
		r.Reason = "malformed aggregate"
	case errors.Is(out.Err(), ErrMaxRecordAge):
		r.Reason = "max record age"
	}
	if !m.ArrivalTime.IsZero() {
		r.Age = max(time.Since(m.ArrivalTime), 0) // a clock behind the stream's reads 0
	}
	h.Record(r)
	if end != nil {
		end(r)
	}
}

// startSpan gives the trace hook, if any, the start of d's handling: the
// handler then gets the context it returns.
func (s *Session) startSpan(d *Delivery) {
	if t := s.e.cfg.Hooks.Tracer(); t != nil {
		o := d.observed()
		o.hctx, o.endSpan = t.StartRecord(d.shard.handlerContext(s.ctx), d.msg())
	}
}

// actionOf is the observe action of a decision that writes.
func actionOf(a retry.Action) observe.Action {
	switch a {
	case retry.DelayQueue:
		return observe.ActionDelay
	case retry.DeadLetter:
		return observe.ActionDeadLetter
	default:
		return observe.ActionCopy
	}
}

// writeKindOf is the observe kind of a write.
func writeKindOf(a retry.Action) observe.WriteKind {
	switch a {
	case retry.DelayQueue:
		return observe.WriteDelay
	case retry.DeadLetter:
		return observe.WriteDeadLetter
	default:
		return observe.WriteCopy
	}
}

// tooOld reports whether d is past the maximum record age (never for a
// record without an arrival time).
func (s *Session) tooOld(d *Delivery) (time.Duration, bool) {
	max := s.e.cfg.MaxRecordAge
	if max <= 0 || d.msg().ArrivalTime.IsZero() {
		return 0, false
	}
	age := time.Since(d.msg().ArrivalTime)
	return age, age > max
}

// expire concludes d, which is past the maximum record age, without
// handling it: dead-lettered (reason "max record age") when there is a
// dead-letter target, else settled with a warning. lb is conclude's.
func (s *Session) expire(d *Delivery, age time.Duration, lb *laneSettles) {
	e := s.e
	out := message.Drop(fmt.Errorf("%w: arrived %s ago (limit %s)", ErrMaxRecordAge, age.Round(time.Millisecond), e.cfg.MaxRecordAge))
	if s.ctx.Err() != nil || !d.shard.Live() {
		// As conclude: nothing changes. The hooks read d before giveUp
		// gives its memory back.
		s.observe(d, out, observe.ActionUnsettled)
		s.giveUp(d)
		return
	}
	if !e.cfg.Policy.DeadLetter {
		e.logRecord(s.ctx, slog.LevelWarn, s.cfg.Mode, "lambdaadapter: record past the maximum record age dropped without a dead-letter target", d.msg(), out, nil)
		s.observe(d, out, observe.ActionSettled)
		s.settleIn(d, lb)
		return
	}
	dec := retry.Decision{Action: retry.DeadLetter, Note: "max record age"}
	w, err := e.newWrite(d, dec, out, time.Now())
	if err != nil {
		e.logRecord(s.ctx, slog.LevelError, s.cfg.Mode, "lambdaadapter: cannot write the dead letter of a record past the maximum record age; record left unsettled", d.msg(), out, err)
		s.observe(d, out, observe.ActionUnsettled)
		s.unsettled(d, out, err, nil)
		return
	}
	s.observe(d, out, observe.ActionDeadLetter)
	if !s.submitWrite(w) {
		s.giveUp(d)
	}
}
