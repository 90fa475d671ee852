package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lease"
)

func TestOneWorkerFourShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(4)
		last := f.fill(4, 250)
		store := lease.NewMemory()
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Limit: 100, Owner: "w1"}, handler(h))
		waitFor(t, "1,000 records", func() bool { return h.count() == 1000 })
		if got := c.Owned(); len(got) != 4 {
			t.Errorf("owned %v", got)
		}
		time.Sleep(2 * time.Second) // a checkpoint interval
		ls, _ := leasesOf(store.Snapshot(t.Context(), testStream))
		for _, l := range ls {
			if l.Checkpoint != last[l.Key.ShardID] || l.Owner != "w1" {
				t.Errorf("%s: checkpoint %s owner %q, want %s (written within the interval)", l.Key.ShardID, l.Checkpoint, l.Owner, last[l.Key.ShardID])
			}
		}
		stop()
		ls, _ = leasesOf(store.Snapshot(context.Background(), testStream))
		for _, l := range ls {
			if l.Checkpoint != last[l.Key.ShardID] || l.Owner != "" {
				t.Errorf("after stop %s: checkpoint %s owner %q", l.Key.ShardID, l.Checkpoint, l.Owner)
			}
		}
		for s := range 4 {
			id := shardID(s)
			want := make([]string, 250)
			for i := range want {
				want[i] = fmt.Sprintf("%s-%d", id, i)
			}
			got := slices.Clone(h.handled[id])
			slices.SortFunc(got, cmpIndex)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", id, diff)
			}
		}
	})
}

func cmpIndex(a, b string) int {
	x, _ := strconv.Atoi(a[strings.LastIndex(a, "-")+1:])
	y, _ := strconv.Atoi(b[strings.LastIndex(b, "-")+1:])
	return x - y
}

// TestRetryDeliveredAgainInProcess: an unsettled record (uncounted Retry)
// is delivered again in process after a backoff, with Attempt counted up;
// it holds the checkpoint meanwhile; later records of its key wait for it,
// other keys go on; once it settles, the checkpoint passes everything.
func TestRetryDeliveredAgainInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		var seqs []string
		for i := range 10 {
			key := "k" + strconv.Itoa(i)
			if i == 6 {
				key = "k4" // waits for record 4
			}
			seqs = append(seqs, f.put(id, key, strconv.Itoa(i)))
		}
		store := lease.NewMemory()
		h := newRecorder()
		var heal sync.Once
		healed := make(chan struct{})
		h.outcome = func(m *message.Message) message.Outcome {
			if string(m.Payload) == "4" {
				select {
				case <-healed:
				default:
					return message.Retry(errors.New("not now"))
				}
			}
			return message.Ack()
		}
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", RetryBackoff: time.Second, MaxRetryBackoff: 4 * time.Second}, handler(h))
		waitFor(t, "three attempts of record 4", func() bool { return len(h.attempts("4")) >= 3 })
		if got := h.attempts("6"); len(got) != 0 {
			t.Errorf("record 6 (same key as 4) handled %v before 4 settled", got)
		}
		for _, p := range []string{"5", "7", "8", "9"} {
			if len(h.attempts(p)) != 1 {
				t.Errorf("record %s (another key) handled %v times, want once: other keys go on", p, h.attempts(p))
			}
		}
		time.Sleep(2 * time.Second)
		if cp := checkpointOf(t, store, id); cp != seqs[3] {
			t.Errorf("checkpoint %s, want %s (just before the unsettled record)", cp, seqs[3])
		}
		heal.Do(func() { close(healed) })
		waitFor(t, "record 6", func() bool { return len(h.attempts("6")) == 1 })
		got := h.attempts("4")
		for i, a := range got {
			if a != i+1 {
				t.Fatalf("record 4 handled with attempts %v, want 1, 2, 3, ...", got)
			}
		}
		time.Sleep(2 * time.Second)
		if cp := checkpointOf(t, store, id); cp != seqs[9] {
			t.Errorf("checkpoint %s, want %s once the record settled", cp, seqs[9])
		}
		stop()
		for p, n := range h.times() {
			if p != "4" && n != 1 {
				t.Errorf("record %s handled %d times, want once (nothing settled is delivered again)", p, n)
			}
		}
	})
}

func TestWorkersShareShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(6)
		store := lease.NewMemory()
		var cs []*Consumer
		var stops []func()
		for i := range 3 {
			c, stop := run(t, Config{Kinesis: f, Store: store, Owner: fmt.Sprintf("w%d", i), LeaseDuration: 3 * time.Second}, handler(newRecorder()))
			cs = append(cs, c)
			stops = append(stops, stop)
		}
		waitFor(t, "2/2/2", func() bool {
			for _, c := range cs {
				if len(c.Owned()) != 2 {
					return false
				}
			}
			return true
		})
		c4, stop4 := run(t, Config{Kinesis: f, Store: store, Owner: "w3", LeaseDuration: 3 * time.Second}, handler(newRecorder()))
		cs = append(cs, c4)
		stops = append(stops, stop4)
		waitFor(t, "2/2/1/1", func() bool {
			n := []int{}
			for _, c := range cs {
				n = append(n, len(c.Owned()))
			}
			slices.Sort(n)
			return slices.Equal(n, []int{1, 1, 2, 2})
		})
		time.Sleep(10 * time.Second)
		total := 0
		for _, c := range cs {
			total += len(c.Owned())
		}
		if total != 6 {
			t.Errorf("%d shards owned after settling, want 6 (no flapping)", total)
		}
		// A worker stopping gracefully hands its shards over.
		stops[0]()
		waitFor(t, "handover", func() bool {
			total := 0
			for _, c := range cs[1:] {
				total += len(c.Owned())
			}
			return total == 6
		})
		for _, stop := range stops[1:] {
			stop()
		}
	})
}

// TestSplitParentsFirst: no child record is handled before every record of
// its parent settled and the parent is SHARD_END.
func TestSplitParentsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		parent := shardID(0)
		for i := range 50 {
			f.put(parent, "k"+strconv.Itoa(i%5), fmt.Sprintf("p%d", i))
		}
		a, b := f.Split(testStream, parent)
		for i := range 20 {
			f.put(a, "k", fmt.Sprintf("a%d", i))
			f.put(b, "k", fmt.Sprintf("b%d", i))
		}
		store := lease.NewMemory()
		h := newRecorder()
		var parentDone int
		h.outcome = func(m *message.Message) message.Outcome {
			if m.ShardID == parent {
				parentDone++
			} else if parentDone != 50 {
				t.Errorf("child record %s handled before the parent finished (%d/50)", m.Payload, parentDone)
			}
			return message.Ack()
		}
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", Concurrency: 1, ListInterval: 2 * time.Second}, handler(h))
		waitFor(t, "90 records", func() bool { return h.count() == 90 })
		stop()
		if cp := checkpointOf(t, store, parent); cp != lease.ShardEnd {
			t.Errorf("parent checkpoint %q, want SHARD_END", cp)
		}
	})
}

// TestChildrenStartWhenParentsEnd: the worker that ends a parent lists the
// shards and balances at once, so the children start within seconds of the
// parent's end, not at the next listing (ListInterval) or balancing
// (LeaseDuration/2), both far off here: a split while the parent is read
// (children not yet listed), then a merge of those children (the merged
// child listed at the first parent's end, taken at the second's), in
// virtual time.
func TestChildrenStartWhenParentsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const soon = 30 * time.Second // against the next listing's hour and the next balancing's 5 minutes
		f := newStream(1)
		parent := shardID(0)
		for i := range 50 {
			f.put(parent, "k", fmt.Sprintf("p%d", i))
		}
		h := newRecorder()
		cfg := Config{Kinesis: f, Store: lease.NewMemory(), Start: TrimHorizon(), Owner: "w1",
			ListInterval: time.Hour, LeaseDuration: 10 * time.Minute}
		_, stop := run(t, cfg, handler(h))
		defer stop()
		waitFor(t, "the parent's 50 records", func() bool { return h.on(parent) == 50 })

		split := time.Now()
		a, b := f.Split(testStream, parent)
		for i := range 20 {
			f.put(a, "k", fmt.Sprintf("a%d", i))
			f.put(b, "k", fmt.Sprintf("b%d", i))
		}
		waitFor(t, "the children's 40 records", func() bool { return h.on(a) == 20 && h.on(b) == 20 })
		if d := time.Since(split); d > soon {
			t.Errorf("split: the children's records were handled %v after the split, want within %v", d, soon)
		}

		merge := time.Now()
		child := f.Merge(testStream, a, b)
		f.put(child, "k", "m0")
		waitFor(t, "the merged child's record", func() bool { return h.on(child) == 1 })
		if d := time.Since(merge); d > soon {
			t.Errorf("merge: the child's record was handled %v after the merge, want within %v", d, soon)
		}
	})
}

