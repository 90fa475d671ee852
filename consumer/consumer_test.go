package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/message"
)

// recorder is a handler that records what it handled, per shard, and can
// be told what to return.
type recorder struct {
	mu      sync.Mutex
	handled map[string][]string // shard -> payloads in handling order
	order   []string            // shard/payload, global order
	outcome func(m *message.Message) message.Outcome
}

func newRecorder() *recorder { return &recorder{handled: map[string][]string{}} }

func (r *recorder) HandleRecord(_ context.Context, m *message.Message) message.Outcome {
	r.mu.Lock()
	r.handled[m.ShardID] = append(r.handled[m.ShardID], string(m.Payload))
	r.order = append(r.order, m.ShardID+"/"+string(m.Payload))
	r.mu.Unlock()
	if r.outcome != nil {
		return r.outcome(m)
	}
	return message.Ack()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// waitFor advances the fake clock until cond holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 600 {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func fill(f *fakeStream, perShard int) map[string]string {
	last := map[string]string{}
	for _, s := range f.shards {
		for i := range perShard {
			last[s.id] = f.put(s.id, fmt.Sprintf("key-%d", i%7), fmt.Sprintf("%s-%d", s.id, i))
		}
	}
	return last
}

func run(t *testing.T, cfg Config) (*Consumer, func()) {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return c, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func TestOneWorkerFourShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(4)
		last := fill(f, 250)
		store := lease.NewMemory()
		h := newRecorder()
		c, stop := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: h, Start: TrimHorizon(), Limit: 100, Owner: "w1"})
		waitFor(t, "1,000 records", func() bool { return h.count() == 1000 })
		if got := c.Owned(); len(got) != 4 {
			t.Errorf("owned %v", got)
		}
		time.Sleep(2 * time.Second) // a checkpoint interval
		ls, _ := store.List(t.Context(), "s")
		for _, l := range ls {
			if l.Checkpoint != last[l.Key.ShardID] || l.Owner != "w1" {
				t.Errorf("%s: checkpoint %s owner %q, want %s (written within the interval)", l.Key.ShardID, l.Checkpoint, l.Owner, last[l.Key.ShardID])
			}
		}
		stop()
		ls, _ = store.List(context.Background(), "s")
		for _, l := range ls {
			if l.Checkpoint != last[l.Key.ShardID] || l.Owner != "" {
				t.Errorf("after stop %s: checkpoint %s owner %q", l.Key.ShardID, l.Checkpoint, l.Owner)
			}
		}
		for _, s := range f.shards {
			want := make([]string, 250)
			for i := range want {
				want[i] = fmt.Sprintf("%s-%d", s.id, i)
			}
			got := h.handled[s.id]
			slices.SortFunc(got, func(a, b string) int { return cmpIndex(a, b) })
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", s.id, diff)
			}
		}
	})
}

func cmpIndex(a, b string) int {
	var x, y int
	fmt.Sscanf(a[len("shardId-000000000000-"):], "%d", &x)
	fmt.Sscanf(b[len("shardId-000000000000-"):], "%d", &y)
	return x - y
}

// TestRetryHoldsCheckpoint: an unsettled record holds the checkpoint while
// the reader goes on; a restart reads again from it.
func TestRetryHoldsCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(1)
		id := f.shards[0].id
		var seqs []string
		for i := range 10 {
			seqs = append(seqs, f.put(id, "k"+fmt.Sprint(i), fmt.Sprint(i)))
		}
		store := lease.NewMemory()
		h := newRecorder()
		h.outcome = func(m *message.Message) message.Outcome {
			if string(m.Payload) == "4" {
				return message.Retry(errors.New("not now"))
			}
			return message.Ack()
		}
		_, stop := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: h, Start: TrimHorizon(), Owner: "w1"})
		waitFor(t, "10 records", func() bool { return h.count() == 10 })
		stop()
		l, _ := store.Get(context.Background(), lease.Key{Stream: "s", ShardID: id})
		if l.Checkpoint != seqs[3] {
			t.Fatalf("checkpoint %s, want %s (just before the retried record)", l.Checkpoint, seqs[3])
		}
		// The next owner reads again from the retried record.
		h2 := newRecorder()
		_, stop2 := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: h2, Start: TrimHorizon(), Owner: "w2"})
		waitFor(t, "redelivery", func() bool { return h2.count() == 6 })
		stop2()
		got := h2.handled[id]
		slices.Sort(got)
		if diff := cmp.Diff([]string{"4", "5", "6", "7", "8", "9"}, got); diff != "" {
			t.Errorf("redelivered (-want +got):\n%s", diff)
		}
	})
}

func TestWorkersShareShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(6)
		store := lease.NewMemory()
		var cs []*Consumer
		var stops []func()
		for i := range 3 {
			c, stop := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: newRecorder(), Owner: fmt.Sprintf("w%d", i), LeaseDuration: 3 * time.Second})
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
		c4, stop4 := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: newRecorder(), Owner: "w3", LeaseDuration: 3 * time.Second})
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
		f := newFakeStream(1)
		parent := f.shards[0].id
		for i := range 50 {
			f.put(parent, "k"+fmt.Sprint(i%5), fmt.Sprintf("p%d", i))
		}
		a, b := f.split(parent)
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
		_, stop := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: h, Start: TrimHorizon(), Owner: "w1", Concurrency: 1, ListInterval: 2 * time.Second})
		waitFor(t, "90 records", func() bool { return h.count() == 90 })
		stop()
		l, _ := store.Get(context.Background(), lease.Key{Stream: "s", ShardID: parent})
		if l.Checkpoint != lease.ShardEnd {
			t.Errorf("parent checkpoint %q, want SHARD_END", l.Checkpoint)
		}
	})
}

func TestExpiredIteratorNeverRewinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(2)
		fill(f, 300)
		f.expireEvery = 3
		h := newRecorder()
		_, stop := run(t, Config{Stream: "s", Kinesis: f, Handler: h, Start: TrimHorizon(), Limit: 50, Owner: "w1"})
		waitFor(t, "600 records", func() bool { return h.count() == 600 })
		time.Sleep(5 * time.Second)
		stop()
		if h.count() != 600 {
			t.Errorf("%d records handled, want 600 exactly once", h.count())
		}
	})
}

func TestSeekHorizon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(1)
		fill(f, 20)
		h := newRecorder()
		c, stop := run(t, Config{Stream: "s", Kinesis: f, Handler: h, Start: TrimHorizon(), Owner: "w1"})
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
		f := newFakeStream(2)
		fill(f, 120)
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
		_, stop := run(t, Config{Stream: "s", Kinesis: f, Store: store, BatchHandler: bh, BatchSize: 50, Start: TrimHorizon(), Owner: "w1"})
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
	f := newFakeStream(1)
	h := newRecorder()
	for name, cfg := range map[string]Config{
		"no stream":  {Kinesis: f, Handler: h},
		"no client":  {Stream: "s", Handler: h},
		"no handler": {Stream: "s", Kinesis: f},
		"limit":      {Stream: "s", Kinesis: f, Handler: h, Limit: 10001},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLostLeaseCannotCheckpoint: when another owner takes a shard (a steal
// seen at renewal), this worker stops it and never writes its checkpoint
// again.
func TestLostLeaseCannotCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(1)
		id := f.shards[0].id
		fill(f, 10)
		store := lease.NewMemory()
		h := newRecorder()
		c, stop := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: h, Start: TrimHorizon(), Owner: "w1", LeaseDuration: 3 * time.Second})
		waitFor(t, "10", func() bool { return h.count() == 10 })
		time.Sleep(2 * time.Second)
		k := lease.Key{Stream: "s", ShardID: id}
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
		f := newFakeStream(1)
		parent := f.shards[0].id
		h := newRecorder()
		_, stop := run(t, Config{Stream: "s", Kinesis: f, Handler: h, Owner: "w1", ListInterval: 2 * time.Second})
		time.Sleep(3 * time.Second) // the reader sits at LATEST
		for i := range 10 {
			f.put(parent, "k", fmt.Sprintf("p%d", i))
		}
		waitFor(t, "parent records", func() bool { return h.count() == 10 })
		a, b := f.split(parent)
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
		f := newFakeStream(1)
		parent := f.shards[0].id
		f.put(parent, "k", "old-parent")
		a, b := f.split(parent)
		f.put(a, "k", "old-a")
		f.put(b, "k", "old-b")
		store := lease.NewMemory()
		h := newRecorder()
		c, stop := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: h, Owner: "w1"})
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
		if _, err := store.Get(context.Background(), lease.Key{Stream: "s", ShardID: parent}); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("the old parent got a lease row: %v", err)
		}
	})
}

