package soak

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Run is everything a soak run leaves for the checker: what was produced,
// what the processes logged, what the streams and dead-letter targets hold
// at the end, and when which fault was active.
type Run struct {
	Seed      uint64
	Limits    Limits
	Windows   []Window
	Processes []*Process
	Produced  []Produced
	// Stream holds every record of the source streams at the end
	// (originals and counted copies).
	Stream      []StreamRecord
	DeadLetters []DeadLetter
	Invocations []Invocation
	// HarnessErrors are the harness's own failures (a producer's write that
	// failed, a stream that could not be read): the run proves nothing
	// where they happened, so they fail it.
	HarnessErrors []string
}

// Check is the name of one of the checker's promises.
type Check string

// The checks, in report order.
const (
	CheckLost      Check = "lost"
	CheckOverlap   Check = "overlap"
	CheckFence     Check = "stale lease"
	CheckOrder     Check = "per-key order"
	CheckDuplicate Check = "duplicate"
	CheckCopy      Check = "extra copy"
	CheckStall     Check = "stall"
	CheckFlap      Check = "lease flapping"
	CheckExit      Check = "exit"
	CheckHarness   Check = "harness"
)

// Finding is one thing the checker found. Violation says it breaks a
// promise; otherwise it is counted (a documented duplicate, say).
type Finding struct {
	Check     Check
	Mode      Mode
	Violation bool
	// Kinds are the fault windows the finding falls in (KindNone for none).
	Kinds []Kind
	// Cause is the documented (or not) cause of a duplicate or an extra copy.
	Cause   string
	Time    time.Time
	Shard   string
	ID      string
	Workers []string
	// Count is how many records (starts, duplicates) the finding stands for.
	Count  int
	Detail string
}

// Causes of duplicates and extra copies.
const (
	CauseInProcess    = "in-process retry"
	CauseKill         = "kill -9"
	CauseKillHeld     = "kill -9, behind an unsettled record"
	CausePause        = "pause"
	CausePauseHeld    = "pause, behind an unsettled record"
	CauseCutDynamoDB  = "cut off from DynamoDB"
	CauseFencedErrors = "DynamoDB errors: lease writes failed for 0.9 × lease (fenced)"
	CauseSIGTERM      = "SIGTERM"
	CauseSIGTERMHeld  = "SIGTERM, behind an unsettled record"
	CausePlanned      = "planned move"
	CausePlannedHeld  = "planned move, behind an unsettled record"
	CauseLeaseLost    = "lease lost"
	CauseLambda       = "Lambda: batch again from a reported record"
	CauseDelayTwice   = "delay message forwarded twice"
	CauseWriteAgain   = "a write with no answer in time, made again"
	CauseAfterFence   = "started after its lease went stale"
	CauseUnexplained  = "unexplained"
	causeHandledTwice = "its retried delivery was handled twice"
)

// Check checks the run and returns the report.
func (r *Run) Check() *Report {
	c := newChecker(r)
	c.harness()
	c.lost()
	c.overlap()
	c.fence()
	c.order()
	c.duplicates()
	c.copies()
	c.stall()
	c.flapping()
	c.exits()
	return &Report{Run: r, Findings: c.findings, Stats: c.stats()}
}

// start is one handler start (a "record" line).
type start struct {
	proc    *Process
	t       time.Time
	attempt int
	id      string
	// tenure counts the proc's "lease taken" lines of the shard before
	// this start (ECS); taken is the last one's time.
	tenure int
	taken  time.Time
}

// end is one handler end (a "record outcome" line).
type end struct {
	proc    *Process
	t       time.Time
	attempt int
	id      string
	outcome string
}

type delivery struct {
	mode       Mode
	shard, seq string
}

type checker struct {
	r        *Run
	findings []Finding

	starts  map[delivery][]start
	ends    map[delivery][]end
	endsID  map[string][]end // by id, every delivery (originals and copies)
	takes   map[string][]start
	moves   map[*Process][]Line // lease lines other than takes, per process
	orig    map[delivery]*Produced
	byID    map[string]*Produced
	dead    map[string]int
	windows []Window
	// ambiguous are the failed writes whose error leaves open whether the
	// write was applied (AmbiguousWriteError), and the writes an attempt
	// of which got no answer (Line.Unanswered), by process.
	ambiguous map[*Process][]Line
}

