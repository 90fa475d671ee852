package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
)

// TestRefFreedOnceAllFinished: a delivery's Ref (a long-running answer's
// storage, shared by its deliveries) is released exactly once, when the
// engine finished with it, whatever became of the record: acked, dropped,
// redelivered after a backoff until acked, written as a delayed copy (the
// write held back), given up on by a quiesce, never submitted. Each
// delivery has a Ref of its own here, so each path is checked on its own;
// a last Ref shared by all is freed once, at the end.
func TestRefFreedOnceAllFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 6
		var mu sync.Mutex
		var running [n]bool // a handler call for record i is under way
		var freed [n]int
		var freedRunning [n]bool
		h := message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			var i int
			fmt.Sscanf(string(m.Payload), "r%d", &i)
			mu.Lock()
			running[i] = true
			mu.Unlock()
			defer func() {
				mu.Lock()
				running[i] = false
				mu.Unlock()
			}()
			switch i {
			case 0:
				if m.Attempt < 3 {
					return message.Retry(errors.New("not yet"))
				}
			case 1:
				return message.RetryAfter(time.Second, nil)
			case 2:
				return message.Drop(nil)
			case 4:
				return message.Retry(nil)
			}
			return message.Ack()
		})
		w := newWorld(t, h)
		open := make(chan struct{})
		pub, err := publish.NewPublisher(gatedPuts{Kinesis: w.k, open: open})
		if err != nil {
			t.Fatal(err)
		}
		w.cfg.Publisher = pub
		e := w.engine(t)

		var sharedFrees atomic.Int64
		shared := engine.NewRef(func() { sharedFrees.Add(1) })
		sh := engine.NewShard("s", engine.Hooks{})
		ds := make([]engine.Delivery, n)
		for i := range ds {
			ds[i].Msg = message.Message{
				Payload: []byte(fmt.Sprintf("r%d", i)), PartitionKey: fmt.Sprint("k", i), SequenceNumber: fmt.Sprint(1000 + i),
				ShardID: "s", StreamARN: testARN, Attempt: 1,
			}
		}
		register(t, sh, ds)
		for i := range ds {
			d := &ds[i]
			d.Ref = engine.NewRef(func() {
				shared.Release()
				mu.Lock()
				freed[i]++
				freedRunning[i] = running[i]
				mu.Unlock()
			})
			d.Ref.Hold(1) // the delivery's
			shared.Hold(1)
		}
		shared.Release() // the creator's hold
		check := func(stage string, want [n]int) {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			if freed != want {
				t.Errorf("%s: released %v times, want %v", stage, freed, want)
			}
			for i, r := range freedRunning {
				if r {
					t.Errorf("%s: r%d released while its handler ran", stage, i)
				}
			}
		}
		s := e.Start(t.Context(), engine.SessionConfig{Mode: engine.ModeLongRunning, Lanes: 3, Backoff: func(n int) time.Duration { return time.Duration(n) * time.Second }})
		submit(t, s, ds[:5])
		ds[5].Drop() // the reader stopped with it in hand
		for i := range ds {
			ds[i].Ref.Release() // each delivery's creator's hold
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// r0 acked on its third attempt, r2 dropped, r3 acked, r5 never
		// submitted; r1's copy waits at the gate; r4 is parked for a retry.
		check("copy held back, r4 parked", [n]int{1, 0, 1, 1, 0, 1})
		close(open)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := len(w.k.Written()); got != 1 {
			t.Fatalf("%d copies written, want 1 (r1's)", got)
		}
		check("copy written", [n]int{1, 1, 1, 1, 0, 1})
		s.Quiesce(sh)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if !waitIdle(ctx, sh) {
			t.Fatalf("shard not idle after Quiesce: %d in flight", sh.Inflight())
		}
		check("quiesced", [n]int{1, 1, 1, 1, 1, 1})
		s.Stop(ctx, time.Second)
		check("stopped", [n]int{1, 1, 1, 1, 1, 1})
		if n := sharedFrees.Load(); n != 1 {
			t.Errorf("the shared Ref was freed %d times, want once", n)
		}
	})
}

// TestRefMisuse: a Ref released more often than held, or held again after
// it was freed, panics instead of freeing storage still in use.
func TestRefMisuse(t *testing.T) {
	panics := func(f func()) (p bool) {
		defer func() { p = recover() != nil }()
		f()
		return false
	}
	var freed int
	r := engine.NewRef(func() { freed++ })
	r.Hold(2)
	r.Release()
	r.Release()
	if freed != 0 {
		t.Fatal("freed while held")
	}
	r.Release()
	if freed != 1 {
		t.Fatalf("freed %d times, want 1", freed)
	}
	if !panics(r.Release) {
		t.Error("a release more than held did not panic")
	}
	if !panics(func() { f := engine.NewRef(func() {}); f.Release(); f.Hold(1) }) {
		t.Error("Hold after the Ref was freed did not panic")
	}
	var nilRef *engine.Ref
	nilRef.Release() // a delivery without shared storage
}