// TestChildrenStartWhenParentTrimmed: a parent trimmed away while it is
// read counts as done for its children, which start within seconds, not
// after the next listing (an hour here) finds it gone.
func TestChildrenStartWhenParentTrimmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const soon = 30 * time.Second
		f := newStream(1)
		parent := shardID(0)
		for i := range 100 {
			f.put(parent, "k", fmt.Sprintf("p%d", i))
		}
		a, b := f.Split(testStream, parent)
		f.put(a, "k", "a0")
		f.put(b, "k", "b0")
		h := newRecorder()
		// One record per GetRecords: the parent takes 20 s to read.
		cfg := Config{Kinesis: f, Store: lease.NewMemory(), Start: TrimHorizon(), Owner: "w1", Limit: 1,
			ListInterval: time.Hour, LeaseDuration: 10 * time.Minute}
		_, stop := run(t, cfg, handler(h))
		defer stop()
		waitFor(t, "the parent's first record", func() bool { return h.on(parent) > 0 })
		if h.on(a)+h.on(b) != 0 {
			t.Fatal("a child started before its parent ended")
		}
		trimmed := time.Now()
		f.Trim(testStream, parent)
		waitFor(t, "the children's records", func() bool { return h.on(a) == 1 && h.on(b) == 1 })
		if d := time.Since(trimmed); d > soon {
			t.Errorf("the children's records were handled %v after the parent was trimmed, want within %v", d, soon)
		}
		if n := h.on(parent); n == 100 {
			t.Errorf("the parent was read to its end (%d records): the test did not trim it while it was read", n)
		}
	})
}

// listCounter counts ListShards calls.
type listCounter struct {
	*stream
	n atomic.Int64
}

func (l *listCounter) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	l.n.Add(1)
	return l.stream.ListShards(ctx, in, opts...)
}

// TestShardsEndingTogetherListedOnce: shards that end within a second of
// one another (a resharding of the whole stream) are listed for their
// children at most once a second, not once per shard.
func TestShardsEndingTogetherListedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &listCounter{stream: newStream(4)}
		var children []string
		for i := range 4 {
			// One record per GetRecords, 5 calls a second: the parents end
			// about 200 ms apart.
			for j := range 5 + i {
				f.put(shardID(i), "k", fmt.Sprintf("p%d-%d", i, j))
			}
			a, b := f.Split(testStream, shardID(i))
			f.put(a, "k", "a")
			f.put(b, "k", "b")
			children = append(children, a, b)
		}
		h := newRecorder()
		cfg := Config{Kinesis: f, Store: lease.NewMemory(), Start: TrimHorizon(), Owner: "w1", Limit: 1,
			ListInterval: time.Hour, LeaseDuration: 10 * time.Minute}
		_, stop := run(t, cfg, handler(h))
		defer stop()
		waitFor(t, "every child's record", func() bool {
			for _, c := range children {
				if h.on(c) != 1 {
					return false
				}
			}
			return true
		})
		// One listing at start, then one for the first parent's end and one
		// a second later for the other three.
		if n := f.n.Load(); n > 3 {
			t.Errorf("%d ListShards calls for 4 shards ending within a second, want at most 3", n)
		}
	})
}

// expiringStream answers every third GetRecords with
// ExpiredIteratorException.
type expiringStream struct {
	*stream
	n  int
	mu sync.Mutex
}

func (e *expiringStream) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	e.mu.Lock()
	e.n++
	expire := e.n%3 == 0
	e.mu.Unlock()
	if expire {
		return nil, &kinesistypes.ExpiredIteratorException{Message: aws.String("expired")}
	}
	return e.stream.GetRecords(ctx, in, opts...)
}

func TestExpiredIteratorNeverRewinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(2)
		f.fill(2, 300)
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: &expiringStream{stream: f}, Start: TrimHorizon(), Limit: 50, Owner: "w1"}, handler(h))
		waitFor(t, "600 records", func() bool { return h.count() == 600 })
		time.Sleep(5 * time.Second)
		stop()
		if h.count() != 600 {
			t.Errorf("%d records handled, want 600 exactly once", h.count())
		}
	})
}

// refreshFailingStream answers every third GetRecords with
// ExpiredIteratorException, as expiringStream does, and the
// GetShardIterator that follows each of those with an error (a throttled or
// failed call, or the fault layer's ExpiredIteratorException) the first two
// times.
type refreshFailingStream struct {
	expiringStream
	expired   int
	iterators int
	fails     int
	noIter    int // GetRecords calls without an iterator
}

func (e *refreshFailingStream) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if in.ShardIterator == nil {
		e.mu.Lock()
		e.noIter++
		e.mu.Unlock()
		return nil, errors.New("1 validation error(s) found: missing required field, GetRecordsInput.ShardIterator")
	}
	out, err := e.expiringStream.GetRecords(ctx, in, opts...)
	var expired *kinesistypes.ExpiredIteratorException
	if errors.As(err, &expired) {
		e.mu.Lock()
		e.expired++
		e.mu.Unlock()
	}
	return out, err
}

