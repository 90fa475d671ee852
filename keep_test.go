package lambdaadapter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// keeper is a handler that keeps every Message it is given, as a test that
// collects messages does, and a deep copy of what it saw during the call.
type keeper struct {
	mu      sync.Mutex
	kept    []*lambdaadapter.Message
	saw     []lambdaadapter.Message
	payload [][]byte // m.Payload, kept on its own
	// outcome decides; nil acks.
	outcome func(*lambdaadapter.Message) lambdaadapter.Outcome
}

func (k *keeper) HandleRecord(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
	c := *m
	c.Payload = bytes.Clone(m.Payload)
	c.Headers = slices.Clone(m.Headers)
	k.mu.Lock()
	k.kept = append(k.kept, m)
	k.saw = append(k.saw, c)
	k.payload = append(k.payload, m.Payload)
	k.mu.Unlock()
	if k.outcome != nil {
		return k.outcome(m)
	}
	return lambdaadapter.Ack()
}

// same reports whether kept message i still reads as its handler saw it;
// k.mu must be held.
func (k *keeper) same(i int) bool {
	return cmp.Equal(k.saw[i], *k.kept[i], cmpopts.IgnoreUnexported(lambdaadapter.Message{}), cmpopts.EquateEmpty())
}

// check compares every kept message, field by field, with what its handler
// saw, and returns how many there were.
func (k *keeper) check(t *testing.T) int {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, m := range k.kept {
		if !k.same(i) {
			t.Fatalf("message %d (%s/%s) changed after its handler returned (-saw +now):\n%s", i, k.saw[i].ShardID, k.saw[i].SequenceNumber,
				cmp.Diff(k.saw[i], *m, cmpopts.IgnoreUnexported(lambdaadapter.Message{}), cmpopts.EquateEmpty()))
		}
	}
	return len(k.kept)
}

// count counts the kept handlings for which f, called with k.mu held, is
// true.
func (k *keeper) count(f func(i int) bool) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for i := range k.kept {
		if f(i) {
			n++
		}
	}
	return n
}

// TestMessagesAreYoursToKeep (Lambda mode): a handler keeps every Message
// it is given; after three invocations in a row (two raw ones through
// Invoke, one through HandleEvent) every kept message, its Payload and its
// Headers still read as they did during the call: ordinary records with
// and without RSK1 headers, and the user records of KPL aggregates.
func TestMessagesAreYoursToKeep(t *testing.T) {
	k := &keeper{}
	a, err := lambdaadapter.NewFunction(k, lambdaadapter.WithKinesisClient(lambdaadaptertest.NewKinesis()))
	if err != nil {
		t.Fatal(err)
	}
	batch := func(i int) *lambdaadaptertest.Batch {
		b := lambdaadaptertest.NewBatch("keep").Generate(700, 40, 100, true)
		for j := range 3 {
			b.AddAggregate(
				lambdaadaptertest.UserRecord{PartitionKey: fmt.Sprintf("agg-%d-%d-a", i, j), Payload: fmt.Appendf(nil, "user a of %d/%d", i, j), Headers: []string{"trace", "t-a"}},
				lambdaadaptertest.UserRecord{PartitionKey: fmt.Sprintf("agg-%d-%d-b", i, j), Payload: fmt.Appendf(nil, "user b of %d/%d", i, j)},
			)
		}
		return b
	}
	want := 0
	for i := range 2 {
		b := batch(i)
		want += 700 + 6
		resp, err := a.Invoke(t.Context(), b.JSON())
		if err != nil {
			t.Fatal(err)
		}
		if string(resp) != `{"batchItemFailures":[]}` {
			t.Fatalf("invocation %d: response %s, want no failures", i, resp)
		}
	}
	if _, err := a.HandleEvent(t.Context(), batch(2).Event()); err != nil {
		t.Fatal(err)
	}
	want += 700 + 6
	if n := k.check(t); n != want {
		t.Errorf("%d messages kept, want %d", n, want)
	}
}

// TestMessagesAreYoursToKeepPlain (Lambda mode): invocations of ordinary
// records only (the path on which the runner reuses its deliveries from one
// invocation to the next, the messages apart): while later invocations run
// on the same deliveries, a goroutine keeps calling Reply on the messages
// kept from the first, and gets ErrReplyAfterReturn (under -race, this is
// also the check that reusing a delivery does not race a late Reply); at
// the end every kept message reads as its handler saw it.
func TestMessagesAreYoursToKeepPlain(t *testing.T) {
	k := &keeper{}
	a, err := lambdaadapter.NewFunction(k, lambdaadapter.WithKinesisClient(lambdaadaptertest.NewKinesis()))
	if err != nil {
		t.Fatal(err)
	}
	invoke := func(i int) {
		b := lambdaadaptertest.NewBatch(fmt.Sprintf("plain-%d", i)).Generate(700, 40, 100, true)
		resp, err := a.Invoke(t.Context(), b.JSON())
		if err != nil {
			t.Fatal(err)
		}
		if string(resp) != `{"batchItemFailures":[]}` {
			t.Fatalf("invocation %d: response %s, want no failures", i, resp)
		}
	}
	invoke(0)
	k.mu.Lock()
	first := slices.Clone(k.kept)
	k.mu.Unlock()
	stop := make(chan struct{})
	var late atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := first[i%len(first)].Reply(t.Context(), lambdaadapter.Reply{Payload: []byte("late")})
			if !errors.Is(err, lambdaadapter.ErrReplyAfterReturn) {
				t.Errorf("reply on a kept message during a later invocation: %v, want ErrReplyAfterReturn", err)
				return
			}
			late.Add(1)
		}
	})
	for i := 1; i < 4; i++ {
		invoke(i)
	}
	close(stop)
	wg.Wait()
	if late.Load() == 0 {
		t.Error("no late reply was tried")
	}
	for _, m := range first {
		if err := m.Reply(t.Context(), lambdaadapter.Reply{Payload: []byte("late")}); !errors.Is(err, lambdaadapter.ErrReplyAfterReturn) {
			t.Fatalf("reply on a kept message: %v, want ErrReplyAfterReturn", err)
		}
	}
	if n := k.check(t); n != 4*700 {
		t.Errorf("%d messages kept, want %d", n, 4*700)
	}
}

