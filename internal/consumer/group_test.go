package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// worker is one process of a service with several streams: a group of one
// consumer per stream.
type worker struct {
	cs    []*Consumer
	scans *scanCounter // the process's store, counting its full reads
	stop  func()
}

// owned returns how many leases the worker holds, in all its streams.
func (w worker) owned() int {
	n := 0
	for _, c := range w.cs {
		n += len(c.Owned())
	}
	return n
}

// startGroup runs one worker of owner reading streams, each consumer with
// its own recorder (recs, by stream), on the store. It starts at the trim
// horizon: a lease handed over before anything settled in it has no
// checkpoint, and a reader that starts at the tip would skip what was
// written while it moved.
func startGroup(t *testing.T, k KinesisAPI, mem lease.Store, owner string, streams []string, recs map[string]*recorder, by Assignment, tweaks ...func(*Config)) worker {
	t.Helper()
	return startGroupWith(t, k, mem, owner, streams, func(s string) message.Handler { return recs[s] }, by, tweaks...)
}

// startGroupWith is startGroup with each stream's handler made by h.
func startGroupWith(t *testing.T, k KinesisAPI, mem lease.Store, owner string, streams []string, h func(stream string) message.Handler, by Assignment, tweaks ...func(*Config)) worker {
	t.Helper()
	store := &scanCounter{Store: mem}
	var cs []*Consumer
	for _, s := range streams {
		cfg := Config{Stream: s, Kinesis: k, Store: store, Owner: owner, LeaseDuration: 3 * time.Second, Assignment: by, Start: TrimHorizon()}
		for _, tweak := range tweaks {
			tweak(&cfg)
		}
		cs = append(cs, newConsumer(t, cfg, handler(h(s))))
	}
	if _, err := NewGroup(cs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, len(cs))
	for _, c := range cs {
		go func() { done <- c.Run(ctx) }()
	}
	return worker{cs: cs, scans: store, stop: func() {
		cancel()
		for range cs {
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}}
}

// startGroups starts n workers (w0, w1, ...) reading streams by, on mem.
func startGroups(t *testing.T, k KinesisAPI, mem lease.Store, n int, streams []string, recs map[string]*recorder, by Assignment) []worker {
	t.Helper()
	var ws []worker
	for i := range n {
		ws = append(ws, startGroup(t, k, mem, fmt.Sprintf("w%d", i), streams, recs, by))
	}
	return ws
}

// newStreams makes the streams, of shards shards each, in a fake Kinesis,
// and a recorder for each.
func newStreams(shards int, streams ...string) (*awsfake.Kinesis, *stream, map[string]*recorder) {
	fk := awsfake.NewKinesis()
	recs := map[string]*recorder{}
	for _, s := range streams {
		fk.CreateStream(s, shards)
		recs[s] = newRecorder()
	}
	return fk, &stream{Kinesis: fk}, recs
}

// TestGroupBalancesAcrossStreams: three workers read three streams of one
// shard each. Balancing each stream alone could leave all three leases on
// one worker (each stream's share is one lease per worker); the group's
// leader plans the streams together, so each worker holds one. Every
// record of every stream is handled once, by its stream's handler, and
// only the leader reads the whole table. A worker that reads one of the
// streams only never gets a lease of the others.
func TestGroupBalancesAcrossStreams(t *testing.T) {
	for name, by := range map[string]Assignment{"load": AssignByLoad, "count": AssignByCount} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				streams := []string{"a", "b", "c"}
				fk, k, recs := newStreams(1, streams...)
				mem := lease.NewMemory()
				ws := startGroups(t, k, mem, 3, streams, recs, by)
				leaderOf := func() lease.Lease {
					l, _ := mem.Get(context.Background(), lease.LeaderKey("a"))
					return l
				}
				waitFor(t, "one lease each, planned by one leader", func() bool {
					for _, w := range ws {
						if w.owned() != 1 {
							return false
						}
					}
					return leaderOf().Checkpoint == "plan:leader:a,b,c"
				})
				for _, s := range streams {
					for i := range 5 {
						fk.PutTo(s, shardID(0), "k", fmt.Appendf(nil, "%s-%d", s, i))
					}
				}
				for range 600 {
					if recs["a"].count() >= 5 && recs["b"].count() >= 5 && recs["c"].count() >= 5 {
						break
					}
					time.Sleep(time.Second)
				}
				if recs["a"].count() < 5 || recs["b"].count() < 5 || recs["c"].count() < 5 {
					for _, s := range streams {
						snap, _ := mem.Snapshot(context.Background(), s)
						t.Logf("stream %s: handled %v; leases %+v", s, recs[s].times(), snap.Leases)
					}
					for _, w := range ws {
						for _, c := range w.cs {
							t.Logf("%s %s owns %v", c.Owner(), c.cfg.Stream, c.Owned())
						}
					}
					t.Fatal("not every record handled")
				}
				for _, s := range streams {
					for p, n := range recs[s].times() {
						if n != 1 || p[:1] != s {
							t.Errorf("stream %s's handler handled %q %d times", s, p, n)
						}
					}
				}

				// A worker reading stream a only joins, and the worker
				// holding b's lease stops: b's lease goes to a worker that
				// reads b, though the new one holds nothing.
				solo := startGroup(t, k, mem, "w9", []string{"a"}, recs, by)
				for i, w := range ws {
					if len(w.cs[1].Owned()) == 1 {
						w.stop()
						ws = slices.Delete(ws, i, i+1)
						break
					}
				}
				waitFor(t, "b's lease held again", func() bool {
					for _, w := range ws {
						if len(w.cs[1].Owned()) == 1 {
							return true
						}
					}
					return false
				})
				time.Sleep(30 * time.Second)
				if len(solo.cs[0].Owned()) > 1 {
					t.Errorf("the worker of stream a alone holds %v", solo.cs[0].Owned())
				}
				total := solo.owned()
				for _, w := range ws {
					total += w.owned()
					if len(w.cs[1].Owned()) == 1 {
						total-- // b's, checked below
					}
				}
				b := 0
				for _, w := range ws {
					b += len(w.cs[1].Owned())
				}
				if b != 1 || total != 2 {
					t.Errorf("b's lease held %d times, the others %d times in all, want 1 and 2", b, total)
				}
				solo.stop()

				// Only the leader's process reads the whole table. (The
				// solo worker led, perhaps: another leads once every member
				// has read the new row.)
				waitFor(t, "a leader of the three streams", func() bool {
					l := leaderOf()
					return l.Owner != "" && l.Checkpoint == "plan:leader:a,b,c"
				})
				time.Sleep(5 * time.Second)
				leader := leaderOf().Owner
				before := make([]int64, len(ws))
				for i, w := range ws {
					before[i] = w.scans.scans.Load()
				}
				time.Sleep(30 * time.Second)
				for i, w := range ws {
					n := w.scans.scans.Load() - before[i]
					switch owner := w.cs[0].Owner(); {
					case owner == leader && n == 0:
						t.Errorf("the leader %s read the table %d times in 30 s, want some", owner, n)
					case owner != leader && n != 0:
						t.Errorf("follower %s read the whole table %d times in 30 s, want none (leader row %+v)", owner, n, leaderOf())
					}
				}
				for _, w := range ws {
					w.stop()
				}
			})
		})
	}
}

