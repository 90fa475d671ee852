package soak

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Shape is what a schedule is drawn for: the run's length and the fleet.
type Shape struct {
	// Duration is how long faults are injected and records produced.
	Duration time.Duration
	// Warmup is the calm start: workers start and share the leases.
	Warmup time.Duration
	// Workers is the number of worker slots (each holds one process at a
	// time; a killed or stopped one is replaced in its slot).
	Workers int
	// LeaseDuration is the workers' lease duration: pauses and cuts are
	// drawn in multiples of it.
	LeaseDuration time.Duration
}

// Event is one fault of a schedule, at an offset from the run's start.
type Event struct {
	At   time.Duration
	Kind Kind
	// For is how long it lasts (0 for kill -9, split and merge).
	For time.Duration
	// Slot is the worker slot it hits (kill, SIGTERM, pause, cuts); -1
	// for the others.
	Slot int
	// Replace is how long after a kill -9 or a SIGTERM's exit the slot's
	// replacement starts.
	Replace time.Duration
	// BlackHole: a cut drops the data and holds the connections (calls
	// time out) instead of refusing them.
	BlackHole bool
	// Ops, Fault and Rate are an AWS error burst: the operations hit, the
	// fault (a faultnet constructor's name) and the share of calls hit.
	Ops   []string
	Fault string
	Rate  float64
	// Sleep is the longest handler sleep of a slow-handler window (each
	// record produced in it sleeps a random time up to Sleep).
	Sleep time.Duration
	// Pick chooses the shard(s) a split or merge hits among those open at
	// the time, in [0,1).
	Pick float64
}

// Plan is a schedule drawn from a seed.
type Plan struct {
	Seed   uint64
	Shape  Shape
	Events []Event
	// Skipped are the events that did not fit (no free worker slot).
	Skipped []string
}

// The AWS error bursts to draw from, per service (the faultnet
// constructors' names; see faultnet). Kinesis bursts hit either the reads or
// the writes (copies, dead letters).
var (
	kinesisReadOps   = []string{"GetRecords", "GetShardIterator", "ListShards"}
	kinesisReadFault = []string{"Throttled", "LimitExceeded", "KMSThrottling", "InternalFailure", "ServiceUnavailable", "ExpiredIterator", "CutBody"}
	kinesisWriteOps  = []string{"PutRecords", "PutRecord"}
	kinesisWriteFlt  = []string{"Throttled", "PartialFailure", "InternalFailure", "ServiceUnavailable"}
	dynamoFaults     = []string{"Throttled", "ThrottlingException", "RequestLimitExceeded", "InternalFailure", "LostResponse"}
	// A lost response is one of a conditional write (its retry's condition
	// fails): DynamoDB never answers a read with
	// ConditionalCheckFailedException, and a lease write that lost its
	// answer reads its row back with GetItem.
	dynamoWriteOps = []string{"PutItem", "UpdateItem", "DeleteItem"}
	sqsOps         = []string{"SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch"}
	sqsFaults      = []string{"SQSThrottled", "InternalFailure", "ServiceUnavailable", "PartialFailure"}
)