func (e *refreshFailingStream) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	e.mu.Lock()
	e.iterators++
	fail := e.expired > 0 && e.fails < 2
	if fail {
		e.fails++
	}
	e.mu.Unlock()
	if fail {
		return nil, &kinesistypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}
	}
	return e.stream.GetShardIterator(ctx, in, opts...)
}

// TestExpiredIteratorRefreshFails: when the GetShardIterator after an
// ExpiredIteratorException fails, the reader gets a new iterator again
// (after the last record read) instead of calling GetRecords without one.
// Before, it called GetRecords with no iterator for ever, and the shard
// stopped (fault soak seed 5: every shard of the fleet, after a burst of
// ExpiredIteratorException on GetRecords and GetShardIterator).
func TestExpiredIteratorRefreshFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		f.fill(1, 300)
		e := &refreshFailingStream{expiringStream: expiringStream{stream: f}}
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: e, Start: TrimHorizon(), Limit: 50, Owner: "w1"}, handler(h))
		waitFor(t, "300 records", func() bool { return h.count() == 300 })
		time.Sleep(5 * time.Second)
		stop()
		if h.count() != 300 {
			t.Errorf("%d records handled, want 300 exactly once", h.count())
		}
		if e.fails != 2 {
			t.Errorf("%d failed refreshes, want 2: the test did not test much", e.fails)
		}
		if e.noIter > 0 {
			t.Errorf("%d GetRecords calls without a shard iterator", e.noIter)
		}
	})
}

func TestSeekHorizon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		f.fill(1, 20)
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Start: TrimHorizon(), Owner: "w1"}, handler(h))
		waitFor(t, "20", func() bool { return h.count() == 20 })
		if err := c.Seek(t.Context(), TrimHorizon()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "40", func() bool { return h.count() == 40 })
		stop()
	})
}

func TestBatchHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(2)
		f.fill(2, 120)
		var mu sync.Mutex
		var sizes []int
		n := 0
		bh := BatchHandlerFunc(func(_ context.Context, ms []*message.Message) []message.Outcome {
			mu.Lock()
			sizes = append(sizes, len(ms))
			n += len(ms)
			mu.Unlock()
			outs := make([]message.Outcome, len(ms))
			for i := range outs {
				outs[i] = message.Ack()
			}
			return outs
		})
		store := lease.NewMemory()
		_, stop := run(t, Config{Kinesis: f, Store: store, BatchSize: 50, Start: TrimHorizon(), Owner: "w1"}, engineConfig{BatchHandler: bh})
		waitFor(t, "240", func() bool { mu.Lock(); defer mu.Unlock(); return n == 240 })
		stop()
		for _, s := range sizes {
			if s > 50 {
				t.Errorf("batch of %d > 50", s)
			}
		}
	})
}

func TestNewValidates(t *testing.T) {
	f := newStream(1)
	h := newRecorder()
	e := newConsumer(t, Config{Kinesis: f}, handler(h)).cfg.Engine
	for name, cfg := range map[string]Config{
		"no stream": {Kinesis: f, Engine: e},
		"no client": {Stream: "s", Engine: e},
		"no engine": {Stream: "s", Kinesis: f},
		"limit":     {Stream: "s", Kinesis: f, Engine: e, Limit: 10001},
		"negative":  {Stream: "s", Kinesis: f, Engine: e, RetryBackoff: -1},
	} {
		if _, err := New(cfg); err == nil || !strings.HasPrefix(err.Error(), "consumer: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// TestLostLeaseCannotCheckpoint: when another owner takes a shard (a steal
// seen at renewal), this worker stops it and never writes its checkpoint
// again.
func TestLostLeaseCannotCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		f.fill(1, 10)
		store := lease.NewMemory()
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", LeaseDuration: 3 * time.Second}, handler(h))
		waitFor(t, "10", func() bool { return h.count() == 10 })
		time.Sleep(2 * time.Second)
		k := lease.Key{Stream: testStream, ShardID: id}
		l, _ := store.Get(t.Context(), k)
		stolen, err := store.Take(t.Context(), l, "thief")
		if err != nil {
			t.Fatal(err)
		}
		// The thief keeps its lease alive, as a live worker would.
		thiefDone := make(chan struct{})
		quit := make(chan struct{})
		go func() {
			defer close(thiefDone)
			held := stolen
			for {
				select {
				case <-quit:
					return
				case <-time.After(time.Second):
				}
				if l, err := store.Renew(context.Background(), held); err == nil {
					held = l
				}
			}
		}()
		waitFor(t, "the shard to be dropped", func() bool { return len(c.Owned()) == 0 })
		for i := range 5 {
			f.put(id, "k", fmt.Sprintf("late-%d", i))
		}
		time.Sleep(10 * time.Second)
		stop()
		close(quit)
		<-thiefDone
		now, _ := store.Get(context.Background(), k)
		if now.Owner != "thief" || now.Checkpoint != stolen.Checkpoint {
			t.Errorf("after the steal w1 wrote to the lease: %+v (stolen as %+v)", now, stolen)
		}
		if h.count() != 10 {
			t.Errorf("w1 handled %d records, want 10: it must not read a shard it lost", h.count())
		}
	})
}