// TestGroupBalancesLoadAcrossStreams: two workers read streams a and b,
// two shards each; a's first shard carries three times the records of each
// other shard, and each record costs the handler's worker the same CPU
// time. Balancing each stream alone, or the streams together by count,
// leaves two leases on each worker, one of them with the hot shard and a
// cold one (0.4 CPU against 0.2). The group's leader plans both streams by
// the load each worker publishes in each stream's row, so the hot shard
// ends alone on its worker and the three cold ones, of both streams, on
// the other (0.3 each), by graceful hand-overs: every record is handled
// once.
func TestGroupBalancesLoadAcrossStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		streams := []string{"a", "b"}
		fk, k, recs := newStreams(2, streams...)
		mem := lease.NewMemory()
		const perRecord = 10 * time.Millisecond
		var ws []worker
		for i := range 2 {
			var used atomic.Int64 // this worker's CPU time, charged per record
			h := func(s string) message.Handler {
				return message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
					used.Add(int64(perRecord))
					return recs[s].HandleRecord(ctx, m)
				})
			}
			cpu := func(c *Config) {
				c.CPUTime = func() time.Duration { return time.Duration(used.Load()) }
				c.CPUs = 1
			}
			ws = append(ws, startGroupWith(t, k, mem, fmt.Sprintf("w%d", i), streams, h, AssignByLoad, cpu))
		}
		// 30 records/s to a's first shard, 10/s to each other shard.
		wctx, stopWriting := context.WithCancel(t.Context())
		defer stopWriting()
		written := make(chan int, 1)
		go func() {
			n := 0
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-wctx.Done():
					written <- n
					return
				case <-tick.C:
				}
				for _, s := range streams {
					for sh := range 2 {
						per := 1
						if s == "a" && sh == 0 {
							per = 3
						}
						for range per {
							fk.PutTo(s, shardID(sh), "k", fmt.Appendf(nil, "%s-%d-%d", s, sh, n))
							n++
						}
					}
				}
			}
		}()
		hotOwner := func() (hot, other *worker) {
			for i := range ws {
				if slices.Contains(ws[i].cs[0].Owned(), shardID(0)) {
					return &ws[i], &ws[1-i]
				}
			}
			return nil, nil
		}
		waitFor(t, "the hot shard alone on its worker, the three cold ones on the other", func() bool {
			hot, other := hotOwner()
			return hot != nil && hot.owned() == 1 && other.owned() == 3
		})
		// It stays so: the load is even now, and nothing flaps.
		time.Sleep(time.Minute)
		if hot, other := hotOwner(); hot == nil || hot.owned() != 1 || other.owned() != 3 {
			for _, w := range ws {
				for _, c := range w.cs {
					t.Logf("%s %s owns %v", c.Owner(), c.cfg.Stream, c.Owned())
				}
			}
			t.Error("the leases moved again after the load was even")
		}
		stopWriting()
		n := <-written
		waitFor(t, "every record handled", func() bool { return recs["a"].count()+recs["b"].count() >= n })
		for _, r := range recs {
			handledOnce(t, r.times())
		}
		if got := recs["a"].count() + recs["b"].count(); got != n {
			t.Errorf("%d records handled, %d written", got, n)
		}
		for _, w := range ws {
			w.stop()
		}
	})
}

