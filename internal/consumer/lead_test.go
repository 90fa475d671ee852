package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/smithy-go"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
	"github.com/shardsettle/lambdaadapter/lease"
)

// scanCounter counts a worker's full reads of the table, and its reads
// of the leader row and of the owner index.
type scanCounter struct {
	lease.Store
	scans, rowReads, ownedReads atomic.Int64
}

func (s *scanCounter) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	s.scans.Add(1)
	return s.Store.Snapshot(ctx, stream)
}

func (s *scanCounter) Get(ctx context.Context, k lease.Key) (lease.Lease, error) {
	if k == lease.LeaderKey(k.Stream) {
		s.rowReads.Add(1)
	}
	return s.Store.Get(ctx, k)
}

func (s *scanCounter) Owned(ctx context.Context, owner string) ([]lease.Key, error) {
	s.ownedReads.Add(1)
	return s.Store.Owned(ctx, owner)
}

// olderWorker is the store of a worker of a version before the leader: it
// publishes no load and never sees the leader row, so it balances for
// itself on every round.
type olderWorker struct{ lease.Store }

var errOlder = errors.New("an older version knows no leader row")

func (o olderWorker) Heartbeat(ctx context.Context, stream, owner string, _ *lease.Load) (lease.Worker, error) {
	return o.Store.Heartbeat(ctx, stream, owner, nil)
}

func (o olderWorker) Get(ctx context.Context, k lease.Key) (lease.Lease, error) {
	if k == lease.LeaderKey(k.Stream) {
		return lease.Lease{}, errOlder
	}
	return o.Store.Get(ctx, k)
}

// leaderRow returns the stream's leader row.
func leaderRow(t *testing.T, store lease.Store) lease.Lease {
	t.Helper()
	l, err := store.Get(context.Background(), lease.LeaderKey(testStream))
	if err != nil {
		return lease.Lease{}
	}
	return l
}

// counts returns the leases each consumer holds, sorted.
func counts(cs []*Consumer) []int {
	var n []int
	for _, c := range cs {
		n = append(n, len(c.Owned()))
	}
	slices.Sort(n)
	return n
}

// sixShards returns a stream of six shards of 20 records each, an empty
// lease table and a recorder, for the leader tests.
func sixShards() (*stream, *lease.Memory, *recorder) {
	f := newStream(6)
	f.fill(6, 20)
	return f, lease.NewMemory(), newRecorder()
}

// zeroCPU is a CPU clock that never moves: the tests' workers share one
// process, whose CPU time says nothing of each.
func zeroCPU() time.Duration { return 0 }

// TestLeaderPlansForTheFleet: one worker leads (it holds the leader row and
// says so in it), gives every lease out, and is the only one that reads the
// whole table once the fleet runs; the others find their leases through
// the owner index. A worker that joins gets its share by planned moves;
// when the leader stops, another leads.
func TestLeaderPlansForTheFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(6)
		mem := lease.NewMemory()
		var (
			cs    []*Consumer
			stops []func()
			scans []*scanCounter
		)
		start := func(i int) {
			s := &scanCounter{Store: mem}
			c, stop := run(t, Config{Kinesis: f, Store: s, Owner: fmt.Sprintf("w%d", i), LeaseDuration: 3 * time.Second, CPUTime: zeroCPU}, handler(newRecorder()))
			cs, stops, scans = append(cs, c), append(stops, stop), append(scans, s)
		}
		for i := range 3 {
			start(i)
		}
		waitFor(t, "2/2/2 with a leader", func() bool {
			return slices.Equal(counts(cs), []int{2, 2, 2}) && leaderRow(t, mem).Checkpoint == fleetLed
		})
		before := make([]int64, len(scans))
		for i, s := range scans {
			before[i] = s.scans.Load()
		}
		time.Sleep(30 * time.Second)
		leader := leaderRow(t, mem).Owner
		for i, s := range scans {
			n := s.scans.Load() - before[i]
			switch {
			case cs[i].Owner() == leader && n == 0:
				t.Errorf("the leader %s read the table %d times in 30 s, want some", leader, n)
			case cs[i].Owner() != leader && n != 0:
				t.Errorf("follower %s read the whole table %d times in 30 s, want none", cs[i].Owner(), n)
			}
		}
		start(3)
		waitFor(t, "2/2/1/1", func() bool { return slices.Equal(counts(cs), []int{1, 1, 2, 2}) })
		for i, c := range cs {
			if c.Owner() == leader {
				stops[i]()
				cs = slices.Delete(cs, i, i+1)
				stops = slices.Delete(stops, i, i+1)
				break
			}
		}
		waitFor(t, "another leader, 2/2/2", func() bool {
			l := leaderRow(t, mem)
			return l.Owner != "" && l.Owner != leader && slices.Equal(counts(cs), []int{2, 2, 2})
		})
		for _, stop := range stops {
			stop()
		}
	})
}