func newChecker(r *Run) *checker {
	c := &checker{
		r:      r,
		starts: map[delivery][]start{},
		ends:   map[delivery][]end{},
		endsID: map[string][]end{},
		takes:  map[string][]start{},
		moves:  map[*Process][]Line{},
		orig:   map[delivery]*Produced{},
		byID:   map[string]*Produced{},
		dead:   map[string]int{},

		ambiguous: map[*Process][]Line{},
	}
	for i := range r.Produced {
		p := &r.Produced[i]
		c.orig[delivery{p.Mode, p.Shard, p.Seq}] = p
		c.byID[p.ID] = p
	}
	for _, d := range r.DeadLetters {
		c.dead[d.ID]++
	}
	for _, p := range r.Processes {
		tenure := map[string]int{}
		taken := map[string]time.Time{}
		for _, l := range p.Lines {
			d := delivery{p.Mode, l.ShardID, l.Seq}
			switch {
			case l.Msg == MsgLeaseTaken:
				tenure[l.ShardID]++
				taken[l.ShardID] = l.Time
				c.takes[l.ShardID] = append(c.takes[l.ShardID], start{proc: p, t: l.Time, tenure: tenure[l.ShardID], taken: l.Time})
			case l.Msg == MsgRecord:
				c.starts[d] = append(c.starts[d], start{proc: p, t: l.Time, attempt: l.Attempt, id: l.ID, tenure: tenure[l.ShardID], taken: taken[l.ShardID]})
			case l.Msg == MsgRecordOutcome:
				e := end{proc: p, t: l.Time, attempt: l.Attempt, id: l.ID, outcome: l.Outcome}
				c.ends[d] = append(c.ends[d], e)
				c.endsID[l.ID] = append(c.endsID[l.ID], e)
			case isWriteFailed(l.Msg):
				if l.Unanswered || AmbiguousWriteError(l.Err) {
					c.ambiguous[p] = append(c.ambiguous[p], l)
				}
			default:
				c.moves[p] = append(c.moves[p], l)
			}
		}
	}
	for _, ss := range c.starts {
		slices.SortStableFunc(ss, func(a, b start) int { return a.t.Compare(b.t) })
	}
	for _, ts := range c.takes {
		slices.SortStableFunc(ts, func(a, b start) int { return a.t.Compare(b.t) })
	}
	c.windows = slices.Clone(r.Windows)
	slices.SortStableFunc(c.windows, func(a, b Window) int { return a.Start.Compare(b.Start) })
	return c
}

func (c *checker) add(f Finding) {
	if len(f.Kinds) == 0 {
		f.Kinds = []Kind{KindNone}
	}
	if f.Count == 0 {
		f.Count = 1
	}
	c.findings = append(c.findings, f)
}

// tail is how long after a window's end a finding is still attributed to
// it: what a fault sets off (leases expiring, a replacement taking its
// share, children starting) takes a few lease durations to settle.
func (c *checker) tail(k Kind) time.Duration {
	l := c.r.Limits.LeaseDuration
	switch k {
	case KindKill, KindSIGTERM, KindPause, KindCutDynamoDB, KindCutKinesis, KindSplit, KindMerge, KindStartup:
		return 4 * l
	}
	return 2 * l
}

// attribute returns the kinds of the windows that t falls in (each
// extended by its tail) that hit every process (Worker "") or one of
// workers; KindNone when there is none.
func (c *checker) attribute(t time.Time, workers ...string) []Kind {
	return c.attributeTo(t, false, workers)
}

// attributeTo is attribute; with any, windows of every worker count.
func (c *checker) attributeTo(t time.Time, any bool, workers []string) []Kind {
	var ks []Kind
	for _, w := range c.windows {
		if t.Before(w.Start) || t.After(w.End.Add(c.tail(w.Kind))) {
			continue
		}
		if !any && w.Worker != "" && !slices.Contains(workers, w.Worker) {
			continue
		}
		if !slices.Contains(ks, w.Kind) {
			ks = append(ks, w.Kind)
		}
	}
	if len(ks) == 0 {
		return []Kind{KindNone}
	}
	sortKinds(ks)
	return ks
}

// sortKinds sorts ks in report order.
func sortKinds(ks []Kind) {
	slices.SortFunc(ks, func(a, b Kind) int { return cmp.Compare(slices.Index(Kinds, a), slices.Index(Kinds, b)) })
}

// windowsOf returns the windows of kind k that hit worker (or every
// process).
func (c *checker) windowsOf(k Kind, worker string) []Window {
	var out []Window
	for _, w := range c.windows {
		if w.Kind == k && (w.Worker == "" || w.Worker == worker) {
			out = append(out, w)
		}
	}
	return out
}

// stillInFlight reports whether w logged, between from and to, that it
// stopped shard with records still in flight after its shutdown timeout:
// observed, the shard's checkpoint stayed before the first of them, and the
// records after it come again ("behind an unsettled record").
func (c *checker) stillInFlight(w *Process, shard string, from, to time.Time) bool {
	for _, l := range c.moves[w] {
		if l.Msg == MsgStillInFlight && l.ShardID == shard && !l.Time.Before(from) && !l.Time.After(to) {
			return true
		}
	}
	return false
}

// heldBehind reports whether a record of worker's may have been held
// unsettled between from and to: a write (copy, dead letter, delay) could
// fail then, so the checkpoint may have stopped before it and the records
// after it come again after a stop ("plus what was unsettled").
func (c *checker) heldBehind(worker string, from, to time.Time) bool {
	for _, k := range []Kind{KindOutage, KindErrorsKinesis, KindErrorsSQS, KindCutKinesis} {
		for _, w := range c.windowsOf(k, worker) {
			if !w.Start.After(to) && !w.End.Add(c.tail(k)).Before(from) {
				return true
			}
		}
	}
	return false
}

func (c *checker) harness() {
	for _, e := range c.r.HarnessErrors {
		c.add(Finding{Check: CheckHarness, Violation: true, Kinds: []Kind{kindHarnessForReport}, Detail: e})
	}
}

// done reports whether id settled for good: some handling acked or dropped
// it, or it was dead-lettered.
func (c *checker) done(id string) bool {
	if c.dead[id] > 0 {
		return true
	}
	for _, e := range c.endsID[id] {
		if e.outcome == "ack" || e.outcome == "drop" {
			return true
		}
	}
	return false
}