// TestGroupSharesReads: a follower reading three streams reads the leader
// row and queries the owner index once a round, with its primary, not
// once per stream; its members use the primary's reads. A lease handed to
// one of its members in a move is still adopted, and every record is
// handled once.
func TestGroupSharesReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		streams := []string{"a", "b", "c"}
		fk, k, recs := newStreams(2, streams...)
		mem := lease.NewMemory()
		ws := startGroups(t, k, mem, 2, streams, recs, AssignByCount)
		leader := func() string {
			l, _ := mem.Get(context.Background(), lease.LeaderKey("a"))
			return l.Owner
		}
		waitFor(t, "three leases each", func() bool {
			return ws[0].owned() == 3 && ws[1].owned() == 3 && leader() != ""
		})
		time.Sleep(5 * time.Second)
		var follower worker
		for _, w := range ws {
			if w.cs[0].Owner() != leader() {
				follower = w
			}
		}
		rows, owned := follower.scans.rowReads.Load(), follower.scans.ownedReads.Load()
		const window = 30 * time.Second
		time.Sleep(window)
		rounds := int64(window / (3 * time.Second / 2)) // a round every D/2
		t.Logf("in %s the follower read the leader row %d times and queried the owner index %d times (%d rounds)",
			window, follower.scans.rowReads.Load()-rows, follower.scans.ownedReads.Load()-owned, rounds)
		if n := follower.scans.rowReads.Load() - rows; n > rounds+rounds/2 {
			t.Errorf("the follower read the leader row %d times in %s, want about %d (once a round, not once per stream)", n, window, rounds)
		}
		if n := follower.scans.ownedReads.Load() - owned; n > rounds+rounds/2 {
			t.Errorf("the follower queried the owner index %d times in %s, want about %d (once a round, not once per stream)", n, window, rounds)
		}

		// A third worker joins: the leader gives it leases, and the
		// followers' members adopt what they are given.
		ws = append(ws, startGroup(t, k, mem, "w2", streams, recs, AssignByCount))
		waitFor(t, "two leases each", func() bool {
			return ws[0].owned() == 2 && ws[1].owned() == 2 && ws[2].owned() == 2
		})
		for _, s := range streams {
			for sh := range 2 {
				fk.PutTo(s, shardID(sh), "k", fmt.Appendf(nil, "%s-%d", s, sh))
			}
		}
		waitFor(t, "every record handled", func() bool {
			return recs["a"].count() == 2 && recs["b"].count() == 2 && recs["c"].count() == 2
		})
		time.Sleep(5 * time.Second)
		for _, r := range recs {
			handledOnce(t, r.times())
		}
		for _, w := range ws {
			w.stop()
		}
	})
}

