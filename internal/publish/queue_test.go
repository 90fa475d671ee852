package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
)

const testQueue = "https://sqs.eu-west-1.amazonaws.com/123456789012/delays"

var (
	errQThrottled = &sqstypes.RequestThrottled{Message: ptr("Request is throttled.")}
	errQKMS       = &sqstypes.KmsThrottled{Message: ptr("kms")}
	errQNotFound  = &sqstypes.QueueDoesNotExist{Message: ptr("The specified queue does not exist.")}
	errQInvalid   = &sqstypes.InvalidMessageContents{Message: ptr("bad characters")}
)

func newQueue(t testing.TB, c SQSAPI, opts ...QueueOption) *Queue {
	t.Helper()
	q, err := NewQueue(c, opts...)
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	q.cfg.backoff.jitter = maxJitter
	return q
}

func sqFail(n int, err error) func(int, *sqcall) ([]sqAnswer, error) {
	return func(i int, _ *sqcall) ([]sqAnswer, error) {
		if i < n {
			return nil, err
		}
		return nil, nil
	}
}

func TestNewQueuePanicsOnNilClient(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "publish: ") {
			t.Errorf("recover() = %v, want a publish: panic", r)
		}
	}()
	_, _ = NewQueue(nil)
}

func TestNewQueueValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    []QueueOption
		wantErr string
	}{
		{"defaults", nil, ""},
		{"lower size", []QueueOption{WithMaxMessageSize(262_144)}, ""},
		{"size 0", []QueueOption{WithMaxMessageSize(0)}, "publish: max message size 0 is outside [1, 1048576]"},
		{"size above 1 MiB", []QueueOption{WithMaxMessageSize(1<<20 + 1)}, "publish: max message size 1048577 is outside [1, 1048576]"},
		{"bad backoff", []QueueOption{WithQueueBackoff(time.Second, 0)}, "publish: backoff max 0s is below its base 1s"},
		{"nil logger", []QueueOption{WithQueueLogger(nil)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := NewQueue(&fakeSQS{}, tt.opts...)
			if tt.wantErr == "" {
				if err != nil || q == nil {
					t.Fatalf("NewQueue = %v, %v; want a queue", q, err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("NewQueue error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestDelaySeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int32
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{1500 * time.Millisecond, 2},
		{899*time.Second + 1, 900},
		{900 * time.Second, 900},
		{900*time.Second + 1, 900},
		{time.Hour, 900},
		{time.Duration(1<<63 - 1), 900},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			if got := DelaySeconds(tt.d); got != tt.want {
				t.Errorf("DelaySeconds(%s) = %d, want %d", tt.d, got, tt.want)
			}
		})
	}
}

func TestSendMakesOneSendMessage(t *testing.T) {
	f := &fakeSQS{}
	q := newQueue(t, f)
	id, err := q.Send(t.Context(), testQueue, QueueMessage{Body: `{"a":1}`, Delay: 1500 * time.Millisecond, Attributes: map[string]string{"kind": "delay"}})
	if err != nil || id != "msg-1" {
		t.Fatalf("Send = %q, %v; want msg-1", id, err)
	}
	want := []sqcall{{Op: "SendMessage", QueueURL: testQueue, Entries: []sqentry{{Body: `{"a":1}`, DelaySeconds: 2, Attributes: map[string]string{"kind": "String:delay"}}}}}
	if diff := cmp.Diff(want, f.Calls(), cmpCall); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestSendRefusals(t *testing.T) {
	attrs := func(n int) map[string]string {
		m := make(map[string]string)
		for i := range n {
			m[fmt.Sprint("a", i)] = "v"
		}
		return m
	}
	// A limit of 100: body plus, per attribute, name + "String" + value.
	tests := []struct {
		name   string
		url    string
		m      QueueMessage
		wantIs error
	}{
		{"exactly the limit", testQueue, QueueMessage{Body: strings.Repeat("b", 100)}, nil},
		{"one byte more", testQueue, QueueMessage{Body: strings.Repeat("b", 101)}, ErrMessageTooLarge},
		{"attributes count, exactly the limit", testQueue, QueueMessage{Body: strings.Repeat("b", 100-len("k")-len("String")-len("vv")), Attributes: map[string]string{"k": "vv"}}, nil},
		{"attributes count, one byte more", testQueue, QueueMessage{Body: strings.Repeat("b", 101-len("k")-len("String")-len("vv")), Attributes: map[string]string{"k": "vv"}}, ErrMessageTooLarge},
		{"ten attributes", testQueue, QueueMessage{Body: "b", Attributes: attrs(10)}, nil},
		{"eleven attributes", testQueue, QueueMessage{Body: "b", Attributes: attrs(11)}, ErrInvalidMessage},
		{"empty body", testQueue, QueueMessage{}, ErrInvalidMessage},
		{"empty attribute value", testQueue, QueueMessage{Body: "b", Attributes: map[string]string{"k": ""}}, ErrInvalidMessage},
		{"empty attribute name", testQueue, QueueMessage{Body: "b", Attributes: map[string]string{"": "v"}}, ErrInvalidMessage},
		{"no queue URL", "", QueueMessage{Body: "b"}, ErrInvalidMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSQS{}
			q := newQueue(t, f, WithMaxMessageSize(100))
			_, err := q.Send(t.Context(), tt.url, tt.m)
			berr := q.SendBatch(t.Context(), tt.url, []QueueMessage{tt.m})[0].Err
			calls := len(f.Calls())
			if tt.wantIs == nil {
				if err != nil || berr != nil || calls != 2 {
					t.Errorf("errors %v, %v after %d calls; want success after 2", err, berr, calls)
				}
				return
			}
			if !errors.Is(err, tt.wantIs) || !errors.Is(berr, tt.wantIs) || calls != 0 {
				t.Errorf("errors %v, %v after %d calls; want %v without a call", err, berr, calls, tt.wantIs)
			}
			if prefix := fmt.Sprintf("publish: send to queue %q: ", tt.url); !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q lacks its context", err)
			}
		})
	}
}

func TestSendDefaultLimitIs1MiB(t *testing.T) {
	f := &fakeSQS{}
	q := newQueue(t, f)
	if _, err := q.Send(t.Context(), testQueue, QueueMessage{Body: strings.Repeat("b", 1<<20)}); err != nil {
		t.Errorf("1 MiB body: %v", err)
	}
	if _, err := q.Send(t.Context(), testQueue, QueueMessage{Body: strings.Repeat("b", 1<<20+1)}); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("1 MiB + 1 body: %v, want ErrMessageTooLarge", err)
	}
}

func TestSendRetries(t *testing.T) {
	for _, err := range []error{errQThrottled, errQKMS, errGeneric, err500, errSend} {
		t.Run(fmt.Sprintf("%T", err), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeSQS{script: sqFail(2, err)}
				q := newQueue(t, f)
				start := time.Now()
				id, serr := q.Send(t.Context(), testQueue, QueueMessage{Body: "b"})
				if serr != nil || id == "" {
					t.Fatalf("Send = %q, %v", id, serr)
				}
				if n := len(f.Calls()); n != 3 {
					t.Errorf("%d calls, want 3", n)
				}
				if d := time.Since(start); d != 150*time.Millisecond {
					t.Errorf("Send took %s, want 50ms + 100ms of backoff", d)
				}
			})
		})
	}
}