// doneAt returns when id settled for good (its first ack or drop, or the
// handling at the cap that sent it to the dead-letter target), or zero.
func (c *checker) doneAt(id string) time.Time {
	var at time.Time
	for _, e := range c.endsID[id] {
		fin := e.outcome == "ack" || e.outcome == "drop" || (c.dead[id] > 0 && e.attempt >= c.r.Limits.MaxAttempts)
		if fin && (at.IsZero() || e.t.Before(at)) {
			at = e.t
		}
	}
	return at
}

// lost: every produced id was handled to an ack (or a drop) or
// dead-lettered.
func (c *checker) lost() {
	for _, p := range c.r.Produced {
		if c.done(p.ID) {
			continue
		}
		at, workers, what := p.Time, []string(nil), "never handled"
		if es := c.endsID[p.ID]; len(es) > 0 {
			last := es[len(es)-1]
			at, workers = last.t, []string{last.proc.Name}
			what = fmt.Sprintf("handled %d times, last at attempt %d with %q, never acked nor dead-lettered", len(es), last.attempt, last.outcome)
		}
		c.add(Finding{Check: CheckLost, Mode: p.Mode, Violation: true, Kinds: c.attribute(at, workers...), Time: at,
			Shard: p.Shard, ID: p.ID, Workers: workers, Detail: fmt.Sprintf("%s (key %s, produced %s)", what, p.Key, p.Time.Format(timeFormat))})
	}
}

// overlap: per shard, no worker starts a record after another worker
// started one of the shard, within one tenure of its lease (between two of
// its "lease taken" lines): a1 < b1 < a2 with a from worker A and b from
// worker B is an overlap, unless A took the lease again between b1 and a2.
// Overlapping starts close to each other (within two lease durations) form
// one episode; a finding is an episode, from the first b1 to the last
// overlapping start, and counts every record of the shard started in it
// by any worker: the records handed out while two workers held the shard.
func (c *checker) overlap() {
	byShard := map[string][]start{}
	for d, ss := range c.starts {
		if d.mode == ModeECS {
			byShard[d.shard] = append(byShard[d.shard], ss...)
		}
	}
	for _, shard := range sortedKeys(byShard) {
		ss := byShard[shard]
		slices.SortStableFunc(ss, func(a, b start) int { return a.t.Compare(b.t) })
		type episode struct {
			from, to time.Time
			workers  []string
			inter    int
		}
		var eps []*episode
		last := map[*Process]start{} // each worker's last start
		for _, s := range ss {
			prev, ok := last[s.proc]
			last[s.proc] = s
			if !ok || prev.tenure != s.tenure {
				continue
			}
			// The first start of another worker after this worker's
			// previous one, if any.
			var other *start
			for p, o := range last {
				if p != s.proc && o.t.After(prev.t) && (other == nil || o.t.Before(other.t)) {
					o := o
					other = &o
				}
			}
			if other == nil {
				continue
			}
			e := (*episode)(nil)
			if n := len(eps); n > 0 && !other.t.After(eps[n-1].to.Add(2*c.r.Limits.LeaseDuration)) {
				e = eps[n-1]
			} else {
				e = &episode{from: other.t}
				eps = append(eps, e)
			}
			e.to, e.inter = s.t, e.inter+1
			for _, w := range []string{s.proc.Name, other.proc.Name} {
				if !slices.Contains(e.workers, w) {
					e.workers = append(e.workers, w)
				}
			}
		}
		for _, e := range eps {
			n := 0
			for _, s := range ss {
				if !s.t.Before(e.from) && !s.t.After(e.to) {
					n++
				}
			}
			slices.Sort(e.workers)
			c.add(Finding{Check: CheckOverlap, Mode: ModeECS, Violation: true, Time: e.from, Shard: shard, Count: n,
				Workers: e.workers, Kinds: c.attribute(e.from, e.workers...),
				Detail: fmt.Sprintf("%s: %s started records of it alternately for %v from %s (%d starts, %d of them after another worker's, within its own lease tenure)",
					shard, strings.Join(e.workers, " and "), e.to.Sub(e.from).Round(time.Millisecond), e.from.Format(timeFormat), n, e.inter)})
		}
	}
}