// TestMemberFollowsOnlyWhatTheLeaderPlans: a member of a group follows the
// leader only for the streams the leader row names; a single-stream leader
// (plan:leader) plans its own stream alone.
func TestMemberFollowsOnlyWhatTheLeaderPlans(t *testing.T) {
	for _, c := range []struct {
		fleet, stream string
		want          bool
	}{
		{fleetLed, "a", true},
		{fleetLed, "b", false},
		{fleetSelf, "a", false},
		{"plan:leader:a,b", "b", true},
		{"plan:leader:a,b", "c", false},
		{"plan:leader:a,bc", "b", false},
		{"", "a", false},
	} {
		if got := fleetCovers(c.fleet, "a", c.stream); got != c.want {
			t.Errorf("fleetCovers(%q, a, %s) = %v, want %v", c.fleet, c.stream, got, c.want)
		}
	}
}

// TestMemberFollowsAnUndecidedLeader: a group's member that finds the
// group's leader row held by another worker that has not said yet what it
// plans (its first round is under way) follows it as the primary does,
// taking no lease of its stream by count, which the leader's plan would
// move again; when that leader's row expires, the primary leads and the
// worker holds every lease of both streams.
func TestMemberFollowsAnUndecidedLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := awsfake.NewKinesis()
		k := &stream{Kinesis: fk}
		fk.CreateStream("a", 2)
		fk.CreateStream("b", 2)
		mem := lease.NewMemory()
		ctx := context.Background()
		row, err := mem.Ensure(ctx, lease.LeaderKey("a"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Take(ctx, row, "starting"); err != nil {
			t.Fatal(err)
		}
		recs := map[string]*recorder{"a": newRecorder(), "b": newRecorder()}
		w := startGroup(t, k, mem, "w1", []string{"a", "b"}, recs, AssignByLoad)
		defer w.stop()
		time.Sleep(time.Second)
		synctest.Wait()
		for _, c := range w.cs {
			if n := len(c.Owned()); n != 0 {
				t.Errorf("stream %s: %d leases taken while the leader row is held undecided, want 0", c.cfg.Stream, n)
			}
		}
		waitFor(t, "w1 leads both streams and holds every lease", func() bool {
			l, _ := mem.Get(ctx, lease.LeaderKey("a"))
			return w.owned() == 4 && l.Owner == "w1" && l.Checkpoint == "plan:leader:a,b"
		})
	})
}