// NewPlan draws the schedule for seed over shape: every fault kind at
// least once, more in a longer run (about one of each kind per two
// minutes; splits and merges one per four), at times and lengths drawn
// with math/rand/v2 from the seed. Faults that hit a worker never overlap
// on one slot, and each leaves its slot two lease durations to settle.
// The downstream outage lasts 60 s in runs of 5 minutes or more, a fifth
// of the run in shorter ones.
func NewPlan(seed uint64, shape Shape) *Plan {
	r := rand.New(rand.NewPCG(seed, 0x50a4))
	p := &Plan{Seed: seed, Shape: shape}
	d, l := shape.Duration, shape.LeaseDuration
	count := func(every time.Duration) int { return max(1, int(math.Round(float64(d)/float64(every)))) }
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	end := d - 2*time.Second // every fault is over by then
	busy := make([][][2]time.Duration, shape.Workers)
	maxAtOnce := 2
	if d < 3*time.Minute {
		maxAtOnce = 3
	}
	atOnce := func(from, to time.Duration) int {
		n := 0
		for _, b := range busy {
			for _, iv := range b {
				if iv[0] < to && from < iv[1] {
					n++
					break
				}
			}
		}
		return n
	}
	// place finds a start and a free slot for a worker fault of length
	// length (plus its replacement and settling time).
	place := func(e Event, length, settle time.Duration) {
		for try := 0; try < 200; try++ {
			latest := end - length
			if latest <= shape.Warmup {
				break
			}
			at := between(shape.Warmup, latest)
			from, to := at, at+length+settle
			if try < 150 && atOnce(from, to) >= maxAtOnce {
				continue
			}
			slot := r.IntN(shape.Workers)
			free := true
			for _, iv := range busy[slot] {
				if iv[0] < to && from < iv[1] {
					free = false
				}
			}
			if !free {
				continue
			}
			busy[slot] = append(busy[slot], [2]time.Duration{from, to})
			e.At, e.Slot = at, slot
			p.Events = append(p.Events, e)
			return
		}
		p.Skipped = append(p.Skipped, fmt.Sprintf("%s for %v: no free worker slot", e.Kind, e.For))
	}
	// anytime places an event that hits no slot.
	anytime := func(e Event) {
		latest := end - e.For
		if latest < shape.Warmup {
			latest = shape.Warmup
		}
		e.At, e.Slot = between(shape.Warmup, latest), -1
		p.Events = append(p.Events, e)
	}

	// The outage first: it is long.
	outage := time.Minute
	if d < 5*time.Minute {
		outage = (d / 5).Round(time.Second)
	}
	anytime(Event{Kind: KindOutage, For: outage})
	// Worker faults, longest first, so they find room.
	for range count(3 * time.Minute) {
		e := Event{Kind: KindCutDynamoDB, For: between(2*l, 4*l), BlackHole: r.IntN(2) == 0}
		place(e, e.For, 2*l)
	}
	for range count(3 * time.Minute) {
		e := Event{Kind: KindCutKinesis, For: between(2*l, 4*l), BlackHole: r.IntN(2) == 0}
		place(e, e.For, 2*l)
	}
	for range count(2 * time.Minute) {
		e := Event{Kind: KindPause, For: between(l, 3*l)}
		place(e, e.For, 2*l)
	}
	for range count(2 * time.Minute) {
		e := Event{Kind: KindSIGTERM, Replace: between(500*time.Millisecond, 2*time.Second)}
		// A graceful stop takes up to the shutdown timeout; count 2 lease
		// durations for it.
		place(e, 2*l+e.Replace, 2*l)
	}
	for range count(2 * time.Minute) {
		e := Event{Kind: KindKill, Replace: between(500*time.Millisecond, 2*time.Second)}
		place(e, e.Replace, 2*l)
	}
	// AWS error bursts on every route.
	for range count(2 * time.Minute) {
		e := Event{Kind: KindErrorsKinesis, For: between(2*time.Second, 8*time.Second), Rate: 0.3 + 0.7*r.Float64()}
		if r.IntN(2) == 0 {
			e.Ops, e.Fault = kinesisReadOps, kinesisReadFault[r.IntN(len(kinesisReadFault))]
		} else {
			e.Ops, e.Fault = kinesisWriteOps, kinesisWriteFlt[r.IntN(len(kinesisWriteFlt))]
			if e.Fault == "PartialFailure" {
				e.Ops = []string{"PutRecords"}
			}
		}
		anytime(e)
	}
	for range count(2 * time.Minute) {
		// At most half the calls: a lease whose renewals keep failing for
		// its whole duration is lost by design; the promise is that one
		// that recovers within it is not.
		e := Event{Kind: KindErrorsDynamoDB, For: between(2*time.Second, 8*time.Second), Rate: 0.2 + 0.3*r.Float64(),
			Fault: dynamoFaults[r.IntN(len(dynamoFaults))]}
		if e.Fault == "LostResponse" {
			e.Rate /= 4
			e.Ops = dynamoWriteOps
		}
		anytime(e)
	}
	for range count(2 * time.Minute) {
		e := Event{Kind: KindErrorsSQS, For: between(2*time.Second, 8*time.Second), Rate: 0.3 + 0.7*r.Float64(),
			Ops: sqsOps, Fault: sqsFaults[r.IntN(len(sqsFaults))]}
		if e.Fault == "PartialFailure" {
			e.Ops = []string{"SendMessageBatch"}
		}
		anytime(e)
	}
	for range count(2 * time.Minute) {
		anytime(Event{Kind: KindSlow, For: between(5*time.Second, 15*time.Second), Sleep: between(50*time.Millisecond, 300*time.Millisecond).Round(time.Millisecond)})
	}
	for range count(4 * time.Minute) {
		anytime(Event{Kind: KindSplit, Pick: r.Float64()})
	}
	for range count(4 * time.Minute) {
		anytime(Event{Kind: KindMerge, Pick: r.Float64()})
	}
	slices.SortStableFunc(p.Events, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(slices.Index(Kinds, a.Kind), slices.Index(Kinds, b.Kind)))
	})
	return p
}