// TestSeekSequenceOneShard: a seek to a sequence number moves that shard
// only, redelivering from exactly that record; the other shard is untouched.
func TestSeekSequenceOneShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(2)
		s0, s1 := f.shards[0].id, f.shards[1].id
		var seqs []string
		for i := range 10 {
			seqs = append(seqs, f.put(s0, "k", fmt.Sprint(i)))
			f.put(s1, "k", fmt.Sprint(i))
		}
		h := newRecorder()
		c, stop := run(t, Config{Stream: "s", Kinesis: f, Handler: h, Start: TrimHorizon(), Owner: "w1"})
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

func TestBatchSizeRaisesLimit(t *testing.T) {
	bh := BatchHandlerFunc(func(context.Context, []*message.Message) []message.Outcome { return nil })
	for _, tt := range []struct{ size, limit, want int }{{0, 0, 1000}, {5000, 0, 5000}, {10000, 0, 10000}, {5000, 300, 300}} {
		c, err := New(Config{Stream: "s", Kinesis: newFakeStream(1), BatchHandler: bh, BatchSize: tt.size, Limit: tt.limit})
		if err != nil {
			t.Fatal(err)
		}
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
		f := newFakeStream(1)
		fill(f, 1000)
		release := make(chan struct{})
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome {
			<-release
			return message.Ack()
		}
		c, stop := run(t, Config{Stream: "s", Kinesis: f, Store: lease.NewMemory(), Handler: h, Start: TrimHorizon(), Limit: limit, Concurrency: 1, Owner: "w1"})
		time.Sleep(5 * time.Second) // far more than the reads need
		synctest.Wait()
		f.mu.Lock()
		read, calls := f.read, f.calls["GetRecords"]
		f.mu.Unlock()
		handedOff := int(c.inflight.Load())
		if len(c.ch) != ChannelSize {
			t.Fatalf("channel holds %d deliveries, want it full (%d)", len(c.ch), ChannelSize)
		}
		// Handed off: the channel, the lane's queue and the handler; held
		// by the shard: the rest of the batch being handed off plus the
		// batch read ahead.
		if held := read - handedOff; held <= limit || held > 2*limit {
			t.Errorf("read %d records in %d calls, %d handed off: the shard holds %d, want one batch read ahead (%d < held ≤ %d)", read, calls, handedOff, held, limit, 2*limit)
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
	lists   int
	// listsAtTake is the number of listings before the first Take.
	listsAtTake int
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

func (o *orderStore) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	o.mu.Lock()
	o.lists++
	o.mu.Unlock()
	return o.Store.List(ctx, stream)
}

func (o *orderStore) Take(ctx context.Context, held lease.Lease, owner string) (lease.Lease, error) {
	o.mu.Lock()
	if o.listsAtTake == 0 {
		o.listsAtTake = o.lists
	}
	o.mu.Unlock()
	defer o.enter("Take")()
	return o.Store.Take(ctx, held, owner)
}

// TestStartUpConcurrentParentsFirst: at start-up lease rows are written
// concurrently but parents first, and free leases are taken concurrently.
func TestStartUpConcurrentParentsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(6)
		a, _ := f.split(f.shards[0].id)
		f.split(a)
		store := &orderStore{Store: lease.NewMemory(), t: t, maxBusy: map[string]int{}}
		h := newRecorder()
		c, stop := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: h, Start: TrimHorizon(), Owner: "w1"})
		waitFor(t, "leases of the open shards", func() bool { return len(c.Owned()) >= 6 })
		store.mu.Lock()
		if store.listsAtTake != 1 {
			t.Errorf("%d lease listings before the first take, want 1 (balance uses the rows discover read and wrote)", store.listsAtTake)
		}
		store.mu.Unlock()
		stop()
		ls, _ := store.List(context.Background(), "s")
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

