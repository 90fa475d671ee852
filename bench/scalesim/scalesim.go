// Package scalesim simulates a fleet of long-running workers sharing a large
// Kinesis stream, to measure how leases behave at a scale the local
// stand-ins cannot run (a thousand shards, fifty workers). Everything in it
// is the real code — consumer.New and Run, the lease code with one shared
// lease.Memory as the lease table — except the stream, which is the
// in-memory Kinesis of package awsfake, and the workers, which are
// goroutines of one process, each with its own consumer, engine, store
// connection and Kinesis client.
//
// Run starts the workers, writes records to the stream continuously, and
// changes the fleet as Config.Events says: workers join, leave gracefully
// (their Run context is cancelled, as on SIGTERM: they settle, checkpoint
// and release their leases) or are killed (from the kill on, every call of
// their store and Kinesis client blocks until its context ends, as the
// calls of a dead host never answer; their Run context is then cancelled,
// so nothing of theirs is released: their leases expire and others take
// them, and their handler handles nothing more). After each change it
// measures the time until the leases converge again, the owner changes it
// cost, and the records handled twice; it counts the lease-store calls by
// kind (in a steady window too), and at the end it checks that every
// record written was handled at least once.
//
//	rep, err := scalesim.Run(ctx, scalesim.Config{
//		Shards: 1000, Workers: 50, WriteRate: 2000,
//		Events: []scalesim.Event{{Kind: scalesim.Join, N: 1}, {Kind: scalesim.Kill, N: 1}},
//	})
//	rep.Format(os.Stdout)
//
// Run keeps the time with time.Now and timers, so it runs in real time, or
// in a testing/synctest bubble in virtual time (the tests do that). Times
// are those of the lease protocol: they scale with Config.LeaseDuration
// (balancing every half of it, renewal every third, expiry after it).
//
// It is a module of its own (bench/scalesim/go.mod), outside the product
// module; make bench-scale runs the full simulation, make unit the small one.
package scalesim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/internal/consumer"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// EventKind is a change of the fleet.
type EventKind int

const (
	// Join starts new workers.
	Join EventKind = iota
	// Leave stops live workers gracefully: their Run context is cancelled,
	// as on SIGTERM.
	Leave
	// Kill stops live workers abruptly: their store and Kinesis calls never
	// answer from then on, and their handlers handle nothing.
	Kill
	// Upgrade stops gracefully, as Leave does, N live workers of an older
	// version (Config.Older): the last step of a rolling deployment, when
	// the last old tasks stop once their replacements run. With none of
	// them left, the fleet balances as its leader plans (by load, the
	// default) from the counts they balanced to.
	Upgrade
)

// String names the kind as the tables do ("join", "leave", "kill").
func (k EventKind) String() string {
	switch k {
	case Join:
		return "join"
	case Leave:
		return "leave"
	case Kill:
		return "kill"
	case Upgrade:
		return "upgrade"
	}
	return "event?"
}

// Event is one change of the fleet: N workers join, leave or are killed at
// once. Workers that leave or are killed are drawn at random (Config.Seed).
type Event struct {
	Kind EventKind
	N    int
}

// Config describes a simulation. Shards, Workers and WriteRate are
// required; zero durations take the defaults named.
type Config struct {
	// Shards is the number of open shards of the stream, or of all the
	// streams together.
	Shards int
	// Streams is how many streams the shards are dealt over, round robin
	// (0 or 1: one stream). With several, each worker reads every stream as
	// one process does (consumer.NewGroup: a consumer per stream under one
	// owner id, one CPU clock and one handler), and the group's leader
	// plans the leases of every stream at once, as a service reading
	// several streams does.
	Streams int
	// Workers is the number of workers started together at the start.
	Workers int
	// Older is how many of them run an older version, as during a rolling
	// deployment to this one: their worker rows carry no load and they
	// know no leader row (lease tables before the leader). While any runs,
	// every worker balances by count for itself, as the leader then says
	// in its row (docs/long-running.md, "Balance"), and a phase converges
	// by counts; Upgrade events stop them. One stream only.
	Older int
	// Events are the changes of the fleet, in order; each comes once the
	// one before converged and Settle passed.
	Events []Event
	// WriteRate is how many records per second are written to the stream,
	// from the start until every event is over: round robin over its shards,
	// or, with SkewTop set, each record to a shard drawn from the skew's
	// shares.
	WriteRate int
	// Grain is how many of a busier stream's records each record written
	// stands for, with SkewTop set (0 or 1: one). Each shard's records
	// are then every Grain-th arrival of a Poisson stream Grain times as
	// busy (the shard's records drawn Grain times as often, one written
	// at every Grain-th): a worker's records in a window vary as a
	// stream's of WriteRate × Grain records a second do, about 1/√Grain
	// of the plain draw's noise, with the simulation's cost of
	// WriteRate. The CPU model's costs are then per written record.
	Grain int

	// SkewTop and SkewMax skew the writes (FitSkew): the top 5% of the
	// shards carry SkewTop of the records and the hottest SkewMax (e.g. 0.5
	// and 0.02). Which shard has which rank is drawn with Seed. Zero: every
	// shard carries the same, written round robin.
	SkewTop, SkewMax float64
	// Assignment is the consumers' (consumer.Config.Assignment): the
	// leader evens out load (AssignByLoad, the default) or lease counts
	// (AssignByCount). It also picks what converged means (see Phase).
	Assignment consumer.Assignment
	// CPUPerRecord, CPUPerByte and CPUPerPoll are the CPU model: each
	// worker's CPU clock (its consumer's Config.CPUTime, with CPUs 1)
	// advances by CPUPerRecord and CPUPerByte × its payload bytes for every
	// record its handler handles, and by CPUPerPoll for every GetRecords
	// call it makes. Zero takes DefaultCPUPerRecord, DefaultCPUPerByte and
	// DefaultCPUPerPoll.
	CPUPerRecord, CPUPerByte, CPUPerPoll time.Duration

	// LeaseDuration, ListInterval, CheckpointInterval and ShutdownTimeout
	// are the consumers' (consumer.Config); zero takes the consumer's
	// defaults (10s, 30s, 1s, 10s).
	LeaseDuration      time.Duration
	ListInterval       time.Duration
	CheckpointInterval time.Duration
	ShutdownTimeout    time.Duration

	// Settle is how long a phase goes on after it converged, so late moves
	// and flapping are counted (default EndWindow).
	Settle time.Duration
	// EndWindow is the window over which each phase's MaxMeanEnd is
	// measured (default one lease duration, the window of MaxMean). A
	// longer one, with Settle as long, tells the placement from the noise
	// of a short window (a worker's few hundred records in 10 s vary by
	// about 5 %), as a CloudWatch period of a minute does.
	EndWindow time.Duration
	// Steady is the window after the start converged in which the
	// lease-store calls are counted for the steady state (default three
	// lease durations).
	Steady time.Duration
	// ConvergeTimeout bounds each phase's wait for convergence (default 30
	// lease durations); a phase that does not converge is reported so and
	// the next event comes.
	ConvergeTimeout time.Duration
	// DrainTimeout bounds the wait, after the last event, for every record
	// written to be handled (default 30 lease durations).
	DrainTimeout time.Duration
	// Sample is how often the lease table and the workers are looked at
	// (default 100ms): the resolution of the times measured.
	Sample time.Duration
	// Seed draws the workers that leave or are killed.
	Seed uint64
	// Logger receives the consumers' logs (nil: none).
	Logger *slog.Logger
	// Progress, when set, is told what happens as it happens (a line per
	// phase).
	Progress func(line string)
	// Trace, when set, is told of each lease that changes owner, as the
	// samples see it: the shard's and both workers' expected costs over
	// the mean (see Phase.ExpectedEnd).
	Trace func(line string)
}

