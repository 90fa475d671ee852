package settle

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Errors returned by a Watermark. Check them with errors.Is: Deliver and End
// wrap them with the shard ID and the sequence numbers involved, Settle
// returns them unwrapped.
var (
	// ErrAlreadySettled reports a second settlement of the same part of a
	// delivery. It is a no-op: nothing moves.
	ErrAlreadySettled = errors.New("settle: delivery already settled")
	// ErrStale reports a settlement of a ticket issued before the last Reset.
	// It changes nothing.
	ErrStale = errors.New("settle: settlement from an earlier epoch")
	// ErrEnded reports a Deliver after End.
	ErrEnded = errors.New("settle: shard ended")
	// ErrUnsettled reports an End while some deliveries are still unsettled.
	ErrUnsettled = errors.New("settle: deliveries still unsettled")
	// ErrOutOfOrder reports a Deliver whose sequence number is not strictly
	// greater than the previous delivery's in this epoch, or than the position
	// given to Reset.
	ErrOutOfOrder = errors.New("settle: sequence number not after the previous delivery")
	// ErrInvalidSequence reports a sequence number that ValidSequence refuses.
	ErrInvalidSequence = errors.New("settle: invalid sequence number")
	// ErrInvalidParts reports a Deliver with parts outside 1..MaxParts.
	ErrInvalidParts = errors.New("settle: invalid number of parts")
	// ErrUnknownTicket reports a ticket that this Watermark never issued (the
	// zero Ticket, a ticket of another Watermark) or a part index outside the
	// delivery's parts.
	ErrUnknownTicket = errors.New("settle: unknown ticket")
)

// MaxParts is the largest number of parts one delivery may have. A KPL
// aggregated record holds at most 1 MiB, so it cannot carry more sub-records
// than this; the limit bounds the per-delivery bitset at 128 KiB.
const MaxParts = 1 << 20

// Epoch numbers the generations of a Watermark. A new Watermark is in epoch
// 1; every Reset starts the next epoch. Tickets carry the epoch they were
// issued in, and settlements of tickets from an earlier epoch are refused
// with ErrStale.
type Epoch uint64

// Ticket identifies one part of one delivery to one Watermark. Deliver
// returns the ticket for part 0; Part derives the others. A Ticket is a small
// comparable value: copy it freely, use it as a map key, and settle it from
// any goroutine. The zero Ticket is invalid: settling it returns
// ErrUnknownTicket.
type Ticket struct {
	w     *Watermark
	epoch Epoch
	index uint64 // absolute index of the delivery in its epoch; compaction does not change it
	part  int
}

// Part returns the ticket for part i (counted from 0) of the delivery t
// belongs to. Part does not check i: settling a ticket whose part is
// negative or not less than the delivery's parts returns ErrUnknownTicket
// (or ErrAlreadySettled once the checkpoint has passed the delivery, when
// its part count is no longer known).
func (t Ticket) Part(i int) Ticket {
	t.part = i
	return t
}

// Epoch returns the epoch t was issued in (0 for the zero Ticket).
func (t Ticket) Epoch() Epoch { return t.epoch }

// entry is one delivery.
type entry struct {
	seq    string
	parts  int32    // number of parts, 1..MaxParts
	left   int32    // parts not yet settled; 0 means the delivery is settled
	prefix int32    // parts 0..prefix-1 are settled (kept for multi-part deliveries)
	bits   []uint64 // settled parts; nil when parts == 1
}

// Position is how far a shard's deliveries settled, to the part: every
// delivery up to and including Seq settled when Parts is 0; when Parts is
// greater than 0, Seq is a multi-part delivery (a KPL aggregate) that
// settled only in part — every delivery before it, and its parts 0 to
// Parts-1, settled. A reader that resumes from a Position starts after Seq
// when Parts is 0, and at Seq, skipping its first Parts parts, otherwise.
// The zero Position means nothing settled and no Reset position.
type Position struct {
	Seq   string
	Parts int
}

