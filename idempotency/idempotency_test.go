package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/idempotency"
	internalmessage "github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

const (
	streamARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"
	shardID   = "shardId-000000000000"
	seq1      = "49590338271490256608559692538361571095921575989136588898"
	seq2      = "49590338271490256608559692538361571095921575989136588899"
)

func message(seq string) *lambdaadapter.Message {
	return &lambdaadapter.Message{
		Payload: []byte(`{"id":"order-1"}`), PartitionKey: "user-1", SequenceNumber: seq,
		ShardID: shardID, StreamARN: streamARN, Attempt: 1,
	}
}

// runs is a handler that counts its runs and returns what next says.
type runs struct {
	n    atomic.Int32
	next func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome
}

func (r *runs) HandleRecord(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
	r.n.Add(1)
	return r.next(ctx, m)
}

func returning(o lambdaadapter.Outcome) *runs {
	return &runs{next: func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome { return o }}
}

func newHandler(t *testing.T, next lambdaadapter.Handler, db *fakeDB, opts ...idempotency.Option) *idempotency.Handler {
	t.Helper()
	h, err := idempotency.New(next, db, db.table, append([]idempotency.Option{idempotency.WithKeyPrefix("orders-fn")}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h
}

func sAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func nAttr(t *testing.T, item map[string]types.AttributeValue, name string) int64 {
	t.Helper()
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("item has no number %s: %v", name, item)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const wantID = "orders-fn#" + streamARN + "#" + shardID + "#" + seq1 + "#0"

func TestAckIsRecordedAndNotRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := newFakeDB(t)
		next := returning(lambdaadapter.Ack())
		h := newHandler(t, next, db)
		start := time.Now()
		if out := h.HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindAck {
			t.Fatalf("first delivery: %v, want ack", out)
		}
		item := db.item(wantID)
		if item == nil {
			t.Fatalf("no item %q; have %q", wantID, db.ids())
		}
		if got := sAttr(item, "status"); got != "COMPLETED" {
			t.Errorf("status %q, want COMPLETED", got)
		}
		if got := sAttr(item, "data"); got != `{"outcome":"ack"}` {
			t.Errorf("data %q", got)
		}
		if got, want := nAttr(t, item, "expiration"), start.Add(time.Hour).Unix(); got != want {
			t.Errorf("expiration %d, want %d (now + 1h)", got, want)
		}
		if _, ok := item["validation"]; ok {
			t.Errorf("validation stored without WithPayloadValidation")
		}

		time.Sleep(59 * time.Minute)
		if out := h.HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindAck || out.Err() != nil {
			t.Fatalf("redelivery: %v, want a plain ack", out)
		}
		if n := next.n.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
		// Another record runs.
		if out := h.HandleRecord(t.Context(), message(seq2)); out.Kind() != lambdaadapter.KindAck || next.n.Load() != 2 {
			t.Errorf("other record: %v, %d runs", out, next.n.Load())
		}
		// After the TTL the record runs again.
		time.Sleep(2 * time.Minute)
		h.HandleRecord(t.Context(), message(seq1))
		if n := next.n.Load(); n != 3 {
			t.Errorf("after the TTL: handler ran %d times in all, want 3", n)
		}
	})
}

func TestDropIsReplayedAsDrop(t *testing.T) {
	db := newFakeDB(t)
	next := returning(lambdaadapter.Drop(errors.New("bad order")))
	h := newHandler(t, next, db)
	if out := h.HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindDrop {
		t.Fatalf("first delivery: %v, want drop", out)
	}
	if got := sAttr(db.item(wantID), "data"); got != `{"outcome":"drop","reason":"bad order"}` {
		t.Errorf("data %q", got)
	}
	out := h.HandleRecord(t.Context(), message(seq1))
	if out.Kind() != lambdaadapter.KindDrop || !errors.Is(out.Err(), idempotency.ErrDuplicate) || !strings.Contains(out.Err().Error(), "bad order") {
		t.Errorf("redelivery: %v, want a drop matching ErrDuplicate with the first reason", out)
	}
	if n := next.n.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestFailureDeletesTheClaim(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  lambdaadapter.Outcome
	}{
		{"retry", lambdaadapter.Retry(errors.New("down"))},
		{"retry after", lambdaadapter.RetryAfter(time.Minute, errors.New("throttled"))},
		{"zero outcome", lambdaadapter.Outcome{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newFakeDB(t)
			next := returning(tc.out)
			h := newHandler(t, next, db)
			for i := range 2 {
				out := h.HandleRecord(t.Context(), message(seq1))
				if out != tc.out {
					t.Errorf("delivery %d: %v, want %v passed on", i+1, out, tc.out)
				}
				if ids := db.ids(); len(ids) != 0 {
					t.Errorf("delivery %d left items %q", i+1, ids)
				}
			}
			if n := next.n.Load(); n != 2 {
				t.Errorf("handler ran %d times, want 2 (a failure runs again)", n)
			}
		})
	}
}