// order: per partition key, no original record starts before every earlier
// record of its key (in production order) has ended a handling: later
// records of a key wait for it. A counted retry gives up its place (its
// copy goes to the end of the stream), so copies are not in the order; the
// original's handling ended when it was copied.
func (c *checker) order() {
	type ev struct {
		t     time.Time
		isEnd bool
		idx   int
		proc  *Process
	}
	byKey := map[string][]*Produced{}
	for i := range c.r.Produced {
		p := &c.r.Produced[i]
		byKey[string(p.Mode)+"/"+p.Key] = append(byKey[string(p.Mode)+"/"+p.Key], p)
	}
	for _, k := range sortedKeys(byKey) {
		ps := byKey[k]
		slices.SortFunc(ps, func(a, b *Produced) int { return cmp.Compare(a.KeySeq, b.KeySeq) })
		var evs []ev
		for i, p := range ps {
			d := delivery{p.Mode, p.Shard, p.Seq}
			for _, s := range c.starts[d] {
				evs = append(evs, ev{t: s.t, idx: i, proc: s.proc})
			}
			for _, e := range c.ends[d] {
				evs = append(evs, ev{t: e.t, isEnd: true, idx: i, proc: e.proc})
			}
		}
		slices.SortStableFunc(evs, func(a, b ev) int {
			if n := a.t.Compare(b.t); n != 0 {
				return n
			}
			switch {
			case a.isEnd && !b.isEnd:
				return -1
			case !a.isEnd && b.isEnd:
				return 1
			}
			return 0
		})
		ended := make([]bool, len(ps))
		prefix := 0 // ps[:prefix] have all ended a handling
		var f *Finding
		for _, e := range evs {
			if e.isEnd {
				ended[e.idx] = true
				for prefix < len(ps) && ended[prefix] {
					prefix++
				}
				continue
			}
			if e.idx <= prefix {
				continue
			}
			p := ps[e.idx]
			if f == nil {
				f = &Finding{Check: CheckOrder, Mode: p.Mode, Violation: true, Time: e.t, Shard: p.Shard, ID: p.ID,
					Workers: []string{e.proc.Name}, Kinds: c.attribute(e.t, e.proc.Name),
					Detail: fmt.Sprintf("key %s: %s (key sequence %d) started at %s before %s (key sequence %d) had ended a handling",
						p.Key, p.ID, p.KeySeq, e.t.Format(timeFormat), ps[prefix].ID, ps[prefix].KeySeq)}
				continue
			}
			f.Count++
		}
		if f != nil {
			c.add(*f)
		}
	}
}

// causeKinds are the fault kinds of the causes that name one: a
// duplicate counts in the row of the fault that caused it, besides the
// windows its redelivery falls in.
var causeKinds = map[string]Kind{
	CauseKill: KindKill, CauseKillHeld: KindKill, CausePause: KindPause, CausePauseHeld: KindPause,
	CauseCutDynamoDB: KindCutDynamoDB, CauseFencedErrors: KindErrorsDynamoDB, CauseSIGTERM: KindSIGTERM, CauseSIGTERMHeld: KindSIGTERM,
}

// duplicates: every record of a stream (original or copy) is handled once,
// except in-process retries (same worker, same lease, a higher attempt)
// and the documented redeliveries, each counted by its cause.
func (c *checker) duplicates() {
	ds := sortedKeysFunc(c.starts, func(a, b delivery) int {
		return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.shard, b.shard), cmp.Compare(a.seq, b.seq))
	})
	for _, d := range ds {
		ss := c.starts[d]
		for i := 1; i < len(ss); i++ {
			s1, s2 := ss[i-1], ss[i]
			if d.mode == ModeECS && s1.proc == s2.proc && s1.tenure == s2.tenure && s2.attempt > s1.attempt {
				c.add(Finding{Check: CheckDuplicate, Mode: d.mode, Cause: CauseInProcess, Time: s2.t, Shard: d.shard,
					ID: s2.id, Workers: []string{s2.proc.Name}, Kinds: c.attribute(s2.t, s2.proc.Name)})
				continue
			}
			var cause, why string
			var bad bool
			if d.mode == ModeLambda {
				cause, bad, why = c.lambdaCause(d, s1)
			} else {
				cause, bad, why = c.ecsCause(d, s1, s2)
			}
			kinds := c.attribute(s2.t, s1.proc.Name, s2.proc.Name)
			if k, ok := causeKinds[cause]; ok && !slices.Contains(kinds, k) {
				kinds = append(slices.DeleteFunc(kinds, func(k Kind) bool { return k == KindNone }), k)
				sortKinds(kinds)
			}
			c.add(Finding{Check: CheckDuplicate, Mode: d.mode, Violation: bad, Cause: cause, Time: s2.t, Shard: d.shard, ID: s2.id,
				Workers: []string{s1.proc.Name, s2.proc.Name}, Kinds: kinds,
				Detail: fmt.Sprintf("%s (sequence %s) started by %s at %s (attempt %d), again by %s at %s (attempt %d): %s",
					s2.id, d.seq, s1.proc.Name, s1.t.Format(timeFormat), s1.attempt, s2.proc.Name, s2.t.Format(timeFormat), s2.attempt, why)})
		}
	}
}

// lambdaCause explains a Lambda-mode redelivery: the batch that held the
// first handling was reported from this record or before it, or failed.
func (c *checker) lambdaCause(d delivery, s1 start) (cause string, bad bool, why string) {
	for _, inv := range c.r.Invocations {
		if inv.Shard != d.shard || s1.t.Before(inv.Start) || s1.t.After(inv.End) {
			continue
		}
		switch {
		case inv.Err != "":
			return CauseLambda, false, "its invocation failed (" + inv.Err + ")"
		case inv.Reported != "" && !seqLess(d.seq, inv.Reported):
			return CauseLambda, false, "its invocation reported " + inv.Reported + ", at or before it"
		}
		return CauseUnexplained, true, "its invocation checkpointed past it"
	}
	return CauseUnexplained, true, "no invocation of its shard was under way when it started"
}

