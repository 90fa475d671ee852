package settle

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

var replaySeed = flag.Int64("settle.seed", -1, "replay only this property-test schedule seed, logging every step")

// chooser is the source of a schedule's choices: a seeded math/rand/v2
// generator for the property test, the fuzzer's bytes for FuzzWatermark.
type chooser interface {
	IntN(n int) int
}

// byteChooser takes choices from fuzz input; it returns 0 once exhausted.
type byteChooser struct{ b []byte }

func (c *byteChooser) IntN(n int) int {
	if len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	if n > 256 && len(c.b) > 0 {
		v = v<<8 | int(c.b[0])
		c.b = c.b[1:]
	}
	return v % n
}

// modelDelivery is one delivery in the reference model.
type modelDelivery struct {
	seq   string
	parts int
	done  []bool
	left  int
}

// model is the reference: a plain list of the epoch's deliveries, with the
// checkpoint computed from scratch by scanning it.
type model struct {
	epoch    Epoch
	ds       []*modelDelivery
	resetPos string
	last     string
	ended    bool
}

func (m *model) checkpoint() string {
	cp := m.resetPos
	for _, d := range m.ds {
		if d.left > 0 {
			break
		}
		cp = d.seq
	}
	return cp
}

// position is the model's Position: the checkpoint, or the oldest
// unsettled delivery with the run of its settled parts from part 0.
func (m *model) position() Position {
	if i := m.firstUnsettledIndex(); i < len(m.ds) {
		n := 0
		for n < m.ds[i].parts && m.ds[i].done[n] {
			n++
		}
		if n > 0 {
			return Position{Seq: m.ds[i].seq, Parts: n}
		}
	}
	return Position{Seq: m.checkpoint()}
}

func (m *model) firstUnsettledIndex() int {
	for i, d := range m.ds {
		if d.left > 0 {
			return i
		}
	}
	return len(m.ds)
}

func (m *model) pending() int {
	n := 0
	for _, d := range m.ds {
		if d.left > 0 {
			n++
		}
	}
	return n
}

func (m *model) state() state {
	s := state{Pending: m.pending(), Ended: m.ended, Epoch: m.epoch}
	s.Checkpoint = m.checkpoint()
	s.HasCheckpoint = s.Checkpoint != ""
	if i := m.firstUnsettledIndex(); i < len(m.ds) {
		s.FirstUnsettled, s.HasUnsettled = m.ds[i].seq, true
	}
	return s
}

func (m *model) deliver(seq string, parts int) error {
	switch {
	case m.ended:
		return ErrEnded
	case parts < 1 || parts > MaxParts:
		return ErrInvalidParts
	case !isCanonical(seq):
		return ErrInvalidSequence
	case m.last != "" && CompareSequence(seq, m.last) <= 0:
		return ErrOutOfOrder
	}
	m.ds = append(m.ds, &modelDelivery{seq: seq, parts: parts, done: make([]bool, parts), left: parts})
	m.last = seq
	return nil
}

// isCanonical is the model's own spelling of the sequence number rule.
func isCanonical(s string) bool {
	return isDigits(s) && len(s) <= 129 && (s == "0" || s[0] != '0')
}

func (m *model) settle(w *Watermark, t Ticket) (string, bool, error) {
	switch {
	case t.w != w || t.part < 0:
		return "", false, ErrUnknownTicket
	case t.epoch < m.epoch:
		return "", false, ErrStale
	case t.epoch > m.epoch:
		return "", false, ErrUnknownTicket
	case t.index < uint64(m.firstUnsettledIndex()):
		return "", false, ErrAlreadySettled
	case t.index >= uint64(len(m.ds)):
		return "", false, ErrUnknownTicket
	}
	d := m.ds[t.index]
	switch {
	case t.part >= d.parts:
		return "", false, ErrUnknownTicket
	case d.done[t.part]:
		return "", false, ErrAlreadySettled
	}
	before := m.checkpoint()
	d.done[t.part] = true
	d.left--
	after := m.checkpoint()
	return after, after != before, nil
}

func (m *model) reset(from string) {
	m.epoch++
	m.ds = nil
	m.resetPos = from
	m.last = from
	m.ended = false
}

