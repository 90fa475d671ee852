package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/internal/message"
)

// handled records the sequence numbers a handler saw, in order, overall
// and per partition key.
type handled struct {
	mu    sync.Mutex
	all   []string
	byKey map[string][]string
}

func (h *handled) add(m *message.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byKey == nil {
		h.byKey = map[string][]string{}
	}
	h.all = append(h.all, m.SequenceNumber)
	h.byKey[m.PartitionKey] = append(h.byKey[m.PartitionKey], m.SequenceNumber)
}

func (h *handled) snapshot() ([]string, map[string][]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	by := map[string][]string{}
	for k, v := range h.byKey {
		by[k] = slices.Clone(v)
	}
	return slices.Clone(h.all), by
}

// wantByKey is what handled.byKey must be for records of sequence numbers
// 1000+i and keys keys(i), each handled once, in order per key.
func wantByKey(n int, keys func(int) string) map[string][]string {
	want := map[string][]string{}
	for i := range n {
		want[keys(i)] = append(want[keys(i)], fmt.Sprint(1000+i))
	}
	return want
}

// TestLambdaInlineRunsInOrder: while its handlers are fast (no virtual time
// passes in a bubble), a Lambda-mode session runs its records one after
// another in the order they were submitted, across parts, and settles them.
func TestLambdaInlineRunsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got handled
		e := newWorld(t, message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			got.add(m)
			return message.Ack()
		})).engine(t)
		keys := func(i int) string { return fmt.Sprint("k", i%7) }
		sh, ds := shardOf(t, "s", 300, keys)
		runLambda(t, e, 4, ds[:1], ds[1:130], ds[130:])
		all, _ := got.snapshot()
		var want []string
		for i := range 300 {
			want = append(want, fmt.Sprint(1000+i))
		}
		if diff := cmp.Diff(want, all); diff != "" {
			t.Errorf("handled (-want +got):\n%s", diff)
		}
		if seq := firstUnsettled(sh); seq != "" {
			t.Errorf("first unsettled %s, want none", seq)
		}
	})
}

// TestLambdaInlineHandsOver: a handler that blocks makes the session hand
// the records not started to the lanes, which run the other keys meanwhile;
// the later records of the blocked record's key wait for it, and every
// record is handled once and settles. The hand-over comes in the middle of
// a part and between parts.
func TestLambdaInlineHandsOver(t *testing.T) {
	for _, block := range []int{0, 3, 4, 9} {
		t.Run(fmt.Sprint("block=", block), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got handled
				release := make(chan struct{})
				blocked := fmt.Sprint(1000 + block)
				e := newWorld(t, message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
					if m.SequenceNumber == blocked {
						<-release
					}
					got.add(m)
					return message.Ack()
				})).engine(t)
				keys := func(i int) string { return fmt.Sprint("k", i%3) }
				const n = 40
				sh, ds := shardOf(t, "s", n, keys)
				done := make(chan struct{})
				go func() {
					defer close(done)
					runLambda(t, e, 4, ds[:4], ds[4:25], ds[25:])
				}()
				time.Sleep(time.Second)
				synctest.Wait()
				_, by := got.snapshot()
				blockedKey := keys(block)
				for i := range n {
					seq, k := fmt.Sprint(1000+i), keys(i)
					ran := slices.Contains(by[k], seq)
					switch {
					case i < block && !ran:
						t.Errorf("record %s, before the blocked one, not handled", seq)
					case k == blockedKey && i >= block && ran:
						t.Errorf("record %s of the blocked key handled before the blocked record returned", seq)
					case k != blockedKey && !ran:
						t.Errorf("record %s of another key not handled while the blocked record runs", seq)
					}
				}
				close(release)
				<-done
				_, by = got.snapshot()
				if diff := cmp.Diff(wantByKey(n, keys), by); diff != "" {
					t.Errorf("handled per key (-want +got):\n%s", diff)
				}
				if seq := firstUnsettled(sh); seq != "" {
					t.Errorf("first unsettled %s, want none", seq)
				}
			})
		})
	}
}

// TestLambdaInlineHandOverKeepsTheLanes: after a hand-over, no more
// records are handled at once than the session has lanes: the record the
// inline runner is still handling counts as one of them (the runner goes
// on as a lane once it returns). With one lane, the other keys wait for the
// blocked record; with four, three run meanwhile. Every record is handled
// once, in order per key.
func TestLambdaInlineHandOverKeepsTheLanes(t *testing.T) {
	for _, lanes := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("lanes=", lanes), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got handled
				var mu sync.Mutex
				running, most := 0, 0
				release := make(chan struct{})
				e := newWorld(t, message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
					mu.Lock()
					running++
					most = max(most, running)
					mu.Unlock()
					if m.SequenceNumber == "1000" {
						<-release
					} else {
						time.Sleep(time.Millisecond)
					}
					got.add(m)
					mu.Lock()
					running--
					mu.Unlock()
					return message.Ack()
				})).engine(t)
				keys := func(i int) string { return fmt.Sprint("k", i%8) }
				const n = 64
				sh, ds := shardOf(t, "s", n, keys)
				done := make(chan struct{})
				go func() {
					defer close(done)
					runLambda(t, e, lanes, ds)
				}()
				time.Sleep(time.Second)
				synctest.Wait()
				all, _ := got.snapshot()
				if lanes == 1 && len(all) != 0 {
					t.Errorf("%d records handled while the first one blocks the one lane, want 0", len(all))
				}
				if lanes > 1 && len(all) == 0 {
					t.Error("no record of another key handled while the first one blocks")
				}
				close(release)
				<-done
				if most > lanes {
					t.Errorf("%d records handled at once, want at most the %d lanes", most, lanes)
				}
				_, by := got.snapshot()
				if diff := cmp.Diff(wantByKey(n, keys), by); diff != "" {
					t.Errorf("handled per key (-want +got):\n%s", diff)
				}
				if seq := firstUnsettled(sh); seq != "" {
					t.Errorf("first unsettled %s, want none", seq)
				}
			})
		})
	}
}

// TestLambdaInlineSlowHandlers: handlers that each take longer than the
// inline runner's average bound make the session hand the rest to the
// lanes; the invocation then takes about what the lanes take, not the sum
// of the handlers' times, and keeps every key's order.
func TestLambdaInlineSlowHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got handled
		e := newWorld(t, message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			time.Sleep(100 * time.Microsecond)
			got.add(m)
			return message.Ack()
		})).engine(t)
		keys := func(i int) string { return fmt.Sprint("k", i%50) }
		const n = 2000
		sh, ds := shardOf(t, "s", n, keys)
		start := time.Now()
		runLambda(t, e, 16, ds)
		// One record at a time would take 200 ms; 16 lanes take 12.5 ms,
		// plus the inline runner's first look.
		if took := time.Since(start); took > 20*time.Millisecond {
			t.Errorf("took %v (virtual), want the lanes' time", took)
		}
		_, by := got.snapshot()
		if diff := cmp.Diff(wantByKey(n, keys), by); diff != "" {
			t.Errorf("handled per key (-want +got):\n%s", diff)
		}
		if seq := firstUnsettled(sh); seq != "" {
			t.Errorf("first unsettled %s, want none", seq)
		}
	})
}
