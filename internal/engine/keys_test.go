package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
)

// newTestScheduler returns a scheduler with cfg and its lock.
func newTestScheduler(cfg schedConfig) (*keyScheduler, *sync.Mutex) {
	mu := new(sync.Mutex)
	k := new(keyScheduler)
	k.init(mu, cfg)
	return k, mu
}

// rec is a delivery of key whose sequence number is i.
func rec(key string, i int) *Delivery {
	return &Delivery{Msg: message.Message{PartitionKey: key, SequenceNumber: strconv.Itoa(i)}}
}

// seqOf is the sequence number of d as an int.
func seqOf(d *Delivery) int {
	n, _ := strconv.Atoi(d.Msg.SequenceNumber)
	return n
}

// runTestLane is a lane as Session.runKeyLongRunning runs one: it takes a key,
// handles its records one by one (handle reports whether to park the
// record for a retry, until when) and goes on with the next ready key,
// until take says to end.
func runTestLane(ctx context.Context, k *keyScheduler, handle func(d *Delivery) (time.Time, bool)) {
	var w *laneWake
	for {
		ks := k.take(ctx, &w, nil)
		if ks == nil {
			return
		}
		k.mu.Lock()
		for turn := 0; ; turn++ {
			if k.turnOver(ctx, ks, turn) {
				if ks = k.switchKey(ctx, ks); ks == nil {
					break
				}
				turn = 0
			}
			d := k.pop(ks)
			k.mu.Unlock()
			until, park := handle(d)
			k.mu.Lock()
			if park {
				k.park(d, until)
				k.kick()
			}
		}
		k.mu.Unlock()
	}
}

// TestKeySchedulerOrderPerKey: lanes take records of many keys while more
// are pushed, some parked for a retry; the records of each key are handled
// in the order they were pushed (a parked one again before any later one
// of its key), every one at least once, and no key is held by two lanes at
// once.
func TestKeySchedulerOrderPerKey(t *testing.T) {
	for _, cfg := range []schedConfig{{keep: true}, {parking: true}, {parking: true, maxQueued: 50}} {
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const keys, perKey, lanes = 20, 200, 4
				k, mu := newTestScheduler(cfg)
				var tmu sync.Mutex
				holders := map[string]int{}
				handled := map[string][]int{}
				parkedOnce := map[int]bool{}
				handle := func(d *Delivery) (time.Time, bool) {
					key, seq := d.Msg.PartitionKey, seqOf(d)
					tmu.Lock()
					if holders[key] != 0 {
						t.Errorf("key %s held by two lanes", key)
					}
					holders[key]++
					handled[key] = append(handled[key], seq)
					park := cfg.parking && seq%7 == 0 && !parkedOnce[seq]
					parkedOnce[seq] = parkedOnce[seq] || park
					tmu.Unlock()
					runtime.Gosched()
					tmu.Lock()
					holders[key]--
					tmu.Unlock()
					return time.Now().Add(time.Duration(seq%3+1) * time.Second), park
				}
				ctx := t.Context()
				var wg sync.WaitGroup
				for range lanes {
					wg.Go(func() { runTestLane(ctx, k, handle) })
				}
				quit := make(chan struct{})
				var timer sync.WaitGroup
				if cfg.parking {
					timer.Go(func() { k.timer(quit) })
				}
				for i := range keys * perKey {
					d := rec(fmt.Sprint("k", i%keys), i)
					mu.Lock()
					if err := k.waitRoom(ctx); err != nil {
						t.Fatal(err)
					}
					k.push(d, false)
					mu.Unlock()
				}
				mu.Lock()
				for !k.empty() { // every record handled, none parked
					ch := k.wait()
					mu.Unlock()
					<-ch
					mu.Lock()
				}
				k.close()
				k.broadcast()
				mu.Unlock()
				wg.Wait()
				close(quit)
				timer.Wait()
				for key, seqs := range handled {
					if !slices.IsSorted(seqs) {
						t.Errorf("key %s handled out of order: %v", key, seqs)
					}
					if n := len(slices.Compact(slices.Clone(seqs))); n != perKey {
						t.Errorf("key %s: %d records handled, want %d", key, n, perKey)
					}
				}
				if len(handled) != keys {
					t.Errorf("%d keys handled, want %d", len(handled), keys)
				}
			})
		})
	}
}