// stale says why x started on a stale lease ("" when it did not): after
// its worker resumed from a pause (every pause lasts at least a lease
// duration), or more than a lease duration after its worker was cut off
// from DynamoDB (its last renewal came before the cut), on a lease taken
// before the pause or the cut.
func (c *checker) stale(x start) string {
	w, l := x.proc, c.r.Limits
	for _, p := range c.windowsOf(KindPause, w.Name) {
		if !x.t.Before(p.End) && x.taken.Before(p.Start) {
			return fmt.Sprintf("%s started it %v after resuming from a %v pause, on a lease taken before it",
				w.Name, x.t.Sub(p.End).Round(time.Millisecond), p.End.Sub(p.Start).Round(time.Millisecond))
		}
	}
	for _, p := range c.windowsOf(KindCutDynamoDB, w.Name) {
		if x.t.After(p.Start.Add(l.LeaseDuration)) && x.taken.Before(p.Start) {
			return fmt.Sprintf("%s started it %v after it was cut off from DynamoDB for %v (lease duration %v), on a lease taken before it",
				w.Name, x.t.Sub(p.Start).Round(time.Millisecond), p.End.Sub(p.Start).Round(time.Millisecond), l.LeaseDuration)
		}
	}
	return ""
}

// fence: a worker starts no record on a lease whose last renewal is older
// than the lease duration (self-fencing): none after resuming from a pause,
// none more than a lease duration into a cut from DynamoDB, on a lease it
// took before (one it takes again later is a new tenure).
func (c *checker) fence() {
	type key struct {
		proc   *Process
		shard  string
		tenure int
	}
	found := map[key]*Finding{}
	var order []key
	for _, d := range sortedKeysFunc(c.starts, func(a, b delivery) int {
		return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.shard, b.shard), cmp.Compare(a.seq, b.seq))
	}) {
		if d.mode != ModeECS {
			continue
		}
		for _, x := range c.starts[d] {
			why := c.stale(x)
			if why == "" {
				continue
			}
			k := key{x.proc, d.shard, x.tenure}
			f := found[k]
			if f == nil {
				f = &Finding{Check: CheckFence, Mode: ModeECS, Violation: true, Shard: d.shard, Workers: []string{x.proc.Name}, Time: x.t, ID: x.id}
				found[k] = f
				order = append(order, k)
			}
			f.Count++
			if !x.t.After(f.Time) {
				f.Time, f.ID, f.Detail = x.t, x.id, why
			}
		}
	}
	for _, k := range order {
		f := found[k]
		f.Kinds = c.attribute(f.Time, f.Workers...)
		f.Detail = fmt.Sprintf("%s started %d records of %s on a stale lease; the first: %s", f.Workers[0], f.Count, f.Shard, f.Detail)
		c.add(*f)
	}
}

// ecsCause explains why a record that worker W (s1's) started was started
// again by s2 (another worker, or W under a new lease).
func (c *checker) ecsCause(d delivery, s1, s2 start) (cause string, bad bool, why string) {
	w, l := s1.proc, c.r.Limits
	bound := l.redeliveryBound()
	// A worker must start nothing once its lease is stale: not after
	// resuming from a pause, nor after a cut from DynamoDB has lasted a
	// lease duration, on a lease it took before. Either start may be the
	// stale one.
	for _, x := range []start{s1, s2} {
		if why := c.stale(x); why != "" {
			return CauseAfterFence, true, why
		}
	}
	if e := w.Exit; e != nil && e.Stop == StopKill && !e.Signalled.Before(s1.t) && !e.Signalled.After(s2.t) {
		age := e.Signalled.Sub(s1.t)
		switch {
		case age <= bound:
			return CauseKill, false, fmt.Sprintf("%s was killed %v after it started it (bound %v)", w.Name, age.Round(time.Millisecond), bound)
		case c.heldBehind(w.Name, s1.t, e.Signalled):
			return CauseKillHeld, false, fmt.Sprintf("%s was killed %v after it started it, while writes could fail", w.Name, age.Round(time.Millisecond))
		}
		return CauseKill, true, fmt.Sprintf("%s was killed %v after it started it: beyond about one checkpoint interval (bound %v)", w.Name, age.Round(time.Millisecond), bound)
	}
	for _, p := range c.windowsOf(KindPause, w.Name) {
		if p.Start.Before(s1.t) || p.Start.After(s2.t) {
			continue
		}
		age := p.Start.Sub(s1.t)
		switch {
		case age <= bound:
			return CausePause, false, fmt.Sprintf("%s was paused %v after it started it (in flight or not yet checkpointed; bound %v)", w.Name, age.Round(time.Millisecond), bound)
		case c.heldBehind(w.Name, s1.t, p.Start):
			return CausePauseHeld, false, fmt.Sprintf("%s was paused %v after it started it, while writes could fail", w.Name, age.Round(time.Millisecond))
		}
		return CausePause, true, fmt.Sprintf("%s was paused %v after it started it: beyond about one checkpoint interval (bound %v)", w.Name, age.Round(time.Millisecond), bound)
	}
	for _, p := range c.windowsOf(KindCutDynamoDB, w.Name) {
		if p.Start.After(s2.t) || p.End.Add(bound).Before(s1.t) {
			continue
		}
		if s1.t.Before(p.Start.Add(-bound)) && !c.heldBehind(w.Name, s1.t, p.Start) {
			return CauseCutDynamoDB, true, fmt.Sprintf("%s was cut off from DynamoDB %v after it started it: beyond about one checkpoint interval (bound %v)",
				w.Name, p.Start.Sub(s1.t).Round(time.Millisecond), bound)
		}
		return CauseCutDynamoDB, false, fmt.Sprintf("%s started it %v from the start of its cut from DynamoDB (its checkpoints could not be written)",
			w.Name, s1.t.Sub(p.Start).Round(time.Millisecond))
	}
	if e := w.Exit; e != nil && (e.Stop == StopSIGTERM || e.Stop == StopFinal) && !e.Signalled.Before(s1.t.Add(-l.MaxHandler)) && !e.Signalled.After(s2.t) {
		if c.heldBehind(w.Name, s1.t.Add(-bound), e.Signalled) {
			return CauseSIGTERMHeld, false, fmt.Sprintf("%s was stopped with SIGTERM while writes could fail (a record waiting for a retry is left to the next owner)", w.Name)
		}
		return CauseSIGTERM, true, fmt.Sprintf("%s was stopped with SIGTERM %v after it started it", w.Name, e.Signalled.Sub(s1.t).Round(time.Millisecond))
	}
	for _, m := range c.moves[w] {
		if m.ShardID != d.shard || m.Time.Before(s1.t) || m.Time.After(s2.t) {
			continue
		}
		switch {
		case m.Msg == MsgHandedOver || m.Msg == MsgHandingOver || m.Msg == MsgReleased:
			if c.stillInFlight(w, d.shard, s1.t, s2.t) || c.heldBehind(w.Name, s1.t.Add(-bound), m.Time) {
				return CausePlannedHeld, false, fmt.Sprintf("%s: %q while writes could fail (a record waiting for a retry is left to the next owner)", w.Name, m.Msg)
			}
			return CausePlanned, true, fmt.Sprintf("%s: %q %v after it started it", w.Name, m.Msg, m.Time.Sub(s1.t).Round(time.Millisecond))
		case m.Msg == MsgFenced:
			if why := c.fencedByErrors(w, d.shard, s1, m); why != "" {
				return CauseFencedErrors, false, why
			}
			return CauseLeaseLost, true, fmt.Sprintf("%s: %q %v after it started it, with no DynamoDB error burst and failed lease write of the shard to explain it",
				w.Name, m.Msg, m.Time.Sub(s1.t).Round(time.Millisecond))
		case strings.HasPrefix(m.Msg, msgDroppedPrefix):
			return CauseLeaseLost, true, fmt.Sprintf("%s: %q %v after it started it", w.Name, m.Msg, m.Time.Sub(s1.t).Round(time.Millisecond))
		}
	}
	return CauseUnexplained, true, "no kill, pause, cut, stop or lease move of " + w.Name + " explains it"
}