// TestOlderWorkerMakesTheFleetBalanceItself: while a worker of an older
// version runs (its row carries no load, it knows no leader), the leader
// says so in its row and every worker balances for itself by counts, as
// before; once it stops, the leader plans for the fleet again. Nothing is
// handled twice meanwhile.
func TestOlderWorkerMakesTheFleetBalanceItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, mem, rec := sixShards()
		var cs []*Consumer
		var stops []func()
		for i := range 2 {
			c, stop := run(t, Config{Kinesis: f, Store: mem, Owner: fmt.Sprintf("new%d", i), Start: TrimHorizon(), LeaseDuration: 3 * time.Second, CPUTime: zeroCPU}, handler(rec))
			cs, stops = append(cs, c), append(stops, stop)
		}
		old, stopOld := run(t, Config{Kinesis: f, Store: olderWorker{mem}, Owner: "old", Start: TrimHorizon(), LeaseDuration: 3 * time.Second, CPUTime: zeroCPU}, handler(rec))
		waitFor(t, "2/2/2, balancing for themselves", func() bool {
			return slices.Equal(counts(append(cs, old)), []int{2, 2, 2}) && leaderRow(t, mem).Checkpoint == fleetSelf
		})
		time.Sleep(20 * time.Second)
		if n := counts(append(cs, old)); !slices.Equal(n, []int{2, 2, 2}) {
			t.Errorf("leases %v after 20 s, want 2/2/2 (no flapping)", n)
		}
		stopOld()
		var last string
		t.Cleanup(func() {
			if t.Failed() {
				t.Log("last:", last)
			}
		})
		waitFor(t, "3/3 led", func() bool {
			l := leaderRow(t, mem)
			snap, _ := mem.Snapshot(context.Background(), testStream)
			last = fmt.Sprintf("counts %v leader %q %q; leases:", counts(cs), l.Owner, l.Checkpoint)
			for _, x := range snap.Leases {
				last += fmt.Sprintf(" %s=%s/%s", x.Key.ShardID[len(x.Key.ShardID)-1:], x.Owner, x.Handoff)
			}
			for _, w := range snap.Workers {
				last += fmt.Sprintf(" W:%s load=%v", w.Owner, w.Load != nil)
			}
			return slices.Equal(counts(cs), []int{3, 3}) && l.Checkpoint == fleetLed
		})
		waitFor(t, "every record", func() bool { return rec.count() >= 120 })
		handledOnce(t, rec.times())
		for _, stop := range stops {
			stop()
		}
	})
}