// TestSplitWithLatest: with the default LATEST start, a child of a split
// that happens while the consumer runs is read from its first record, so no
// child record is lost.
func TestSplitWithLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		parent := shardID(0)
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: f, Owner: "w1", ListInterval: 2 * time.Second}, handler(h))
		time.Sleep(3 * time.Second) // the reader sits at LATEST
		for i := range 10 {
			f.put(parent, "k", fmt.Sprintf("p%d", i))
		}
		waitFor(t, "parent records", func() bool { return h.count() == 10 })
		a, b := f.Split(testStream, parent)
		for i := range 10 {
			f.put(a, "k", fmt.Sprintf("a%d", i))
			f.put(b, "k", fmt.Sprintf("b%d", i))
		}
		waitFor(t, "child records", func() bool { return h.count() == 30 })
		stop()
	})
}

// TestLatestOnAResharedStream: a consumer starting at LATEST on a stream
// resharded before its time reads neither the old parent nor the old
// records of the children, only what arrives later.
func TestLatestOnAResharedStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		parent := shardID(0)
		f.put(parent, "k", "old-parent")
		a, b := f.Split(testStream, parent)
		f.put(a, "k", "old-a")
		f.put(b, "k", "old-b")
		// Older than the few seconds before the start that a pinned tip
		// reads (latestSkew).
		time.Sleep(2 * latestSkew)
		store := lease.NewMemory()
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Store: store, Owner: "w1"}, handler(h))
		waitFor(t, "both children owned", func() bool { return len(c.Owned()) == 2 })
		time.Sleep(2 * time.Second)
		f.put(a, "k", "new-a")
		f.put(b, "k", "new-b")
		waitFor(t, "new records", func() bool { return h.count() >= 2 })
		time.Sleep(3 * time.Second)
		stop()
		got := slices.Sorted(slices.Values(h.order))
		if diff := cmp.Diff([]string{a + "/new-a", b + "/new-b"}, got); diff != "" {
			t.Errorf("handled (-want +got):\n%s", diff)
		}
		if _, err := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: parent}); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("the old parent got a lease row: %v", err)
		}
	})
}

// TestStartAtTimestampReadsClosedParent (fault: start at a timestamp
// skipped a closed parent): a fresh consumer at AtTimestamp(T) on a stream
// split after T reads the parent's records from T to the split, then the
// children's.
func TestStartAtTimestampReadsClosedParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		parent := shardID(0)
		for i := range 3 {
			f.put(parent, "k", fmt.Sprintf("before-%d", i))
		}
		time.Sleep(time.Second)
		at := time.Now()
		for i := range 3 {
			f.put(parent, "k", fmt.Sprintf("after-%d", i))
		}
		time.Sleep(time.Second)
		a, b := f.Split(testStream, parent)
		f.put(a, "k", "child-a")
		f.put(b, "k", "child-b")
		time.Sleep(time.Second)
		store := lease.NewMemory()
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: AtTimestamp(at), Owner: "w1", ListInterval: 2 * time.Second}, handler(h))
		waitFor(t, "5 records", func() bool { return h.count() >= 5 })
		time.Sleep(5 * time.Second)
		stop()
		got := slices.Sorted(slices.Values(h.order))
		want := []string{a + "/child-a", parent + "/after-0", parent + "/after-1", parent + "/after-2", b + "/child-b"}
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("handled (-want +got):\n%s", diff)
		}
	})
}

// TestSeekSequenceOneShard: a seek to a sequence number moves that shard
// only, redelivering from exactly that record; the other shard is untouched.
func TestSeekSequenceOneShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(2)
		s0, s1 := shardID(0), shardID(1)
		var seqs []string
		for i := range 10 {
			seqs = append(seqs, f.put(s0, "k", strconv.Itoa(i)))
			f.put(s1, "k", strconv.Itoa(i))
		}
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Start: TrimHorizon(), Owner: "w1"}, handler(h))
		waitFor(t, "20", func() bool { return h.count() == 20 })
		if err := c.Seek(t.Context(), AtSequence(s0, seqs[6])); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "4 more", func() bool { return h.count() == 24 })
		time.Sleep(3 * time.Second)
		stop()
		if diff := cmp.Diff([]string{"6", "7", "8", "9"}, h.handled[s0][10:]); diff != "" {
			t.Errorf("after the seek (-want +got):\n%s", diff)
		}
		if len(h.handled[s1]) != 10 {
			t.Errorf("the other shard was moved: %d records", len(h.handled[s1]))
		}
		if err := c.Seek(t.Context(), AtSequence("shardId-000000000099", "1")); err == nil {
			t.Error("seek on a shard not owned succeeded")
		}
	})
}