// Watermark tracks the deliveries of one shard in arrival order and the
// checkpoint: the sequence number of the last delivery in the run of settled
// deliveries that starts at the oldest one. The checkpoint never passes a
// delivery that is not settled, and within an epoch it never moves back.
//
// Deliveries are settled in any order, part by part; a delivery is settled
// when all of its parts are. Settled deliveries at the front are dropped as
// the checkpoint passes them, so memory is bounded by the deliveries between
// the oldest unsettled one and the newest (amortised O(1) per delivery), and
// a single-part Deliver plus Settle does not allocate in steady state. A
// Watermark keeps each delivery's seq string until the checkpoint passes it.
//
// A Watermark is safe for concurrent use by multiple goroutines; all methods
// take one mutex. It starts no goroutines and does no I/O.
type Watermark struct {
	shardID string

	mu         sync.Mutex
	epoch      Epoch
	epochNow   atomic.Uint64 // epoch, for Epoch without the mutex
	entries    []entry       // entries[head:] are the deliveries not yet passed by the checkpoint
	head       int           // index in entries of the oldest unsettled delivery; len(entries) when none
	base       uint64        // absolute index of entries[0]
	pending    int           // unsettled deliveries
	last       string        // seq of the previous delivery in this epoch, else the Reset position, else ""
	checkpoint string        // "" when none
	ended      bool
}

// NewWatermark returns an empty Watermark for the shard shardID in epoch 1,
// with no checkpoint. The shard ID is only used in error messages and
// returned by ShardID.
func NewWatermark(shardID string) *Watermark {
	w := &Watermark{shardID: shardID, epoch: 1}
	w.epochNow.Store(1)
	return w
}

// Grow makes room for n more deliveries without reallocating: a runner that
// knows how many records it is about to deliver (a Lambda invocation) saves
// the copies of a growing slice. It is safe for concurrent use.
func (w *Watermark) Grow(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n > 0 {
		w.entries = slices.Grow(w.entries, n)
	}
}

// TakeRoom moves the room of from, a Watermark nobody delivers to anymore
// (a Lambda invocation's, sealed by Reset), to w, which has none yet: a
// runner that makes a Watermark per run reuses the last run's array
// instead of growing a new one. It takes nothing when from still holds
// deliveries or w has room already. A late call on from (a stale Settle)
// finds it empty. It is safe for concurrent use.
func (w *Watermark) TakeRoom(from *Watermark) {
	if from == w {
		return
	}
	w.mu.Lock()
	has := cap(w.entries) > 0
	w.mu.Unlock()
	if has {
		return
	}
	from.mu.Lock()
	room := from.entries
	if len(room) > 0 {
		from.mu.Unlock()
		return
	}
	from.entries = nil
	from.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if cap(w.entries) == 0 {
		w.entries = room // every slot past len is cleared (drop, Reset)
	}
}

// ShardID returns the shard ID given to NewWatermark. It is safe for
// concurrent use.
func (w *Watermark) ShardID() string { return w.shardID }

// Deliver records a delivery with sequence number seq made of parts parts
// (1 for a plain record, n for a KPL aggregated record of n sub-records) and
// returns the ticket for its part 0; settle the others with Ticket.Part. The
// delivery is unsettled until every part is settled, and the checkpoint
// cannot pass it until then.
//
// Deliver returns, checked in this order: ErrEnded after End; ErrInvalidParts
// unless 1 <= parts <= MaxParts; ErrInvalidSequence unless ValidSequence(seq);
// ErrOutOfOrder unless seq is strictly greater (CompareSequence) than the
// previous delivery's seq in this epoch and than the position given to Reset.
// A refused delivery changes nothing. Deliver is safe for concurrent use, but
// the order of concurrent Deliver calls is the order they take the mutex.
func (w *Watermark) Deliver(seq string, parts int) (Ticket, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deliver(seq, parts)
}