func TestPanicDeletesTheClaimAndPassesOn(t *testing.T) {
	db := newFakeDB(t)
	var fail atomic.Bool
	fail.Store(true)
	next := &runs{next: func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
		if fail.Load() {
			panic("boom")
		}
		return lambdaadapter.Ack()
	}}
	h := newHandler(t, next, db)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the handler's panic", r)
			}
		}()
		h.HandleRecord(t.Context(), message(seq1))
		t.Error("HandleRecord returned; want the panic passed on")
	}()
	if ids := db.ids(); len(ids) != 0 {
		t.Errorf("the panic left items %q", ids)
	}
	fail.Store(false)
	if out := h.HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindAck || next.n.Load() != 2 {
		t.Errorf("after the panic: %v, %d runs; want ack, 2", out, next.n.Load())
	}
}

func TestInProgressStaysUnsettledUntilItsExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := newFakeDB(t)
		now := time.Now()
		// A claim left by a crashed run, expiring in 30 s.
		db.put(map[string]types.AttributeValue{
			"id":                     &types.AttributeValueMemberS{Value: wantID},
			"status":                 &types.AttributeValueMemberS{Value: "INPROGRESS"},
			"expiration":             &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
			"in_progress_expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(30*time.Second).UnixMilli(), 10)},
		})
		next := returning(lambdaadapter.Ack())
		h := newHandler(t, next, db)
		for range 3 {
			out := h.HandleRecord(t.Context(), message(seq1))
			if out.Kind() != lambdaadapter.KindRetry || !errors.Is(out.Err(), idempotency.ErrInProgress) {
				t.Fatalf("while claimed: %v, want a retry matching ErrInProgress", out)
			}
			time.Sleep(10 * time.Second)
		}
		if n := next.n.Load(); n != 0 {
			t.Fatalf("handler ran %d times while the record was claimed", n)
		}
		time.Sleep(time.Second) // 31 s: the claim expired
		if out := h.HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindAck || next.n.Load() != 1 {
			t.Errorf("after the claim's expiry: %v, %d runs; want ack, 1", out, next.n.Load())
		}
		if got := sAttr(db.item(wantID), "status"); got != "COMPLETED" {
			t.Errorf("status %q, want COMPLETED", got)
		}
	})
}

func TestPowertoolsClaimWithoutInProgressExpiryHoldsUntilExpiration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := newFakeDB(t)
		db.put(map[string]types.AttributeValue{
			"id":         &types.AttributeValueMemberS{Value: wantID},
			"status":     &types.AttributeValueMemberS{Value: "INPROGRESS"},
			"expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)},
		})
		next := returning(lambdaadapter.Ack())
		h := newHandler(t, next, db)
		if out := h.HandleRecord(t.Context(), message(seq1)); !errors.Is(out.Err(), idempotency.ErrInProgress) {
			t.Fatalf("%v, want ErrInProgress", out)
		}
		time.Sleep(61 * time.Second)
		if out := h.HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindAck || next.n.Load() != 1 {
			t.Errorf("after the expiration: %v, %d runs", out, next.n.Load())
		}
	})
}