func (c *Config) defaults() error {
	switch {
	case c.Shards < 1 || c.Workers < 1 || c.WriteRate < 1:
		return errors.New("scalesim: shards, workers and write rate must be positive")
	case c.Grain < 0:
		return errors.New("scalesim: negative grain")
	case c.Streams < 0 || c.Streams > c.Shards:
		return errors.New("scalesim: streams must be between 0 and the shards")
	case c.Older < 0 || c.Older > c.Workers:
		return errors.New("scalesim: older workers must be between 0 and the workers")
	case c.Older > 0 && c.Streams > 1:
		return errors.New("scalesim: older workers read one stream")
	case c.SkewTop < 0 || c.SkewMax < 0 || c.CPUPerRecord < 0 || c.CPUPerByte < 0 || c.CPUPerPoll < 0:
		return errors.New("scalesim: negative skew or CPU cost")
	case c.Assignment != consumer.AssignByLoad && c.Assignment != consumer.AssignByCount:
		return fmt.Errorf("scalesim: unknown assignment %d", c.Assignment)
	case c.LeaseDuration < 0 || c.ListInterval < 0 || c.CheckpointInterval < 0 || c.ShutdownTimeout < 0 ||
		c.Settle < 0 || c.EndWindow < 0 || c.Steady < 0 || c.ConvergeTimeout < 0 || c.DrainTimeout < 0 || c.Sample < 0:
		return errors.New("scalesim: negative duration")
	}
	live, older := c.Workers, c.Older
	for _, e := range c.Events {
		if e.N < 1 {
			return fmt.Errorf("scalesim: %s of %d workers", e.Kind, e.N)
		}
		switch e.Kind {
		case Join:
			live += e.N
		case Leave, Kill:
			live -= e.N
		case Upgrade:
			if older -= e.N; older < 0 {
				return fmt.Errorf("scalesim: upgrade of %d workers of an older version, %d left to stop", e.N, older+e.N)
			}
			live -= e.N
		default:
			return fmt.Errorf("scalesim: unknown event kind %d", e.Kind)
		}
		if live < 1 {
			return errors.New("scalesim: the events leave no worker")
		}
	}
	if c.SkewTop != 0 || c.SkewMax != 0 {
		if _, err := FitSkew(c.Shards, c.SkewTop, c.SkewMax); err != nil {
			return err
		}
	}
	if c.Streams == 0 {
		c.Streams = 1
	}
	if c.CPUPerRecord == 0 {
		c.CPUPerRecord = DefaultCPUPerRecord
	}
	if c.CPUPerByte == 0 {
		c.CPUPerByte = DefaultCPUPerByte
	}
	if c.CPUPerPoll == 0 {
		c.CPUPerPoll = DefaultCPUPerPoll
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = consumer.DefaultLeaseDuration
	}
	if c.ListInterval == 0 {
		c.ListInterval = consumer.DefaultListInterval
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = consumer.DefaultCheckpointInterval
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = consumer.DefaultShutdownTimeout
	}
	if c.EndWindow == 0 {
		c.EndWindow = c.LeaseDuration
	}
	if c.Settle == 0 {
		c.Settle = c.EndWindow
	}
	if c.Steady == 0 {
		c.Steady = 3 * c.LeaseDuration
	}
	if c.ConvergeTimeout == 0 {
		c.ConvergeTimeout = 30 * c.LeaseDuration
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * c.LeaseDuration
	}
	if c.Sample == 0 {
		c.Sample = 100 * time.Millisecond
	}
	return nil
}

// streamName is the simulated stream, or, with Config.Streams, the first
// part of each stream's name (scale-0, scale-1, ...).
const streamName = "scale"

// shardLoc is where a shard is: its stream and shard id.
type shardLoc struct{ stream, id string }

// Report is what a simulation measured.
type Report struct {
	// Config is the configuration run, defaults filled in.
	Config Config
	// Phases are the start and each event, in order.
	Phases []Phase
	// Steady is the steady state after the start.
	Steady Steady
	// Written is the number of records written; Lost those never handled
	// (by a worker while it was alive); Duplicates the handlings beyond
	// the first.
	Written, Lost, Duplicates int64
	// Drained is how long after the writes stopped every record written was
	// handled (or DrainTimeout, with Lost > 0).
	Drained time.Duration
	// Elapsed is the whole run; CPU the process's CPU time meanwhile (0
	// where the platform does not tell; meaningless in a synctest bubble).
	Elapsed, CPU time.Duration
	// Total counts the lease-store calls of the whole run.
	Total Counts
	// GetRecords counts the GetRecords calls that reached the stream.
	GetRecords int64
}

// balanceRatio is the highest worker utilization over the mean that a
// load-aware run counts as balanced (issue 30's target).
const balanceRatio = 1.2