// missingStream is a Kinesis without the stream.
type missingStream struct{ *fakeStream }

func (missingStream) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return nil, &kinesistypes.ResourceNotFoundException{Message: aws.String("Stream s under account 000000000000 not found.")}
}

// TestMissingStreamAtStart: Run returns at once with an error naming the
// stream when it does not exist, instead of retrying forever.
func TestMissingStreamAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New(Config{Stream: "s", Kinesis: missingStream{newFakeStream(1)}, Handler: newRecorder(), Owner: "w1"})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Run(t.Context())
		if !errors.Is(err, ErrStreamNotFound) || !strings.Contains(err.Error(), `s (ListShards: Stream s under account`) {
			t.Errorf("Run = %v, want ErrStreamNotFound naming the stream", err)
		}
	})
}

// TestThrottledReadBacksOff: ProvisionedThroughputExceededException makes
// the reader back off (doubling from the 200 ms spacing) and call again with
// the same iterator, without a new one; every record arrives once.
func TestThrottledReadBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(1)
		fill(f, 30)
		f.throttle = 3
		h := newRecorder()
		_, stop := run(t, Config{Stream: "s", Kinesis: f, Handler: h, Start: TrimHorizon(), Owner: "w1", Limit: 10})
		waitFor(t, "30 records", func() bool { return h.count() == 30 })
		stop()
		f.mu.Lock()
		defer f.mu.Unlock()
		if n := f.calls["GetShardIterator"]; n != 1 {
			t.Errorf("%d GetShardIterator calls, want 1: a throttled read keeps its iterator", n)
		}
		calls := f.getRecords
		if len(calls) < 4 {
			t.Fatalf("%d GetRecords calls, want at least 4", len(calls))
		}
		for i := 1; i <= 3; i++ {
			if calls[i].iter != calls[0].iter {
				t.Errorf("call %d used iterator %s after a throttled call with %s", i, calls[i].iter, calls[0].iter)
			}
			want := minCallInterval << i // 400 ms, 800 ms, 1.6 s
			if gap := calls[i].at.Sub(calls[i-1].at); gap < want {
				t.Errorf("call %d came %v after a throttled one, want at least %v", i, gap, want)
			}
		}
		if got := len(h.handled[f.shards[0].id]); got != 30 {
			t.Errorf("handled %d records, want 30 once each", got)
		}
	})
}

// TestBlockedReaderKeepsLease: a worker whose handler blocks (its reader
// waits on the full channel for half a minute) keeps renewing its lease on
// its own timer: another worker never finds it expired.
func TestBlockedReaderKeepsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStream(1)
		fill(f, 200)
		store := lease.NewMemory()
		release := make(chan struct{})
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome {
			<-release
			return message.Ack()
		}
		a, stopA := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: h, Start: TrimHorizon(), Owner: "a", LeaseDuration: 3 * time.Second, Limit: 100})
		waitFor(t, "a's lease", func() bool { return len(a.Owned()) == 1 })
		b, stopB := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: newRecorder(), Start: TrimHorizon(), Owner: "b", LeaseDuration: 3 * time.Second})
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
		f := newFakeStream(1)
		id := f.shards[0].id
		seqs := f.putNumbered(id, 10, false)
		store := lease.NewMemory()
		k := lease.Key{Stream: "s", ShardID: id}
		l, err := store.Ensure(t.Context(), k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l, err = store.Take(t.Context(), l, "dead"); err != nil {
			t.Fatal(err)
		}
		if _, err = store.Checkpoint(t.Context(), l, seqs[5]); err != nil {
			t.Fatal(err)
		}
		h := newRecorder()
		c, stop := run(t, Config{Stream: "s", Kinesis: f, Store: store, Handler: h, Start: TrimHorizon(), Owner: "live", LeaseDuration: 4 * time.Second})
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