// TestMemberRole: a group's member that is not its primary follows while
// the group's leader row plans its stream or says nothing yet: the row
// held by a leader in its first round, free, or not there (its primary
// takes or makes it in its own round); it balances its stream for itself
// when the row says the leader plans other streams or that every worker
// balances for itself, or when the row cannot be read.
func TestMemberRole(t *testing.T) {
	ctx := context.Background()
	k := newStream(1)
	for _, c := range []struct {
		name       string
		none       bool   // no leader row
		owner      string // who holds it ("": nobody)
		fleet      string // what it says
		released   bool   // its holder released it
		unreadable bool   // reading it fails
		want       role
	}{
		{name: "no row", none: true, want: roleFollowing},
		{name: "free, undecided", want: roleFollowing},
		{name: "held, undecided", owner: "v", want: roleFollowing},
		{name: "plans b", owner: "v", fleet: "plan:leader:a,b", want: roleFollowing},
		{name: "released, planned b", owner: "v", fleet: "plan:leader:a,b", released: true, want: roleFollowing},
		{name: "plans a alone", owner: "v", fleet: fleetLed, want: roleSelf},
		{name: "released, planned a alone", owner: "v", fleet: fleetLed, released: true, want: roleSelf},
		{name: "every worker for itself", owner: "v", fleet: fleetSelf, want: roleSelf},
		{name: "unreadable", owner: "v", unreadable: true, want: roleSelf},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := lease.NewMemory()
			if !c.none {
				row, err := mem.Ensure(ctx, lease.LeaderKey("a"), nil)
				if err == nil && c.owner != "" {
					row, err = mem.Take(ctx, row, c.owner)
				}
				if err == nil && c.fleet != "" {
					row, err = mem.Checkpoint(ctx, row, c.fleet, 0)
				}
				if err == nil && c.released {
					_, err = mem.Release(ctx, row)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			var store lease.Store = mem
			if c.unreadable {
				store = unreadableStore{mem}
			}
			mk := func(stream string) *Consumer {
				return newConsumer(t, Config{Stream: stream, Kinesis: k, Store: store, Owner: "w"}, handler(newRecorder()))
			}
			a, b := mk("a"), mk("b")
			if _, err := NewGroup(a, b); err != nil {
				t.Fatal(err)
			}
			if got := b.memberRole(ctx); got != c.want {
				t.Errorf("memberRole = %v, want %v", got, c.want)
			}
		})
	}
}

// unreadableStore is a lease store whose Get fails.
type unreadableStore struct{ lease.Store }

func (unreadableStore) Get(context.Context, lease.Key) (lease.Lease, error) {
	return lease.Lease{}, errors.New("throttled")
}

// TestNewGroupValidates: a group's consumers share the owner and the store
// and read distinct streams.
func TestNewGroupValidates(t *testing.T) {
	mem := lease.NewMemory()
	k := newStream(1)
	mk := func(stream, owner string, store lease.Store) *Consumer {
		return newConsumer(t, Config{Stream: stream, Kinesis: k, Store: store, Owner: owner}, handler(newRecorder()))
	}
	for name, cs := range map[string][]*Consumer{
		"none":   nil,
		"twice":  {mk("a", "w", mem), mk("a", "w", mem)},
		"owners": {mk("a", "w", mem), mk("b", "v", mem)},
		"stores": {mk("a", "w", mem), mk("b", "w", lease.NewMemory())},
	} {
		if _, err := NewGroup(cs...); err == nil {
			t.Errorf("%s: NewGroup succeeded", name)
		}
	}
	a, b := mk("a", "w", mem), mk("b", "w", mem)
	if _, err := NewGroup(a, b); err != nil {
		t.Fatal(err)
	}
	if _, err := NewGroup(a, mk("c", "w", mem)); err == nil {
		t.Error("a consumer joined a second group")
	}
	if !slices.Equal(a.grp.Streams(), []string{"a", "b"}) || !a.isPrimary() || b.isPrimary() {
		t.Errorf("group %v", a.grp.Streams())
	}
}