func (m *model) end() error {
	if m.ended {
		return nil
	}
	if m.pending() > 0 {
		return ErrUnsettled
	}
	m.ended = true
	return nil
}

// seqGen makes increasing sequence numbers from a counter: short decimal
// numbers (crossing digit-length boundaries), 56-digit Kinesis-like ones, or
// 129-digit ones.
type seqGen struct {
	prefix string // "" for short numbers
	n      uint64 // the last number used (or the reset position)
}

func (g *seqGen) seq(n uint64) string {
	if g.prefix == "" {
		return itoa(n)
	}
	return fmt.Sprintf("%s%020d", g.prefix, n)
}

// sim runs one schedule against a Watermark and the model.
type sim struct {
	c       chooser
	w       *Watermark
	other   Ticket // a ticket of another Watermark
	m       model
	g       seqGen
	tickets []Ticket // every ticket issued, all epochs; part 0
	parts   map[Ticket]int
	prevCP  string
	prevEp  Epoch
	step    int
	logf    func(format string, args ...any) // nil unless replaying
}

func newSim(c chooser, logf func(string, ...any)) *sim {
	s := &sim{c: c, w: NewWatermark("shardId-000000000000"), m: model{epoch: 1}, logf: logf, parts: map[Ticket]int{}}
	ow := NewWatermark("shardId-000000000001")
	s.other, _ = ow.Deliver("1", 1)
	digits := func(n int) string {
		var b strings.Builder
		b.WriteByte(byte('1' + c.IntN(9)))
		for range n - 1 {
			b.WriteByte(byte('0' + c.IntN(10)))
		}
		return b.String()
	}
	switch c.IntN(4) {
	case 0:
		s.g.prefix = digits(36) // 56 digits in all
	case 1:
		s.g.prefix = digits(109) // 129 digits in all
	default:
		starts := []uint64{0, 7, 97, 996, 9997, 99_999_999_999_999_990, 18_446_744_073_709_551_000}
		s.g.n = starts[c.IntN(len(starts))]
	}
	return s
}

func (s *sim) log(format string, args ...any) {
	if s.logf != nil {
		s.logf("step %d: "+format, append([]any{s.step}, args...)...)
	}
}

// check compares every observable of the Watermark with the model and checks
// the invariants directly.
func (s *sim) check() error {
	got, want := snapshot(s.w), s.m.state()
	if got != want {
		return fmt.Errorf("state %+v, model %+v", got, want)
	}
	if p, wp := s.w.Position(), s.m.position(); p != wp {
		return fmt.Errorf("Position() = %+v, model %+v", p, wp)
	}
	for _, d := range s.m.ds {
		if d.left > 0 && got.HasCheckpoint && CompareSequence(got.Checkpoint, d.seq) >= 0 {
			return fmt.Errorf("checkpoint %s passes unsettled delivery %s", got.Checkpoint, d.seq)
		}
	}
	if got.Epoch == s.prevEp && s.prevCP != "" && (!got.HasCheckpoint || CompareSequence(got.Checkpoint, s.prevCP) < 0) {
		return fmt.Errorf("checkpoint moved back from %s to %q within epoch %d", s.prevCP, got.Checkpoint, got.Epoch)
	}
	s.prevCP, s.prevEp = got.Checkpoint, got.Epoch
	return nil
}

func (s *sim) deliver(seq string, parts int) error {
	s.step++
	s.log("Deliver(%s, %d)", clip(seq), parts)
	tk, err := s.w.Deliver(seq, parts)
	want := s.m.deliver(seq, parts)
	if !errors.Is(err, want) || (want == nil) != (err == nil) {
		return fmt.Errorf("Deliver(%q, %d) = %v, model %v", clip(seq), parts, err, want)
	}
	if err == nil {
		if tk.epoch != s.m.epoch || tk.Epoch() != s.m.epoch || tk.index != uint64(len(s.m.ds)-1) || tk.part != 0 || tk.w != s.w {
			return fmt.Errorf("Deliver(%q, %d) ticket %+v, want epoch %d index %d", seq, parts, tk, s.m.epoch, len(s.m.ds)-1)
		}
		s.tickets = append(s.tickets, tk)
		s.parts[tk] = parts
		s.g.n, _ = parseCounter(s.g, seq)
	}
	return s.check()
}

