package consumer

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/hooks"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/retry"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
)

// slowStream returns a stream of two shards, each with a slow record first
// ("slow-<shard>", key k0-<i>) and then four records of other keys and one
// more of k0-<i>, so that whichever shard moves has a record in flight at the
// hand-over and settled records behind it.
func slowStream() *stream {
	f := newStream(2)
	for i := range 2 {
		id := shardID(i)
		key := func(k string) string { return k + "-" + strconv.Itoa(i) } // keys of one shard only
		f.put(id, key("k0"), "slow-"+id)
		for _, k := range []string{"k1", "k2", "k3", "k4", "k0"} {
			f.put(id, key(k), "after-"+k+"-"+id)
		}
	}
	return f
}

// callLog counts the handler calls per payload and the contexts cancelled.
type callLog struct {
	mu        sync.Mutex
	n         map[string]int
	cancelled map[string]int
}

func newCallLog() *callLog { return &callLog{n: map[string]int{}, cancelled: map[string]int{}} }

func (l *callLog) add(p string) {
	l.mu.Lock()
	l.n[p]++
	l.mu.Unlock()
}

func (l *callLog) cancel(p string) {
	l.mu.Lock()
	l.cancelled[p]++
	l.mu.Unlock()
}

func (l *callLog) snapshot() (n, cancelled map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.n), maps.Clone(l.cancelled)
}

// handledOnce fails t for each record of n (handler calls per payload)
// handled other than once.
func handledOnce(t *testing.T, n map[string]int) {
	t.Helper()
	for p, c := range n {
		if c != 1 {
			t.Errorf("%s handled %d times, want 1", p, c)
		}
	}
}

func (l *callLog) started(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := 0
	for k, v := range l.n {
		if strings.HasPrefix(k, prefix) {
			c += v
		}
	}
	return c
}

// slowHandler handles "slow-*" records for took (a negative took: until its
// context is cancelled), answering Retry when its context is cancelled
// first; everything else is acknowledged at once.
func slowHandler(l *callLog, took time.Duration) message.Handler {
	return message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
		p := string(m.Payload)
		l.add(p)
		if !strings.HasPrefix(p, "slow-") {
			return message.Ack()
		}
		var done <-chan time.Time
		if took >= 0 {
			done = time.After(took)
		}
		select {
		case <-done:
			return message.Ack()
		case <-ctx.Done():
			l.cancel(p)
			return message.Retry(ctx.Err())
		}
	})
}

// TestHandOverWaitsForSlowHandler: a planned hand-over whose shard has a
// handler running longer than the shutdown timeout (and longer than the
// second wait of a stop, max(T, 30 s)) waits for it with the lease held
// and renewed, instead of cancelling it: the record settles, the lease goes
// over with a checkpoint after every record, and the new owner handles
// nothing again. (Before, the handler's context was cancelled after the
// shutdown timeout, and the record and the five behind it came again.)
func TestHandOverWaitsForSlowHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := slowStream()
		store := lease.NewMemory()
		l := newCallLog()
		h := slowHandler(l, 45*time.Second)
		cfg := Config{Kinesis: f, Store: store, Start: TrimHorizon(), LeaseDuration: 3 * time.Second, ShutdownTimeout: time.Second}
		cfg.Owner = "a"
		a, stopA := run(t, cfg, handler(h))
		waitFor(t, "both slow records running", func() bool { return l.started("slow-") == 2 && l.started("after-") == 8 })
		cfg.Owner = "b"
		b, stopB := run(t, cfg, handler(h))
		t0 := time.Now()
		waitFor(t, "the hand-over", func() bool { return len(a.Owned()) == 1 && len(b.Owned()) == 1 })
		took := time.Since(t0)
		time.Sleep(30 * time.Second) // the new owner reads what it was handed
		stopB()
		stopA()
		n, cancelled := l.snapshot()
		handledOnce(t, n)
		if len(n) != 12 {
			t.Errorf("%d records handled, want 12: %v", len(n), n)
		}
		if len(cancelled) != 0 {
			t.Errorf("handlers cancelled by the hand-over: %v", cancelled)
		}
		if took < 40*time.Second {
			t.Errorf("handed over %v after the request, want after the slow handler (45 s)", took)
		}
	})
}