func TestSendFailures(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		timeout   time.Duration
		wantIs    []error
		wantMsg   string
		wantCalls int
	}{
		{"queue not found", errQNotFound, 0, []error{ErrQueueNotFound}, `publish: send to queue "` + testQueue + `": queue not found: QueueDoesNotExist: The specified queue does not exist.`, 1},
		{"invalid contents", errQInvalid, 0, nil, `publish: send to queue "` + testQueue + `": InvalidMessageContents: bad characters`, 1},
		{"throttled until the deadline", errQThrottled, time.Second, []error{ErrThrottled, context.DeadlineExceeded}, `publish: send to queue "` + testQueue + `": gave up while throttled: no time left before the deadline: RequestThrottled: Request is throttled.`, 5},
		{"5xx until the deadline", err500, time.Second, []error{context.DeadlineExceeded}, `publish: send to queue "` + testQueue + `": gave up: no time left before the deadline: http response error StatusCode: 503, service unavailable`, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeSQS{script: sqFail(1<<30, tt.err)}
				q := newQueue(t, f)
				ctx := t.Context()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				id, err := q.Send(ctx, testQueue, QueueMessage{Body: "b"})
				if id != "" || err == nil {
					t.Fatalf("Send = %q, %v; want an error", id, err)
				}
				if err.Error() != tt.wantMsg {
					t.Errorf("error %q, want %q", err, tt.wantMsg)
				}
				for _, target := range append(tt.wantIs, tt.err) {
					if !errors.Is(err, target) {
						t.Errorf("error %v does not match %v", err, target)
					}
				}
				if n := len(f.Calls()); n != tt.wantCalls {
					t.Errorf("%d calls, want %d", n, tt.wantCalls)
				}
			})
		})
	}
}

func messages(n, size int) []QueueMessage {
	ms := make([]QueueMessage, n)
	for i := range ms {
		body := fmt.Sprintf("%d:", i)
		ms[i] = QueueMessage{Body: body + strings.Repeat("m", max(0, size-len(body)))}
	}
	return ms
}

// checkQueueResults verifies SendBatch's results against what the fake
// queue holds: a result without error names a message holding its body.
func checkQueueResults(t *testing.T, f *fakeSQS, ms []QueueMessage, results []QueueResult) (ok int) {
	t.Helper()
	if len(results) != len(ms) {
		t.Fatalf("%d results for %d messages", len(results), len(ms))
	}
	f.mu.Lock()
	byID := make(map[string]string)
	for i, e := range f.sent {
		byID[fmt.Sprint("msg-", i+1)] = e.Body
	}
	f.mu.Unlock()
	for i, res := range results {
		if res.Err != nil {
			if errors.Is(res.Err, errUnsettled) {
				t.Errorf("result %d left unsettled", i)
			}
			continue
		}
		if body, found := byID[res.MessageID]; !found || body != ms[i].Body {
			t.Errorf("result %d: reported sent as %q, which holds %q", i, res.MessageID, body)
		}
		ok++
	}
	return ok
}