// parseCounter recovers the counter from a generated seq.
func parseCounter(g seqGen, seq string) (uint64, bool) {
	var n uint64
	for _, c := range seq[len(g.prefix):] {
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

func (s *sim) settle(t Ticket) error {
	s.step++
	s.log("Settle(epoch %d, index %d, part %d)", t.epoch, t.index, t.part)
	if s.step%2 == 0 {
		before := s.m.position()
		pos, moved, err := s.w.SettleAt(t)
		_, _, werr := s.m.settle(s.w, t)
		after := s.m.position()
		if werr != nil {
			after = Position{}
		}
		if !errors.Is(err, werr) || (werr == nil) != (err == nil) || pos != after || moved != (werr == nil && before != after) {
			return fmt.Errorf("SettleAt(epoch %d, index %d, part %d) = %+v, %v, %v; model %+v, %v, %v",
				t.epoch, t.index, t.part, pos, moved, err, after, before != after, werr)
		}
		return s.check()
	}
	cp, moved, err := s.w.Settle(t)
	wcp, wmoved, werr := s.m.settle(s.w, t)
	if !errors.Is(err, werr) || (werr == nil) != (err == nil) || cp != wcp || moved != wmoved {
		return fmt.Errorf("Settle(epoch %d, index %d, part %d) = %q, %v, %v; model %q, %v, %v",
			t.epoch, t.index, t.part, cp, moved, err, wcp, wmoved, werr)
	}
	return s.check()
}

func (s *sim) reset(from string) error {
	s.step++
	s.log("Reset(%q)", from)
	ep := s.w.Reset(from)
	s.m.reset(from)
	if ep != s.m.epoch {
		return fmt.Errorf("Reset returned epoch %d, model %d", ep, s.m.epoch)
	}
	return s.check()
}

func (s *sim) end() error {
	s.step++
	s.log("End()")
	err, want := s.w.End(), s.m.end()
	if !errors.Is(err, want) || (want == nil) != (err == nil) {
		return fmt.Errorf("End() = %v, model %v", err, want)
	}
	return s.check()
}

// nextSeq returns a valid sequence number after the last one generated.
func (s *sim) nextSeq() string {
	return s.g.seq(s.g.n + 1 + uint64(s.c.IntN(3)))
}

func (s *sim) randomParts() int {
	switch r := s.c.IntN(20); {
	case r < 14:
		return 1
	case r < 19:
		return 2 + s.c.IntN(3)
	default:
		return 60 + s.c.IntN(80) // crosses bitset word boundaries
	}
}

// currentTickets returns the tickets of the current epoch.
func (s *sim) currentTickets() []Ticket {
	i := len(s.tickets)
	for i > 0 && s.tickets[i-1].epoch == s.m.epoch {
		i--
	}
	return s.tickets[i:]
}

// settleAll settles every remaining part of delivery d in random order.
func (s *sim) settleAll(t Ticket) error {
	d := s.m.ds[t.index]
	var todo []int
	for p, done := range d.done {
		if !done {
			todo = append(todo, p)
		}
	}
	for len(todo) > 0 {
		k := s.c.IntN(len(todo))
		p := todo[k]
		todo[k] = todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if err := s.settle(t.Part(p)); err != nil {
			return err
		}
	}
	return nil
}

// op runs one random operation (one or more steps).
func (s *sim) op() error {
	c := s.c
	switch r := c.IntN(100); {
	case r < 30: // a valid delivery
		return s.deliver(s.nextSeq(), s.randomParts())
	case r < 36: // a delivery the model may refuse
		seq := s.nextSeq()
		parts := 1
		switch c.IntN(7) {
		case 0:
			seq = s.m.last
		case 1:
			if s.g.n > 0 {
				seq = s.g.seq(s.g.n - 1)
			}
		case 2:
			seq = []string{"", "01", "00", "1a", "-5", " 7", strings.Repeat("9", 130)}[c.IntN(7)]
		case 3:
			parts = []int{0, -1, MaxParts + 1}[c.IntN(3)]
		case 4:
			if s.g.prefix == "" && s.g.n >= 10 {
				// The same digits as a shorter string: "9" after "10".
				seq = itoa(s.g.n)[:1]
			}
		case 5:
			seq = "0" + seq
		default:
			if s.g.prefix != "" {
				seq = s.g.prefix[:len(s.g.prefix)-1] + itoa(s.g.n+1) // fewer digits
			}
		}
		return s.deliver(seq, parts)
	case r < 66: // settle a ticket part, mostly of this epoch
		pool := s.currentTickets()
		if len(pool) == 0 || c.IntN(8) == 0 {
			pool = s.tickets
		}
		if len(pool) == 0 {
			return s.settle(Ticket{})
		}
		t := pool[c.IntN(len(pool))]
		parts := s.parts[t]
		part := c.IntN(parts)
		if c.IntN(12) == 0 {
			part = []int{-1, parts, parts + 64}[c.IntN(3)]
		}
		return s.settle(t.Part(part))
	case r < 70: // tickets the Watermark never issued
		var t Ticket
		switch c.IntN(4) {
		case 0:
		case 1:
			t = s.other
		case 2:
			t = Ticket{w: s.w, epoch: s.m.epoch, index: uint64(len(s.m.ds) + c.IntN(3))}
		default:
			t = Ticket{w: s.w, epoch: s.m.epoch + 1}
		}
		return s.settle(t)
	case r < 78: // finish one delivery of this epoch
		pool := s.currentTickets()
		if len(pool) == 0 {
			return s.end()
		}
		return s.settleAll(pool[c.IntN(len(pool))])
	case r < 82: // finish everything of this epoch, in random delivery order
		pool := append([]Ticket(nil), s.currentTickets()...)
		for len(pool) > 0 {
			k := c.IntN(len(pool))
			t := pool[k]
			pool[k] = pool[len(pool)-1]
			pool = pool[:len(pool)-1]
			if err := s.settleAll(t); err != nil {
				return err
			}
		}
		return s.end()
	case r < 90: // seek: back, forward, or to no position
		switch c.IntN(3) {
		case 0:
			s.g.n = uint64(c.IntN(int(min(s.g.n, 1<<20)) + 1))
			return s.reset("")
		default:
			if c.IntN(2) == 0 {
				s.g.n -= min(s.g.n, uint64(c.IntN(20)))
			} else {
				s.g.n += uint64(c.IntN(20))
			}
			return s.reset(s.g.seq(s.g.n))
		}
	default:
		return s.end()
	}
}

// runSchedule runs up to maxOps random operations, or until a byteChooser is
// exhausted.
func runSchedule(c chooser, maxOps int, logf func(string, ...any)) error {
	s := newSim(c, logf)
	if err := s.check(); err != nil {
		return fmt.Errorf("initial: %w", err)
	}
	bc, _ := c.(*byteChooser)
	for range maxOps {
		if bc != nil && len(bc.b) == 0 {
			return nil
		}
		if err := s.op(); err != nil {
			return fmt.Errorf("step %d: %w", s.step, err)
		}
	}
	return nil
}

func scheduleSource(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x5e771e))
}