// TestHandOverPatienceEnds: a planned hand-over whose record never settles
// (its handler runs until its context is cancelled) waits the shutdown
// timeout plus handOverPatience, then cancels the handler and transfers;
// the record comes again to the new owner, as documented. And Run's stop
// during that long wait ends it at once: Run returns within the stop's
// bound (ShutdownTimeout + max(ShutdownTimeout, 30 s)), not after the
// patience.
func TestHandOverPatienceEnds(t *testing.T) {
	for _, stopDuring := range []bool{false, true} {
		name := "patience"
		if stopDuring {
			name = "stop during the wait"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := slowStream()
				store := lease.NewMemory()
				l := newCallLog()
				h := slowHandler(l, -1)
				const timeout = time.Second
				cfg := Config{Kinesis: f, Store: store, Start: TrimHorizon(), LeaseDuration: 3 * time.Second, ShutdownTimeout: timeout}
				cfg.Owner = "a"
				a := newConsumer(t, cfg, handler(h))
				ctxA, cancelA := context.WithCancel(t.Context())
				ranA := make(chan error, 1)
				go func() { ranA <- a.Run(ctxA) }()
				waitFor(t, "both slow records running", func() bool { return l.started("slow-") == 2 && l.started("after-") == 8 })
				cfg.Owner = "b"
				b, stopB := run(t, cfg, handler(h))
				waitFor(t, "a hand-over asked", func() bool {
					ls, _ := leasesOf(store.Snapshot(context.Background(), testStream))
					for _, x := range ls {
						if x.Handoff == "b" {
							return true
						}
					}
					return false
				})
				t0 := time.Now()
				if stopDuring {
					time.Sleep(timeout + time.Minute) // well inside the patience
					t1 := time.Now()
					cancelA()
					if err := <-ranA; err != nil {
						t.Errorf("Run: %v", err)
					}
					if took, bound := time.Since(t1), timeout+max(timeout, writeTimeout)+time.Second; took > bound {
						t.Errorf("Run returned %v after its stop, want at most %v", took, bound)
					}
					waitFor(t, "b holds both", func() bool { return len(b.Owned()) == 2 })
				} else {
					waitFor(t, "the hand-over", func() bool { return len(a.Owned()) == 1 && len(b.Owned()) == 1 })
					if took, want := time.Since(t0), timeout+handOverPatience; took < want {
						t.Errorf("handed over %v after the request, want after the shutdown timeout and the patience (%v)", took, want)
					}
					cancelA()
					if err := <-ranA; err != nil {
						t.Errorf("Run: %v", err)
					}
				}
				stopB()
				_, cancelled := l.snapshot()
				if len(cancelled) == 0 {
					t.Errorf("no slow handler was cancelled")
				}
			})
		})
	}
}

// TestHandOverMakesFailedWritesAgain: during a planned hand-over, a copy
// whose write fails (PutRecords throttled for 20 s) is made again while the
// hand-over waits, instead of leaving its record unsettled for the new
// owner: the lease goes over once the copy is written, and no record is
// handled twice. (Before, the failed write gave its record up and the new
// owner handled it, and the records behind it, again.)
func TestHandOverMakesFailedWritesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := slowStream()
		store := lease.NewMemory()
		k := awsfake.NewKinesis() // copies go here
		var mu sync.Mutex
		var failUntil time.Time
		k.Fail = func(string, string, []byte) string {
			mu.Lock()
			defer mu.Unlock()
			if time.Now().Before(failUntil) {
				return "ProvisionedThroughputExceededException"
			}
			return ""
		}
		l := newCallLog()
		release := make(chan struct{})
		h := message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
			p := string(m.Payload)
			l.add(p)
			if strings.HasPrefix(p, "slow-") {
				<-release
				return message.Retry(errors.New("downstream failed")) // a counted copy
			}
			return message.Ack()
		})
		ec := engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Publisher: newPublisher(t, k)}
		cfg := Config{Kinesis: f, Store: store, Start: TrimHorizon(), LeaseDuration: 3 * time.Second, ShutdownTimeout: time.Second}
		cfg.Owner = "a"
		a, stopA := run(t, cfg, ec)
		waitFor(t, "both slow records running", func() bool { return l.started("slow-") == 2 && l.started("after-") == 8 })
		mu.Lock()
		failUntil = time.Now().Add(20 * time.Second) // longer than a write round's retries
		mu.Unlock()
		close(release)
		cfg.Owner = "b"
		b, stopB := run(t, cfg, ec)
		waitFor(t, "the hand-over", func() bool { return len(a.Owned()) == 1 && len(b.Owned()) == 1 })
		waitFor(t, "both copies", func() bool { return len(k.Written()) == 2 })
		time.Sleep(30 * time.Second)
		stopB()
		stopA()
		n, _ := l.snapshot()
		handledOnce(t, n)
		if w := len(k.Written()); w != 2 {
			t.Errorf("%d copies written, want 2", w)
		}
	})
}