// Phase is the start or one event, from the change until the next one.
type Phase struct {
	// Name says what changed ("start 50", "kill 1").
	Name string
	// Kind is the event's (Join for the start); N its workers.
	Kind EventKind
	N    int
	// Workers is the number of live workers after the change, Target
	// ceil(shards / Workers). Balanced means every shard is owned by a
	// live worker and, by count (consumer.AssignByCount, or while a worker
	// of an older version runs: Config.Older), each holds Target ± 1, or,
	// by load, each holds at least one lease and the highest
	// worker's CPU utilization over the last lease duration is at most 1.2
	// × the mean.
	Workers, Target int
	// Balanced is the time from the change until the lease table first
	// converged; Reading until, besides, every live worker read exactly the
	// shards it owns there. Converged is false if Reading never came within
	// ConvergeTimeout.
	Balanced, Reading time.Duration
	Converged         bool
	// Moves counts the owner changes in the lease table in the phase (the
	// sum of the rows' OwnerSwitches: takes and transfers); Ideal is the
	// fewest the change needs (the leases of workers that left or died;
	// floor(shards / workers) per joining worker; at the start, every
	// shard).
	Moves, Ideal int64
	// Fewest is a lower bound on the moves to converge by load: every
	// worker's load at most 1.2 × the mean and every worker holding a
	// lease, from the shards' modelled costs and who held them at the
	// change (FewestMoves: a leaving or dying worker's leases all count,
	// the costliest leases off each worker above the limit count, and a
	// joining worker, empty, needs at least one).
	Fewest int64
	// JoinHeld is the number of leases the joining workers held when the
	// phase converged (0 for other events).
	JoinHeld int
	// MaxMean is the highest worker CPU utilization over the mean, both
	// over the last lease duration, when the phase converged; MaxMeanEnd
	// at its end (after Settle), over the last EndWindow; MeanCPU the mean
	// utilization then, over EndWindow.
	MaxMean, MaxMeanEnd, MeanCPU float64
	// ExpectedEnd is the highest worker's expected CPU over the mean at the
	// phase's end: each live worker's expected load is the sum of the
	// modelled costs (see costs: each shard's true write rate and its polls
	// priced by the CPU model) of the shards it owns then, so it has none
	// of the noise of MaxMeanEnd's measured window. It tells whether the
	// placement holds the target and the rest is measurement.
	// The start's is figured after the steady window, which measures each
	// shard's polls (before it, they are not known).
	ExpectedEnd float64
	// Oracle is, for a join, what a planner that knew every shard's true
	// cost would reach with the fewest moves and with the most the target
	// allows (oracleJoin), and how a reading of each tells it; nil for the
	// start and the other changes.
	Oracle *Oracle
	// Greedy is, for a leave, a kill or an upgrade, what a planner that
	// knew every shard's true cost reaches placing greedily (oraclePlace):
	// an achievable count of moves, where Fewest is a lower bound; nil for
	// the start, the joins, and where it did not reach the limit.
	Greedy *OracleEnd
	// Sure is the placement by the true costs with the fewest moves whose
	// readings show the busiest within 1.2 × the mean in at least
	// sureShare of them: what a planner that knew every true cost would
	// move to reach the target as the phase's end reads it (over
	// EndWindow, records and all), not only by the model. For a join,
	// the oracle's with the fewest moves or with more spent on the peak,
	// one at a time (sureJoin); where Greedy is set, the same greedy
	// placement to the highest limit (Limit, in steps of 0.01 down from
	// 1.2 to 1.1) that does (placeGreedily). nil for the start, and where
	// none does.
	Sure *OracleEnd
	// ownedEnd is each live worker's shards at the phase's end, for
	// ExpectedEnd.
	ownedEnd observation
	// Store counts the lease-store calls in the phase; its FreeTakes,
	// ExpiredTakes and Transfers break Moves down by cause.
	Store Counts
	// MinHeld and MaxHeld are the fewest and most leases a live worker held
	// at the end of the phase.
	MinHeld, MaxHeld int
	// Unowned is the most shards at once without a live owner (the shards
	// nobody read) in the phase.
	Unowned int
	// Flaps counts how often the converged state was lost again before the
	// phase ended.
	Flaps int
	// Duplicates counts the records handled again in the phase.
	Duplicates int64
	// Length is the phase's length.
	Length time.Duration
}

// Oracle is what an oracle reaches after a join (oracleJoin): Ends[0]
// with FewestMoves's count of moves, Ends[1] with the most moves the
// target allows, 1.2 × the fewest (rounded down).
type Oracle struct{ Ends [2]OracleEnd }

// OracleEnd is one of an oracle's ends: its moves; Expected, its highest
// worker's modelled CPU over the mean, as Phase.ExpectedEnd counts it;
// Within, the share of one-EndWindow readings of that placement (records
// Poisson, readWithin) that show the highest worker at most 1.2 × the
// mean. Ends[1].Within far below 1 says that even knowing every shard's
// true cost, the moves allowed leave the busiest so near the limit that a
// reading tells the limit from the noise only by chance: the phase's own
// MaxMeanEnd can be no surer.
type OracleEnd struct {
	Moves            int
	Expected, Within float64
	// Limit is the limit a Sure placement placed to (0 otherwise).
	Limit float64
}

// sureShare is the share of readings within 1.2 × the mean that makes a
// placement Sure: nine in ten.
const sureShare = 0.9

// oracleDraws is how many readings readWithin draws.
const oracleDraws = 4000

// Steady is the lease-store traffic of the steady window after the start.
type Steady struct {
	// Window is its length; Shards and Workers the fleet.
	Window          time.Duration
	Shards, Workers int
	// Store counts the calls in the window; Handled the records handled.
	Store   Counts
	Handled int64
	// GetRecords counts the GetRecords calls in the window; PollRates
	// are each shard's calls per second in it, by shard id.
	GetRecords int64
	PollRates  map[string]float64
	// CPU is the process's CPU time in the window.
	CPU time.Duration
	// MaxMean is the highest worker CPU utilization (modelled) over the
	// mean at the end of the window, both over the last lease duration;
	// MeanCPU the mean.
	MaxMean, MeanCPU float64
}

// PerShardSecond returns n per shard per second of the window.
func (s Steady) PerShardSecond(n int64) float64 {
	if s.Window <= 0 || s.Shards == 0 {
		return 0
	}
	return float64(n) / float64(s.Shards) / s.Window.Seconds()
}

// worker is one simulated process.
type worker struct {
	id     string
	cs     []*consumer.Consumer // one per stream, a group when several
	sw     *switchboard
	cpu    *cpuClock
	older  bool // of an older version (Config.Older)
	killed atomic.Bool
	cancel context.CancelFunc
	done   chan error // each consumer's Run result
}