// fencedByErrors explains a shard that worker w dropped because its lease
// was not renewed in time (fenced, at m) under a DynamoDB error burst: a
// burst that hits every call at random leaves some lease unrenewed for 0.9
// × the lease duration now and then, which is docs/faults.md's "DynamoDB
// failing longer than 0.9 × D": as for a cut, what the worker handled since
// its last checkpoint that was written comes again. Documented when a burst
// was on (or ended less than a lease duration before) at the fence, the
// worker logged a failed lease write (renewal or checkpoint) of the shard
// within the lease duration before it, and s1 started no earlier than a
// redelivery bound before the burst (records held behind an unsettled one
// excepted, as for a cut). It returns "" otherwise.
func (c *checker) fencedByErrors(w *Process, shard string, s1 start, m Line) string {
	l := c.r.Limits
	bound := l.redeliveryBound()
	for _, b := range c.windowsOf(KindErrorsDynamoDB, w.Name) {
		if m.Time.Before(b.Start) || m.Time.After(b.End.Add(l.LeaseDuration)) {
			continue
		}
		failed := 0
		for _, f := range c.moves[w] {
			if f.ShardID == shard && (f.Msg == MsgRenewFailed || f.Msg == MsgCheckpointFailed) &&
				!f.Time.After(m.Time) && !f.Time.Before(m.Time.Add(-l.LeaseDuration)) {
				failed++
			}
		}
		if failed == 0 {
			continue
		}
		if s1.t.Before(b.Start.Add(-bound)) && !c.heldBehind(w.Name, s1.t, b.Start) {
			continue
		}
		return fmt.Sprintf("%s dropped the shard %v after it started it, fenced under %s %s (%d failed lease writes of the shard in the lease duration before)",
			w.Name, m.Time.Sub(s1.t).Round(time.Millisecond), b.Kind, b.Detail, failed)
	}
	return ""
}

