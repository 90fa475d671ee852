package engine

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/observe"
)

// Hooks are what a runner does when records of a shard settle.
type Hooks struct {
	// Moved is called with the new position whenever a settlement moves
	// the shard's watermark (to the user record of a KPL aggregate: see
	// settle.Watermark.SettleAt). Calls are serialised with the
	// settlements, so they come in checkpoint order; Moved must not block.
	Moved func(pos settle.Position)
	// Settled is called after every settlement of the shard, outside the
	// settlement's lock (long-running mode ends a closed shard there).
	Settled func()
	// TrackAge makes the shard remember the arrival times of its records
	// until the checkpoint passes them, for OldestUnsettled.
	TrackAge bool
	// Lapsed is called once, from whichever goroutine finds it, when the
	// shard's fence lapses (see Shard.Fence): a record was about to start
	// after the fence's deadline. It must not block.
	Lapsed func()
}

// Shard is one shard as the engine settles it: its watermark, the ordinal
// of each delivery, the first record given up on, and how many deliveries
// are in flight. A Shard is safe for concurrent use; deliveries of one
// shard must be registered (Deliver, DeliverGroup) by one goroutine at a
// time, in stream order.
type Shard struct {
	id    string
	wm    *settle.Watermark
	hooks Hooks

	mu sync.Mutex // a settlement and its Moved hook are one step

	next atomic.Int64 // ordinal of the last delivery registered
	// blocked is the ordinal of the first record of this epoch given up on
	// (left unsettled for good); later records are not started. MaxInt64
	// when none.
	blocked atomic.Int64
	// quiescing: the shard is being handed over or shut down; an unsettled
	// record is given up on instead of delivered again.
	quiescing atomic.Bool

	imu sync.Mutex
	// inflight changes without imu while it stays above zero; a change to
	// or from zero takes imu, and a change to zero closes idle in the same
	// step.
	inflight atomic.Int64
	idle     chan struct{} // made by Idle while inflight > 0 (under imu); nil when nobody waits

	amu  sync.Mutex
	ages []arrival // registered records, oldest first, until the checkpoint passes them (TrackAge)

	// The fence (long-running mode; see Fence). fctx is nil without one
	// (Lambda mode): the shard is then always live.
	fctx   context.Context
	until  atomic.Pointer[time.Time] // the fence's deadline; nil: none yet
	lapsed atomic.Bool               // the deadline passed once: for good
}

// arrival is a registered record's sequence number and arrival time.
type arrival struct {
	seq string
	at  time.Time
}

// noteArrival remembers the arrival of a record just registered.
func (s *Shard) noteArrival(seq string, at time.Time) {
	if !s.hooks.TrackAge {
		return
	}
	s.amu.Lock()
	s.ages = append(s.ages, arrival{seq, at})
	s.amu.Unlock()
}

// OldestUnsettled returns the arrival time of the shard's oldest record
// that is not settled (ok false when none is, or without TrackAge). A
// record without an arrival time counts as none.
func (s *Shard) OldestUnsettled() (time.Time, bool) {
	if !s.hooks.TrackAge {
		return time.Time{}, false
	}
	first, ok := s.wm.FirstUnsettled()
	s.amu.Lock()
	defer s.amu.Unlock()
	if !ok {
		clear(s.ages)
		s.ages = s.ages[:0]
		return time.Time{}, false
	}
	i := 0
	for i < len(s.ages) && settle.CompareSequence(s.ages[i].seq, first) < 0 {
		i++
	}
	if i > 0 {
		n := copy(s.ages, s.ages[i:])
		clear(s.ages[n:])
		s.ages = s.ages[:n]
	}
	if len(s.ages) == 0 || s.ages[0].seq != first || s.ages[0].at.IsZero() {
		return time.Time{}, false
	}
	return s.ages[0].at, true
}

