package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/envelope"
)

const (
	testStream = "orders"
	testARN    = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
)

// maxJitter makes the backoff deterministic: always the ceiling.
func maxJitter(c time.Duration) time.Duration { return c }

func newPublisher(t testing.TB, k KinesisAPI, opts ...Option) *Publisher {
	t.Helper()
	p, err := NewPublisher(k, opts...)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	p.cfg.backoff.jitter = maxJitter
	return p
}

func TestNewPublisherPanicsOnNilClient(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.HasPrefix(fmt.Sprint(r), "publish: ") {
			t.Errorf("recover() = %v, want a publish: panic", r)
		}
	}()
	_, _ = NewPublisher(nil)
}

func TestNewPublisherValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    []Option
		wantErr string
	}{
		{"defaults", nil, ""},
		{"backoff", []Option{WithBackoff(time.Millisecond, time.Second)}, ""},
		{"backoff base equal to max", []Option{WithBackoff(time.Second, time.Second)}, ""},
		{"backoff base zero", []Option{WithBackoff(0, time.Second)}, "publish: backoff base 0s is not positive"},
		{"backoff max below base", []Option{WithBackoff(time.Second, time.Millisecond)}, "publish: backoff max 1ms is below its base 1s"},
		{"policy key 256 characters", []Option{WithPartitionKey(strings.Repeat("é", 256))}, ""},
		{"policy key 257 characters", []Option{WithPartitionKey(strings.Repeat("é", 257))}, "publish: policy partition key has 257 characters, more than 256"},
		{"max record size 10 MiB", []Option{WithMaxRecordSize(10 << 20)}, ""},
		{"max record size above 10 MiB", []Option{WithMaxRecordSize(10<<20 + 1)}, "publish: max record size 10485761 is outside [1, 10485760]"},
		{"max record size 0", []Option{WithMaxRecordSize(0)}, "publish: max record size 0 is outside [1, 10485760]"},
		{"nil logger", []Option{WithLogger(nil)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPublisher(&fakeKinesis{}, tt.opts...)
			if tt.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("NewPublisher = %v, %v; want a publisher", p, err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("NewPublisher error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPartitionKeyResolutionOrder(t *testing.T) {
	withPolicy := newPublisher(t, &fakeKinesis{}, WithPartitionKey("policy"))
	without := newPublisher(t, &fakeKinesis{})
	header := envelope.Headers{{Name: "partition-key", Value: "from-header"}}
	tests := []struct {
		name string
		p    *Publisher
		r    Record
		want string // "" = generated
	}{
		{"record key first", withPolicy, Record{PartitionKey: "own", Headers: header}, "own"},
		{"then the header", withPolicy, Record{Headers: header}, "from-header"},
		{"header name in any case", withPolicy, Record{Headers: envelope.Headers{{Name: "Partition-Key", Value: "upper"}}}, "upper"},
		{"then the policy key", withPolicy, Record{Headers: envelope.Headers{{Name: "x-a", Value: "1"}}}, "policy"},
		{"empty header value falls through", withPolicy, Record{Headers: envelope.Headers{{Name: "partition-key", Value: ""}}}, "policy"},
		{"then a generated key", without, Record{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.p.PartitionKey(&tt.r)
			if tt.want != "" {
				if got != tt.want {
					t.Errorf("PartitionKey = %q, want %q", got, tt.want)
				}
				return
			}
			prefix, _, ok := strings.Cut(got, "-")
			if !ok || len(prefix) != 16 || prefix != keyPrefix() {
				t.Errorf("generated key %q, want %s-<counter>", got, keyPrefix())
			}
		})
	}
}

func TestGeneratedKeysAreDistinct(t *testing.T) {
	a, b := newPublisher(t, &fakeKinesis{}), newPublisher(t, &fakeKinesis{})
	seen := make(map[string]bool)
	for i := range 2000 {
		p := a
		if i%2 == 1 {
			p = b // unique per process, not per publisher
		}
		k := p.PartitionKey(&Record{})
		if seen[k] {
			t.Fatalf("generated key %q twice", k)
		}
		seen[k] = true
	}
}

// Put resolves the key once per record and keeps it across retries.
func TestPutKeepsGeneratedKeyAcrossRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKinesis{script: failTimes(2, errThroughput)}
		p := newPublisher(t, f)
		if _, err := p.Put(t.Context(), Record{Stream: testStream, Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		calls := f.Calls()
		if len(calls) != 3 {
			t.Fatalf("%d calls, want 3", len(calls))
		}
		for _, c := range calls[1:] {
			if c.Entries[0].PartitionKey != calls[0].Entries[0].PartitionKey {
				t.Errorf("key changed across retries: %q then %q", calls[0].Entries[0].PartitionKey, c.Entries[0].PartitionKey)
			}
		}
	})
}

func mustEncode(t testing.TB, h envelope.Headers, payload []byte) []byte {
	t.Helper()
	b, err := envelope.Encode(h, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPutMakesOnePutRecord(t *testing.T) {
	h := envelope.Headers{{Name: "content-type", Value: "application/json"}, {Name: "partition-key", Value: "ignored"}}
	tests := []struct {
		name string
		r    Record
		want kcall
	}{
		{
			name: "envelope, stream name",
			r:    Record{Stream: testStream, PartitionKey: "user-42", Headers: h, Payload: []byte(`{"id":1}`)},
			want: kcall{Op: "PutRecord", StreamName: testStream, Entries: []kentry{{Data: mustEncode(t, h, []byte(`{"id":1}`)), PartitionKey: "user-42"}}},
		},
		{
			name: "raw payload when only the partition key header, stream ARN",
			r:    Record{Stream: testARN, Headers: envelope.Headers{{Name: "partition-key", Value: "k"}}, Payload: []byte("raw")},
			want: kcall{Op: "PutRecord", StreamARN: testARN, Entries: []kentry{{Data: []byte("raw"), PartitionKey: "k"}}},
		},
		{
			name: "explicit hash key",
			r:    Record{Stream: testStream, PartitionKey: "k", ExplicitHashKey: "170141183460469231731687303715884105728", Payload: []byte("p")},
			want: kcall{Op: "PutRecord", StreamName: testStream, Entries: []kentry{{Data: []byte("p"), PartitionKey: "k", ExplicitHashKey: "170141183460469231731687303715884105728"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeKinesis{}
			p := newPublisher(t, f)
			res, err := p.Put(t.Context(), tt.r)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			calls := f.Calls()
			if diff := cmp.Diff([]kcall{tt.want}, calls, cmpCall); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			w := f.Written()
			if want := (Result{ShardID: "shardId-000000000000", SequenceNumber: w[0].Seq}); res != want {
				t.Errorf("Result = %+v, want %+v", res, want)
			}
		})
	}
}

// cmpCall ignores the time of a call.
var cmpCall = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore())

func TestStreamNameOrARN(t *testing.T) {
	tests := []struct {
		stream   string
		wantName string
		wantARN  string
	}{
		{"orders", "orders", ""},
		{testARN, "", testARN},
		{"arn:aws-cn:kinesis:cn-north-1:123456789012:stream/x", "", "arn:aws-cn:kinesis:cn-north-1:123456789012:stream/x"},
		{"arnold", "arnold", ""},
	}
	for _, tt := range tests {
		t.Run(tt.stream, func(t *testing.T) {
			f := &fakeKinesis{}
			p := newPublisher(t, f)
			if _, err := p.Put(t.Context(), Record{Stream: tt.stream, Payload: []byte("a")}); err != nil {
				t.Fatal(err)
			}
			for i, r := range p.PutBatch(t.Context(), []Record{{Stream: tt.stream, Payload: []byte("b")}}) {
				if r.Err != nil {
					t.Fatalf("PutBatch result %d: %v", i, r.Err)
				}
			}
			for _, c := range f.Calls() {
				if c.StreamName != tt.wantName || c.StreamARN != tt.wantARN {
					t.Errorf("%s: StreamName %q, StreamARN %q; want %q, %q", c.Op, c.StreamName, c.StreamARN, tt.wantName, tt.wantARN)
				}
			}
		})
	}
}

func TestPutSizeLimits(t *testing.T) {
	h := envelope.Headers{{Name: "x-a", Value: "1"}}
	overhead := envelope.EncodedLen(h, nil) // Magic, length and block
	tests := []struct {
		name    string
		opts    []Option
		r       Record
		wantErr bool
	}{
		{"exactly 1 MiB of data and key", nil, Record{PartitionKey: "key", Payload: make([]byte, MaxRecordSize-3)}, false},
		{"one byte more", nil, Record{PartitionKey: "key", Payload: make([]byte, MaxRecordSize-2)}, true},
		{"exactly 1 MiB with the envelope", nil, Record{PartitionKey: "key", Headers: h, Payload: make([]byte, MaxRecordSize-3-overhead)}, false},
		{"the envelope counts", nil, Record{PartitionKey: "key", Headers: h, Payload: make([]byte, MaxRecordSize-2-overhead)}, true},
		{"key bytes count, not characters", nil, Record{PartitionKey: "ééé", Payload: make([]byte, MaxRecordSize-5)}, true},
		{"key of 256 characters", nil, Record{PartitionKey: strings.Repeat("é", 256), Payload: []byte("p")}, false},
		{"key of 257 characters", nil, Record{PartitionKey: strings.Repeat("a", 257), Payload: []byte("p")}, true},
		{"lowered limit", []Option{WithMaxRecordSize(100)}, Record{PartitionKey: "k", Payload: make([]byte, 100)}, true},
		{"raised limit", []Option{WithMaxRecordSize(2 << 20)}, Record{PartitionKey: "k", Payload: make([]byte, 2<<20-1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.Stream = testStream
			for _, batch := range []bool{false, true} {
				f := &fakeKinesis{}
				p := newPublisher(t, f, tt.opts...)
				var err error
				if batch {
					err = p.PutBatch(t.Context(), []Record{tt.r})[0].Err
				} else {
					_, err = p.Put(t.Context(), tt.r)
				}
				calls := len(f.Calls())
				if !tt.wantErr {
					if err != nil || calls != 1 {
						t.Errorf("batch=%v: error %v after %d calls, want success after 1", batch, err, calls)
					}
					continue
				}
				if !errors.Is(err, ErrTooLarge) || calls != 0 {
					t.Errorf("batch=%v: error %v after %d calls, want ErrTooLarge without a call", batch, err, calls)
				}
				if err != nil && !strings.HasPrefix(err.Error(), `publish: put to stream "orders": `) {
					t.Errorf("error %q lacks its context", err)
				}
			}
		})
	}
}

func TestPutInvalidRecord(t *testing.T) {
	tests := []struct {
		name       string
		r          Record
		wantHeader bool
	}{
		{"no stream", Record{Payload: []byte("p")}, false},
		{"header value with newline", Record{Stream: testStream, Headers: envelope.Headers{{Name: "x-a", Value: "1\n2"}}, Payload: []byte("p")}, true},
		{"header name with colon", Record{Stream: testStream, Headers: envelope.Headers{{Name: "x:a", Value: "1"}}, Payload: []byte("p")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeKinesis{}
			p := newPublisher(t, f)
			_, err := p.Put(t.Context(), tt.r)
			berr := p.PutBatch(t.Context(), []Record{tt.r})[0].Err
			for _, err := range []error{err, berr} {
				if !errors.Is(err, ErrInvalidRecord) {
					t.Errorf("error %v, want ErrInvalidRecord", err)
				}
				if got := errors.Is(err, envelope.ErrInvalidHeader); got != tt.wantHeader {
					t.Errorf("errors.Is(%v, envelope.ErrInvalidHeader) = %v, want %v", err, got, tt.wantHeader)
				}
			}
			if n := len(f.Calls()); n != 0 {
				t.Errorf("%d calls, want none", n)
			}
		})
	}
}

func TestPutRetries(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"provisioned throughput", errThroughput},
		{"limit exceeded", errLimit},
		{"KMS throttling", errKMSThrottle},
		{"throttling code", errGeneric},
		{"internal failure", errInternal},
		{"503", err500},
		{"transport", errSend},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeKinesis{script: failTimes(3, tt.err)}
				p := newPublisher(t, f, WithBackoff(50*time.Millisecond, 150*time.Millisecond))
				start := time.Now()
				res, err := p.Put(t.Context(), Record{Stream: testStream, PartitionKey: "k", Payload: []byte("p")})
				if err != nil || res.SequenceNumber == "" {
					t.Fatalf("Put = %+v, %v; want success", res, err)
				}
				var gaps []time.Duration
				for _, c := range f.Calls() {
					gaps = append(gaps, c.At.Sub(start))
					start = c.At
				}
				// Full jitter at its ceiling: 50ms, 100ms, then capped at 150ms.
				want := []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond}
				if diff := cmp.Diff(want, gaps); diff != "" {
					t.Errorf("time before each call (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestPutDoesNotRetry(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantIs  error
		wantMsg string
	}{
		{"stream not found", errNotFound, ErrStreamNotFound, `publish: put to stream "orders": stream not found: ResourceNotFoundException: Stream orders not found`},
		{"validation", errValidation, nil, `publish: put to stream "orders": ValidationException: bad request`},
		{"access denied", errAccess, nil, `publish: put to stream "orders": AccessDeniedException: denied`},
		{"client error without a type", fmt.Errorf("something else"), nil, `publish: put to stream "orders": something else`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeKinesis{script: failTimes(100, tt.err)}
			p := newPublisher(t, f)
			res, err := p.Put(t.Context(), Record{Stream: testStream, Payload: []byte("p")})
			if err == nil || res.Err != err {
				t.Fatalf("Put = %+v, %v; want the error in both", res, err)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("error %q, want %q", err, tt.wantMsg)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v does not match %v", err, tt.wantIs)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("error %v does not wrap the cause", err)
			}
			if n := len(f.Calls()); n != 1 {
				t.Errorf("%d calls, want 1", n)
			}
		})
	}
}

func TestPutThrottledUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKinesis{script: failTimes(1<<30, errThroughput)}
		p := newPublisher(t, f) // 50ms .. 2s
		ctx, cancel := context.WithTimeout(t.Context(), 1*time.Second)
		defer cancel()
		start := time.Now()
		_, err := p.Put(ctx, Record{Stream: testStream, Payload: []byte("p")})
		elapsed := time.Since(start)
		if !errors.Is(err, ErrThrottled) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want ErrThrottled and context.DeadlineExceeded", err)
		}
		var pt *ktypes.ProvisionedThroughputExceededException
		if !errors.As(err, &pt) {
			t.Errorf("error %v does not wrap the last throttling error", err)
		}
		want := `publish: put to stream "orders": gave up while throttled: no time left before the deadline: ProvisionedThroughputExceededException: Rate exceeded for shard shardId-000000000000`
		if err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
		// Waits of 50, 100, 200, 400ms: the next (800ms) would pass the
		// deadline, so Put returns at 750ms without waiting.
		if n := len(f.Calls()); n != 5 {
			t.Errorf("%d calls, want 5", n)
		}
		if elapsed != 750*time.Millisecond {
			t.Errorf("Put returned after %s, want 750ms", elapsed)
		}
	})
}

func TestPutContextEnds(t *testing.T) {
	t.Run("already canceled: no call", func(t *testing.T) {
		f := &fakeKinesis{}
		p := newPublisher(t, f)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := p.Put(ctx, Record{Stream: testStream, Payload: []byte("p")})
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrThrottled) {
			t.Errorf("error %v, want context.Canceled only", err)
		}
		if want := `publish: put to stream "orders": not sent: context canceled`; err == nil || err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
		if n := len(f.Calls()); n != 0 {
			t.Errorf("%d calls, want none", n)
		}
	})
	t.Run("canceled during the backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			f := &fakeKinesis{script: func(n int, _ *kcall) ([]string, error) {
				if n == 1 {
					cancel()
				}
				return nil, err500
			}}
			p := newPublisher(t, f)
			_, err := p.Put(ctx, Record{Stream: testStream, Payload: []byte("p")})
			if !errors.Is(err, context.Canceled) || !errors.Is(err, err500) || errors.Is(err, ErrThrottled) {
				t.Errorf("error %v, want context.Canceled and the 503", err)
			}
			if n := len(f.Calls()); n != 2 {
				t.Errorf("%d calls, want 2", n)
			}
		})
	})
}