// TestConcurrentDeliveriesRunOnce hands the same record to two goroutines
// at once; the handler blocks until both have tried: one runs, the other
// stays unsettled.
func TestConcurrentDeliveriesRunOnce(t *testing.T) {
	db := newFakeDB(t)
	second := make(chan lambdaadapter.Outcome, 2)
	release := make(chan struct{})
	next := &runs{next: func(ctx context.Context, _ *lambdaadapter.Message) lambdaadapter.Outcome {
		select {
		case <-release:
		case <-ctx.Done():
			return lambdaadapter.Retry(ctx.Err())
		}
		return lambdaadapter.Ack()
	}}
	h := newHandler(t, next, db)
	var wg sync.WaitGroup
	outs := make(chan lambdaadapter.Outcome, 2)
	for range 2 {
		wg.Go(func() {
			out := h.HandleRecord(t.Context(), message(seq1))
			outs <- out
			if out.Kind() == lambdaadapter.KindRetry {
				second <- out
			}
		})
	}
	// The one that did not get the claim returns at once, while the other
	// is blocked in the handler.
	select {
	case out := <-second:
		if !errors.Is(out.Err(), idempotency.ErrInProgress) {
			t.Errorf("the second delivery: %v, want ErrInProgress", out)
		}
	case <-time.After(time.Minute):
		t.Fatal("neither delivery returned while the other ran the handler")
	}
	close(release)
	wg.Wait()
	close(outs)
	kinds := map[lambdaadapter.OutcomeKind]int{}
	for o := range outs {
		kinds[o.Kind()]++
	}
	if diff := cmp.Diff(map[lambdaadapter.OutcomeKind]int{lambdaadapter.KindAck: 1, lambdaadapter.KindRetry: 1}, kinds); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if n := next.n.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// TestTakenOverClaimIsNotOverwritten: a run outlives its claim, another
// delivery takes it over and completes; the first run's completion must
// fail and leave the other's item alone.
func TestTakenOverClaimIsNotOverwritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := newFakeDB(t)
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		slow := make(chan struct{})
		next := &runs{next: func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
			if m.Attempt == 1 {
				<-slow
				return lambdaadapter.Ack()
			}
			return lambdaadapter.Drop(errors.New("second run"))
		}}
		h := newHandler(t, next, db, idempotency.WithInProgressExpiry(10*time.Second), idempotency.WithLogger(logger))
		done := make(chan lambdaadapter.Outcome)
		go func() { done <- h.HandleRecord(context.Background(), message(seq1)) }()
		synctest.Wait()
		time.Sleep(11 * time.Second)
		m := message(seq1)
		m.Attempt = 2
		if out := h.HandleRecord(t.Context(), m); out.Kind() != lambdaadapter.KindDrop {
			t.Fatalf("second delivery after the claim's expiry: %v, want the handler's drop", out)
		}
		close(slow)
		if out := <-done; out.Kind() != lambdaadapter.KindAck {
			t.Errorf("first run: %v, want its ack passed on", out)
		}
		if got := sAttr(db.item(wantID), "data"); !strings.Contains(got, "second run") {
			t.Errorf("data %q: the first run's completion overwrote the second's", got)
		}
		if !strings.Contains(logs.String(), "was not recorded") {
			t.Errorf("the failed completion was not logged:\n%s", logs.String())
		}
	})
}

func TestInProgressExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			opts     []idempotency.Option
			deadline time.Duration // 0: none
			want     time.Duration
		}{
			{"no deadline: the default", nil, 0, idempotency.DefaultInProgressExpiry},
			{"the context's deadline", nil, 14 * time.Minute, 14 * time.Minute},
			{"explicit", []idempotency.Option{idempotency.WithInProgressExpiry(5 * time.Second)}, time.Minute, 5 * time.Second},
			{"never above the TTL", []idempotency.Option{idempotency.WithTTL(2 * time.Minute)}, 14 * time.Minute, 2 * time.Minute},
		} {
			db := newFakeDB(t)
			var claim int64
			next := &runs{next: func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
				claim = nAttr(t, db.item(wantID), "in_progress_expiration")
				return lambdaadapter.Ack()
			}}
			h := newHandler(t, next, db, tc.opts...)
			ctx := t.Context()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			h.HandleRecord(ctx, message(seq1))
			if want := time.Now().Add(tc.want).UnixMilli(); claim != want {
				t.Errorf("%s: in_progress_expiration %d, want %d (now + %v)", tc.name, claim, want, tc.want)
			}
			// The completed item keeps it (as Powertools' does).
			if got := nAttr(t, db.item(wantID), "in_progress_expiration"); got != claim {
				t.Errorf("%s: completed item has in_progress_expiration %d, want %d", tc.name, got, claim)
			}
		}
	})
}

func TestEndedContextClaimsNothing(t *testing.T) {
	db := newFakeDB(t)
	next := returning(lambdaadapter.Ack())
	h := newHandler(t, next, db)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	out := h.HandleRecord(ctx, message(seq1))
	if out.Kind() != lambdaadapter.KindRetry || !errors.Is(out.Err(), context.Canceled) || next.n.Load() != 0 || len(db.callLog()) != 0 {
		t.Errorf("%v, %d runs, calls %v; want a retry without a call", out, next.n.Load(), db.callLog())
	}
}