// propertySchedules is the number of random schedules; the race detector
// makes each one about ten times slower, so it gets fewer.
func propertySchedules() int {
	if raceEnabled {
		return 10_000
	}
	return 100_000
}

func TestWatermarkProperty(t *testing.T) {
	const maxOps = 40
	if *replaySeed >= 0 {
		seed := uint64(*replaySeed)
		if err := runSchedule(scheduleSource(seed), maxOps, t.Logf); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		return
	}
	n := propertySchedules()
	var next atomic.Int64
	var failed atomic.Bool
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for !failed.Load() {
				seed := next.Add(1) - 1
				if seed >= int64(n) {
					return
				}
				if err := runSchedule(scheduleSource(uint64(seed)), maxOps, nil); err != nil {
					failed.Store(true)
					mu.Lock()
					failures = append(failures, fmt.Sprintf("seed %d: %v (replay: go test -run TestWatermarkProperty -v ./settle -settle.seed=%d)", seed, err, seed))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
}

func FuzzWatermark(f *testing.F) {
	for seed := range uint64(16) {
		r := scheduleSource(seed)
		b := make([]byte, 64+r.IntN(512))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := runSchedule(&byteChooser{b: data}, len(data), nil); err != nil {
			t.Fatal(err)
		}
	})
}