func TestPutBufferReusesTheBuffer(t *testing.T) {
	f := &fakeKinesis{}
	p := newPublisher(t, f)
	var buf []byte
	h := envelope.Headers{{Name: "x-a", Value: "1"}}
	for i, payload := range []string{"first payload", "second"} {
		r := Record{Stream: testStream, PartitionKey: "k", Headers: h, Payload: []byte(payload)}
		if _, err := p.PutBuffer(t.Context(), r, &buf); err != nil {
			t.Fatal(err)
		}
		if got, want := f.Calls()[i].Entries[0].Data, mustEncode(t, h, r.Payload); !bytes.Equal(got, want) {
			t.Errorf("record %d: data %q, want %q", i, got, want)
		}
		if len(buf) != 0 || cap(buf) < len(mustEncode(t, h, r.Payload)) {
			t.Errorf("record %d: buffer len %d cap %d, want it kept empty with room", i, len(buf), cap(buf))
		}
	}
	first := &buf[:1][0]
	if _, err := p.PutBuffer(t.Context(), Record{Stream: testStream, Headers: h, Payload: []byte("x")}, &buf); err != nil {
		t.Fatal(err)
	}
	if &buf[:1][0] != first {
		t.Error("PutBuffer reallocated a buffer with room to spare")
	}
	if _, err := p.PutBuffer(t.Context(), Record{Stream: testStream, Payload: []byte("x")}, nil); err != nil {
		t.Errorf("PutBuffer with a nil buffer: %v", err)
	}
}