// DeliverIn is Deliver on condition that the Watermark is still in epoch e:
// a reader that started in e and was since superseded by a Reset (a seek, a
// lost lease) gets ErrStale and registers nothing. The check and the
// delivery are one step, so no delivery of an old reader ever enters a new
// epoch. It is safe for concurrent use.
func (w *Watermark) DeliverIn(e Epoch, seq string, parts int) (Ticket, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e != w.epoch {
		return Ticket{}, w.staleLocked(seq, e)
	}
	return w.deliver(seq, parts)
}

// DeliverEachIn is DeliverIn(e, seq(i), 1) for i from 0 to n-1, in order,
// under one hold of the lock: a runner registering a batch of plain records
// takes the lock once instead of once per record. ticket(i, t) receives the
// ticket of delivery i. DeliverEachIn stops at the first delivery refused
// and returns the number registered before it with DeliverIn's error for
// it; the callbacks must not call the Watermark. It is safe for concurrent
// use.
func (w *Watermark) DeliverEachIn(e Epoch, n int, seq func(i int) string, ticket func(i int, t Ticket)) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n > 0 && e != w.epoch {
		return 0, w.staleLocked(seq(0), e)
	}
	for i := range n {
		t, err := w.deliver(seq(i), 1)
		if err != nil {
			return i, err
		}
		ticket(i, t)
	}
	return n, nil
}

// DeliverEachOrderedIn is DeliverEachIn for sequence numbers the caller has
// checked already: every seq(i) valid (ValidSequence) and, from the second
// on, strictly greater (CompareSequence) than seq(i-1). Only seq(0) is
// checked here, against the previous delivery and the position given to
// Reset, as DeliverIn checks it; the rest are registered without looking
// at their digits again (the Lambda runner checks an invocation's sequence
// numbers before it registers any, so that an unusable invocation handles
// nothing). It is safe for concurrent use.
func (w *Watermark) DeliverEachOrderedIn(e Epoch, n int, seq func(i int) string, ticket func(i int, t Ticket)) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == 0 {
		return 0, nil
	}
	if e != w.epoch {
		return 0, w.staleLocked(seq(0), e)
	}
	t, err := w.deliver(seq(0), 1)
	if err != nil {
		return 0, err
	}
	ticket(0, t)
	w.entries = slices.Grow(w.entries, n-1)
	for i := 1; i < n; i++ {
		s := seq(i)
		w.entries = append(w.entries, entry{seq: s, parts: 1, left: 1})
		w.last = s
		w.pending++
		ticket(i, Ticket{w: w, epoch: w.epoch, index: w.base + uint64(len(w.entries)-1)})
	}
	return n, nil
}

// staleLocked is the error for seq, read in epoch e, which is no longer
// the Watermark's.
func (w *Watermark) staleLocked(seq string, e Epoch) error {
	return fmt.Errorf("%w: shard %s, sequence number %q read in epoch %d, now %d", ErrStale, w.shardID, clip(seq), e, w.epoch)
}

func (w *Watermark) deliver(seq string, parts int) (Ticket, error) {
	switch {
	case w.ended:
		return Ticket{}, fmt.Errorf("%w: shard %s, sequence number %q", ErrEnded, w.shardID, clip(seq))
	case parts < 1 || parts > MaxParts:
		return Ticket{}, fmt.Errorf("%w: shard %s, sequence number %q, %d parts", ErrInvalidParts, w.shardID, clip(seq), parts)
	case !ValidSequence(seq):
		return Ticket{}, fmt.Errorf("%w: shard %s, sequence number %q", ErrInvalidSequence, w.shardID, clip(seq))
	case w.last != "" && CompareSequence(seq, w.last) <= 0:
		return Ticket{}, fmt.Errorf("%w: shard %s, sequence number %s after %s", ErrOutOfOrder, w.shardID, seq, w.last)
	}
	e := entry{seq: seq, parts: int32(parts), left: int32(parts)}
	if parts > 1 {
		e.bits = make([]uint64, (parts+63)/64)
	}
	w.entries = append(w.entries, e)
	w.last = seq
	w.pending++
	return Ticket{w: w, epoch: w.epoch, index: w.base + uint64(len(w.entries)-1)}, nil
}