// sim is one run.
type sim struct {
	cfg     Config
	k       *awsfake.Kinesis
	streams []string          // the streams' names
	arns    []string          // their ARNs
	byARN   map[string]string // stream name by ARN
	ids     []string          // each shard's key (sim.key), by index
	locs    []shardLoc        // where each shard is, by index
	index   map[string]int    // each shard's index, by key
	mem     *lease.Memory
	store   *countingStore
	rng     *rand.Rand

	all  []*worker // every worker started
	live []*worker // those neither leaving nor killed

	shares   []float64 // each shard's share of the records, by index
	cum      []float64 // their running sum (nil: round robin)
	grains   []int     // each shard's arrivals towards its next record (Grain)
	wrng     *rand.Rand
	cpuw     cpuWindow
	cpuEnd   cpuWindow // over EndWindow
	pollRate float64   // GetRecords calls per shard per second in the steady window
	// polls counts the GetRecords calls of each shard; pollRates are
	// their rates in the steady window, by shard id (a busy shard is
	// polled more often than an idle one).
	polls     *shardPolls
	pollRates map[string]float64

	tally tally
	plans planLog // the leader's plans, when tracing
}

// tally counts how often each record was handled.
type tally struct {
	mu      sync.Mutex
	handled []uint32 // by record id
	handles atomic.Int64
	dups    atomic.Int64
}

// next takes the next record id.
func (t *tally) next() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handled = append(t.handled, 0)
	return len(t.handled) - 1
}

func (t *tally) handle(id int) {
	t.mu.Lock()
	if id < 0 || id >= len(t.handled) {
		t.mu.Unlock()
		panic("scalesim: handled record " + strconv.Itoa(id) + " was never written")
	}
	t.handled[id]++
	again := t.handled[id] > 1
	t.mu.Unlock()
	t.handles.Add(1)
	if again {
		t.dups.Add(1)
	}
}

// missing returns how many records written were never handled.
func (t *tally) missing() (written, lost int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.handled {
		if n == 0 {
			lost++
		}
	}
	return int64(len(t.handled)), lost
}

// Run runs the simulation described by cfg and reports what it measured.
// It returns an error for an invalid cfg, when a worker's Run fails, or
// when ctx ends (every worker is stopped first). It returns once every
// goroutine it started has ended.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &sim{cfg: cfg, k: awsfake.NewKinesis(), mem: lease.NewMemory(), rng: rand.New(rand.NewPCG(cfg.Seed, 0x5ca1e)), polls: newShardPolls()}
	s.store = &countingStore{s: s.mem}
	if cfg.Trace != nil {
		var next slog.Handler
		if cfg.Logger != nil {
			next = cfg.Logger.Handler()
		}
		s.plans = newPlanLog(next)
		s.cfg.Logger = slog.New(s.plans)
	}
	s.byARN, s.index = map[string]string{}, map[string]int{}
	for j := range cfg.Streams {
		name := streamName
		if cfg.Streams > 1 {
			name = fmt.Sprintf("%s-%d", streamName, j)
		}
		n := cfg.Shards / cfg.Streams
		if j < cfg.Shards%cfg.Streams {
			n++
		}
		arn := s.k.CreateStream(name, n)
		s.streams, s.arns = append(s.streams, name), append(s.arns, arn)
		s.byARN[arn] = name
	}
	if cfg.Streams > 1 {
		s.store.streams = s.streams
	}
	for i := range cfg.Shards {
		// The i-th shard is stream i % Streams's (i / Streams)-th.
		loc := shardLoc{stream: s.streams[i%cfg.Streams], id: fmt.Sprintf("shardId-%012d", i/cfg.Streams)}
		s.locs = append(s.locs, loc)
		s.ids = append(s.ids, s.key(loc.stream, loc.id))
		s.index[s.ids[i]] = i
	}
	s.cpuw.window = cfg.LeaseDuration
	s.cpuEnd.window = cfg.EndWindow
	s.wrng = rand.New(rand.NewPCG(cfg.Seed, 0x5ca1e+1))
	s.shares = make([]float64, cfg.Shards)
	if cfg.SkewTop == 0 && cfg.SkewMax == 0 {
		for i := range s.shares {
			s.shares[i] = 1 / float64(cfg.Shards)
		}
	} else {
		k, _ := FitSkew(cfg.Shards, cfg.SkewTop, cfg.SkewMax) // checked by defaults
		byRank := k.Shares(cfg.Shards)
		for rank, i := range s.wrng.Perm(cfg.Shards) {
			s.shares[i] = byRank[rank]
		}
		sum := 0.0
		for _, x := range s.shares {
			sum += x
			s.cum = append(s.cum, sum)
		}
		if cfg.Grain > 1 {
			// Each shard starts at a random point of its cycle, so
			// that no two shards write their first record in step.
			s.grains = make([]int, cfg.Shards)
			for i := range s.grains {
				s.grains[i] = s.wrng.IntN(cfg.Grain)
			}
		}
	}
	rep := &Report{Config: cfg}
	began, cpu0 := time.Now(), cpuTime()

	// The producer writes until every event is over.
	wctx, stopWriting := context.WithCancel(ctx)
	written := make(chan struct{})
	go func() {
		defer close(written)
		s.write(wctx)
	}()
	err := s.script(ctx, rep)
	stopWriting()
	<-written
	if err == nil {
		err = s.drain(ctx, rep)
	}
	if stopErr := s.stopAll(); err == nil {
		err = stopErr
	}
	rep.Written, rep.Lost = s.tally.missing()
	rep.Duplicates = s.tally.dups.Load()
	rep.Elapsed, rep.CPU = time.Since(began), cpuTime()-cpu0
	rep.Total = s.store.counts()
	rep.GetRecords = int64(s.k.Calls("GetRecords"))
	return rep, err
}