func records(n, size int) []Record {
	rs := make([]Record, n)
	for i := range rs {
		// Unique payloads: a record's index, padded to size.
		payload := fmt.Appendf(nil, "%d:", i)
		for len(payload) < size {
			payload = append(payload, 'a'+byte(i%26))
		}
		rs[i] = Record{Stream: testStream, PartitionKey: fmt.Sprintf("key-%d", i), Payload: payload}
	}
	return rs
}

// checkResults verifies the results of PutBatch against what the fake
// stream holds: a result without error names a written entry carrying its
// record, and a failed record was never written (the payloads are unique).
func checkResults(t *testing.T, f *fakeKinesis, rs []Record, results []Result) (ok, failed int) {
	t.Helper()
	if len(results) != len(rs) {
		t.Fatalf("%d results for %d records", len(results), len(rs))
	}
	bySeq := make(map[string]kentry)
	byData := make(map[string]int)
	for _, w := range f.Written() {
		bySeq[w.Seq] = w.Entry
		byData[string(w.Entry.Data)]++
	}
	for i, res := range results {
		data := string(rs[i].Payload)
		if res.Err != nil {
			if errors.Is(res.Err, errUnsettled) {
				t.Errorf("result %d left unsettled", i)
			}
			if byData[data] != 0 {
				t.Errorf("result %d: reported failed (%v) but written", i, res.Err)
			}
			failed++
			continue
		}
		e, found := bySeq[res.SequenceNumber]
		if !found || string(e.Data) != data {
			t.Errorf("result %d: reported written as %q, which holds %q", i, res.SequenceNumber, e.Data)
		}
		ok++
	}
	return ok, failed
}