// TestSeekRefusesBadSequence: a sequence number that is not one (a lease's
// LATEST@ checkpoint copied from bootstrap leases, a typo) is an error, and
// the shard reads on; it used to restart the reader on it, which then asked
// Kinesis for an iterator every second, never read the shard again and
// kept its lease.
func TestSeekRefusesBadSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		s0 := shardID(0)
		f.put(s0, "k", "0")
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Start: TrimHorizon(), Owner: "w1"}, handler(h))
		defer stop()
		waitFor(t, "the first record", func() bool { return h.count() == 1 })
		for _, seq := range []string{"", "LATEST@1765000000000", "49xyz", "007"} {
			if err := c.Seek(t.Context(), AtSequence(s0, seq)); err == nil || !strings.Contains(err.Error(), "not a sequence number") {
				t.Errorf("Seek to %q: %v, want an error saying it is not a sequence number", seq, err)
			}
		}
		f.put(s0, "k", "1")
		waitFor(t, "the shard read on", func() bool { return h.count() == 2 })
	})
}

// TestConcurrentSeeks (fault: two concurrent Seeks leaked a reader and froze
// the shard): many seeks at once leave one reader per shard, the shard's
// records in flight drain, and records written afterwards are read once
// per seek at most.
func TestConcurrentSeeks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		f.putNumbered(id, 200, true)
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Start: TrimHorizon(), Owner: "w1", Limit: 10}, handler(h))
		waitFor(t, "the first records", func() bool { return h.count() >= 20 })
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if err := c.Seek(context.Background(), AtSequence(id, f.Records(testStream)[i].SequenceNumber)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		before := h.count()
		f.put(id, "late", "late")
		waitFor(t, "the late record", func() bool { return h.times()["late"] >= 1 })
		time.Sleep(5 * time.Second)
		if n := h.times()["late"]; n != 1 {
			t.Errorf("the late record was handled %d times, want once: one reader per shard", n)
		}
		c.mu.Lock()
		s := c.shards[id]
		c.mu.Unlock()
		if s == nil {
			t.Fatal("shard not held")
		}
		if n := s.es.Inflight(); n != 0 {
			t.Errorf("%d records in flight after the seeks settled, want 0 (the shard froze)", n)
		}
		if p := s.es.Watermark().Pending(); p != 0 {
			t.Errorf("watermark pending %d, want 0", p)
		}
		stop()
		if h.count() <= before {
			t.Error("nothing handled after the seeks")
		}
	})
}

// TestSeekOnEndedShard (fault: a seek on an ended shard could write
// SHARD_END while a record was unsettled): the reader reaches the end of a
// closed shard while a record runs; a seek then starts a new epoch; the
// shard is checkpointed SHARD_END only once the new epoch's records all
// settled.
func TestSeekOnEndedShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		f.putNumbered(id, 5, true)
		f.Split(testStream, id)
		store := lease.NewMemory()
		release := make(chan struct{})
		h := newRecorder()
		var blocked sync.Once
		h.outcome = func(m *message.Message) message.Outcome {
			if string(m.Payload) == "r2" {
				first := false
				blocked.Do(func() { first = true })
				if first {
					<-release
				}
			}
			return message.Ack()
		}
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1"}, handler(h))
		waitFor(t, "the other records", func() bool { return h.count() == 5 })
		synctest.Wait() // the reader has read to the end
		if err := c.Seek(t.Context(), TrimHorizon()); err != nil {
			t.Fatal(err)
		}
		close(release) // the first r2 settles now: stale
		synctest.Wait()
		l, _ := store.Get(t.Context(), lease.Key{Stream: testStream, ShardID: id})
		if l.Checkpoint == lease.ShardEnd && h.count() < 10 {
			t.Fatalf("SHARD_END written with only %d of 10 deliveries handled", h.count())
		}
		waitFor(t, "the second pass", func() bool { return h.count() == 10 })
		waitFor(t, "SHARD_END", func() bool { return checkpointOf(t, store, id) == lease.ShardEnd })
		stop()
	})
}

func TestBatchSizeRaisesLimit(t *testing.T) {
	bh := BatchHandlerFunc(func(context.Context, []*message.Message) []message.Outcome { return nil })
	for _, tt := range []struct{ size, limit, want int }{{0, 0, 1000}, {5000, 0, 5000}, {10000, 0, 10000}, {5000, 300, 300}} {
		c := newConsumer(t, Config{Kinesis: newStream(1), BatchSize: tt.size, Limit: tt.limit}, engineConfig{BatchHandler: bh})
		if c.cfg.Limit != tt.want {
			t.Errorf("batch size %d, limit %d: GetRecords limit %d, want %d", tt.size, tt.limit, c.cfg.Limit, tt.want)
		}
	}
}