func TestSendBatchChunks(t *testing.T) {
	tests := []struct {
		name      string
		opts      []QueueOption
		n, size   int
		wantSizes []int
	}{
		{"ten per request", nil, 25, 10, []int{10, 10, 5}},
		{"by size", []QueueOption{WithMaxMessageSize(100)}, 5, 40, []int{2, 2, 1}},
		{"exactly the size", []QueueOption{WithMaxMessageSize(100)}, 4, 50, []int{2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSQS{}
			q := newQueue(t, f, tt.opts...)
			ms := messages(tt.n, tt.size)
			ms[0].Delay = 2 * time.Hour
			results := q.SendBatch(t.Context(), testQueue, ms)
			if ok := checkQueueResults(t, f, ms, results); ok != tt.n {
				t.Errorf("%d sent, want %d", ok, tt.n)
			}
			var sizes []int
			var ids []string
			for _, c := range f.Calls() {
				sizes = append(sizes, len(c.Entries))
				for _, e := range c.Entries {
					ids = append(ids, e.ID)
				}
			}
			if diff := cmp.Diff(tt.wantSizes, sizes); diff != "" {
				t.Errorf("entries per request (-want +got):\n%s", diff)
			}
			for i, id := range ids {
				if id != fmt.Sprint(i) {
					t.Fatalf("entry IDs %v, want the indices", ids)
				}
			}
			if d := f.Calls()[0].Entries[0].DelaySeconds; d != 900 {
				t.Errorf("DelaySeconds %d, want 900", d)
			}
		})
	}
}

func TestSendBatchRetriesFailedEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSQS{script: func(n int, c *sqcall) ([]sqAnswer, error) {
			if n == 0 {
				return []sqAnswer{
					{},                      // 0: sent
					{Code: "InternalError"}, // 1: retried
					{Code: "InvalidParameterValue", SenderFault: true}, // 2: not retried
					{Omit: true},               // 3: not mentioned: retried
					{Both: true},               // 4: contradictory: retried
					{Code: "RequestThrottled"}, // 5: retried
				}, nil
			}
			return nil, nil
		}}
		q := newQueue(t, f)
		ms := messages(6, 8)
		results := q.SendBatch(t.Context(), testQueue, ms)
		if ok := checkQueueResults(t, f, ms, results); ok != 5 {
			t.Errorf("%d sent, want 5", ok)
		}
		var ee *EntryError
		if !errors.As(results[2].Err, &ee) || ee.Code != "InvalidParameterValue" {
			t.Errorf("result 2: %v, want the sender's fault", results[2].Err)
		}
		calls := f.Calls()
		if len(calls) != 2 {
			t.Fatalf("%d calls, want 2", len(calls))
		}
		var retried []string
		for _, e := range calls[1].Entries {
			retried = append(retried, e.ID)
		}
		if diff := cmp.Diff([]string{"1", "3", "4", "5"}, retried); diff != "" {
			t.Errorf("retried IDs (-want +got):\n%s", diff)
		}
	})
}

func TestSendBatchFailures(t *testing.T) {
	t.Run("throttled until the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeSQS{script: func(n int, c *sqcall) ([]sqAnswer, error) {
				if n == 0 {
					return []sqAnswer{{}, {Code: "RequestThrottled"}}, nil
				}
				return nil, errQThrottled
			}}
			q := newQueue(t, f)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			ms := messages(2, 8)
			results := q.SendBatch(ctx, testQueue, ms)
			if ok := checkQueueResults(t, f, ms, results); ok != 1 {
				t.Errorf("%d sent, want 1", ok)
			}
			if err := results[1].Err; !errors.Is(err, ErrThrottled) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("result 1: %v, want ErrThrottled", err)
			}
		})
	})
	t.Run("queue not found", func(t *testing.T) {
		f := &fakeSQS{script: sqFail(1<<30, errQNotFound)}
		q := newQueue(t, f)
		ms := messages(25, 8)
		results := q.SendBatch(t.Context(), testQueue, ms)
		for i, r := range results {
			if !errors.Is(r.Err, ErrQueueNotFound) {
				t.Fatalf("result %d: %v, want ErrQueueNotFound", i, r.Err)
			}
		}
		if n := len(f.Calls()); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
	})
	t.Run("context canceled", func(t *testing.T) {
		f := &fakeSQS{}
		q := newQueue(t, f)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for i, r := range q.SendBatch(ctx, testQueue, messages(3, 8)) {
			if !errors.Is(r.Err, context.Canceled) {
				t.Errorf("result %d: %v, want context.Canceled", i, r.Err)
			}
		}
		if n := len(f.Calls()); n != 0 {
			t.Errorf("%d calls, want none", n)
		}
	})
}