func TestPutBatchOf1000MakesTwoCalls(t *testing.T) {
	f := &fakeKinesis{}
	p := newPublisher(t, f)
	rs := records(1000, 16)
	results := p.PutBatch(t.Context(), rs)
	if ok, _ := checkResults(t, f, rs, results); ok != 1000 {
		t.Errorf("%d written, want 1000", ok)
	}
	calls := f.Calls()
	if len(calls) != 2 || len(calls[0].Entries) != 500 || len(calls[1].Entries) != 500 {
		t.Fatalf("%d calls, want 2 of 500", len(calls))
	}
	for i, e := range append(calls[0].Entries, calls[1].Entries...) {
		if e.PartitionKey != rs[i].PartitionKey || !bytes.Equal(e.Data, rs[i].Payload) {
			t.Fatalf("entry %d is %q/%q, want record %d in order", i, e.PartitionKey, e.Data, i)
		}
	}
}

func TestPutBatchChunksByBytes(t *testing.T) {
	tests := []struct {
		name      string
		n, size   int
		wantSizes []int
	}{
		// 5 records of 1,000,000 bytes plus a key of 5 or 6 bytes fit
		// in 5 MiB (5,242,880); a sixth does not.
		{"1 MB records", 12, 1_000_000, []int{5, 5, 2}},
		// 1 MiB minus the key: exactly 1 MiB each, five per request.
		{"records of exactly 1 MiB", 11, MaxRecordSize - len("key-10"), []int{5, 5, 1}},
		{"small records", 501, 10, []int{500, 1}},
		{"single record", 1, 10, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeKinesis{}
			p := newPublisher(t, f)
			rs := records(tt.n, tt.size)
			for i := range rs {
				rs[i].PartitionKey = fmt.Sprintf("key-%02d", i%100)
			}
			results := p.PutBatch(t.Context(), rs)
			if ok, _ := checkResults(t, f, rs, results); ok != tt.n {
				t.Errorf("%d written, want %d", ok, tt.n)
			}
			var sizes []int
			for _, c := range f.Calls() {
				sizes = append(sizes, len(c.Entries))
				total := 0
				for _, e := range c.Entries {
					total += len(e.Data) + len(e.PartitionKey)
				}
				if total > MaxBatchBytes || len(c.Entries) > MaxBatchRecords {
					t.Errorf("request of %d entries and %d bytes exceeds the limits", len(c.Entries), total)
				}
			}
			if diff := cmp.Diff(tt.wantSizes, sizes); diff != "" {
				t.Errorf("entries per request (-want +got):\n%s", diff)
			}
		})
	}
}