// TestReadAheadOneBatch: while a reader waits on the full channel, its
// fetcher has read exactly one batch ahead and waits too: handlers set the
// pace, and a shard holds at most two batches beyond what it handed off.
func TestReadAheadOneBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 100
		f := newStream(1)
		f.fill(1, 1000)
		release := make(chan struct{})
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome {
			<-release
			return message.Ack()
		}
		c, stop := run(t, Config{Kinesis: f, Store: lease.NewMemory(), Start: TrimHorizon(), Limit: limit, Concurrency: 1, MaxWaiting: 1, Owner: "w1"}, handler(h))
		time.Sleep(5 * time.Second) // far more than the reads need
		synctest.Wait()
		read := int(f.read.Load())
		handedOff := c.shards[shardID(0)].es.Inflight()
		if len(c.ch) != cap(c.ch) || cap(c.ch)*chunkSize != ChannelSize {
			t.Fatalf("channel holds %d runs of up to %d deliveries, want it full (%d runs, %d deliveries)", len(c.ch), chunkSize, cap(c.ch), ChannelSize)
		}
		// Registered (in flight): the batch being handed off, whole (the
		// channel, the lane's queue, the handler and the rest of it); held
		// by the fetcher: exactly the batch read ahead.
		if handedOff != limit || read != 2*limit {
			t.Errorf("read %d records, %d registered: want one batch registered (%d) and one read ahead", read, handedOff, limit)
		}
		close(release)
		waitFor(t, "1,000 records", func() bool { return h.count() == 1000 })
		stop()
	})
}

// orderStore checks that no lease row is written before its parents' rows,
// and counts how many Ensure and Take calls overlapped.
type orderStore struct {
	lease.Store
	t       *testing.T
	mu      sync.Mutex
	now     int
	maxBusy map[string]int
	scans   int
	// scansAtTake is the number of scans before the first Take.
	scansAtTake int
}

func (o *orderStore) enter(op string) func() {
	o.mu.Lock()
	o.now++
	if o.now > o.maxBusy[op] {
		o.maxBusy[op] = o.now
	}
	o.mu.Unlock()
	time.Sleep(10 * time.Millisecond) // a store round trip
	return func() {
		o.mu.Lock()
		o.now--
		o.mu.Unlock()
	}
}

func (o *orderStore) Ensure(ctx context.Context, k lease.Key, parents []string) (lease.Lease, error) {
	for _, p := range parents {
		if _, err := o.Store.Get(ctx, lease.Key{Stream: k.Stream, ShardID: p}); err != nil {
			o.t.Errorf("row of %s written before the row of its parent %s: %v", k.ShardID, p, err)
		}
	}
	defer o.enter("Ensure")() // the row is written at the end of the round trip
	return o.Store.Ensure(ctx, k, parents)
}

func (o *orderStore) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	o.mu.Lock()
	o.scans++
	o.mu.Unlock()
	return o.Store.Snapshot(ctx, stream)
}

func (o *orderStore) Take(ctx context.Context, held lease.Lease, owner string) (lease.Lease, error) {
	o.mu.Lock()
	if o.scansAtTake == 0 {
		o.scansAtTake = o.scans
	}
	o.mu.Unlock()
	defer o.enter("Take")()
	return o.Store.Take(ctx, held, owner)
}

// TestStartUpConcurrentParentsFirst: at start-up lease rows are written
// concurrently but parents first, and free leases are taken concurrently.
func TestStartUpConcurrentParentsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(6)
		a, _ := f.Split(testStream, shardID(0))
		f.Split(testStream, a)
		store := &orderStore{Store: lease.NewMemory(), t: t, maxBusy: map[string]int{}}
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1"}, handler(h))
		waitFor(t, "leases of the open shards", func() bool { return len(c.Owned()) >= 6 })
		store.mu.Lock()
		if store.scansAtTake != 1 {
			t.Errorf("%d lease-table scans before the first take, want 1 (balance uses the rows discover read and wrote)", store.scansAtTake)
		}
		store.mu.Unlock()
		stop()
		ls, _ := leasesOf(store.Snapshot(context.Background(), testStream))
		if len(ls) != 10 {
			t.Errorf("%d lease rows, want 10", len(ls))
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		if store.maxBusy["Ensure"] < 2 || store.maxBusy["Take"] < 2 {
			t.Errorf("at most %d Ensure and %d Take calls at once, want concurrent start-up", store.maxBusy["Ensure"], store.maxBusy["Take"])
		}
	})
}