func TestCancelledHandlerStillReleases(t *testing.T) {
	db := newFakeDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	next := &runs{next: func(ctx context.Context, _ *lambdaadapter.Message) lambdaadapter.Outcome {
		cancel() // the deadline passes while the handler runs
		return lambdaadapter.Retry(ctx.Err())
	}}
	h := newHandler(t, next, db)
	h.HandleRecord(ctx, message(seq1))
	if ids := db.ids(); len(ids) != 0 {
		t.Errorf("claim left behind: %q", ids)
	}
}

func TestKeyFunc(t *testing.T) {
	keyOf := func(m *lambdaadapter.Message) (string, error) {
		var o struct{ ID string }
		if err := json.Unmarshal(m.Payload, &o); err != nil {
			return "", err
		}
		return o.ID, nil
	}
	db := newFakeDB(t)
	next := returning(lambdaadapter.Ack())
	h := newHandler(t, next, db, idempotency.WithKeyFunc(keyOf))

	// A copy with another sequence number is the same record.
	h.HandleRecord(t.Context(), message(seq1))
	copyOf := message(seq2)
	copyOf.Attempt = 2
	if out := h.HandleRecord(t.Context(), copyOf); out.Kind() != lambdaadapter.KindAck || next.n.Load() != 1 {
		t.Errorf("copy: %v, %d runs; want ack without running", out, next.n.Load())
	}
	if diff := cmp.Diff([]string{"orders-fn#order-1"}, db.ids()); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}

	// A long key is hashed.
	long := message(seq1)
	long.Payload = []byte(`{"id":"` + strings.Repeat("x", 2000) + `"}`)
	id, err := h.ID(long)
	if err != nil || !strings.HasPrefix(id, "orders-fn#sha256:") || len(id) != len("orders-fn#sha256:")+64 {
		t.Errorf("ID of a long key = %q, %v", id, err)
	}

	// No key: unsettled, not run, nothing written.
	for _, payload := range []string{`not json`, `{"id":""}`} {
		m := message(seq1)
		m.Payload = []byte(payload)
		calls := len(db.callLog())
		out := h.HandleRecord(t.Context(), m)
		if out.Kind() != lambdaadapter.KindRetry || !errors.Is(out.Err(), idempotency.ErrKey) || len(db.callLog()) != calls {
			t.Errorf("payload %q: %v, want a retry matching ErrKey, no call", payload, out)
		}
		if !strings.Contains(out.Err().Error(), seq1) {
			t.Errorf("payload %q: error %q does not name the record", payload, out.Err())
		}
	}
	var syntax *json.SyntaxError
	m := message(seq1)
	m.Payload = []byte(`not json`)
	if out := h.HandleRecord(t.Context(), m); !errors.As(out.Err(), &syntax) {
		t.Errorf("error %v does not match the key function's", out.Err())
	}
	if n := next.n.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestDefaultKey(t *testing.T) {
	m := message(seq1)
	m.Aggregated, m.SubSequenceNumber = true, 3
	key, err := idempotency.DefaultKey(m)
	if want := streamARN + "#" + shardID + "#" + seq1 + "#3"; key != want || err != nil {
		t.Errorf("DefaultKey = %q, %v; want %q", key, err, want)
	}
	if _, err := idempotency.DefaultKey(&lambdaadapter.Message{ShardID: shardID}); err == nil {
		t.Error("DefaultKey without a sequence number: no error")
	}
	// A counted copy: its own coordinates differ, the origin header names
	// the original's.
	own := streamARN + "#shardId-000000000002#" + seq2 + "#0"
	for _, tt := range []struct{ origin, want string }{
		{shardID + "#" + seq1 + "#0", streamARN + "#" + shardID + "#" + seq1 + "#0"},
		{shardID + "#" + seq1 + "#7", streamARN + "#" + shardID + "#" + seq1 + "#7"},
		{"", own}, // not of the form: ignored
		{shardID + "#" + seq1, own},
		{shardID + "#x" + seq1 + "#0", own},
		{"#" + seq1 + "#0", own},
		{shardID + "#" + seq1 + "#0#1", own},
	} {
		c := &lambdaadapter.Message{StreamARN: streamARN, ShardID: "shardId-000000000002", SequenceNumber: seq2, Attempt: 2,
			Headers: envelope.Headers{{Name: "x-ruststream-retry-count", Value: "1"}, {Name: publish.OriginHeader, Value: tt.origin}}}
		if key, err := idempotency.DefaultKey(c); key != tt.want || err != nil {
			t.Errorf("DefaultKey with origin %q = %q, %v; want %q", tt.origin, key, err, tt.want)
		}
	}
}