// script runs the start, the steady window and the events.
func (s *sim) script(ctx context.Context, rep *Report) error {
	cfg := s.cfg
	// Every shard is taken once at the start.
	fewest := int64(FewestMovesPlacing(make([][]float64, cfg.Workers), s.costs(s.ids), balanceRatio))
	p, err := s.phase(ctx, fmt.Sprintf("start %d", cfg.Workers), Join, cfg.Workers, int64(cfg.Shards), fewest, nil, nil, nil, func() {
		for i := range cfg.Workers {
			s.startWorker(ctx, i < cfg.Older)
		}
	})
	rep.Phases = append(rep.Phases, p)
	if err != nil {
		return err
	}
	rep.Steady, err = s.steady(ctx)
	if err != nil {
		return err
	}
	rep.Phases[0].ExpectedEnd = s.expectedMaxMean(rep.Phases[0].ownedEnd) // with the polls measured now
	for _, e := range cfg.Events {
		var ideal, fewest int64
		var oracle *Oracle
		var greedy, sure *OracleEnd
		change := func() {}
		o := s.observe()
		switch e.Kind {
		case Join:
			ideal = int64(e.N * (cfg.Shards / (len(s.live) + e.N)))
			var costs [][]float64
			for _, w := range s.live {
				costs = append(costs, s.costs(o.owned[w.id]))
			}
			for range e.N {
				costs = append(costs, nil)
			}
			fewest = int64(FewestMoves(costs, balanceRatio))
			var held [][]shardLoad
			for _, w := range s.live {
				held = append(held, s.loads(o.owned[w.id]))
			}
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(len(rep.Phases))))
			oracle = &Oracle{}
			for i, budget := range []int{0, int(balanceRatio*float64(fewest) + 1e-9)} {
				placed, moves := oracleJoin(held, e.N, balanceRatio, budget)
				oracle.Ends[i] = OracleEnd{Moves: moves, Expected: maxMeanLoads(placed), Within: readWithin(placed, s.perRecord(), cfg.EndWindow.Seconds(), cfg.Grain, balanceRatio, oracleDraws, rng)}
			}
			sure = sureJoin(held, e.N, s.reading(uint64(len(rep.Phases))))
			change = func() {
				for range e.N {
					s.startWorker(ctx, false)
				}
			}
		case Leave, Kill, Upgrade:
			var out []*worker
			if e.Kind == Upgrade {
				if out = s.older(e.N); out == nil {
					return fmt.Errorf("scalesim: upgrade %d: fewer workers of the older version live", e.N)
				}
			} else {
				out = s.draw(e.N)
			}
			var costs [][]float64
			var unplaced []float64
			for _, w := range s.live {
				costs = append(costs, s.costs(o.owned[w.id]))
			}
			for _, w := range out {
				ideal += int64(o.held[w.id])
				unplaced = append(unplaced, s.costs(o.owned[w.id])...)
			}
			fewest = int64(FewestMovesPlacing(costs, unplaced, balanceRatio))
			var held [][]shardLoad
			var left []shardLoad
			for _, w := range s.live {
				held = append(held, s.loads(o.owned[w.id]))
			}
			for _, w := range out {
				left = append(left, s.loads(o.owned[w.id])...)
			}
			greedy, sure = placeGreedily(held, left, s.reading(uint64(len(rep.Phases))))
			change = func() {
				for _, w := range out {
					s.stop(w, e.Kind == Kill)
				}
			}
		}
		p, err := s.phase(ctx, fmt.Sprintf("%s %d", e.Kind, e.N), e.Kind, e.N, ideal, fewest, oracle, greedy, sure, change)
		rep.Phases = append(rep.Phases, p)
		if err != nil {
			return err
		}
	}
	return nil
}

// reading returns readWithin for the placements a phase's Sure compares:
// the same draws (Config.Seed, seed) at each call.
func (s *sim) reading(seed uint64) func([][]shardLoad) float64 {
	return func(placed [][]shardLoad) float64 {
		rng := rand.New(rand.NewPCG(s.cfg.Seed, seed))
		return readWithin(placed, s.perRecord(), s.cfg.EndWindow.Seconds(), s.cfg.Grain, balanceRatio, oracleDraws, rng)
	}
}

// costs returns the modelled CPU cost (seconds per second) of each of the
// shards: its share of the writes × (CPUPerRecord + CPUPerByte × the
// mean payload), plus its polls (the shard's GetRecords calls per second
// in the steady window, or, before it, the mean of all) × CPUPerPoll. A
// hot shard is polled several times as often as an idle one: priced at
// the mean, the idle shards of a worker that holds many would count ~50 %
// above what they cost, and the bound would count moves that no worker
// needs.
func (s *sim) costs(shards []string) []float64 {
	perRecord := s.perRecord()
	out := make([]float64, 0, len(shards))
	for _, id := range shards {
		i := s.shardIndex(id)
		polls := s.pollRate
		if r, ok := s.pollRates[id]; ok {
			polls = r
		}
		out = append(out, s.shares[i]*float64(s.cfg.WriteRate)*perRecord+polls*s.cfg.CPUPerPoll.Seconds())
	}
	return out
}

// key returns the key by which the simulation knows the shard id of
// stream: the shard id with one stream, else "stream/shardId".
func (s *sim) key(stream, id string) string {
	if len(s.streams) == 1 {
		return id
	}
	return stream + "/" + id
}

// shardIndex returns the index in s.shares of the shard key.
func (s *sim) shardIndex(key string) int {
	i, ok := s.index[key]
	if !ok {
		panic("scalesim: no shard " + key)
	}
	return i
}

// perRecord is the CPU model's cost of one record, in seconds, at a
// payload of 6 bytes (a record's id, in decimal).
func (s *sim) perRecord() float64 {
	const payload = 6
	return (s.cfg.CPUPerRecord + payload*s.cfg.CPUPerByte).Seconds()
}

// loads returns each of the shards' modelled cost (costs) and write rate.
func (s *sim) loads(shards []string) []shardLoad {
	costs := s.costs(shards)
	out := make([]shardLoad, len(shards))
	for k, id := range shards {
		i := s.shardIndex(id)
		out[k] = shardLoad{cost: costs[k], records: s.shares[i] * float64(s.cfg.WriteRate)}
	}
	return out
}

// expectedMaxMean returns the highest live worker's expected CPU (the sum
// of costs of the shards it owns in o) over the mean of the live workers'.
func (s *sim) expectedMaxMean(o observation) float64 {
	u := make(map[string]float64, len(o.held))
	for id := range o.held { // a worker owning nothing counts, at 0
		u[id] = 0
		for _, c := range s.costs(o.owned[id]) {
			u[id] += c
		}
	}
	r, _ := maxMean(u)
	return r
}