// TestLeaderAveragesWhileTheFleetBalancesItself: while a worker of an
// older version makes the fleet balance itself, the leader goes on
// averaging each lease's throughput over its rounds (observe), so that its
// first plan for the fleet, once that worker stops, prices the leases by
// figures averaged over many rounds, not one interval's.
func TestLeaderAveragesWhileTheFleetBalancesItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, mem, rec := sixShards()
		start := time.Now()
		busy := func() time.Duration { return time.Since(start) / 4 } // a quarter of a CPU: figures to average
		var cs []*Consumer
		for i := range 2 {
			c, stop := run(t, Config{Kinesis: f, Store: mem, Owner: fmt.Sprintf("new%d", i), Start: TrimHorizon(), LeaseDuration: 3 * time.Second, CPUTime: busy}, handler(rec))
			cs = append(cs, c)
			t.Cleanup(stop)
		}
		_, stopOld := run(t, Config{Kinesis: f, Store: olderWorker{mem}, Owner: "old", Start: TrimHorizon(), LeaseDuration: 3 * time.Second, CPUTime: zeroCPU}, handler(rec))
		t.Cleanup(stopOld)
		waitFor(t, "a fleet balancing itself", func() bool { return leaderRow(t, mem).Checkpoint == fleetSelf })
		time.Sleep(30 * time.Second)
		var leader *Consumer
		for _, c := range cs {
			if c.cfg.Owner == leaderRow(t, mem).Owner {
				leader = c
			}
		}
		if leader == nil {
			t.Fatalf("no new worker leads: the leader row is %q's", leaderRow(t, mem).Owner)
		}
		leader.mu.Lock()
		seen := maps.Clone(leader.lastSeen)
		leader.mu.Unlock()
		n := 0
		for _, c := range cs {
			for _, id := range c.Owned() {
				n++
				if got := seen[lease.Key{Stream: testStream, ShardID: id}].plans; got < 5 {
					t.Errorf("the leader's figures for %s, held by %s, average %v rounds after 30 s of a fleet balancing itself, want 5 or more", id, c.cfg.Owner, got)
				}
			}
		}
		if n == 0 {
			t.Fatal("the new workers hold no lease")
		}
	})
}

// noIndex is the store of a lease table without the owner index (created
// by an older bootstrap leases init, or with the index still building).
type noIndex struct{ lease.Store }

func (noIndex) Owned(context.Context, string) ([]lease.Key, error) {
	return nil, fmt.Errorf("query: %w", lease.ErrNoOwnerIndex)
}

// TestFleetWithoutOwnerIndex: on a table without the owner index the
// leader says that every worker balances for itself, and they do, by
// count, as before the leader: a joiner gets its share, and the leases of
// a worker that stops are taken at once (no worker waits for a plan, as
// after an older worker stops: TestUpgradeEndWaitsForTheLeader). Nothing
// is handled twice.
func TestFleetWithoutOwnerIndex(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, mem, rec := sixShards()
		var cs []*Consumer
		var stops []func()
		var began time.Time
		for i := range 3 {
			c, stop := run(t, Config{Kinesis: f, Store: noIndex{mem}, Owner: fmt.Sprintf("w%d", i), Start: TrimHorizon(), LeaseDuration: 3 * time.Second}, handler(rec))
			cs, stops = append(cs, c), append(stops, stop)
			if i == 0 {
				waitFor(t, "w0 holding every lease", func() bool { return len(c.Owned()) == 6 && leaderRow(t, mem).Checkpoint == fleetSelf })
				began = time.Now()
			}
		}
		waitFor(t, "2/2/2, balancing for themselves", func() bool { return slices.Equal(counts(cs), []int{2, 2, 2}) })
		// Two rounds and the hand-overs: the joiners ask w0 for leases, w0
		// hands them over (1.6–3.1 s seen in virtual time, the order of
		// the goroutines' wake-ups varying). A joiner that waited for a
		// leader's plan, as at the end of a rolling deployment, took 4.5 s.
		if took := time.Since(began); took > 4*time.Second {
			t.Errorf("the joiners got their share after %s, want within two rounds and the hand-overs (4 s)", took)
		}
		stops[2]()
		began = time.Now()
		waitFor(t, "3/3", func() bool { return slices.Equal(counts(cs[:2]), []int{3, 3}) })
		if took := time.Since(began); took > 2*1500*time.Millisecond {
			t.Errorf("the stopped worker's leases taken after %s, want within two rounds (3 s)", took)
		}
		if l := leaderRow(t, mem); l.Checkpoint != fleetSelf {
			t.Errorf("leader row says %q, want %q", l.Checkpoint, fleetSelf)
		}
		waitFor(t, "every record", func() bool { return rec.count() >= 120 })
		handledOnce(t, rec.times())
		stops[1]()
		stops[0]()
	})
}