// NewShard returns the Shard id with a new watermark (epoch 1).
func NewShard(id string, hooks Hooks) *Shard {
	s := &Shard{id: id, wm: settle.NewWatermark(id), hooks: hooks}
	s.blocked.Store(math.MaxInt64)
	return s
}

// Fence ties the shard to a lease (long-running mode): ctx is the context
// its handlers get, and its records start, and their writes go out, only
// while ctx lives and before the deadline that Extend sets. The owner of the
// lease cancels ctx when it gives the lease up or lost it, and extends the
// deadline after each write of the lease that succeeded. Once the deadline
// has passed the fence has lapsed, for good: Extend changes nothing more,
// and the Lapsed hook is called. Call Fence once, before the first delivery
// is registered.
func (s *Shard) Fence(ctx context.Context) { s.fctx = ctx }

// Extend moves the fence's deadline to until, if that is later. It reports
// false, changing nothing, when the fence has lapsed already.
func (s *Shard) Extend(until time.Time) bool {
	for {
		if s.lapsed.Load() {
			return false
		}
		old := s.until.Load()
		if old != nil && !until.After(*old) {
			return true
		}
		if s.until.CompareAndSwap(old, &until) {
			return !s.lapsed.Load()
		}
	}
}

// Live reports whether a record of the shard may start, or a write of one
// go out, now: always without a fence; with one, while its context lives and
// its deadline has not passed. A Live that finds the deadline passed lapses
// the fence (calling the Lapsed hook).
func (s *Shard) Live() bool {
	if s.fctx == nil {
		return true
	}
	if s.fctx.Err() != nil || s.lapsed.Load() {
		return false
	}
	if u := s.until.Load(); u != nil && !time.Now().Before(*u) {
		s.lapse()
		return false
	}
	return true
}

// Lapsed reports whether the shard's fence has lapsed (see Fence).
func (s *Shard) Lapsed() bool {
	if s.fctx == nil {
		return false
	}
	if u := s.until.Load(); u != nil && !s.lapsed.Load() && !time.Now().Before(*u) {
		s.lapse() // a deadline that passed unnoticed
	}
	return s.lapsed.Load()
}

// Deadline returns the fence's deadline; ok is false without one.
func (s *Shard) Deadline() (until time.Time, ok bool) {
	if u := s.until.Load(); u != nil && s.fctx != nil {
		return *u, true
	}
	return time.Time{}, false
}

// handlerContext is the context d's handler gets: its shard's fence's, else
// the session's.
func (s *Shard) handlerContext(sess context.Context) context.Context {
	if s.fctx != nil {
		return s.fctx
	}
	return sess
}

func (s *Shard) lapse() {
	if s.lapsed.CompareAndSwap(false, true) && s.hooks.Lapsed != nil {
		s.hooks.Lapsed()
	}
}

// ID returns the shard's id.
func (s *Shard) ID() string { return s.id }

// Watermark returns the shard's watermark.
func (s *Shard) Watermark() *settle.Watermark { return s.wm }

// Reset starts a new epoch of the shard's watermark, positioned after from
// ("" for none), and forgets what was given up on: deliveries of earlier
// epochs are stale from now on (a lane drops them; their settlements change
// nothing). It returns the new epoch.
func (s *Shard) Reset(from string) settle.Epoch {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.wm.Reset(from)
	s.amu.Lock()
	clear(s.ages)
	s.ages = s.ages[:0]
	s.amu.Unlock()
	s.blocked.Store(math.MaxInt64)
	s.quiescing.Store(false)
	return e
}

// Deliver registers ds, in order, as the next deliveries of the shard in
// epoch e, taking the watermark's lock once; each d.Msg must be set, and
// each is one Kinesis record (DeliverGroup registers the user records of a
// KPL aggregate). It stops at the first delivery refused and returns the
// number registered before it with the error for it: one matching
// settle.ErrStale, registering nothing, when the shard's epoch is no
// longer e (a seek or a lost lease since the reader started), or the
// watermark's error for a sequence number that is invalid or does not grow.
// Deliver is not safe for concurrent use on one shard (see Shard).
func (s *Shard) Deliver(e settle.Epoch, ds []Delivery) (int, error) {
	return s.deliver(e, ds, func(i int) string { return ds[i].Msg.SequenceNumber }, false)
}