// copies: a counted copy is written once per failed handling. Copies
// beyond the handlings that failed at that attempt are extra, documented
// only for a durable delay whose message was forwarded twice (SQS
// redelivers a message whose delete failed), and for a write that got no
// answer in time (its deadline, a reset or a cut answer) and was made
// again: the service may have applied the first (docs/faults.md, "an answer to a
// write cut mid-body or lost"). The same holds for dead letters.
func (c *checker) copies() {
	type level struct {
		id    string
		count int
	}
	// The records whose write at an attempt got no answer in time.
	again := map[level]bool{}
	for p, ls := range c.ambiguous {
		for _, l := range ls {
			for _, s := range c.starts[delivery{p.Mode, l.ShardID, l.Seq}] {
				again[level{s.id, l.Attempt}] = true
				if strings.Contains(l.Msg, "dead_letter") {
					again[level{s.id, -1}] = true
				}
			}
		}
	}
	have := map[level]int{}
	mode := map[string]Mode{}
	for _, r := range c.r.Stream {
		if r.RetryCount > 0 {
			have[level{r.ID, r.RetryCount}]++
			mode[r.ID] = r.Mode
		}
	}
	want := map[level]int{}
	wantDead := map[string]int{}
	for id, es := range c.endsID {
		for _, e := range es {
			switch e.outcome {
			case "retry", "outage", "retry_after", "panic":
			default:
				continue
			}
			if e.attempt >= c.r.Limits.MaxAttempts {
				wantDead[id]++
			} else {
				want[level{id, e.attempt}]++
			}
		}
	}
	for _, lv := range sortedKeysFunc(have, func(a, b level) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.count, b.count)) }) {
		extra := have[lv] - want[lv]
		if extra <= 0 {
			continue
		}
		f := Finding{Check: CheckCopy, Mode: mode[lv.id], ID: lv.id, Count: extra, Violation: true, Cause: CauseUnexplained,
			Detail: fmt.Sprintf("%s has %d copies with retry count %d, but only %d handlings failed at attempt %d", lv.id, have[lv], lv.count, want[lv], lv.count)}
		if p := c.byID[lv.id]; p != nil && p.Delayed && lv.count == 1 {
			f.Violation, f.Cause = false, CauseDelayTwice
		} else if again[lv] {
			f.Violation, f.Cause = false, CauseWriteAgain
		}
		f.Kinds = []Kind{KindNone}
		if es := c.endsID[lv.id]; len(es) > 0 {
			f.Time = es[0].t
			f.Kinds = c.attribute(f.Time, es[0].proc.Name)
		}
		c.add(f)
	}
	for _, id := range sortedKeys(c.dead) {
		if extra := c.dead[id] - wantDead[id]; extra > 0 {
			f := Finding{Check: CheckCopy, ID: id, Count: extra, Violation: true, Cause: CauseUnexplained, Kinds: []Kind{KindNone},
				Detail: fmt.Sprintf("%s was dead-lettered %d times, but only %d handlings failed at the cap", id, c.dead[id], wantDead[id])}
			if again[level{id, -1}] {
				f.Violation, f.Cause = false, CauseWriteAgain
			}
			if p := c.byID[id]; p != nil {
				f.Mode = p.Mode
			}
			c.add(f)
		}
	}
}

// stall: after the last fault, every record is handled within two lease
// durations plus the time the backlog takes (at the best rate seen in the
// run, twice over) plus a slack for a loaded machine. A durable delay whose
// message a worker held when it was stopped comes again only after the
// delay queue's visibility timeout (documented): such a record gets that
// much more.
func (c *checker) stall() {
	l := c.r.Limits
	var lastFault time.Time
	for _, w := range c.r.Windows {
		if w.Kind != KindStartup && w.Kind != KindFinalStop && w.End.After(lastFault) {
			lastFault = w.End
		}
	}
	for _, mode := range []Mode{ModeECS, ModeLambda} {
		type rec struct {
			p  *Produced
			at time.Time
		}
		var recs []rec
		var done []time.Time
		var lastProduced time.Time
		n := 0
		for i := range c.r.Produced {
			p := &c.r.Produced[i]
			if p.Mode != mode {
				continue
			}
			n++
			if p.Time.After(lastProduced) {
				lastProduced = p.Time
			}
			if at := c.doneAt(p.ID); !at.IsZero() {
				done = append(done, at)
				recs = append(recs, rec{p, at})
			}
		}
		if n == 0 {
			continue
		}
		slices.SortFunc(done, func(a, b time.Time) int { return a.Compare(b) })
		from := lastFault
		if lastProduced.After(from) {
			from = lastProduced
		}
		backlog := n - len(done)
		for _, t := range done {
			if t.After(from) {
				backlog++
			}
		}
		rate := peakRate(done, 5*time.Second)
		var backlogTime time.Duration
		if rate > 0 {
			backlogTime = time.Duration(2 * float64(backlog) / rate * float64(time.Second))
		}
		const slack = 10 * time.Second
		bound := 2*l.LeaseDuration + backlogTime + l.MaxHandler + slack
		var worst time.Duration
		worstID, excused, broken := "", 0, 0
		for _, r := range recs {
			late := r.at.Sub(from)
			switch {
			case late <= bound:
				continue
			case r.p.Delayed && c.delayHeld(r.p.ID) && late <= bound+l.DelayVisibility+l.DurableDelay:
				excused++
				continue
			}
			broken++
			if late > worst {
				worst, worstID = late, r.p.ID
			}
		}
		var took time.Duration
		if len(done) > 0 {
			took = max(done[len(done)-1].Sub(from), 0)
		}
		detail := fmt.Sprintf("%s: every record done %v after the last fault or record (%s); bound %v (2 × lease %v + backlog %d at %.0f/s × 2 %v + %v + slack %v)",
			mode, took.Round(time.Millisecond), from.Format(timeFormat), bound.Round(time.Millisecond), l.LeaseDuration, backlog, rate, backlogTime.Round(time.Millisecond), l.MaxHandler, slack)
		if excused > 0 {
			detail += fmt.Sprintf("; %d durable delays held by a stopped worker's delay-queue receive get %v more (visibility timeout %v + delay %v)",
				excused, l.DelayVisibility+l.DurableDelay, l.DelayVisibility, l.DurableDelay)
		}
		if broken > 0 {
			detail += fmt.Sprintf("; %d records done later than the bound, the last (%s) %v after", broken, worstID, worst.Round(time.Millisecond))
		}
		if len(done) < n {
			detail += fmt.Sprintf("; %d records never done (see lost)", n-len(done))
		}
		c.add(Finding{Check: CheckStall, Mode: mode, Violation: len(done) < n || broken > 0, Time: from.Add(took),
			Kinds: []Kind{KindNone}, Detail: detail, Count: broken + n - len(done)})
	}
}