// asksCounted is a store without the owner index that counts the
// hand-overs asked for.
type asksCounted struct {
	noIndex
	asks atomic.Int64
}

func (a *asksCounted) RequestHandoff(ctx context.Context, held lease.Lease, requester string) (lease.Lease, error) {
	a.asks.Add(1)
	return a.noIndex.RequestHandoff(ctx, held, requester)
}

// TestSelfBalancingFleetStartsTogether: workers that balance for
// themselves (here on a table without the owner index) and start together
// from nothing wait for each other's rows before taking free leases, so
// each takes its share and none asks another for one. Before, the first
// to balance took its share of the rows it saw (all 6 when it saw only
// its own), and the others asked for them back.
func TestSelfBalancingFleetStartsTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, mem, rec := sixShards()
		store := &asksCounted{noIndex: noIndex{mem}}
		var cs []*Consumer
		var stops []func()
		for i := range 3 {
			c, stop := run(t, Config{Kinesis: f, Store: store, Owner: fmt.Sprintf("w%d", i), Start: TrimHorizon(), LeaseDuration: 3 * time.Second}, handler(rec))
			cs, stops = append(cs, c), append(stops, stop)
		}
		waitFor(t, "2/2/2", func() bool { return slices.Equal(counts(cs), []int{2, 2, 2}) })
		if n := store.asks.Load(); n != 0 {
			t.Errorf("%d hand-overs asked for, want 0: each worker takes its share of free leases", n)
		}
		waitFor(t, "every record", func() bool { return rec.count() >= 120 })
		handledOnce(t, rec.times())
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	})
}

// ownedFails is a store whose owner-index query fails with err, counting
// the follower's reads of the whole table.
type ownedFails struct {
	lease.Store
	err   error
	scans atomic.Int64
}

func (o *ownedFails) Owned(context.Context, string) ([]lease.Key, error) { return nil, o.err }

func (o *ownedFails) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	o.scans.Add(1)
	return o.Store.Snapshot(ctx, stream)
}

// TestFollowerWithoutOwnerIndex: a follower that cannot query the owner
// index, where the leader can (the index turned ACTIVE between their
// reads, or the follower's role lacks dynamodb:Query on it), reads the
// leases given to it from the table, and reads them; they once waited
// unread until they expired and were given again, round after round. A
// failure that may pass (throttling) is retried at the next round, with
// no read of the whole table.
func TestFollowerWithoutOwnerIndex(t *testing.T) {
	denied := &awserr.Error{Pkg: "lease", Op: "owned", Resource: "w1", Kind: awserr.Classify(&smithy.GenericAPIError{Code: "AccessDeniedException"}), Cause: errors.New("AccessDeniedException: not authorized to perform dynamodb:Query on the index")}
	throttled := &awserr.Error{Pkg: "lease", Op: "owned", Resource: "w1", Kind: awserr.Throttled, Cause: errors.New("ProvisionedThroughputExceededException")}
	for _, tc := range []struct {
		name  string
		err   error
		scans bool
	}{
		{"no index", fmt.Errorf("query: %w", lease.ErrNoOwnerIndex), true},
		{"denied", denied, true},
		{"throttled", throttled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, mem, rec := sixShards()
				c0, stop0 := run(t, Config{Kinesis: f, Store: mem, Owner: "w0", Start: TrimHorizon(), LeaseDuration: 3 * time.Second}, handler(rec))
				waitFor(t, "w0 holding every lease", func() bool { return len(c0.Owned()) == 6 })
				store := &ownedFails{Store: mem, err: tc.err}
				c1, stop1 := run(t, Config{Kinesis: f, Store: store, Owner: "w1", Start: TrimHorizon(), LeaseDuration: 3 * time.Second}, handler(rec))
				cs := []*Consumer{c0, c1}
				if !tc.scans {
					time.Sleep(20 * time.Second)
					if n := store.scans.Load(); n > 1 { // its first round's discovery reads the table
						t.Errorf("%d reads of the whole table, want none after the first round", n)
					}
					stop1()
					stop0()
					return
				}
				waitFor(t, "3/3 led", func() bool {
					return slices.Equal(counts(cs), []int{3, 3}) && leaderRow(t, mem).Checkpoint == fleetLed
				})
				time.Sleep(20 * time.Second)
				if n := counts(cs); !slices.Equal(n, []int{3, 3}) {
					t.Errorf("leases %v after 20 s, want 3/3 (no flapping)", n)
				}
				waitFor(t, "every record", func() bool { return rec.count() >= 120 })
				handledOnce(t, rec.times())
				stop1()
				stop0()
			})
		})
	}
}