// DeliverOrdered is Deliver for deliveries whose sequence numbers the
// caller has checked already: each valid, and each above the one before it
// (see settle.Watermark.DeliverEachOrderedIn). Only the first is checked
// against the shard's previous delivery. seq(i) is the sequence number of
// ds[i], which need not be in its Msg (see Delivery.SetMessage).
func (s *Shard) DeliverOrdered(e settle.Epoch, ds []Delivery, seq func(i int) string) (int, error) {
	return s.deliver(e, ds, seq, true)
}

func (s *Shard) deliver(e settle.Epoch, ds []Delivery, seq func(i int) string, ordered bool) (int, error) {
	ticket := func(i int, t settle.Ticket) { ds[i].shard, ds[i].ticket = s, t }
	var n int
	var err error
	if ordered {
		n, err = s.wm.DeliverEachOrderedIn(e, len(ds), seq, ticket)
	} else {
		n, err = s.wm.DeliverEachIn(e, len(ds), seq, ticket)
	}
	if n == 0 {
		return 0, err
	}
	ord := s.next.Add(int64(n)) - int64(n)
	for i := range ds[:n] {
		ord++
		ds[i].ord = ord
		s.noteArrival(seq(i), ds[i].Msg.ArrivalTime)
	}
	s.track(n)
	return n, err
}

// DeliverGroup registers ds, the user records of one Kinesis record (a KPL
// aggregate, all with its sequence number), as the next delivery of the
// shard in epoch e: one watermark entry of skip+len(ds) parts, which
// settles when every part has. The first skip parts are user records that
// settled before a restart: they are settled at once. ds[i] settles part
// skip+i. Errors are Deliver's, and it registers nothing on error;
// len(ds) must be at least 1.
func (s *Shard) DeliverGroup(e settle.Epoch, ds []Delivery, skip int) error {
	if len(ds) == 0 {
		return fmt.Errorf("engine: shard %s: an aggregate with no user record to deliver", s.id)
	}
	t, err := s.wm.DeliverIn(e, ds[0].Msg.SequenceNumber, skip+len(ds))
	if err != nil {
		return err
	}
	for i := range skip {
		s.settle(t.Part(i))
	}
	for i := range ds {
		ds[i].shard, ds[i].ticket = s, t.Part(skip+i)
		ds[i].ord = s.next.Add(1)
	}
	s.track(len(ds))
	s.noteArrival(ds[0].Msg.SequenceNumber, ds[0].Msg.ArrivalTime)
	return nil
}

// Quiesce makes the shard give up on records instead of delivering them
// again, from now until the next Reset: a shard being handed over or shut
// down settles what it can and leaves the rest to the next reader. Use
// Session.Quiesce, which also releases the records waiting for a retry.
func (s *Shard) quiesce() { s.quiescing.Store(true) }

// Inflight returns the number of registered deliveries the engine has not
// finished with (settled, given up on or dropped as stale).
func (s *Shard) Inflight() int {
	return int(s.inflight.Load())
}