// With a raised record size, a record larger than a request's budget goes
// alone.
func TestPutBatchRecordLargerThanRequestBudget(t *testing.T) {
	f := &fakeKinesis{}
	p := newPublisher(t, f, WithMaxRecordSize(MaxRecordSizeLimit))
	rs := records(3, 10)
	rs[1].Payload = bytes.Repeat([]byte("b"), 6<<20)
	results := p.PutBatch(t.Context(), rs)
	checkResults(t, f, rs, results)
	var sizes []int
	for _, c := range f.Calls() {
		sizes = append(sizes, len(c.Entries))
	}
	if diff := cmp.Diff([]int{1, 1, 1}, sizes); diff != "" {
		t.Errorf("entries per request (-want +got):\n%s", diff)
	}
}

func TestPutBatchRetriesOnlyFailedEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
			if n == 0 {
				return []string{"", "ProvisionedThroughputExceededException", "", "InternalFailure", ""}, nil
			}
			if n == 1 {
				return []string{"ProvisionedThroughputExceededException", ""}, nil
			}
			return nil, nil
		}}
		p := newPublisher(t, f)
		rs := records(5, 8)
		results := p.PutBatch(t.Context(), rs)
		if ok, _ := checkResults(t, f, rs, results); ok != 5 {
			t.Errorf("%d written, want 5", ok)
		}
		var keys [][]string
		for _, c := range f.Calls() {
			var k []string
			for _, e := range c.Entries {
				k = append(k, e.PartitionKey)
			}
			keys = append(keys, k)
		}
		want := [][]string{{"key-0", "key-1", "key-2", "key-3", "key-4"}, {"key-1", "key-3"}, {"key-1"}}
		if diff := cmp.Diff(want, keys); diff != "" {
			t.Errorf("keys per request (-want +got):\n%s", diff)
		}
	})
}