// freeTakes counts the takes of free leases a worker makes for itself (a
// leader's takes for others go through its own store).
type freeTakes struct {
	lease.Store
	n atomic.Int64
}

func (f *freeTakes) Take(ctx context.Context, held lease.Lease, owner string) (lease.Lease, error) {
	if held.Owner == "" {
		f.n.Add(1)
	}
	return f.Store.Take(ctx, held, owner)
}

// TestUpgradeEndWaitsForTheLeader: at the end of a rolling deployment from
// a version before the leader, the last older worker stops and releases
// its leases while the leader row still says that every worker balances
// for itself. A worker whose round comes before the leader's sees no older
// worker left and waits for the leader's plan, instead of taking the free
// leases by count, which a plan by load would move again; the leader then
// gives them. Nothing is handled twice.
func TestUpgradeEndWaitsForTheLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 3 * time.Second
		f, mem, rec := sixShards()
		lead := &scanCounter{Store: mem}
		c0, stop0 := run(t, Config{Kinesis: f, Store: lead, Owner: "new0", Start: TrimHorizon(), LeaseDuration: d}, handler(rec))
		waitFor(t, "new0 leading", func() bool { return leaderRow(t, mem).Owner == "new0" })
		old, stopOld := run(t, Config{Kinesis: f, Store: olderWorker{mem}, Owner: "old", Start: TrimHorizon(), LeaseDuration: d}, handler(rec))
		// afterLeadersRound returns just after the leader's next round
		// (its read of the table).
		afterLeadersRound := func() {
			n := lead.scans.Load()
			waitFor(t, "the leader's round", func() bool { return lead.scans.Load() > n })
		}
		afterLeadersRound()
		time.Sleep(d / 4) // new1's rounds come half-way between the leader's
		own := &freeTakes{Store: mem}
		c1, stop1 := run(t, Config{Kinesis: f, Store: own, Owner: "new1", Start: TrimHorizon(), LeaseDuration: d}, handler(rec))
		cs := []*Consumer{c0, c1}
		waitFor(t, "2/2/2, balancing for themselves", func() bool {
			return slices.Equal(counts(append(cs, old)), []int{2, 2, 2}) && leaderRow(t, mem).Checkpoint == fleetSelf
		})
		afterLeadersRound()
		before := own.n.Load()
		stopOld()
		waitFor(t, "3/3 led", func() bool {
			return slices.Equal(counts(cs), []int{3, 3}) && leaderRow(t, mem).Checkpoint == fleetLed
		})
		if n := own.n.Load() - before; n != 0 {
			t.Errorf("new1 took %d free leases for itself after the older worker stopped, want 0 (the leader gives them)", n)
		}
		waitFor(t, "every record", func() bool { return rec.count() >= 120 })
		handledOnce(t, rec.times())
		stop1()
		stop0()
	})
}