// startWorker starts a new worker, of an older version if older
// (Config.Older).
func (s *sim) startWorker(ctx context.Context, older bool) {
	w := &worker{id: fmt.Sprintf("w%03d", len(s.all)), older: older, sw: &switchboard{dead: make(chan struct{})}, done: make(chan error, len(s.streams))}
	w.cpu = &cpuClock{perRecord: s.cfg.CPUPerRecord, perByte: s.cfg.CPUPerByte, perPoll: s.cfg.CPUPerPoll}
	h := message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
		if w.killed.Load() {
			return message.Ack() // a dead process handles nothing (and writes nothing)
		}
		id, err := strconv.Atoi(string(m.Payload))
		if err != nil {
			panic("scalesim: record " + m.SequenceNumber + " has no id: " + err.Error())
		}
		s.tally.handle(id)
		w.cpu.record(len(m.Payload))
		return message.Ack()
	})
	for j, name := range s.streams {
		e, err := engine.New(engine.Config{Handler: h, Logger: s.cfg.Logger})
		if err != nil {
			panic("scalesim: " + err.Error()) // a valid configuration: a bug here
		}
		var store lease.Store = killableStore{sw: w.sw, s: s.store}
		if older {
			store = olderStore{killableStore{sw: w.sw, s: s.store}}
		}
		c, err := consumer.New(consumer.Config{
			Stream:             name,
			StreamARN:          s.arns[j],
			Kinesis:            killableKinesis{sw: w.sw, k: s.k, cpu: w.cpu, polls: s.polls, key: s.iteratorKey},
			Store:              store,
			Owner:              w.id,
			Engine:             e,
			Start:              consumer.TrimHorizon(),
			LeaseDuration:      s.cfg.LeaseDuration,
			ListInterval:       s.cfg.ListInterval,
			CheckpointInterval: s.cfg.CheckpointInterval,
			ShutdownTimeout:    s.cfg.ShutdownTimeout,
			Assignment:         s.cfg.Assignment,
			CPUTime:            w.cpu.now,
			CPUs:               1,
			Logger:             s.cfg.Logger,
		})
		if err != nil {
			panic("scalesim: " + err.Error())
		}
		w.cs = append(w.cs, c)
	}
	if len(w.cs) > 1 {
		if _, err := consumer.NewGroup(w.cs...); err != nil {
			panic("scalesim: " + err.Error())
		}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	for _, c := range w.cs {
		go func() { w.done <- c.Run(rctx) }()
	}
	s.all = append(s.all, w)
	s.live = append(s.live, w)
}

// draw picks n live workers at random.
func (s *sim) draw(n int) []*worker {
	out := make([]*worker, 0, n)
	for range n {
		out = append(out, s.live[s.rng.IntN(len(s.live))])
		s.live = slices.DeleteFunc(s.live, func(w *worker) bool { return w == out[len(out)-1] })
	}
	return out
}

// older takes n live workers of the older version out of the live ones,
// the first started first; nil if fewer than n live.
func (s *sim) older(n int) []*worker {
	var out []*worker
	for _, w := range s.live {
		if w.older && len(out) < n {
			out = append(out, w)
		}
	}
	if len(out) < n {
		return nil
	}
	s.live = slices.DeleteFunc(s.live, func(w *worker) bool { return slices.Contains(out, w) })
	return out
}

// byCount tells whether the fleet balances by count now: so configured,
// or while a worker of an older version runs.
func (s *sim) byCount() bool {
	return s.cfg.Assignment == consumer.AssignByCount || slices.ContainsFunc(s.live, func(w *worker) bool { return w.older })
}

// stop stops w: gracefully (its Run context is cancelled), or, killed,
// abruptly (its calls never answer again, then its context is cancelled so
// that its Run, unable to release anything, ends).
func (s *sim) stop(w *worker, kill bool) {
	if kill {
		w.killed.Store(true)
		close(w.sw.dead)
	}
	w.cancel()
}

// stopAll stops the live workers gracefully and waits for every worker's
// Run; it returns the first error a Run returned.
func (s *sim) stopAll() error {
	for _, w := range s.live {
		w.cancel()
	}
	s.live = nil
	var first error
	for _, w := range s.all {
		for range w.cs {
			if err := <-w.done; err != nil && first == nil {
				first = fmt.Errorf("scalesim: worker %s: %w", w.id, err)
			}
		}
	}
	return first
}

// write writes WriteRate records per second, round robin over the shards
// or drawn from the skew's shares, each record's data its id, until ctx
// ends.
func (s *sim) write(ctx context.Context) {
	const tick = 20 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	began := time.Now()
	var n int64
	shard := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := int64(time.Since(began).Seconds() * float64(s.cfg.WriteRate))
		for ; n < due; n++ {
			id := s.tally.next()
			to := shard
			if s.cum != nil {
				to = s.drawShard()
			}
			s.k.PutTo(s.locs[to].stream, s.locs[to].id, "k"+strconv.Itoa(id%64), []byte(strconv.Itoa(id)))
			shard = (shard + 1) % len(s.ids)
		}
	}
}

// drawShard draws the shard of the next record from the skew's shares:
// with a Grain, the shard whose count of arrivals reaches the next
// multiple of Grain first.
func (s *sim) drawShard() int {
	for {
		to := min(sort.SearchFloat64s(s.cum, s.wrng.Float64()*s.cum[len(s.cum)-1]), len(s.ids)-1)
		if s.grains == nil {
			return to
		}
		if s.grains[to]++; s.grains[to] == s.cfg.Grain {
			s.grains[to] = 0
			return to
		}
	}
}

// observation is one look at the lease table and the live workers.
type observation struct {
	held     map[string]int      // live worker -> leases it owns
	owned    map[string][]string // live worker -> the shards it owns, sorted
	unowned  int                 // shards without a live owner
	switches int64               // sum of OwnerSwitches
	balanced bool                // every shard has a live owner; each holds target ± 1, or the load is even (see Phase)
	maxMean  float64             // highest CPU utilization over the mean, over the last lease duration
	// maxMeanEnd and meanEnd are maxMean and meanCPU over the last
	// EndWindow.
	maxMeanEnd, meanEnd float64
	meanCPU             float64
	reading             bool // balanced, and each live worker reads exactly what it owns
	min, max            int
	target              int
	liveCount           int
}