func TestPayloadValidation(t *testing.T) {
	db := newFakeDB(t)
	next := returning(lambdaadapter.Ack())
	h := newHandler(t, next, db, idempotency.WithPayloadValidation())
	h.HandleRecord(t.Context(), message(seq1))
	if v := sAttr(db.item(wantID), "validation"); len(v) != 64 {
		t.Errorf("validation %q, want a hex SHA-256", v)
	}
	if out := h.HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindAck {
		t.Errorf("same payload: %v, want ack", out)
	}
	other := message(seq1)
	other.Payload = []byte(`{"id":"order-2"}`)
	if out := h.HandleRecord(t.Context(), other); out.Kind() != lambdaadapter.KindDrop || !errors.Is(out.Err(), idempotency.ErrPayloadMismatch) {
		t.Errorf("other payload: %v, want a drop matching ErrPayloadMismatch", out)
	}
	if n := next.n.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestStoreFailures(t *testing.T) {
	throttled := &types.ProvisionedThroughputExceededException{Message: new("slow down")}
	t.Run("claim fails: unsettled, not run", func(t *testing.T) {
		db := newFakeDB(t)
		db.fail = func(op, _ string) error {
			if op == "PutItem" {
				return throttled
			}
			return nil
		}
		next := returning(lambdaadapter.Ack())
		out := newHandler(t, next, db).HandleRecord(t.Context(), message(seq1))
		var pe *types.ProvisionedThroughputExceededException
		if out.Kind() != lambdaadapter.KindRetry || !errors.Is(out.Err(), idempotency.ErrStore) || !errors.As(out.Err(), &pe) || next.n.Load() != 0 {
			t.Errorf("%v, %d runs; want a retry matching ErrStore and the SDK error, not run", out, next.n.Load())
		}
		// Unsettled even under a cap: it matches the engine's marker of a
		// retry that attempted nothing, as ErrInProgress does.
		if !errors.Is(out.Err(), internalmessage.ErrHeldElsewhere) {
			t.Errorf("%v: want a retry that counts no attempt (ErrHeldElsewhere)", out)
		}
	})
	t.Run("missing table", func(t *testing.T) {
		db := newFakeDB(t)
		h, err := idempotency.New(returning(lambdaadapter.Ack()), db, "nope")
		if err != nil {
			t.Fatal(err)
		}
		out := h.HandleRecord(t.Context(), message(seq1))
		if !errors.Is(out.Err(), idempotency.ErrTableNotFound) || !errors.Is(out.Err(), idempotency.ErrStore) ||
			!strings.Contains(out.Err().Error(), "create it with: bootstrap idempotency init -table nope") {
			t.Errorf("%v, want ErrTableNotFound naming the command", out)
		}
	})
	t.Run("read fails after a refused claim", func(t *testing.T) {
		db := newFakeDB(t)
		db.noOldItem = true
		next := returning(lambdaadapter.Ack())
		h := newHandler(t, next, db)
		h.HandleRecord(t.Context(), message(seq1))
		db.fail = func(op, _ string) error {
			if op == "GetItem" {
				return throttled
			}
			return nil
		}
		if out := h.HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindRetry || !errors.Is(out.Err(), idempotency.ErrStore) || !errors.Is(out.Err(), internalmessage.ErrHeldElsewhere) {
			t.Errorf("%v, want a retry matching ErrStore that counts no attempt", out)
		}
	})
	for _, tc := range []struct {
		op   string
		out  lambdaadapter.Outcome
		logs string
	}{
		{"UpdateItem", lambdaadapter.Ack(), "was not recorded"},
		{"DeleteItem", lambdaadapter.Retry(errors.New("down")), "was not deleted"},
	} {
		t.Run(tc.op+" fails: the outcome passes, logged", func(t *testing.T) {
			db := newFakeDB(t)
			db.fail = func(op, _ string) error {
				if op == tc.op {
					return throttled
				}
				return nil
			}
			var logs bytes.Buffer
			h := newHandler(t, returning(tc.out), db, idempotency.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			if out := h.HandleRecord(t.Context(), message(seq1)); out != tc.out {
				t.Errorf("%v, want %v", out, tc.out)
			}
			for _, want := range []string{tc.logs, `"level":"ERROR"`, `"idempotency_id":"` + wantID, `"shard_id":"` + shardID, "slow down"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logs.String())
				}
			}
			// The claim stays: the record is in progress until its expiry.
			db.fail = nil
			if out := h.HandleRecord(t.Context(), message(seq1)); !errors.Is(out.Err(), idempotency.ErrInProgress) {
				t.Errorf("next delivery: %v, want ErrInProgress", out)
			}
		})
	}
}