// TestKeySchedulerParkedKeyWakesWhenDue: a parked record's key is not
// ready before the record is due; at its due time the timer makes it
// ready, the parked record first, then the later records of its key.
// Other keys do not wait for it.
func TestKeySchedulerParkedKeyWakesWhenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, mu := newTestScheduler(schedConfig{parking: true})
		ctx := t.Context()
		mu.Lock()
		for _, d := range []*Delivery{rec("a", 1), rec("a", 2), rec("b", 3)} {
			k.push(d, false)
		}
		a := k.takeReady(ctx)
		first := k.pop(a)
		k.park(first, time.Now().Add(5*time.Second))
		if !k.turnOver(ctx, a, 1) {
			t.Fatal("a lane keeps a key whose head waits for a retry")
		}
		b := k.switchKey(ctx, a)
		if b == nil || b.key != "b" {
			t.Fatalf("next key %v, want b", b)
		}
		mu.Unlock()
		quit := make(chan struct{})
		var timer sync.WaitGroup
		timer.Go(func() { k.timer(quit) })
		defer func() {
			close(quit)
			timer.Wait()
		}()
		k.kick()

		time.Sleep(5*time.Second - time.Nanosecond)
		synctest.Wait()
		mu.Lock()
		if ks := k.takeReady(ctx); ks != nil {
			t.Fatalf("key %s ready before its parked record is due", ks.key)
		}
		mu.Unlock()

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		ks := k.takeReady(ctx)
		if ks == nil || ks.key != "a" {
			t.Fatalf("key %v ready when the parked record is due, want a", ks)
		}
		var got []int
		for ks.head != nil {
			got = append(got, seqOf(k.pop(ks)))
		}
		if want := []int{1, 2}; !slices.Equal(got, want) {
			t.Errorf("records of a %v, want %v", got, want)
		}
	})
}

// TestKeySchedulerTurnLimit: a lane lets a key that keeps having records go
// after turnLimit of them when another key is ready, and takes that key; a
// key alone keeps its lane.
func TestKeySchedulerTurnLimit(t *testing.T) {
	k, _ := newTestScheduler(schedConfig{keep: true})
	ctx := t.Context()
	for i := range turnLimit + 10 {
		k.push(rec("a", i), false)
	}
	ks := k.takeReady(ctx)
	for turn := range turnLimit {
		if k.turnOver(ctx, ks, turn) {
			t.Fatalf("a lane let its key go after %d records", turn)
		}
		k.pop(ks)
	}
	if k.turnOver(ctx, ks, turnLimit) {
		t.Fatal("a key alone lost its lane at the turn limit")
	}
	k.push(rec("b", 1000), false)
	if !k.turnOver(ctx, ks, turnLimit) {
		t.Fatal("a key kept its lane past the turn limit with another key ready")
	}
	if next := k.switchKey(ctx, ks); next == nil || next.key != "b" {
		t.Fatalf("next key %v, want b", next)
	}
	if len(k.ready) != 1 || k.ready[0] != ks {
		t.Errorf("ready %v, want a again, after b", k.ready)
	}
}

// TestKeySchedulerWakesOneLane: a key made ready wakes one waiting lane,
// not all of them; a lane that takes a key while more are ready wakes the
// next lane, so each ready key gets a lane of its own.
func TestKeySchedulerWakesOneLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lanes = 3
		k, mu := newTestScheduler(schedConfig{keep: true})
		ctx := t.Context()
		took := make(chan string, lanes)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range lanes {
			wg.Go(func() {
				var w *laneWake
				for {
					ks := k.take(ctx, &w, nil)
					if ks == nil {
						return
					}
					took <- ks.key
					<-release // the lane holds the key
					mu.Lock()
					k.pop(ks)
					k.release(ks)
					mu.Unlock()
				}
			})
		}
		synctest.Wait()
		mu.Lock()
		k.push(rec("a", 1), false)
		mu.Unlock()
		synctest.Wait()
		mu.Lock()
		if n, w := len(k.idle), k.waking; n != lanes-1 || w != 0 {
			t.Errorf("one key ready: %d lanes waiting, %d woken on their way; want %d and 0", n, w, lanes-1)
		}
		k.push(rec("b", 2), false)
		k.push(rec("c", 3), false)
		mu.Unlock()
		synctest.Wait()
		var got []string
		for range lanes {
			got = append(got, <-took)
		}
		slices.Sort(got)
		if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
			t.Errorf("lanes took %v, want %v", got, want)
		}
		mu.Lock()
		k.close()
		k.broadcast()
		mu.Unlock()
		close(release)
		wg.Wait()
	})
}