// TestWorkerFollowsAnUndecidedLeader: a worker that finds the leader row
// held by another worker that has not written how the fleet balances yet
// (its first round is under way) follows it, taking no lease by count,
// which the leader's plan would move again; when that leader's row
// expires, the worker leads and takes the leases.
func TestWorkerFollowsAnUndecidedLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(4)
		mem := lease.NewMemory()
		ctx := context.Background()
		row, err := mem.Ensure(ctx, lease.LeaderKey(testStream), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Take(ctx, row, "starting"); err != nil {
			t.Fatal(err)
		}
		c, stop := run(t, Config{Kinesis: f, Store: mem, Owner: "w1", Start: TrimHorizon(), LeaseDuration: 3 * time.Second, CPUTime: zeroCPU}, handler(newRecorder()))
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(c.Owned()); n != 0 {
			t.Errorf("%d leases taken while the leader row is held undecided, want 0", n)
		}
		waitFor(t, "w1 leads and holds every lease", func() bool {
			return len(c.Owned()) == 4 && leaderRow(t, mem).Owner == "w1"
		})
	})
}

// rowRace is a store in which another worker takes the leader row
// between a worker's read of it and its own take, once: the race of the
// workers of a fleet starting together, which all find the row free.
type rowRace struct {
	lease.Store
	raced atomic.Bool
}

func (r *rowRace) Take(ctx context.Context, l lease.Lease, owner string) (lease.Lease, error) {
	if l.Key == lease.LeaderKey(l.Key.Stream) && r.raced.CompareAndSwap(false, true) {
		if _, err := r.Store.Take(ctx, l, "rival"); err != nil {
			return lease.Lease{}, err
		}
	}
	return r.Store.Take(ctx, l, owner)
}

// TestWorkerFollowsTheLeaderThatWonTheRace: a worker that finds the leader
// row free but loses the take of it to another worker follows the winner,
// which has not said yet how the fleet balances, instead of taking leases
// by count that the winner's plans would move again; once the winner's row
// expires (it never plans here), the worker leads and holds every lease.
func TestWorkerFollowsTheLeaderThatWonTheRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(4)
		mem := lease.NewMemory()
		store := &rowRace{Store: mem}
		c, stop := run(t, Config{Kinesis: f, Store: store, Owner: "w1", Start: TrimHorizon(), LeaseDuration: 3 * time.Second, CPUTime: zeroCPU}, handler(newRecorder()))
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if !store.raced.Load() || leaderRow(t, mem).Owner != "rival" {
			t.Fatalf("the rival did not take the leader row (raced %v, row %+v)", store.raced.Load(), leaderRow(t, mem))
		}
		if n := len(c.Owned()); n != 0 {
			t.Errorf("%d leases taken after losing the leader row to another worker, want 0", n)
		}
		waitFor(t, "w1 leads and holds every lease", func() bool {
			return len(c.Owned()) == 4 && leaderRow(t, mem).Owner == "w1"
		})
	})
}

// TestLeaderJoinedCount: the leader counts the workers that joined since
// the fleet last shrank or formed, across plans (a plan that finds the
// fleet even does not end the count), and starts over when a worker
// leaves, counting those that joined in the same plan.
func TestLeaderJoinedCount(t *testing.T) {
	var l leadership
	steps := []struct {
		owners  []string
		forming bool
		want    int
	}{
		{[]string{"a", "b", "c"}, false, 0},           // the first plan: the fleet forms
		{[]string{"a", "b", "c", "d"}, true, 0},       // still forming
		{[]string{"a", "b", "c", "d"}, false, 0},      // formed
		{[]string{"a", "b", "c", "d", "e"}, false, 1}, // e joined
		{[]string{"a", "b", "c", "d", "e"}, false, 1}, // the count stays
		{[]string{"a", "b", "c", "d", "e", "f", "g"}, false, 3},
		{[]string{"a", "b", "d", "e", "f", "g", "h"}, false, 1}, // c left, h joined
		{[]string{"a", "b", "d", "e", "f", "g", "h"}, false, 1},
		{[]string{"a", "h"}, false, 0},
		{[]string{"a", "h", "i"}, false, 1},
		{[]string{"i"}, false, 0}, // at most all but one
	}
	for i, s := range steps {
		if got := l.plans(s.owners, s.forming); got != s.want {
			t.Errorf("step %d, fleet %v: joined %d, want %d", i, s.owners, got, s.want)
		}
	}
}