// TestStreamAddedWithoutMigration: a stream is added to the service's list
// in a rolling deployment. While a worker of the old list (stream a alone)
// leads, it plans a only and says so; the new worker balances b for itself
// and follows the leader for a. Once the old worker is replaced, the
// leader plans both streams, and the leases spread over both workers.
// Every record is handled once throughout.
func TestStreamAddedWithoutMigration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := awsfake.NewKinesis()
		k := &stream{Kinesis: fk}
		recs := map[string]*recorder{"a": newRecorder(), "b": newRecorder()}
		fk.CreateStream("a", 2)
		fk.CreateStream("b", 2)
		mem := lease.NewMemory()
		row := func() lease.Lease {
			l, _ := mem.Get(context.Background(), lease.LeaderKey("a"))
			return l
		}
		put := func(n int) {
			for _, s := range []string{"a", "b"} {
				for sh := range 2 {
					for i := range n {
						fk.PutTo(s, shardID(sh), "k", fmt.Appendf(nil, "%s-%d-%d-%d", s, sh, i, time.Now().UnixNano()))
					}
				}
			}
		}
		old := startGroup(t, k, mem, "w0", []string{"a"}, recs, AssignByCount)
		waitFor(t, "the old worker leads stream a", func() bool {
			return old.owned() == 2 && row().Owner == "w0" && row().Checkpoint == fleetLed
		})
		next := startGroup(t, k, mem, "w1", []string{"a", "b"}, recs, AssignByCount)
		waitFor(t, "b read by the new worker, a shared", func() bool {
			return len(next.cs[1].Owned()) == 2 && len(next.cs[0].Owned()) == 1 && old.owned() == 1
		})
		put(3)
		waitFor(t, "the records handled", func() bool { return recs["a"].count() == 6 && recs["b"].count() == 6 })
		old.stop()
		renewed := startGroup(t, k, mem, "w2", []string{"a", "b"}, recs, AssignByCount)
		waitFor(t, "one leader for both streams, two leases each", func() bool {
			return row().Checkpoint == "plan:leader:a,b" && next.owned() == 2 && renewed.owned() == 2
		})
		put(3)
		waitFor(t, "the records handled", func() bool { return recs["a"].count() == 12 && recs["b"].count() == 12 })
		time.Sleep(10 * time.Second)
		for _, r := range recs {
			handledOnce(t, r.times())
		}
		next.stop()
		renewed.stop()
	})
}

// multiCounter is a worker's store that can read several streams at once,
// counting its reads of one stream and of several.
type multiCounter struct {
	*lease.Memory
	one, several atomic.Int64
}

func (m *multiCounter) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	m.one.Add(1)
	return m.Memory.Snapshot(ctx, stream)
}

func (m *multiCounter) SnapshotStreams(ctx context.Context, streams ...string) (map[string]lease.Snapshot, error) {
	m.several.Add(1)
	return m.Memory.SnapshotStreams(ctx, streams...)
}

// TestGroupLeaderReadsOnce: with a store that reads several streams at
// once (lease.DynamoDB), the leader of a group reads its three streams
// with one read per round, not one per stream; only listing reads one
// stream.
func TestGroupLeaderReadsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := awsfake.NewKinesis()
		k := &stream{Kinesis: fk}
		streams := []string{"a", "b", "c"}
		mem := lease.NewMemory()
		var cs []*Consumer
		store := &multiCounter{Memory: mem}
		for _, s := range streams {
			fk.CreateStream(s, 2)
			cs = append(cs, newConsumer(t, Config{Stream: s, Kinesis: k, Store: store, Owner: "w0", LeaseDuration: 3 * time.Second, ListInterval: time.Hour}, handler(newRecorder())))
		}
		if _, err := NewGroup(cs...); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, len(cs))
		for _, c := range cs {
			go func() { done <- c.Run(ctx) }()
		}
		waitFor(t, "every lease held", func() bool {
			n := 0
			for _, c := range cs {
				n += len(c.Owned())
			}
			return n == 6
		})
		waitFor(t, "the leader plans the three streams", func() bool {
			l, _ := mem.Get(context.Background(), lease.LeaderKey("a"))
			return l.Checkpoint == "plan:leader:a,b,c"
		})
		time.Sleep(3 * time.Second) // every member has read the row since
		one, several := store.one.Load(), store.several.Load()
		time.Sleep(30 * time.Second) // 20 rounds of D/2
		one, several = store.one.Load()-one, store.several.Load()-several
		if several < 10 || one != 0 {
			t.Errorf("in 30 s the leader read several streams at once %d times and one stream %d times, want about 20 and 0", several, one)
		}
		cancel()
		for range cs {
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})
}