func TestPutBatchRetriesWholeCallFailures(t *testing.T) {
	for _, err := range []error{errThroughput, errLimit, errKMSThrottle, errGeneric, err500, errSend, errInternal} {
		t.Run(fmt.Sprintf("%T", err), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeKinesis{script: failTimes(2, err)}
				p := newPublisher(t, f)
				rs := records(3, 8)
				results := p.PutBatch(t.Context(), rs)
				if ok, _ := checkResults(t, f, rs, results); ok != 3 {
					t.Errorf("%d written, want 3", ok)
				}
				if n := len(f.Calls()); n != 3 {
					t.Errorf("%d calls, want 3", n)
				}
			})
		})
	}
}

func TestPutBatchThrottledUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first call writes the even entries; the odd ones are
		// throttled forever.
		f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
			codes := make([]string, len(c.Entries))
			for i, e := range c.Entries {
				var idx int
				fmt.Sscanf(e.PartitionKey, "key-%d", &idx)
				if idx%2 == 1 {
					codes[i] = "ProvisionedThroughputExceededException"
				}
			}
			return codes, nil
		}}
		p := newPublisher(t, f)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		rs := records(700, 8)
		results := p.PutBatch(ctx, rs)
		ok, failed := checkResults(t, f, rs, results)
		if ok != 350 || failed != 350 {
			t.Errorf("%d written, %d failed; want 350 and 350", ok, failed)
		}
		for i, res := range results {
			if i%2 == 0 {
				continue
			}
			var ee *EntryError
			if !errors.Is(res.Err, ErrThrottled) || !errors.Is(res.Err, context.DeadlineExceeded) ||
				!errors.As(res.Err, &ee) || ee.Code != "ProvisionedThroughputExceededException" {
				t.Fatalf("result %d: error %v, want ErrThrottled from the entry's code", i, res.Err)
			}
		}
		want := `publish: put to stream "orders": gave up while throttled: no time left before the deadline: ProvisionedThroughputExceededException: scripted ProvisionedThroughputExceededException`
		if got := results[1].Err.Error(); got != want {
			t.Errorf("error %q, want %q", got, want)
		}
	})
}

// When the deadline passes while the first chunk is being retried, the
// second chunk is still sent if time is left, and fails "not sent" if not.
func TestPutBatchLaterChunksAfterTimeRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
			if c.Entries[0].PartitionKey == "key-0" {
				return nil, errThroughput // the first chunk, always
			}
			if c.Entries[0].PartitionKey == "key-500" {
				// The second chunk's call outlasts the deadline.
				time.Sleep(300 * time.Millisecond)
			}
			return nil, nil
		}}
		p := newPublisher(t, f)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		rs := records(1200, 8)
		results := p.PutBatch(ctx, rs)
		ok, _ := checkResults(t, f, rs, results)
		if ok != 500 {
			t.Errorf("%d written, want the 500 of the second chunk", ok)
		}
		if err := results[0].Err; !errors.Is(err, ErrThrottled) {
			t.Errorf("first chunk: %v, want ErrThrottled", err)
		}
		want := `publish: put to stream "orders": not sent: context deadline exceeded`
		if err := results[1100].Err; err == nil || err.Error() != want || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("third chunk: %v, want %q", err, want)
		}
	})
}

func TestPutBatchPermanentFailures(t *testing.T) {
	t.Run("stream not found fails the stream's later chunks without a call", func(t *testing.T) {
		f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
			if c.StreamName == "missing" {
				return nil, errNotFound
			}
			return nil, nil
		}}
		p := newPublisher(t, f)
		rs := records(1000, 8)
		for i := range rs {
			if i%2 == 0 {
				rs[i].Stream = "missing"
			}
		}
		results := p.PutBatch(t.Context(), rs)
		if ok, failed := checkResults(t, f, rs, results); ok != 500 || failed != 500 {
			t.Errorf("%d written, %d failed; want 500 and 500", ok, failed)
		}
		for i := 0; i < len(rs); i += 2 {
			if !errors.Is(results[i].Err, ErrStreamNotFound) || !strings.Contains(results[i].Err.Error(), `"missing"`) {
				t.Fatalf("result %d: %v, want ErrStreamNotFound naming the stream", i, results[i].Err)
			}
		}
		var streams []string
		for _, c := range f.Calls() {
			streams = append(streams, fmt.Sprintf("%s:%d", c.StreamName, len(c.Entries)))
		}
		if diff := cmp.Diff([]string{"missing:500", "orders:500"}, streams); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
	t.Run("validation error fails the request's entries only", func(t *testing.T) {
		f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
			if n == 0 {
				return nil, errValidation
			}
			return nil, nil
		}}
		p := newPublisher(t, f)
		rs := records(600, 8)
		results := p.PutBatch(t.Context(), rs)
		if ok, failed := checkResults(t, f, rs, results); ok != 100 || failed != 500 {
			t.Errorf("%d written, %d failed; want 100 and 500", ok, failed)
		}
		if n := len(f.Calls()); n != 2 {
			t.Errorf("%d calls, want 2", n)
		}
	})
	t.Run("permanent entry codes are not retried", func(t *testing.T) {
		f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
			if n == 0 {
				return []string{"KMSAccessDeniedException", "ResourceNotFoundException", ""}, nil
			}
			return nil, nil
		}}
		p := newPublisher(t, f)
		rs := records(3, 8)
		results := p.PutBatch(t.Context(), rs)
		checkResults(t, f, rs, results)
		var ee *EntryError
		if !errors.As(results[0].Err, &ee) || ee.Code != "KMSAccessDeniedException" {
			t.Errorf("result 0: %v, want the KMS entry error", results[0].Err)
		}
		if !errors.Is(results[1].Err, ErrStreamNotFound) {
			t.Errorf("result 1: %v, want ErrStreamNotFound", results[1].Err)
		}
		if n := len(f.Calls()); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
	})
}