// Settle marks the part of a delivery that t identifies as handled. When the
// last part of a delivery is settled the delivery is settled, and if it was
// the oldest unsettled one the checkpoint advances over it and over every
// settled delivery after it up to the next unsettled one.
//
// Settle returns the checkpoint after the settlement ("" if there is none
// yet) and moved=true exactly when the checkpoint changed. On error it
// returns "", false and one of: ErrUnknownTicket for the zero Ticket, a
// ticket of another Watermark, or a part index out of range; ErrStale for a
// ticket from an earlier epoch; ErrAlreadySettled when the part was settled
// before (including any part of a delivery the checkpoint has passed). None
// of these change anything. Settle is safe for concurrent use and does not
// allocate.
func (w *Watermark) Settle(t Ticket) (checkpoint string, moved bool, err error) {
	if t.w != w || t.part < 0 {
		return "", false, ErrUnknownTicket
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	moved, _, err = w.settle(t)
	if err != nil {
		return "", false, err
	}
	return w.checkpoint, moved, nil
}

// SettleAt is Settle reporting the Position after the settlement, to the
// part: moved is true exactly when the Position changed — when the
// checkpoint moved, or when a part of the oldest unsettled delivery settled
// right after the parts of it already settled. A long-running reader stores
// the Position, so a restart inside a KPL aggregate skips the user records
// that settled. Errors are Settle's.
func (w *Watermark) SettleAt(t Ticket) (pos Position, moved bool, err error) {
	if t.w != w || t.part < 0 {
		return Position{}, false, ErrUnknownTicket
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	cpMoved, partMoved, err := w.settle(t)
	if err != nil {
		return Position{}, false, err
	}
	return w.position(), cpMoved || partMoved, nil
}

// SettleEach settles the tickets of ts in order, each exactly as Settle
// would, under one acquisition of the mutex: a runner that collects the
// settlements of several records (a Lambda-mode lane) saves a lock per
// record. It returns how many of them settled; the others were refused
// with one of Settle's errors and changed nothing. It is safe for
// concurrent use and does not allocate.
func (w *Watermark) SettleEach(ts []Ticket) int {
	n := 0
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range ts {
		if t.w != w || t.part < 0 {
			continue
		}
		if _, _, err := w.settle(t); err == nil {
			n++
		}
	}
	return n
}

// Position returns the current Position. It is safe for concurrent use.
func (w *Watermark) Position() Position {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.position()
}

func (w *Watermark) position() Position {
	if w.head < len(w.entries) {
		if e := &w.entries[w.head]; e.prefix > 0 {
			return Position{Seq: e.seq, Parts: int(e.prefix)}
		}
	}
	return Position{Seq: w.checkpoint}
}

// settle settles t with w.mu held. cpMoved reports that the checkpoint
// moved; partMoved that the settled prefix of the parts of the oldest
// unsettled delivery grew.
func (w *Watermark) settle(t Ticket) (cpMoved, partMoved bool, err error) {
	if t.epoch != w.epoch {
		if t.epoch < w.epoch {
			return false, false, ErrStale
		}
		return false, false, ErrUnknownTicket
	}
	if t.index < w.base+uint64(w.head) {
		return false, false, ErrAlreadySettled
	}
	i := t.index - w.base
	if i >= uint64(len(w.entries)) {
		return false, false, ErrUnknownTicket
	}
	e := &w.entries[i]
	if t.part >= int(e.parts) {
		return false, false, ErrUnknownTicket
	}
	if e.bits == nil {
		if e.left == 0 {
			return false, false, ErrAlreadySettled
		}
		e.left = 0
	} else {
		word, mask := t.part/64, uint64(1)<<(t.part%64)
		if e.bits[word]&mask != 0 {
			return false, false, ErrAlreadySettled
		}
		e.bits[word] |= mask
		e.left--
		grew := false
		for e.prefix < e.parts && e.bits[e.prefix/64]&(1<<(e.prefix%64)) != 0 {
			e.prefix++
			grew = true
		}
		if e.left > 0 {
			return false, grew && int(i) == w.head, nil
		}
	}
	w.pending--
	if int(i) != w.head {
		return false, false, nil
	}
	h := w.head + 1
	for h < len(w.entries) && w.entries[h].left == 0 {
		h++
	}
	w.checkpoint = w.entries[h-1].seq
	w.drop(h)
	return true, false, nil
}

// drop makes h the head, dropping the settled prefix once it is more than
// half of the entries. Each dropped entry is copied at most once per time it
// is passed, so the cost is amortised O(1) per delivery. Dropped slots are
// cleared so the strings and bitsets they held can be collected; the
// capacity is kept for the next deliveries.
func (w *Watermark) drop(h int) {
	n := len(w.entries)
	switch {
	case h == n:
		clear(w.entries)
		w.entries = w.entries[:0]
		w.base += uint64(n)
		w.head = 0
	case h > n/2:
		k := copy(w.entries, w.entries[h:])
		clear(w.entries[k:])
		w.entries = w.entries[:k]
		w.base += uint64(h)
		w.head = 0
	default:
		w.head = h
	}
}

// Checkpoint returns the sequence number of the last delivery in the run of
// settled deliveries that starts at the oldest delivery of this epoch, or,
// when none of them is settled yet, the position given to Reset. ok is false
// when there is neither. It is safe for concurrent use.
func (w *Watermark) Checkpoint() (seq string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.checkpoint, w.checkpoint != ""
}

// FirstUnsettled returns the sequence number of the oldest delivery of this
// epoch that is not settled yet: in Lambda mode, the itemIdentifier of the
// partial batch response. ok is false when every delivery is settled. It is
// safe for concurrent use.
func (w *Watermark) FirstUnsettled() (seq string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head < len(w.entries) {
		return w.entries[w.head].seq, true
	}
	return "", false
}

// UnsettledBefore returns how many parts before t are not settled: the
// parts of the deliveries of t's epoch that came before t's, and the parts
// of t's own delivery numbered below t's. It counts up to limit+1 at most
// (the exact count when it is at most limit), so its cost is bounded by the
// deliveries between the oldest unsettled one and t. It returns -1 for a
// ticket of another epoch or one never issued. It is safe for concurrent
// use.
func (w *Watermark) UnsettledBefore(t Ticket, limit int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.w != w || t.epoch != w.epoch {
		return -1
	}
	start := w.base + uint64(w.head)
	if t.index < start {
		return 0 // the checkpoint passed t's delivery, and so everything before it
	}
	end := t.index - w.base
	if end >= uint64(len(w.entries)) {
		return -1
	}
	n := 0
	for i := uint64(w.head); i < end && n <= limit; i++ {
		n += int(w.entries[i].left)
	}
	e := &w.entries[end]
	for p := 0; p < t.part && n <= limit; p++ {
		if e.bits != nil && e.bits[p/64]&(1<<(p%64)) == 0 {
			n++
		}
	}
	return n
}

// Before reports whether t comes before u in their watermark's delivery
// order (an earlier delivery, or an earlier part of the same one). Tickets
// of different epochs compare by epoch.
func (t Ticket) Before(u Ticket) bool {
	if t.epoch != u.epoch {
		return t.epoch < u.epoch
	}
	if t.index != u.index {
		return t.index < u.index
	}
	return t.part < u.part
}

// FirstUnsettledTicket returns the ticket of the oldest part of this epoch
// that is not settled: the first unsettled part of the oldest unsettled
// delivery. ok is false when every delivery is settled. It is safe for
// concurrent use.
func (w *Watermark) FirstUnsettledTicket() (t Ticket, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head >= len(w.entries) {
		return Ticket{}, false
	}
	e := &w.entries[w.head]
	p := 0
	if e.bits != nil {
		p = int(e.prefix)
		for p < int(e.parts) && e.bits[p/64]&(1<<(p%64)) != 0 {
			p++
		}
	}
	return Ticket{w: w, epoch: w.epoch, index: w.base + uint64(w.head), part: p}, true
}

// Pending returns the number of deliveries of this epoch that are delivered
// but not settled, counting a multi-part delivery once. It is safe for
// concurrent use.
func (w *Watermark) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending
}

// Reset starts a fresh epoch and returns it: it forgets every delivery, clears
// Ended, and sets the checkpoint to from, the position to resume after ("" for
// none, e.g. a new iterator at TRIM_HORIZON or LATEST). Use it when the
// reader seeks or restarts: deliveries of the new epoch must be greater than
// from, and may be smaller than those of earlier epochs. Settlements of
// tickets issued before the Reset return ErrStale and change nothing.
//
// Reset panics if from is neither "" nor a valid sequence number: that is a
// programmer error, so callers that load a position from storage check it
// with ValidSequence first. It is safe
// for concurrent use.
func (w *Watermark) Reset(from string) Epoch {
	if from != "" && !ValidSequence(from) {
		panic(fmt.Sprintf("settle: Reset with invalid sequence number %q", clip(from)))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.epoch++
	w.epochNow.Store(uint64(w.epoch))
	clear(w.entries)
	w.entries = w.entries[:0]
	w.head = 0
	w.base = 0
	w.pending = 0
	w.last = from
	w.checkpoint = from
	w.ended = false
	return w.epoch
}

// End marks the shard ended (the reader reached SHARD_END). It returns an
// error wrapping ErrUnsettled, and changes nothing, unless every delivery is
// settled (Pending() == 0); the caller settles the rest and calls End again.
// After End, Deliver returns ErrEnded until the next Reset. End on an ended
// Watermark is a no-op that returns nil. It is safe for concurrent use.
func (w *Watermark) End() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.end()
}

// EndIn is End on condition that the Watermark is still in epoch e: it
// returns ErrStale, and ends nothing, after a Reset. A reader that reached
// the end of a closed shard in epoch e ends the shard with it, so a seek
// that starts a new epoch at the same time can never see its new, empty
// epoch ended. It is safe for concurrent use.
func (w *Watermark) EndIn(e Epoch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e != w.epoch {
		return fmt.Errorf("%w: shard %s ended in epoch %d, now %d", ErrStale, w.shardID, e, w.epoch)
	}
	return w.end()
}

// Span returns the number of deliveries of this epoch the checkpoint has not
// passed yet: from the oldest unsettled one to the newest, settled or not.
// Its memory is what a Watermark holds; a reader may pause while it is
// large (a record that does not settle holds every later one). It is safe
// for concurrent use.
func (w *Watermark) Span() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries) - w.head
}

func (w *Watermark) end() error {
	if w.ended {
		return nil
	}
	if w.pending > 0 {
		return fmt.Errorf("%w: shard %s, %d pending from sequence number %s",
			ErrUnsettled, w.shardID, w.pending, w.entries[w.head].seq)
	}
	w.ended = true
	return nil
}

// Ended reports whether End succeeded and no Reset followed. It is safe for
// concurrent use.
func (w *Watermark) Ended() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

// Epoch returns the current epoch: 1 for a new Watermark, one more after each
// Reset. It is safe for concurrent use.
func (w *Watermark) Epoch() Epoch {
	return Epoch(w.epochNow.Load())
}

// clip shortens s for an error message so hostile input cannot make the
// message huge.
func clip(s string) string {
	const limit = MaxSequenceDigits + 3
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}