// TestWithoutOldItem runs the main paths against a service that does not
// return the item that refused a claim (dynalite): a GetItem reads it.
func TestWithoutOldItem(t *testing.T) {
	db := newFakeDB(t)
	db.noOldItem = true
	next := returning(lambdaadapter.Ack())
	h := newHandler(t, next, db)
	h.HandleRecord(t.Context(), message(seq1))
	if out := h.HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindAck || next.n.Load() != 1 {
		t.Errorf("%v, %d runs", out, next.n.Load())
	}
	if diff := cmp.Diff([]string{"PutItem", "UpdateItem", "PutItem", "GetItem"}, db.callLog()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestClaimRetriedWhenTheItemVanishes: the claim is refused, but the item
// is gone when it is read (its run released it): the claim is made again.
func TestClaimRetriedWhenTheItemVanishes(t *testing.T) {
	db := newFakeDB(t)
	db.noOldItem = true
	db.put(map[string]types.AttributeValue{
		"id":                     &types.AttributeValueMemberS{Value: wantID},
		"status":                 &types.AttributeValueMemberS{Value: "INPROGRESS"},
		"expiration":             &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)},
		"in_progress_expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)},
	})
	db.fail = func(op, id string) error {
		if op == "GetItem" {
			db.mu.Lock()
			delete(db.items, id)
			db.mu.Unlock()
		}
		return nil
	}
	next := returning(lambdaadapter.Ack())
	if out := newHandler(t, next, db).HandleRecord(t.Context(), message(seq1)); out.Kind() != lambdaadapter.KindAck || next.n.Load() != 1 {
		t.Errorf("%v, %d runs; want the record claimed again and run", out, next.n.Load())
	}
}

func TestNewValidates(t *testing.T) {
	db := newFakeDB(t)
	next := returning(lambdaadapter.Ack())
	for _, tc := range []struct {
		table string
		opts  []idempotency.Option
		want  string
	}{
		{"", nil, "empty table name"},
		{"t", []idempotency.Option{idempotency.WithKeyPrefix("")}, "empty prefix"},
		{"t", []idempotency.Option{idempotency.WithKeyPrefix("a#b")}, "must not contain '#'"},
		{"t", []idempotency.Option{idempotency.WithKeyPrefix(strings.Repeat("p", 256))}, "at most 255"},
		{"t", []idempotency.Option{idempotency.WithTTL(0)}, "WithTTL"},
		{"t", []idempotency.Option{idempotency.WithInProgressExpiry(-time.Second)}, "WithInProgressExpiry"},
		{"t", []idempotency.Option{idempotency.WithInProgressExpiry(2 * time.Hour)}, "exceeds the TTL"},
	} {
		if _, err := idempotency.New(next, db, tc.table, tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, ...): %v, want an error containing %q", tc.table, err, tc.want)
		}
	}
	for name, f := range map[string]func(){
		"nil handler": func() { idempotency.New(nil, db, "t") },
		"nil client":  func() { idempotency.New(next, nil, "t") },
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.HasPrefix(r, "idempotency: ") {
					t.Errorf("%s: recovered %q, want a panic with the package prefix", name, r)
				}
			}()
			f()
		}()
	}
	h, err := idempotency.New(next, db, "t")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := h.ID(message(seq1)); !strings.HasPrefix(id, idempotency.DefaultKeyPrefix+"#") {
		t.Errorf("default prefix: id %q (outside Lambda it is %q)", id, idempotency.DefaultKeyPrefix)
	}
}

// TestLambdaBatchRedelivered runs a batch through the real Lambda-mode
// runner twice, as Lambda does when it retries a batch: the records that
// were acknowledged the first time are not run again; the one that failed
// is.
func TestLambdaBatchRedelivered(t *testing.T) {
	db := newFakeDB(t)
	var mu sync.Mutex
	effects := map[string]int{}
	failed := map[string]bool{}
	next := lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		mu.Lock()
		defer mu.Unlock()
		id := string(m.Payload)
		if id == "r2" && !failed[id] {
			failed[id] = true
			return lambdaadapter.Retry(errors.New("transient"))
		}
		effects[id]++
		return lambdaadapter.Ack()
	})
	h := newHandler(t, next, db)
	b := lambdaadaptertest.NewBatch("orders")
	for i := range 5 {
		b.Add("key-"+strconv.Itoa(i), []byte("r"+strconv.Itoa(i)))
	}
	first := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithConcurrency(8))
	if len(first.Failures) != 1 || first.Failures[0] != b.SequenceNumbers()[2] {
		t.Fatalf("first run reported %v, want r2's sequence number", first.Failures)
	}
	second := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithConcurrency(8))
	if !second.AllSettled() {
		t.Fatalf("second run reported %v", second.Failures)
	}
	want := map[string]int{"r0": 1, "r1": 1, "r2": 1, "r3": 1, "r4": 1}
	if diff := cmp.Diff(want, effects); diff != "" {
		t.Errorf("side effects (-want +got):\n%s", diff)
	}
}