func TestPutBatchDistrustsIncompleteResponses(t *testing.T) {
	tests := []struct {
		name string
		f    *fakeKinesis
	}{
		{"fewer entries than asked", &fakeKinesis{short: true}},
		{"entries without sequence numbers", &fakeKinesis{noSeq: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPublisher(t, tt.f)
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				rs := records(4, 8)
				results := p.PutBatch(ctx, rs)
				// Reported written only with the fake's own sequence
				// numbers; never on the strength of an incomplete answer.
				if ok, _ := checkResults(t, tt.f, rs, results); ok != 4 {
					t.Errorf("%d written, want 4", ok)
				}
				if n := len(tt.f.Calls()); n != 2 {
					t.Errorf("%d calls, want 2: one retry of every entry", n)
				}
			})
		})
	}
}

func TestPutBatchMixesRefusedAndValidRecords(t *testing.T) {
	f := &fakeKinesis{}
	p := newPublisher(t, f)
	rs := records(5, 8)
	rs[1].Payload = make([]byte, MaxRecordSize)
	rs[3].Headers = envelope.Headers{{Name: "x-a", Value: "bad\nvalue"}}
	rs[4].Headers = envelope.Headers{{Name: "x-a", Value: "good"}}
	results := p.PutBatch(t.Context(), rs)
	checkResults(t, f, rs[:1], results[:1])
	if !errors.Is(results[1].Err, ErrTooLarge) || !errors.Is(results[3].Err, ErrInvalidRecord) {
		t.Errorf("results 1 and 3: %v, %v; want ErrTooLarge and ErrInvalidRecord", results[1].Err, results[3].Err)
	}
	for _, i := range []int{0, 2, 4} {
		if results[i].Err != nil {
			t.Errorf("result %d: %v", i, results[i].Err)
		}
	}
	calls := f.Calls()
	if len(calls) != 1 || len(calls[0].Entries) != 3 {
		t.Fatalf("requests %+v, want one of 3 entries", calls)
	}
	if got, want := calls[0].Entries[2].Data, mustEncode(t, rs[4].Headers, rs[4].Payload); !bytes.Equal(got, want) {
		t.Errorf("enveloped entry %q, want %q", got, want)
	}
}

func TestPutBatchGroupsByStream(t *testing.T) {
	f := &fakeKinesis{}
	p := newPublisher(t, f)
	rs := records(6, 8)
	streams := []string{"b", testARN, "b", "a", testARN, "b"}
	for i := range rs {
		rs[i].Stream = streams[i]
	}
	results := p.PutBatch(t.Context(), rs)
	checkResults(t, f, rs, results)
	var got []string
	for _, c := range f.Calls() {
		var keys []string
		for _, e := range c.Entries {
			keys = append(keys, e.PartitionKey)
		}
		got = append(got, fmt.Sprintf("name=%s arn=%s %v", c.StreamName, c.StreamARN, keys))
	}
	want := []string{
		"name=b arn= [key-0 key-2 key-5]",
		"name= arn=" + testARN + " [key-1 key-4]",
		"name=a arn= [key-3]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestPutBatchEmpty(t *testing.T) {
	f := &fakeKinesis{}
	p := newPublisher(t, f)
	if got := p.PutBatch(t.Context(), nil); len(got) != 0 {
		t.Errorf("PutBatch(nil) = %v", got)
	}
	if n := len(f.Calls()); n != 0 {
		t.Errorf("%d calls, want none", n)
	}
}

// TestPutBatchProperty runs PutBatch against random failures and deadlines
// and checks that no result lies: written means written, and every record
// gets a result.
func TestPutBatchProperty(t *testing.T) {
	codes := []string{"", "", "", "ProvisionedThroughputExceededException", "InternalFailure", "KMSThrottlingException"}
	callErrs := []error{nil, nil, nil, nil, errThroughput, err500, errSend, errLimit}
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 1))
				f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
					if err := callErrs[rng.IntN(len(callErrs))]; err != nil {
						return nil, err
					}
					out := make([]string, len(c.Entries))
					for i := range out {
						out[i] = codes[rng.IntN(len(codes))]
					}
					return out, nil
				}}
				p := newPublisher(t, f)
				p.cfg.backoff.jitter = func(c time.Duration) time.Duration { return rand.N(c + 1) }
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rng.IntN(3000))*time.Millisecond)
				defer cancel()
				rs := records(1+rng.IntN(1200), 1+rng.IntN(64))
				results := p.PutBatch(ctx, rs)
				ok, _ := checkResults(t, f, rs, results)
				if w := len(f.Written()); w != ok {
					t.Errorf("%d entries written, %d reported written", w, ok)
				}
				for i, res := range results {
					if res.Err != nil && !errors.Is(res.Err, context.DeadlineExceeded) {
						t.Fatalf("result %d failed without running out of time: %v", i, res.Err)
					}
				}
			})
		})
	}
}

func TestPutLogsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
		f := &fakeKinesis{script: failTimes(1, errThroughput)}
		p := newPublisher(t, f, WithLogger(logger))
		if _, err := p.Put(t.Context(), Record{Stream: testStream, Payload: []byte("p")}); err != nil {
			t.Fatal(err)
		}
		want := `level=DEBUG msg="publish: retrying put" stream=orders attempt=1 delay=50ms entries=1 error="ProvisionedThroughputExceededException: Rate exceeded for shard shardId-000000000000"` + "\n"
		if got := logs.String(); got != want {
			t.Errorf("logs:\n%s\nwant:\n%s", got, want)
		}
	})
}

func TestBackoffCeiling(t *testing.T) {
	b := backoff{base: 50 * time.Millisecond, max: 2 * time.Second}
	var got []time.Duration
	for n := range 10 {
		got = append(got, b.ceiling(n))
	}
	ms := time.Millisecond
	want := []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms, 2000 * ms, 2000 * ms}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ceilings (-want +got):\n%s", diff)
	}
	if c := b.ceiling(1 << 20); c != 2*time.Second {
		t.Errorf("ceiling(1<<20) = %s, want the max", c)
	}
	for range 1000 {
		if d := fullJitter(time.Second); d < 0 || d > time.Second {
			t.Fatalf("fullJitter(1s) = %s, out of [0, 1s]", d)
		}
	}
}

func TestPutAllocations(t *testing.T) {
	if race {
		t.Skip("allocation counts are not pinned under the race detector")
	}
	p := newPublisher(t, &nopKinesis{})
	h := envelope.Headers{{Name: "content-type", Value: "application/json"}}
	r := Record{Stream: testStream, PartitionKey: "user-42", Headers: h, Payload: make([]byte, 512)}
	buf := make([]byte, 0, 1024)
	batch := benchRecords(1000)
	ctx := t.Context()
	tests := []struct {
		name string
		want float64
		f    func()
	}{
		// The input, with the strings it points to, escapes to the client.
		{"Put", 1, func() { _, _ = p.Put(ctx, r) }},
		{"PutBuffer", 1, func() { _, _ = p.PutBuffer(ctx, r, &buf) }},
		// The results, the batch's state with the request it reuses for
		// each of its two requests, and per request the fake's answer.
		{"PutBatch of 1,000", 4, func() { _ = p.PutBatch(ctx, batch) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(100, tt.f); got != tt.want {
				t.Errorf("%v allocations per run, want %v", got, tt.want)
			}
		})
	}
}

func TestPublisherConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { testPublisherConcurrentUse(t) })
}

func testPublisherConcurrentUse(t *testing.T) {
	f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
		codes := make([]string, len(c.Entries))
		if n%3 == 0 && len(codes) > 1 {
			codes[1] = "InternalFailure"
		}
		return codes, nil
	}}
	p := newPublisher(t, f)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rs := records(600, 16+g)
			for i := range rs {
				rs[i].Headers = envelope.Headers{{Name: "x-g", Value: fmt.Sprint(g)}}
				rs[i].Payload = fmt.Appendf(nil, "g%d-%d", g, i)
			}
			for i, res := range p.PutBatch(t.Context(), rs) {
				if res.Err != nil {
					t.Errorf("goroutine %d result %d: %v", g, i, res.Err)
				}
			}
			var buf []byte
			for i := range 20 {
				if _, err := p.PutBuffer(t.Context(), rs[i], &buf); err != nil {
					t.Errorf("goroutine %d Put %d: %v", g, i, err)
				}
			}
		})
	}
	wg.Wait()
	// Every record written carries the envelope of its own goroutine.
	for _, w := range f.Written() {
		h, payload := envelope.Decode(w.Entry.Data)
		if want := "g" + h.Get("x-g") + "-"; !bytes.HasPrefix(payload, []byte(want)) {
			t.Fatalf("record %q decodes to header x-g=%q", w.Entry.Data, h.Get("x-g"))
		}
	}
}