// TestKeySchedulerCloseEndsLanes: once closed, the lanes handle what is
// left and then end, waiting ones too; a cancelled context ends a lane at
// once.
func TestKeySchedulerCloseEndsLanes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, mu := newTestScheduler(schedConfig{keep: true})
		var handled []int
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				runTestLane(t.Context(), k, func(d *Delivery) (time.Time, bool) {
					mu.Lock()
					handled = append(handled, seqOf(d))
					mu.Unlock()
					return time.Time{}, false
				})
			})
		}
		synctest.Wait()
		mu.Lock()
		k.push(rec("a", 1), false)
		k.push(rec("a", 2), false)
		k.close()
		k.broadcast()
		mu.Unlock()
		wg.Wait()
		if want := []int{1, 2}; !slices.Equal(handled, want) {
			t.Errorf("handled %v, want %v", handled, want)
		}

		ctx, cancel := context.WithCancel(t.Context())
		k2, _ := newTestScheduler(schedConfig{keep: true})
		done := make(chan *keyQueue)
		go func() {
			var w *laneWake
			done <- k2.take(ctx, &w, nil)
		}()
		synctest.Wait()
		cancel()
		if ks := <-done; ks != nil {
			t.Errorf("take after its context ended: %v", ks)
		}
	})
}

// TestKeySchedulerTakeIdle: take calls idle once, without the lock, before
// the lane first waits, and looks for a ready key again after it.
func TestKeySchedulerTakeIdle(t *testing.T) {
	k, mu := newTestScheduler(schedConfig{keep: true})
	calls := 0
	var w *laneWake
	ks := k.take(t.Context(), &w, func() {
		calls++
		mu.Lock() // not held by take
		k.push(rec("a", 1), false)
		mu.Unlock()
	})
	if calls != 1 || ks == nil || ks.key != "a" {
		t.Errorf("idle called %d times, take returned %v; want 1 and key a", calls, ks)
	}
}

// TestKeySchedulerForgetsKeys: without keep, an empty key queue its lane
// lets go is forgotten and reused for the next new key; in keep mode it
// stays, for later records of its key.
func TestKeySchedulerForgetsKeys(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			k, _ := newTestScheduler(schedConfig{keep: keep, parking: !keep})
			ks := k.push(rec("a", 1), false)
			if got := k.takeReady(t.Context()); got != ks {
				t.Fatalf("took %v, want a", got)
			}
			k.pop(ks)
			k.release(ks)
			_, kept := k.keys["a"]
			if kept != keep {
				t.Errorf("key a kept %v after its lane let it go empty, want %v", kept, keep)
			}
			again := k.push(rec("b", 2), false)
			if reused := again == ks; reused == keep {
				t.Errorf("key b's queue is a's again: %v, want %v", reused, !keep)
			}
			if again.key != "b" || again.head == nil || !again.inReady {
				t.Errorf("key b's queue: %+v", again)
			}
		})
	}
}