// TestGiftToStoppingMemberGivenBack: the group's leader may take a lease
// of another stream in this process's name while that stream's consumer
// stops (their contexts end together, and a round in flight finishes its
// writes). The stopping consumer never starts it: it releases it, so that
// another worker takes it at once instead of after its expiry.
func TestGiftToStoppingMemberGivenBack(t *testing.T) {
	for _, when := range []string{"before the stop", "after the stop"} {
		t.Run(when, func(t *testing.T) {
			ctx := t.Context()
			fk := awsfake.NewKinesis()
			k := &stream{Kinesis: fk}
			mem := lease.NewMemory()
			var cs []*Consumer
			for _, s := range []string{"a", "b"} {
				fk.CreateStream(s, 1)
				cs = append(cs, newConsumer(t, Config{Stream: s, Kinesis: k, Store: mem, Owner: "w0", LeaseDuration: 3 * time.Second}, handler(newRecorder())))
			}
			if _, err := NewGroup(cs...); err != nil {
				t.Fatal(err)
			}
			b := cs[1]
			row, err := mem.Ensure(ctx, lease.Key{Stream: "b", ShardID: shardID(0)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			given, err := mem.Take(ctx, row, "w0") // the leader's take in w0's name
			if err != nil {
				t.Fatal(err)
			}
			if when == "before the stop" {
				b.give(given)
				b.stopShards()
			} else {
				b.stopShards()
				b.give(given)
			}
			got, err := mem.Get(ctx, given.Key)
			if err != nil {
				t.Fatal(err)
			}
			if got.Owner != "" {
				t.Errorf("lease given to a stopping consumer: owner %q, want released", got.Owner)
			}
		})
	}
}

// TestGroupSeekNamesTheStream: the streams of a group have shards of the
// same ids. A sequence number belongs to one stream, so a Seek AtSequence
// that names a shard by its id alone, which several members hold, is an
// error and moves nothing; named as stream:shardId it moves that stream's
// shard only.
func TestGroupSeekNamesTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := awsfake.NewKinesis()
		k := &stream{Kinesis: fk}
		recs := map[string]*recorder{}
		var cs []*Consumer
		for _, s := range []string{"a", "b"} {
			fk.CreateStream(s, 1)
			recs[s] = newRecorder()
			cs = append(cs, newConsumer(t, Config{Stream: s, Kinesis: k, Store: lease.NewMemory(), Owner: "w0", LeaseDuration: 3 * time.Second, Start: TrimHorizon()}, handler(recs[s])))
		}
		cs[1].cfg.Store = cs[0].cfg.Store
		g, err := NewGroup(cs...)
		if err != nil {
			t.Fatal(err)
		}
		first := fk.PutTo("a", shardID(0), "k", []byte("a-0"))
		fk.PutTo("b", shardID(0), "k", []byte("b-0"))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		waitFor(t, "both records handled", func() bool { return recs["a"].count() == 1 && recs["b"].count() == 1 })
		if err := g.Seek(t.Context(), AtSequence(shardID(0), first)); err == nil {
			t.Error("Seek by a shard id both streams hold: no error")
		}
		time.Sleep(5 * time.Second)
		if recs["a"].count() != 1 || recs["b"].count() != 1 {
			t.Errorf("an ambiguous Seek moved readers: handled %d in a, %d in b; want 1 and 1", recs["a"].count(), recs["b"].count())
		}
		for key, want := range map[string]string{
			"z:" + shardID(0): "consumer: seek: stream z is not one of the streams read (a, b)",
			"b:" + shardID(9): "consumer: seek: shard b:" + shardID(9) + " is not held by this worker",
			shardID(9):        "consumer: seek: shard " + shardID(9) + " is not held by this worker",
		} {
			if err := g.Seek(t.Context(), AtSequence(key, first)); err == nil || err.Error() != want {
				t.Errorf("Seek %s: %v, want %q", key, err, want)
			}
		}
		if err := g.Seek(t.Context(), AtSequence("a:"+shardID(0), "LATEST@1765000000000")); err == nil {
			t.Error("Seek to a LATEST@ checkpoint: no error")
		}
		if err := g.Seek(t.Context(), AtSequence("a:"+shardID(0), first)); err != nil {
			t.Errorf("Seek a:%s: %v", shardID(0), err)
		}
		waitFor(t, "a's record handled again", func() bool { return recs["a"].count() == 2 })
		time.Sleep(5 * time.Second)
		if recs["b"].count() != 1 {
			t.Errorf("Seek of a's shard moved b's: handled %d in b, want 1", recs["b"].count())
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestGroupStreamMissing: a group one of whose streams does not exist
// when it starts stops as a single stream's consumer does: Run returns
// ErrStreamNotFound naming that stream, after the other members stopped
// gracefully (their leases released, every worker row removed).
func TestGroupStreamMissing(t *testing.T) {
	for _, missing := range []string{"a", "b"} {
		t.Run(missing, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fk := awsfake.NewKinesis()
				k := &stream{Kinesis: fk}
				mem := lease.NewMemory()
				var cs []*Consumer
				for _, s := range []string{"a", "b", "c"} {
					if s != missing {
						fk.CreateStream(s, 2)
					}
					cs = append(cs, newConsumer(t, Config{Stream: s, Kinesis: k, Store: mem, Owner: "w0", LeaseDuration: 3 * time.Second}, handler(newRecorder())))
				}
				g, err := NewGroup(cs...)
				if err != nil {
					t.Fatal(err)
				}
				err = g.Run(t.Context())
				if !errors.Is(err, ErrStreamNotFound) || !strings.Contains(err.Error(), "stream not found: "+missing) {
					t.Errorf("Run = %v, want ErrStreamNotFound naming %s", err, missing)
				}
				for _, s := range []string{"a", "b", "c"} {
					snap, err := mem.Snapshot(context.Background(), s)
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range snap.Leases {
						if l.Owner != "" {
							t.Errorf("%s held by %s after Run returned", l.Key, l.Owner)
						}
					}
					if len(snap.Workers) != 0 {
						t.Errorf("stream %s: worker rows %+v after Run returned", s, snap.Workers)
					}
				}
				if l, err := mem.Get(context.Background(), lease.LeaderKey("a")); err == nil && l.Owner != "" {
					t.Errorf("leader row held by %s after Run returned", l.Owner)
				}
			})
		})
	}
}