// onWrite is an observe.WriteHook calling f.
type onWrite func(observe.Write)

func (f onWrite) OnWrite(w observe.Write) { f(w) }

// TestStopEndsWritesWaitingToBeMadeAgain: a copy whose write keeps failing
// waits, between attempts, for a backoff that grows to 30 s. A stop that
// comes while it waits does not wait that backoff out: once the stop
// cancelled the shard's handlers (after the shutdown timeout), the waiting
// write ends at once (nothing of the shard may be written any more), the
// lease is released with the checkpoint before its record, and Run returns
// about a shutdown timeout after the stop. (Before, the stop waited until
// the write's next attempt, up to 30 s.)
func TestStopEndsWritesWaitingToBeMadeAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		seqs := f.putNumbered(id, 1, false)
		k := awsfake.NewKinesis() // copies go here, and always fail
		k.Fail = func(string, string, []byte) string { return "ResourceNotFoundException" }
		var failed atomic.Int64
		hooks := hooks.New(onWrite(func(w observe.Write) {
			if w.Err != nil {
				failed.Add(1)
			}
		}))
		h := message.HandlerFunc(func(context.Context, *message.Message) message.Outcome {
			return message.Retry(errors.New("downstream failed"))
		})
		store := lease.NewMemory()
		ec := engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Publisher: newPublisher(t, k), Hooks: hooks}
		const timeout = time.Second
		c := newConsumer(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", ShutdownTimeout: timeout}, ec)
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- c.Run(ctx) }()
		// The backoffs 0.5, 1, 2, 4, 8, 16 s: after the 8th failure the
		// write waits 30 s for its next attempt.
		waitFor(t, "eight failed writes", func() bool { return failed.Load() >= 8 })
		start := time.Now()
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
		if took, want := time.Since(start), timeout+time.Second; took > want {
			t.Errorf("Run returned %v after the stop, want at most %v (the write's backoff is not waited out)", took, want)
		}
		l, err := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: id})
		if err != nil {
			t.Fatal(err)
		}
		if l.Owner != "" || l.Checkpoint == seqs[0] {
			t.Errorf("lease owner %q, checkpoint %s; want released before %s (the record comes again)", l.Owner, l.Checkpoint, seqs[0])
		}
	})
}

// TestSlowWriteOutlivesRenewals: a copy whose PutRecords takes longer than
// the fence (5 s against 0.9 × a 3 s lease) is not cut at the fence's
// deadline as it stood when the write began: the renewals made meanwhile
// move it, so the write completes, once, and the record settles. (Before,
// every attempt was cut at 2.7 s and made again, so with a Kinesis this
// slow the copy was never written; with one that applied the cut writes,
// each attempt was an extra copy.) A fence that lapses still ends the
// round: TestCutOffWorkerFencesItself.
func TestSlowWriteOutlivesRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		f.put(id, "k", "slow-copy")
		k := awsfake.NewKinesis() // copies go here
		k.Delay = 5 * time.Second
		h := newRecorder()
		h.outcome = func(m *message.Message) message.Outcome {
			if m.Attempt == 1 {
				return message.Retry(errors.New("downstream failed"))
			}
			return message.Ack()
		}
		var failed atomic.Int64
		hooks := hooks.New(onWrite(func(w observe.Write) {
			if w.Err != nil {
				failed.Add(1)
			}
		}))
		store := lease.NewMemory()
		ec := engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Publisher: newPublisher(t, k), Hooks: hooks}
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", LeaseDuration: 3 * time.Second}, ec)
		waitFor(t, "the copy", func() bool { return len(k.Written()) == 1 })
		time.Sleep(20 * time.Second)
		stop()
		if n := len(k.Written()); n != 1 {
			t.Errorf("%d copies written, want 1", n)
		}
		if n := failed.Load(); n != 0 {
			t.Errorf("%d writes failed, want 0 (cut at the fence's first deadline)", n)
		}
		if got := h.times()["slow-copy"]; got != 1 {
			t.Errorf("the record was handled %d times, want 1", got)
		}
		l, err := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: id})
		if err != nil {
			t.Fatal(err)
		}
		if l.Checkpoint == "" || l.Checkpoint == lease.TrimHorizon {
			t.Errorf("checkpoint %q: the record did not settle", l.Checkpoint)
		}
	})
}