// TestKeySchedulerLockQueuesOf: the queues of a piece of deliveries are
// found (one per key, made from the slab) and returned with the lock held.
func TestKeySchedulerLockQueuesOf(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			k, mu := newTestScheduler(schedConfig{keep: keep})
			ds := make([]Delivery, 5)
			for i, key := range []string{"a", "b", "a", "c", "b"} {
				ds[i].Msg.PartitionKey = key
			}
			kss := make([]*keyQueue, len(ds))
			slab := k.lockQueuesOf(ds, kss, nil, 10)
			if mu.TryLock() {
				t.Fatal("lockQueuesOf returned without the lock")
			}
			defer mu.Unlock()
			if kss[0] != kss[2] || kss[1] != kss[4] || kss[0] == kss[1] || kss[3] == kss[0] || kss[3] == kss[1] {
				t.Errorf("one queue per key: %p", kss)
			}
			for i := range ds {
				if kss[i].key != ds[i].Msg.PartitionKey || k.keys[kss[i].key] != kss[i] {
					t.Errorf("delivery %d: queue of %q", i, kss[i].key)
				}
			}
			if len(slab) == 0 {
				t.Error("nothing left of the slab for the deliveries to come")
			}
		})
	}
}

// TestKeySchedulerUnparkHeads: the parked records that match are taken out
// of their queues; a key with more records is ready again, an empty one
// forgotten; the others stay parked.
func TestKeySchedulerUnparkHeads(t *testing.T) {
	k, _ := newTestScheduler(schedConfig{parking: true})
	ctx := t.Context()
	due := time.Now().Add(time.Hour)
	for _, key := range []string{"a", "b", "c"} {
		ks := k.push(rec(key, 1), false)
		k.takeReady(ctx)
		k.park(k.pop(ks), due)
		k.release(ks)
	}
	k.push(rec("a", 2), false)
	if len(k.ready) != 0 || len(k.parked) != 3 {
		t.Fatalf("%d keys ready, %d parked; want 0 and 3", len(k.ready), len(k.parked))
	}
	given := k.unparkHeads(func(d *Delivery) bool { return d.Msg.PartitionKey != "c" }, nil)
	var got []string
	for _, d := range given {
		got = append(got, d.Msg.PartitionKey)
	}
	slices.Sort(got)
	if want := []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("given up %v, want %v", got, want)
	}
	if len(k.ready) != 1 || k.ready[0].key != "a" || seqOf(k.ready[0].head) != 2 {
		t.Errorf("ready %v, want a with its second record", k.ready)
	}
	if _, ok := k.keys["b"]; ok {
		t.Error("key b, empty and given up, not forgotten")
	}
	if len(k.parked) != 1 || k.parked[0].key != "c" {
		t.Errorf("parked %v, want c", k.parked)
	}
	if n := len(k.unparkHeads(nil, nil)); n != 1 || len(k.parked) != 0 {
		t.Errorf("every parked record: %d given up, %d left parked; want 1 and 0", n, len(k.parked))
	}
}

// TestKeySchedulerWaitRoom: waitRoom waits while maxQueued records are
// queued, until a lane pops one, the scheduler closes, or its context
// ends.
func TestKeySchedulerWaitRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, mu := newTestScheduler(schedConfig{parking: true, maxQueued: 2})
		mu.Lock()
		a := k.push(rec("a", 1), false)
		k.push(rec("a", 2), false)
		mu.Unlock()
		waited := make(chan error, 1)
		wait := func(ctx context.Context) {
			mu.Lock()
			defer mu.Unlock()
			waited <- k.waitRoom(ctx)
		}
		go wait(t.Context())
		synctest.Wait()
		select {
		case err := <-waited:
			t.Fatalf("waitRoom returned %v with the queue full", err)
		default:
		}
		mu.Lock()
		k.takeReady(t.Context())
		k.pop(a)
		mu.Unlock()
		if err := <-waited; err != nil {
			t.Errorf("waitRoom after a pop: %v", err)
		}

		mu.Lock()
		k.push(rec("a", 3), false)
		mu.Unlock()
		ctx, cancel := context.WithCancel(t.Context())
		go wait(ctx)
		synctest.Wait()
		cancel()
		if err := <-waited; !errors.Is(err, context.Canceled) {
			t.Errorf("waitRoom after its context ended: %v", err)
		}
		go wait(t.Context())
		synctest.Wait()
		mu.Lock()
		k.close()
		k.broadcast()
		mu.Unlock()
		if err := <-waited; err != nil {
			t.Errorf("waitRoom once closed: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if k.changed.waiters != 0 {
			t.Errorf("%d waiters left counted", k.changed.waiters)
		}
	})
}