// TestMissingStreamAtStart: Run returns at once with an error naming the
// stream when it does not exist, instead of retrying forever. It matches
// the one ErrStreamNotFound, publish's too.
func TestMissingStreamAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConsumer(t, Config{Stream: "nope", Kinesis: newStream(1), Owner: "w1"}, handler(newRecorder()))
		err := c.Run(t.Context())
		if !errors.Is(err, ErrStreamNotFound) || !strings.HasPrefix(err.Error(), "consumer: stream not found: nope (ListShards:") {
			t.Errorf("Run = %v, want ErrStreamNotFound naming the stream", err)
		}
		if !errors.Is(err, publish.ErrStreamNotFound) {
			t.Errorf("Run = %v, does not match publish.ErrStreamNotFound", err)
		}
	})
}

// TestThrottledReadBacksOff: ProvisionedThroughputExceededException makes
// the reader back off (doubling from the 200 ms spacing) and call again with
// the same iterator, without a new one; every record arrives once.
func TestThrottledReadBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		f.fill(1, 30)
		var mu sync.Mutex
		var calls []time.Time
		throttle := 3
		f.ReadFail = func(api, _ string) error {
			if api != "GetRecords" {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now())
			if throttle > 0 {
				throttle--
				return &kinesistypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}
			}
			return nil
		}
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: f, Start: TrimHorizon(), Owner: "w1", Limit: 10}, handler(h))
		waitFor(t, "30 records", func() bool { return h.count() == 30 })
		stop()
		if n := f.Calls("GetShardIterator"); n != 1 {
			t.Errorf("%d GetShardIterator calls, want 1: a throttled read keeps its iterator", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(calls) < 4 {
			t.Fatalf("%d GetRecords calls, want at least 4", len(calls))
		}
		for i := 1; i <= 3; i++ {
			want := minCallInterval << i // 400 ms, 800 ms, 1.6 s
			if gap := calls[i].Sub(calls[i-1]); gap < want {
				t.Errorf("call %d came %v after a throttled one, want at least %v", i, gap, want)
			}
		}
		if got := len(h.handled[shardID(0)]); got != 30 {
			t.Errorf("handled %d records, want 30 once each", got)
		}
	})
}

// TestBlockedReaderKeepsLease: a worker whose handler blocks (its reader
// waits on the full channel for half a minute) keeps renewing its lease on
// its own timer: another worker never finds it expired.
func TestBlockedReaderKeepsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		f.fill(1, 200)
		store := lease.NewMemory()
		release := make(chan struct{})
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome {
			<-release
			return message.Ack()
		}
		a, stopA := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "a", LeaseDuration: 3 * time.Second, Limit: 100}, handler(h))
		waitFor(t, "a's lease", func() bool { return len(a.Owned()) == 1 })
		b, stopB := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "b", LeaseDuration: 3 * time.Second}, handler(newRecorder()))
		time.Sleep(30 * time.Second) // ten lease durations with a blocked reader
		if len(b.Owned()) != 0 || len(a.Owned()) != 1 {
			t.Errorf("after 30 s blocked: a owns %v, b owns %v; want the lease kept by a", a.Owned(), b.Owned())
		}
		close(release)
		waitFor(t, "200 records", func() bool { return h.count() == 200 })
		stopB()
		stopA()
	})
}

// TestExpiredLeaseTaken: a lease whose owner died (its counter never
// changes) is taken by a live worker once its own clock saw the counter
// unchanged for the lease duration, and not before; reading resumes after
// the dead owner's checkpoint.
func TestExpiredLeaseTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		seqs := f.putNumbered(id, 10, false)
		store := lease.NewMemory()
		k := lease.Key{Stream: testStream, ShardID: id}
		l, err := store.Ensure(t.Context(), k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l, err = store.Take(t.Context(), l, "dead"); err != nil {
			t.Fatal(err)
		}
		if _, err = store.Checkpoint(t.Context(), l, seqs[5], 0); err != nil {
			t.Fatal(err)
		}
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "live", LeaseDuration: 4 * time.Second}, handler(h))
		time.Sleep(3 * time.Second)
		if len(c.Owned()) != 0 {
			t.Errorf("lease taken after 3 s, before the 4 s lease duration passed")
		}
		waitFor(t, "the expired lease", func() bool { return len(c.Owned()) == 1 })
		waitFor(t, "the records after the checkpoint", func() bool { return h.count() == 4 })
		stop()
		if got := h.handled[id]; !slices.Equal(got, []string{"r6", "r7", "r8", "r9"}) {
			t.Errorf("handled %v, want r6..r9 (after the dead owner's checkpoint)", got)
		}
	})
}