// TestReplies: replies go through the runner; a failed reply leaves the
// record unsettled and its claim deleted, so its next delivery runs the
// handler (and the reply) again.
func TestReplies(t *testing.T) {
	db := newFakeDB(t)
	next := &runs{next: func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		_ = m.Reply(ctx, lambdaadapter.Reply{Payload: []byte("answer")}) // a sloppy handler: acks anyway
		return lambdaadapter.Ack()
	}}
	h := newHandler(t, next, db)
	k := lambdaadaptertest.NewKinesis()
	var fail atomic.Bool
	fail.Store(true)
	k.Fail = func(stream, _ string, _ []byte) string {
		if fail.Load() {
			return "AccessDeniedException" // permanent: not retried
		}
		return ""
	}
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("k", []byte("r0"))
	opts := []lambdaadapter.FunctionOption{lambdaadapter.WithReplyStream("replies"), lambdaadapter.WithKinesisClient(k)}
	if res := lambdaadaptertest.Run(t, h, b, opts...); res.AllSettled() {
		t.Fatal("a failed reply settled the record")
	}
	if ids := db.ids(); len(ids) != 0 {
		t.Fatalf("a failed reply left items %q", ids)
	}
	fail.Store(false)
	if res := lambdaadaptertest.Run(t, h, b, opts...); !res.AllSettled() {
		t.Fatalf("second run reported %v", res.Failures)
	}
	if res := lambdaadaptertest.Run(t, h, b, opts...); !res.AllSettled() {
		t.Fatalf("third run reported %v", res.Failures)
	}
	if n := next.n.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (the failed reply, then once)", n)
	}
	replies := 0
	for _, w := range k.Written() {
		if w.Stream == "replies" {
			replies++
		}
	}
	if replies != 1 {
		t.Errorf("%d replies written, want 1", replies)
	}
}

// TestInProgressUnderCountedRetries: a record whose key is claimed by a
// run in progress elsewhere stays unsettled under a cap or a dead-letter
// target, as without one: reported (Lambda delivers it again), with no
// copy, no dead letter and no attempt counted, however often it comes. With
// a cap of 1 it was retired unhandled (lost when the other run then
// failed); with a cap of 3 a copy was written. Once the other run fails and
// releases its claim, the next delivery runs the handler, once.
func TestInProgressUnderCountedRetries(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []lambdaadapter.FunctionOption
	}{
		{"cap 1", []lambdaadapter.FunctionOption{lambdaadapter.WithMaxAttempts(1)}},
		{"cap 3", []lambdaadapter.FunctionOption{lambdaadapter.WithMaxAttempts(3)}},
		{"dead-letter stream, cap 1", []lambdaadapter.FunctionOption{lambdaadapter.WithMaxAttempts(1), lambdaadapter.WithDeadLetterStream("dead-letters")}},
		{"dead-letter queue (cap 3)", []lambdaadapter.FunctionOption{lambdaadapter.WithDeadLetterQueue("https://sqs.us-east-1.amazonaws.com/123456789012/dl")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := newFakeDB(t)
			next := returning(lambdaadapter.Ack())
			h := newHandler(t, next, db)
			b := lambdaadaptertest.NewBatch("orders")
			seq := b.Add("user-1", []byte(`{"id":"order-1"}`))
			b.Add("user-1", []byte(`{"id":"order-2"}`))
			id, err := h.ID(&lambdaadapter.Message{StreamARN: "arn:aws:kinesis:us-east-1:123456789012:stream/orders", ShardID: lambdaadaptertest.DefaultShardID, SequenceNumber: seq})
			if err != nil {
				t.Fatal(err)
			}
			// Another run (a timed-out invocation's, another worker's)
			// holds the first record's key.
			now := time.Now()
			db.put(map[string]types.AttributeValue{
				"id":                     &types.AttributeValueMemberS{Value: id},
				"status":                 &types.AttributeValueMemberS{Value: "INPROGRESS"},
				"expiration":             &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
				"in_progress_expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10)},
			})
			for i := range 3 {
				res := lambdaadaptertest.Run(t, h, b, tt.opts...)
				if !slices.Equal(res.Failures, []string{seq}) {
					t.Fatalf("delivery %d while held: reported %v, want the held record %s", i+1, res.Failures, seq)
				}
				if w := res.Kinesis.Written(); len(w) != 0 {
					t.Fatalf("delivery %d while held: %d records written (a copy or dead letter), want none: %+v", i+1, len(w), w)
				}
				if s := res.SQS.Sent(); len(s) != 0 {
					t.Fatalf("delivery %d while held: %d SQS messages, want none", i+1, len(s))
				}
			}
			if n := next.n.Load(); n != 0 {
				t.Fatalf("handler ran %d times while the key was held elsewhere", n)
			}
			// The other run fails: its claim is released.
			db.mu.Lock()
			delete(db.items, id)
			db.mu.Unlock()
			res := lambdaadaptertest.Run(t, h, b, tt.opts...)
			if !res.AllSettled() || len(res.Kinesis.Written()) != 0 || len(res.SQS.Sent()) != 0 {
				t.Fatalf("after the release: reported %v, wrote %d records and %d messages; want all settled, nothing written",
					res.Failures, len(res.Kinesis.Written()), len(res.SQS.Sent()))
			}
			if n := next.n.Load(); n != 2 {
				t.Errorf("handler ran %d times, want 2 (each record once)", n)
			}
			if st := sAttr(db.item(id), "status"); st != "COMPLETED" {
				t.Errorf("held record's item is %q after its run, want COMPLETED", st)
			}
		})
	}
}