// observe looks at the lease table (directly: not counted) and the live
// workers.
func (s *sim) observe() observation {
	leases := s.leases()
	o := observation{held: map[string]int{}, liveCount: len(s.live)}
	owned := map[string][]string{}
	o.owned = owned
	sample := cpuSample{at: time.Now(), clock: make(map[string]time.Duration, len(s.live))}
	for _, w := range s.live {
		sample.clock[w.id] = w.cpu.now()
	}
	s.cpuw.add(sample)
	s.cpuEnd.add(sample)
	util, full := s.cpuw.utilization()
	o.maxMean, o.meanCPU = maxMean(util)
	end, _ := s.cpuEnd.utilization()
	o.maxMeanEnd, o.meanEnd = maxMean(end)
	for _, w := range s.live {
		o.held[w.id] = 0
	}
	for _, l := range leases {
		o.switches += l.OwnerSwitches
		if _, ok := o.held[l.Owner]; !ok {
			o.unowned++
			continue
		}
		o.held[l.Owner]++
		owned[l.Owner] = append(owned[l.Owner], s.key(l.Key.Stream, l.Key.ShardID))
	}
	for _, keys := range owned {
		slices.Sort(keys)
	}
	if len(s.live) == 0 {
		return o
	}
	o.target = (s.cfg.Shards + len(s.live) - 1) / len(s.live)
	o.min, o.max = s.cfg.Shards, 0
	for _, n := range o.held {
		o.min, o.max = min(o.min, n), max(o.max, n)
	}
	o.balanced = o.unowned == 0 && len(leases) == s.cfg.Shards
	if s.byCount() {
		o.balanced = o.balanced && o.min >= o.target-1 && o.max <= o.target+1
	} else {
		o.balanced = o.balanced && full && o.maxMean <= balanceRatio && o.min > 0
	}
	if !o.balanced {
		return o
	}
	for _, w := range s.live {
		if !slices.Equal(s.reads(w), owned[w.id]) { // both sorted
			return o
		}
	}
	o.reading = true
	return o
}

// leases returns the rows of every stream's shards (directly: not
// counted).
func (s *sim) leases() []lease.Lease {
	var out []lease.Lease
	for _, name := range s.streams {
		snap, err := s.mem.Snapshot(context.Background(), name)
		if err != nil {
			panic("scalesim: " + err.Error()) // Memory fails only on a done context
		}
		out = append(out, snap.Leases...)
	}
	return out
}

// reads returns the keys of the shards w reads, in every stream, sorted.
func (s *sim) reads(w *worker) []string {
	var out []string
	for j, c := range w.cs { // one per stream, in s.streams's order
		for _, id := range c.Owned() {
			out = append(out, s.key(s.streams[j], id))
		}
	}
	slices.Sort(out)
	return out
}

// iteratorKey returns the key of the shard a GetShardIterator call reads
// (for shardPolls).
func (s *sim) iteratorKey(in *kinesis.GetShardIteratorInput) string {
	name := aws.ToString(in.StreamName)
	if in.StreamARN != nil {
		name = s.byARN[*in.StreamARN]
	}
	return s.key(name, aws.ToString(in.ShardId))
}

// phase applies change and watches the fleet until it converged and Settle
// passed, or ConvergeTimeout. ideal, fewest, oracle, greedy and sure are
// the phase's Ideal, Fewest, Oracle, Greedy and Sure.
func (s *sim) phase(ctx context.Context, name string, kind EventKind, n int, ideal, fewest int64, oracle *Oracle, greedy, sure *OracleEnd, change func()) (Phase, error) {
	cfg := s.cfg
	before := s.observe()
	counts0, dups0 := s.store.counts(), s.tally.dups.Load()
	began := time.Now()
	joined := len(s.all)
	change()
	joiners := s.all[joined:]
	p := Phase{Name: name, Kind: kind, N: n, Workers: len(s.live), Target: (cfg.Shards + len(s.live) - 1) / len(s.live), Ideal: ideal, Fewest: fewest, Oracle: oracle, Greedy: greedy, Sure: sure}
	var (
		o        observation
		was      bool
		settleAt time.Time
	)
	var owners map[string]string // shard -> owner, for Trace
	for {
		o = s.observe()
		since := time.Since(began)
		if cfg.Trace != nil {
			owners = s.trace(owners, o, name, since)
		}
		p.Unowned = max(p.Unowned, o.unowned)
		if o.balanced && p.Balanced == 0 {
			p.Balanced = max(since, time.Nanosecond)
		}
		if o.reading && !p.Converged {
			p.Converged, p.Reading = true, max(since, time.Nanosecond)
			p.MaxMean = o.maxMean
			for _, w := range joiners {
				p.JoinHeld += o.held[w.id]
			}
			settleAt = time.Now().Add(cfg.Settle)
		}
		if was && !o.reading {
			p.Flaps++
		}
		was = o.reading
		if p.Converged && !time.Now().Before(settleAt) {
			break
		}
		if !p.Converged && since >= cfg.ConvergeTimeout {
			break
		}
		if err := sleep(ctx, cfg.Sample); err != nil {
			return p, err
		}
	}
	p.Moves = o.switches - before.switches
	p.Store = s.store.counts().sub(counts0)
	p.Duplicates = s.tally.dups.Load() - dups0
	p.MinHeld, p.MaxHeld = o.min, o.max
	p.MaxMeanEnd, p.MeanCPU = o.maxMeanEnd, o.meanEnd
	p.ExpectedEnd, p.ownedEnd = s.expectedMaxMean(o), o
	p.Length = time.Since(began)
	if cfg.Trace != nil {
		s.traceEstimates(o, name)
	}
	if cfg.Progress != nil {
		state := fmt.Sprintf("converged in %s (balanced %s)", round(p.Reading), round(p.Balanced))
		if !p.Converged {
			state = fmt.Sprintf("NOT converged in %s", cfg.ConvergeTimeout)
		}
		line := fmt.Sprintf("%-10s %d workers, target %d: %s; %d moves (ideal %d, fewest %d, joiners hold %d), held %d-%d, max/mean CPU %.2f at convergence, %.2f at the end (expected %.2f, mean %.2f), %d duplicates",
			name, p.Workers, p.Target, state, p.Moves, p.Ideal, p.Fewest, p.JoinHeld, p.MinHeld, p.MaxHeld, p.MaxMean, p.MaxMeanEnd, p.ExpectedEnd, p.MeanCPU, p.Duplicates)
		if p.Oracle != nil {
			f, a := p.Oracle.Ends[0], p.Oracle.Ends[1]
			line += fmt.Sprintf("; by the true costs, %d moves end at %.2f expected, read within %.1f in %.0f%% of %s readings, %d moves at %.2f, %.0f%%",
				f.Moves, f.Expected, balanceRatio, 100*f.Within, round(cfg.EndWindow), a.Moves, a.Expected, 100*a.Within)
		}
		if g := p.Greedy; g != nil {
			line += fmt.Sprintf("; placed greedily by the true costs, %d moves end at %.2f expected, read within %.1f in %.0f%% of %s readings",
				g.Moves, g.Expected, balanceRatio, 100*g.Within, round(cfg.EndWindow))
		}
		if u := p.Sure; u != nil && u.Limit > 0 {
			line += fmt.Sprintf("; to %.2f, %d moves at %.2f, %.0f%%", u.Limit, u.Moves, u.Expected, 100*u.Within)
		} else if u != nil {
			line += fmt.Sprintf("; read within %.1f in %.0f%% or more: %d moves at %.2f, %.0f%%", balanceRatio, 100*sureShare, u.Moves, u.Expected, 100*u.Within)
		}
		cfg.Progress(line)
	}
	return p, nil
}