// Idle returns a channel that is closed once no delivery of the shard is in
// flight (at once when none is now).
func (s *Shard) Idle() <-chan struct{} {
	s.imu.Lock()
	defer s.imu.Unlock()
	if s.inflight.Load() == 0 {
		return closed
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

func (s *Shard) track(n int) {
	d := int64(n)
	for {
		was := s.inflight.Load()
		if was == 0 || was+d <= 0 {
			break // to or from zero: under imu
		}
		if s.inflight.CompareAndSwap(was, was+d) {
			return
		}
	}
	s.imu.Lock()
	defer s.imu.Unlock()
	for {
		was := s.inflight.Load()
		now := was + d
		if !s.inflight.CompareAndSwap(was, now) {
			continue
		}
		if was > 0 && now == 0 && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
		return
	}
}

// block records that d was given up on: later records of its shard (of the
// same epoch) are not started. A stale d blocks nothing.
func (s *Shard) block(d *Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.ticket.Epoch() == s.wm.Epoch() && d.ord < s.blocked.Load() {
		s.blocked.Store(d.ord)
	}
}

// after reports whether d comes after a record of its shard given up on.
func (s *Shard) after(d *Delivery) bool { return d.ord > s.blocked.Load() }

// settle settles t and runs the hooks. It reports whether t settled (false
// for a stale or repeated ticket).
func (s *Shard) settle(t settle.Ticket) bool {
	var err error
	if s.hooks.Moved == nil {
		// Nothing to keep in step with the settlement (Lambda mode): the
		// watermark's own lock is enough.
		_, _, err = s.wm.SettleAt(t)
	} else {
		s.mu.Lock()
		var pos settle.Position
		var moved bool
		pos, moved, err = s.wm.SettleAt(t)
		if err == nil && moved {
			s.hooks.Moved(pos)
		}
		s.mu.Unlock()
	}
	if err != nil {
		return false
	}
	if s.hooks.Settled != nil {
		s.hooks.Settled()
	}
	return true
}

// Delivery is one record handed to the engine: the message the handler
// gets, and where it settles. A Delivery belongs to the engine from Submit
// until it is finished.
type Delivery struct {
	// Msg is the message the handler gets.
	Msg message.Message
	// Poison, when set, says the record cannot be handed to the handler (a
	// KPL aggregate whose MD5 matches but whose body is malformed): the
	// engine does not call the handler and concludes it as Drop(Poison) —
	// dead-lettered with its raw data when the dead-letter target takes
	// drops, else settled with a warning.
	Poison error

	shard  *Shard
	ticket settle.Ticket
	ord    int64
	sess   *Session

	// again is the message handed out when it is not Msg: one of the
	// caller's (SetMessage: the Lambda runner keeps the messages apart from
	// the deliveries it reuses), or that of an in-process redelivery (see
	// Session.park), a copy of the last one handed out with its attempt
	// counted up, so that a message a handler kept after it returned never
	// changes. nil: the message is Msg.
	again *message.Message

	next         *Delivery // the next delivery of its key, in its key queue
	firstAttempt int       // Msg.Attempt when submitted
	uncounted    int       // in-process redeliveries that counted no attempt (held elsewhere)

	rmu      sync.Mutex  // serialises replies; guards replyErr
	replying atomic.Bool // the handler runs: replies are accepted
	replied  atomic.Bool // a Reply came since openReplies (see there)
	replyErr error       // the first failed reply of this call

	w *write // the write the record waits for, if any

	obs *observed // what the hooks keep about the handling; nil without hooks

	// Ref, when set, is the storage d, its payload and its headers share
	// with other deliveries (a GetRecords answer's delivery slab, data and
	// header backing): the engine releases it once when it has finished
	// with d (settled, given up on, dropped), after the handler returned
	// and every write of d was made, and reads nothing of d afterwards, so
	// the storage may then be reused.
	Ref *Ref
}

// msg is the message of d's current (or last) handling: Msg until the
// record is redelivered in process, a copy of it afterwards (again).
func (d *Delivery) msg() *message.Message {
	if d.again != nil {
		return d.again
	}
	return &d.Msg
}

// Message returns the message of d's current (or last) handling: Msg, or
// the one given to SetMessage, or that of an in-process redelivery.
func (d *Delivery) Message() *message.Message { return d.msg() }

// SetMessage makes m the message d's handler gets instead of Msg, before d
// is submitted; Msg then need only hold what registering d reads (its
// sequence number and shard). The engine never writes to *m after d's
// handler returned, so m may outlive d: a caller that keeps its messages
// apart from its deliveries can reuse the deliveries (see Reuse) while the
// handlers keep their messages.
func (d *Delivery) SetMessage(m *message.Message) { d.again = m }

// Reuse readies ds, deliveries the engine finished with (their Ref
// released) whose handlers were given messages of their own (SetMessage),
// for registering again. Unlike Recycle it leaves the reply state alone: a
// handler that kept its message may call Message.Reply at any time, and
// gets ErrReplyAfterReturn, since its message is no longer the one d hands
// out.
func Reuse(ds []Delivery) {
	for i := range ds {
		d := &ds[i]
		d.Msg = message.Message{}
		d.Poison = nil
		d.shard, d.ticket, d.ord, d.sess = nil, settle.Ticket{}, 0, nil
		d.again, d.next = nil, nil
		d.firstAttempt, d.uncounted = 0, 0
		d.w, d.obs, d.Ref = nil, nil, nil
	}
}

// Recycle zeroes ds, deliveries the engine finished with (their Ref
// released), so that they can be registered again (Config.RecycleMessages).
// A handler that kept the Message of one (against the rule of recycled
// messages) gets ErrReplyAfterReturn from its Reply until the delivery is
// used for another record.
func Recycle(ds []Delivery) {
	clear(ds)
	for i := range ds {
		message.Bind(&ds[i].Msg, returned{})
	}
}

// returned is the replier of a recycled delivery's message.
type returned struct{}

func (returned) Reply(context.Context, *message.Message, message.Reply) error {
	return message.ErrReplyAfterReturn
}

// Ref counts the holders of storage that deliveries share: their creator,
// and each delivery registered with it until the engine finished with it.
// The last Release frees the storage.
type Ref struct {
	n    atomic.Int64
	free func()
}

// NewRef returns a Ref held once, by its creator, that runs free when the
// last holder released it.
func NewRef(free func()) *Ref {
	r := &Ref{free: free}
	r.n.Store(1)
	return r
}

// Hold adds n holders; the Ref must still be held.
func (r *Ref) Hold(n int) {
	if r.n.Add(int64(n)) <= int64(n) {
		panic("engine: Ref held after it was freed")
	}
}

// Release drops one holder; the last runs free. Release of a nil Ref does
// nothing.
func (r *Ref) Release() {
	if r == nil {
		return
	}
	switch n := r.n.Add(-1); {
	case n == 0:
		r.free()
	case n < 0:
		panic("engine: Ref released more often than held")
	}
}

// observed is what the record and trace hooks keep about a delivery's
// handling. A Delivery gets one only when hooks are set, so the Deliveries
// of an invocation without hooks stay small.
type observed struct {
	handled time.Duration        // how long the handler ran (measured only for record hooks)
	hctx    context.Context      // the handler's context, when a trace hook gave one
	endSpan func(observe.Record) // the trace hook's end of this record, until called
}

// observed returns d's observed state, allocating it on first use.
func (d *Delivery) observed() *observed {
	if d.obs == nil {
		d.obs = &observed{}
	}
	return d.obs
}

// Shard returns the shard d settles on.
func (d *Delivery) Shard() *Shard { return d.shard }

// Stale reports whether d's shard started a new epoch since d was
// registered: d is then dropped and its settlement would change nothing.
func (d *Delivery) Stale() bool { return d.ticket.Epoch() != d.shard.wm.Epoch() }

// Drop finishes d without handling it: a runner that registered d gives it
// up before submitting it (its reader stopped with d in hand). d stays
// unsettled and comes again from the shard's checkpoint.
func (d *Delivery) Drop() {
	sh := d.shard
	d.Ref.Release() // d may be reused from here on (see Session.done)
	sh.track(-1)
}