// delayHeld reports whether a worker was stopped (kill -9 or SIGTERM) while
// it may have held id's durable delay message: from its RetryAfter until the
// delay and a long poll (20 s) later.
func (c *checker) delayHeld(id string) bool {
	for _, e := range c.endsID[id] {
		if e.outcome != "retry_after" {
			continue
		}
		until := e.t.Add(c.r.Limits.DurableDelay + 25*time.Second)
		for _, w := range c.windows {
			if (w.Kind == KindKill || w.Kind == KindSIGTERM) && !w.Start.Before(e.t) && !w.Start.After(until) {
				return true
			}
		}
	}
	return false
}

// peakRate returns the most events per second in any window of width w
// (sliding over ts, sorted).
func peakRate(ts []time.Time, w time.Duration) float64 {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) > w {
			j++
		}
		best = max(best, i-j+1)
	}
	return float64(best) / w.Seconds()
}

// flapping: outside fault windows (each extended by its tail), a shard's
// lease changes owner at most FlapsPerMinute times in any minute.
func (c *checker) flapping() {
	for _, shard := range sortedKeys(c.takes) {
		var calm []start
		for _, t := range c.takes[shard] {
			// A fault on any worker moves leases between the others too.
			if k := c.attributeTo(t.t, true, nil); len(k) == 1 && k[0] == KindNone {
				calm = append(calm, t)
			}
		}
		j := 0
		for i := range calm {
			for calm[i].t.Sub(calm[j].t) > time.Minute {
				j++
			}
			if n := i - j + 1; n > c.r.Limits.FlapsPerMinute {
				var who []string
				for _, t := range calm[j : i+1] {
					who = append(who, t.proc.Name+"@"+t.t.Format(timeFormat))
				}
				c.add(Finding{Check: CheckFlap, Mode: ModeECS, Violation: true, Time: calm[i].t, Shard: shard, Count: n,
					Detail: fmt.Sprintf("%s: %d lease changes within a minute outside fault windows: %s", shard, n, strings.Join(who, ", "))})
				j = i + 1
			}
		}
	}
}

// exits: SIGTERM ends a worker with status 0 within its bound, kill -9
// with the signal; no worker exits on its own or hangs.
func (c *checker) exits() {
	for _, p := range c.r.Processes {
		e := p.Exit
		if p.Mode != ModeECS {
			continue
		}
		f := Finding{Check: CheckExit, Mode: p.Mode, Violation: true, Workers: []string{p.Name}}
		switch {
		case e == nil:
			f.Detail = p.Name + ": the harness recorded no exit"
		case e.Stop == StopNone:
			f.Time, f.Kinds = e.Exited, c.attribute(e.Exited, p.Name)
			f.Detail = fmt.Sprintf("%s exited on its own (code %d, signal %q); stderr: %s", p.Name, e.Code, e.Signal, e.Stderr)
		case e.Exited.IsZero():
			f.Time, f.Kinds = e.Signalled, c.attribute(e.Signalled, p.Name)
			f.Detail = fmt.Sprintf("%s did not exit within %v of %s (a hang; the harness sent SIGQUIT: the stacks are in %s.stderr); stderr ends: %s", p.Name, e.Bound, e.Stop, p.Name, e.Stderr)
		case e.Exited.Sub(e.Signalled) > e.Bound:
			f.Time, f.Kinds = e.Signalled, c.attribute(e.Signalled, p.Name)
			f.Detail = fmt.Sprintf("%s took %v to exit after %s, bound %v", p.Name, e.Exited.Sub(e.Signalled).Round(time.Millisecond), e.Stop, e.Bound)
		case e.Stop == StopKill && e.Signal != "killed":
			f.Time, f.Kinds = e.Signalled, c.attribute(e.Signalled, p.Name)
			f.Detail = fmt.Sprintf("%s ended with code %d, signal %q after kill -9, want killed", p.Name, e.Code, e.Signal)
		case e.Stop != StopKill && (e.Code != 0 || e.Signal != ""):
			f.Time, f.Kinds = e.Signalled, c.attribute(e.Signalled, p.Name)
			f.Detail = fmt.Sprintf("%s ended with code %d, signal %q after %s, want status 0 (Run returns nil); stderr: %s", p.Name, e.Code, e.Signal, e.Stop, e.Stderr)
		default:
			continue
		}
		c.add(f)
	}
}

// timeFormat is how the report prints times (the run is short: the clock
// time is enough).
const timeFormat = "15:04:05.000"

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func sortedKeysFunc[K comparable, V any](m map[K]V, f func(a, b K) int) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, f)
	return ks
}