// trace tells Config.Trace of each shard whose owner differs in o from
// owners (the last sample's), and returns o's owners.
func (s *sim) trace(owners map[string]string, o observation, phase string, since time.Duration) map[string]string {
	now := map[string]string{}
	for w, shards := range o.owned {
		for _, id := range shards {
			now[id] = w
		}
	}
	if owners == nil {
		return now
	}
	load := map[string]float64{}
	total := 0.0
	for w := range o.held {
		for _, c := range s.costs(o.owned[w]) {
			load[w] += c
			total += c
		}
	}
	mean := total / float64(max(len(o.held), 1))
	for _, id := range slices.Sorted(maps.Keys(now)) {
		to, from := now[id], owners[id]
		if from == to {
			continue
		}
		c := s.costs([]string{id})[0]
		s.cfg.Trace(fmt.Sprintf("%-9s +%-6s %s %.3f: %s (%.3f after) -> %s (%.3f after, held %d); expected max/mean %.3f",
			phase, round(since), id, c/mean, from, load[from]/mean, to, load[to]/mean, o.held[to], s.expectedMaxMean(o)))
	}
	return now
}

// traceEstimates tells Config.Trace how the leader's last plan priced
// each live worker against its expected load (both over their means): the
// busiest by each, and the largest differences.
func (s *sim) traceEstimates(o observation, phase string) {
	est := s.plans.loads()
	if len(est) == 0 {
		return
	}
	exp := map[string]float64{}
	for w := range o.held {
		for _, c := range s.costs(o.owned[w]) {
			exp[w] += c
		}
	}
	norm := func(m map[string]float64) {
		total := 0.0
		for w := range o.held {
			total += m[w]
		}
		for w := range m {
			m[w] /= total / float64(len(o.held))
		}
	}
	norm(est)
	norm(exp)
	ids := slices.Sorted(maps.Keys(o.held))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(exp[b], exp[a]) })
	line := fmt.Sprintf("%-9s end: busiest expected", phase)
	for _, w := range ids[:min(5, len(ids))] {
		line += fmt.Sprintf(" %s %.3f (est %.3f)", w, exp[w], est[w])
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(est[b], est[a]) })
	line += "; busiest estimated"
	for _, w := range ids[:min(3, len(ids))] {
		line += fmt.Sprintf(" %s %.3f (exp %.3f)", w, est[w], exp[w])
	}
	sumsq, worst := 0.0, 0.0
	for _, w := range ids {
		d := est[w] - exp[w]
		sumsq += d * d
		worst = max(worst, math.Abs(d))
	}
	line += fmt.Sprintf("; est-exp rms %.3f, worst %.3f", math.Sqrt(sumsq/float64(len(ids))), worst)
	s.cfg.Trace(line)
	// The busiest's leases, by the table.
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(exp[b], exp[a]) })
	if len(ids) == 0 {
		return
	}
	total := 0.0
	for w := range o.held {
		for _, c := range s.costs(o.owned[w]) {
			total += c
		}
	}
	mean := total / float64(len(o.held))
	line = fmt.Sprintf("%-9s end: %s holds", phase, ids[0])
	for _, l := range s.leases() {
		if l.Owner == ids[0] || l.Handoff == ids[0] {
			key := s.key(l.Key.Stream, l.Key.ShardID)
			line += fmt.Sprintf(" %s %.3f", strings.Replace(key, "shardId-000000000", "", 1), s.costs([]string{key})[0]/mean)
			if l.Handoff != "" {
				line += fmt.Sprintf(" (%s->%s)", l.Owner, l.Handoff)
			}
		}
	}
	s.cfg.Trace(line)
}

// steady counts the store's calls in a window without changes.
func (s *sim) steady(ctx context.Context) (Steady, error) {
	c0, g0, h0, cpu0 := s.store.counts(), s.k.Calls("GetRecords"), s.tally.handles.Load(), cpuTime()
	p0 := s.polls.counts()
	began := time.Now()
	var o observation
	for time.Since(began) < s.cfg.Steady {
		if err := sleep(ctx, min(s.cfg.Sample, s.cfg.Steady-time.Since(began))); err != nil {
			return Steady{}, err
		}
		o = s.observe() // samples the CPU clocks
	}
	st := Steady{
		MaxMean: o.maxMean, MeanCPU: o.meanCPU,
		Window: time.Since(began), Shards: s.cfg.Shards, Workers: len(s.live),
		Store: s.store.counts().sub(c0), Handled: s.tally.handles.Load() - h0,
		GetRecords: int64(s.k.Calls("GetRecords") - g0), CPU: cpuTime() - cpu0,
	}
	s.pollRate = st.PerShardSecond(st.GetRecords)
	st.PollRates = map[string]float64{}
	for id, n := range s.polls.counts() {
		st.PollRates[id] = float64(n-p0[id]) / st.Window.Seconds()
	}
	s.pollRates = st.PollRates
	if s.cfg.Progress != nil {
		s.cfg.Progress(fmt.Sprintf("steady     %s: %.3f store writes per shard per second, %.2f GetRecords calls per shard per second, %.1f RCU/s, max/mean CPU %.2f (mean %.2f)",
			round(st.Window), st.PerShardSecond(st.Store.Writes()), st.PerShardSecond(st.GetRecords), float64(st.Store.RCU)/1000/st.Window.Seconds(), st.MaxMean, st.MeanCPU))
	}
	return st, nil
}

// drain waits until every record written was handled, or DrainTimeout.
func (s *sim) drain(ctx context.Context, rep *Report) error {
	began := time.Now()
	for {
		_, lost := s.tally.missing()
		if lost == 0 || time.Since(began) >= s.cfg.DrainTimeout {
			rep.Drained = time.Since(began)
			return nil
		}
		if err := sleep(ctx, s.cfg.Sample); err != nil {
			return err
		}
	}
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// round rounds a duration for display.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