// TestCopiesShareTheOriginalsKey: a counted copy carries the original's
// coordinates (x-lambdaadapter-origin), and the default key is taken from
// them, so the original and its copies share one key: a second copy chain
// of one record (two copies of it, as a crash between a copy's write and
// the checkpoint leaves) runs the handler once.
func TestCopiesShareTheOriginalsKey(t *testing.T) {
	db := newFakeDB(t)
	next := &runs{next: func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		if m.Attempt == 1 {
			return lambdaadapter.Retry(errors.New("transient"))
		}
		return lambdaadapter.Ack()
	}}
	h := newHandler(t, next, db)
	b := lambdaadaptertest.NewBatch("orders")
	seq := b.Add("user-1", []byte(`{"id":"order-1"}`), "x-tenant", "acme")
	first := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithMaxAttempts(3))
	w := first.Kinesis.Written()
	if !first.AllSettled() || len(w) != 1 {
		t.Fatalf("first run: reported %v, wrote %d records; want a settled original and one copy", first.Failures, len(w))
	}
	origin := lambdaadaptertest.DefaultShardID + "#" + seq + "#0"
	if got := w[0].Headers.Get(publish.OriginHeader); got != origin {
		t.Fatalf("copy's %s = %q, want %q", publish.OriginHeader, got, origin)
	}
	if len(db.ids()) != 0 {
		t.Fatalf("the failed run left items %q", db.ids())
	}
	// Two copies of the record arrive (two copy chains).
	copies := lambdaadaptertest.NewBatch("orders")
	var hdrs []string
	for _, x := range w[0].Headers {
		hdrs = append(hdrs, x.Name, x.Value)
	}
	copies.Add(w[0].PartitionKey, w[0].Payload, hdrs...)
	copies.Add(w[0].PartitionKey, w[0].Payload, hdrs...)
	res := lambdaadaptertest.Run(t, h, copies, lambdaadapter.WithMaxAttempts(3))
	if !res.AllSettled() || len(res.Kinesis.Written()) != 0 {
		t.Fatalf("copies: reported %v, wrote %d records", res.Failures, len(res.Kinesis.Written()))
	}
	if n := next.n.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2: the original (Retry), then one of its two copies", n)
	}
	if ids := db.ids(); !slices.Equal(ids, []string{wantIDOf(seq)}) {
		t.Errorf("items %q, want the original's only (%s)", ids, wantIDOf(seq))
	}
	// The original delivered again (a Lambda retry of its batch) is
	// recognised too.
	if res := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithMaxAttempts(3)); !res.AllSettled() || len(res.Kinesis.Written()) != 0 {
		t.Fatalf("original again: reported %v, wrote %d records", res.Failures, len(res.Kinesis.Written()))
	}
	if n := next.n.Load(); n != 2 {
		t.Errorf("handler ran %d times after the original came again, want 2", n)
	}
}

func wantIDOf(seq string) string {
	return "orders-fn#arn:aws:kinesis:us-east-1:123456789012:stream/orders#" + lambdaadaptertest.DefaultShardID + "#" + seq + "#0"
}