// TestGroupForwardsTheDelayQueueOnce: the group's primary forwards the
// delay queue for every stream (a service gives the receiver to it
// alone); the other members say nothing of it (each warned that the
// process did not forward the queue, and that its delayed records would
// stay there).
func TestGroupForwardsTheDelayQueueOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := awsfake.NewKinesis()
		k := &stream{Kinesis: fk}
		q := &fakeQueue{}
		queue, err := publish.NewQueue(q)
		if err != nil {
			t.Fatal(err)
		}
		warns := newAttrLog(slog.LevelWarn)
		mem := lease.NewMemory()
		var cs []*Consumer
		for i, s := range []string{"a", "b", "c"} {
			fk.CreateStream(s, 1)
			cfg := Config{Stream: s, Kinesis: k, Store: mem, Owner: "w0", LeaseDuration: 3 * time.Second, Logger: slog.New(warns)}
			if i == 0 {
				cfg.DelayReceiver = q
			}
			cs = append(cs, newConsumer(t, cfg, engineConfig{Handler: newRecorder(), Publisher: newPublisher(t, fk), Queue: queue,
				DelayQueue: "https://sqs.us-east-1.amazonaws.com/000000000000/delays"}))
		}
		g, err := NewGroup(cs...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		waitFor(t, "every lease held", func() bool { return len(g.Owned()) == 3 })
		time.Sleep(10 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if msgs := warns.lines(); len(msgs) > 0 {
			t.Errorf("warnings: %q", msgs)
		}
	})
}