// MaxSleep is the longest handler sleep the plan asks for.
func (p *Plan) MaxSleep() time.Duration {
	var m time.Duration
	for _, e := range p.Events {
		m = max(m, e.Sleep)
	}
	return m
}

// String prints the plan, one event a line.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule of seed %d: %v, %d workers, lease %v, warm-up %v\n", p.Seed, p.Shape.Duration, p.Shape.Workers, p.Shape.LeaseDuration, p.Shape.Warmup)
	for _, e := range p.Events {
		fmt.Fprintf(&b, "  +%-8v %s\n", e.At.Round(100*time.Millisecond), e.describe())
	}
	for _, s := range p.Skipped {
		fmt.Fprintf(&b, "  skipped: %s\n", s)
	}
	return b.String()
}

func (e Event) describe() string {
	switch e.Kind {
	case KindKill:
		return fmt.Sprintf("kill -9 of slot %d, replaced %v later", e.Slot, e.Replace.Round(100*time.Millisecond))
	case KindSIGTERM:
		return fmt.Sprintf("SIGTERM to slot %d, replaced %v after it exits", e.Slot, e.Replace.Round(100*time.Millisecond))
	case KindPause:
		return fmt.Sprintf("SIGSTOP of slot %d for %v, then SIGCONT", e.Slot, e.For.Round(100*time.Millisecond))
	case KindCutDynamoDB, KindCutKinesis:
		how := "connections refused (Cut)"
		if e.BlackHole {
			how = "calls time out (BlackHole)"
		}
		return fmt.Sprintf("slot %d %s for %v: %s", e.Slot, e.Kind, e.For.Round(100*time.Millisecond), how)
	case KindErrorsKinesis, KindErrorsDynamoDB, KindErrorsSQS:
		ops := "every operation"
		if len(e.Ops) > 0 {
			ops = strings.Join(e.Ops, ", ")
		}
		return fmt.Sprintf("%s for %v on every route: %s on %.0f%% of %s", e.Kind, e.For.Round(100*time.Millisecond), e.Fault, 100*e.Rate, ops)
	case KindSlow:
		return fmt.Sprintf("slow handlers for %v: records produced sleep up to %v", e.For.Round(100*time.Millisecond), e.Sleep)
	case KindSplit:
		return fmt.Sprintf("split an open shard (pick %.2f)", e.Pick)
	case KindMerge:
		return fmt.Sprintf("merge two adjacent open shards (pick %.2f)", e.Pick)
	case KindOutage:
		return fmt.Sprintf("downstream outage for %v: every record retried (cap and dead-letter target)", e.For.Round(time.Second))
	}
	return string(e.Kind)
}