// TestMessagesAreYoursToKeepLongRunning (long-running mode): a handler
// keeps every Message of many GetRecords answers (at most 10 records each,
// so that the answers' storage would have been reused many times over),
// among them the message of each in-process redelivery of a record it
// retries twice; afterwards every kept message reads as it did during its
// call, each redelivery's message shows its own attempt, and a Reply on an
// earlier attempt's message is refused. The same with a BatchHandler.
func TestMessagesAreYoursToKeepLongRunning(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			const stream, n = "orders", 300
			kin := awsfake.NewKinesis()
			kin.CreateStream(stream, 2)
			for i := range n {
				data, err := envelope.Encode(envelope.Headers{{Name: "trace", Value: fmt.Sprint("t-", i)}}, fmt.Appendf(nil, "record %d", i))
				if err != nil {
					t.Fatal(err)
				}
				kin.Put(stream, fmt.Sprintf("key-%d", i%17), data)
			}
			kin.Put(stream, "again", []byte("retry twice"))
			k := &keeper{}
			var done atomic.Int32
			k.outcome = func(m *lambdaadapter.Message) lambdaadapter.Outcome {
				if string(m.Payload) == "retry twice" && m.Attempt < 3 {
					return lambdaadapter.Retry(errors.New("not yet"))
				}
				done.Add(1)
				return lambdaadapter.Ack()
			}
			opts := []lambdaadapter.ServiceOption{
				lambdaadapter.WithStream(stream),
				lambdaadapter.WithKinesisClient(kin), lambdaadapter.WithLeaseStore(lease.NewMemory()),
				lambdaadapter.WithOwnerID("keeper"), lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
				lambdaadapter.WithGetRecordsLimit(10), lambdaadapter.WithRetryBackoff(time.Millisecond, 10*time.Millisecond),
			}
			var a *lambdaadapter.Service
			var err error
			if batch {
				a, err = lambdaadapter.NewBatchService(lambdaadapter.BatchHandlerFunc(func(ctx context.Context, ms []*lambdaadapter.Message) []lambdaadapter.Outcome {
					outs := make([]lambdaadapter.Outcome, len(ms))
					for i, m := range ms {
						outs[i] = k.HandleRecord(ctx, m)
					}
					return outs
				}), append(opts, lambdaadapter.WithBatchSize(8))...)
			} else {
				a, err = lambdaadapter.NewService(k, opts...)
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- a.Run(ctx) }()
			deadline := time.After(time.Minute)
			for done.Load() < n+1 {
				select {
				case err := <-ran:
					t.Fatalf("Run returned before the stop: %v", err)
				case <-deadline:
					t.Fatalf("after a minute: %d of %d records done", done.Load(), n+1)
				case <-time.After(5 * time.Millisecond):
				}
			}
			cancel()
			if err := <-ran; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := k.check(t); got != n+3 {
				t.Errorf("%d handlings, want %d", got, n+3)
			}
			var attempts []int
			var first *lambdaadapter.Message
			for _, m := range k.kept {
				if string(m.Payload) == "retry twice" {
					attempts = append(attempts, m.Attempt)
					if first == nil {
						first = m
					}
				}
			}
			if !slices.Equal(attempts, []int{1, 2, 3}) {
				t.Errorf("the retried record's kept messages show attempts %v, want [1 2 3]", attempts)
			}
			if err := first.Reply(t.Context(), lambdaadapter.Reply{Payload: []byte("late")}); !errors.Is(err, lambdaadapter.ErrReplyAfterReturn) {
				t.Errorf("reply on a kept message: %v, want ErrReplyAfterReturn", err)
			}
		})
	}
}

// TestRecycledMessagesAreCaught: with WithRecycledMessages the adapter
// reuses the messages' memory, and a test that kept them sees it: after two
// invocations every kept message reads differently (it was zeroed), and
// every payload slice kept on its own reads 0xDB bytes, not another
// record's data.
func TestRecycledMessagesAreCaught(t *testing.T) {
	k := &keeper{}
	a, err := lambdaadapter.NewFunction(k, lambdaadapter.WithKinesisClient(lambdaadaptertest.NewKinesis()), lambdaadapter.WithRecycledMessages())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := a.Invoke(t.Context(), lambdaadaptertest.NewBatch("recycled").Generate(300, 20, 64, i == 0).JSON()); err != nil {
			t.Fatal(err)
		}
	}
	if n := k.count(func(i int) bool { return !k.same(i) }); n != 600 {
		t.Errorf("%d of 600 kept messages changed, want all", n)
	}
	overwritten := func(i int) bool { p := k.payload[i]; return len(p) > 0 && bytes.Count(p, []byte{0xDB}) == len(p) }
	if n := k.count(overwritten); n != 600 {
		t.Errorf("%d of 600 kept payloads overwritten with 0xDB, want all", n)
	}
}
