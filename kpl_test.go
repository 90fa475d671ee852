package lambdaadapter_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// aggregateBatch is one shard: a plain record, a KPL aggregate of five user
// records over keys a and b (u-3 with an explicit hash key), and a plain
// record.
func aggregateBatch() (*lambdaadaptertest.Batch, string) {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("z", []byte("before"))
	parent := b.AddAggregate(
		lambdaadaptertest.UserRecord{PartitionKey: "a", Payload: []byte("u-0")},
		lambdaadaptertest.UserRecord{PartitionKey: "b", Payload: []byte("u-1"), Headers: []string{"trace", "t-1"}},
		lambdaadaptertest.UserRecord{PartitionKey: "a", Payload: []byte("u-2")},
		lambdaadaptertest.UserRecord{PartitionKey: "b", Payload: []byte("u-3"), ExplicitHashKey: "12345"},
		lambdaadaptertest.UserRecord{PartitionKey: "a", Payload: []byte("u-4")},
	)
	b.Add("z", []byte("after"))
	return b, parent
}

type seen struct {
	mu sync.Mutex
	ms map[string]lambdaadapter.Message
	n  map[string]int
}

func (s *seen) handler(fail string) lambdaadapter.Handler {
	return lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.ms == nil {
			s.ms, s.n = map[string]lambdaadapter.Message{}, map[string]int{}
		}
		p := string(m.Payload)
		c := *m
		c.Headers = slices.Clone(m.Headers)
		s.ms[p] = c
		s.n[p]++
		if p == fail {
			return lambdaadapter.Retry(errors.New("user record failed"))
		}
		return lambdaadapter.Ack()
	})
}

// TestAggregateFailingUserRecordNamesParent: one failing user record of an
// aggregate holds its parent: the response names the parent's sequence
// number, and the user records are messages of their own.
func TestAggregateFailingUserRecordNamesParent(t *testing.T) {
	b, parent := aggregateBatch()
	var s seen
	res := lambdaadaptertest.Run(t, s.handler("u-2"), b)
	if !slices.Equal(res.Failures, []string{parent}) {
		t.Fatalf("failures %q, want the parent %q", res.Failures, parent)
	}
	// Records after the failing one may not have started (Lambda mode gives
	// up on the rest of the shard); those before it all ran.
	for i, p := range []string{"u-0", "u-1", "u-2"} {
		m, ok := s.ms[p]
		if !ok {
			t.Fatalf("%s not handled", p)
		}
		if !m.Aggregated || m.SubSequenceNumber != i || m.SequenceNumber != parent {
			t.Errorf("%s: aggregated %v, sub-sequence %d, sequence number %s; want true, %d, %s", p, m.Aggregated, m.SubSequenceNumber, m.SequenceNumber, i, parent)
		}
		if got := m.Header("kinesis-sub-sequence-number"); got != string(rune('0'+i)) {
			t.Errorf("%s: kinesis-sub-sequence-number %q", p, got)
		}
	}
	if m := s.ms["u-1"]; m.PartitionKey != "b" || m.Header("trace") != "t-1" || m.Header("partition-key") != "b" {
		t.Errorf("u-1: key %q, trace %q, partition-key header %q", m.PartitionKey, m.Header("trace"), m.Header("partition-key"))
	}
	if m := s.ms["before"]; m.Aggregated || m.Header("kinesis-sub-sequence-number") != "" {
		t.Errorf("a plain record reads as aggregated: %+v", m)
	}
}

// TestAggregateCountedRetryCopiesUserRecord: with WithMaxAttempts the
// failing user record becomes a counted copy of its own — a plain record
// under its own key — and the parent settles.
func TestAggregateCountedRetryCopiesUserRecord(t *testing.T) {
	b, _ := aggregateBatch()
	var s seen
	res := lambdaadaptertest.Run(t, s.handler("u-2"), b, lambdaadapter.WithMaxAttempts(3))
	if !res.AllSettled() {
		t.Fatalf("failures %q, want none: the copy settles the user record", res.Failures)
	}
	w := res.Kinesis.Written()
	if len(w) != 1 {
		t.Fatalf("%d records written, want one copy", len(w))
	}
	c := w[0]
	if string(c.Payload) != "u-2" || c.PartitionKey != "a" || c.Headers.Get("x-ruststream-retry-count") != "1" ||
		c.Headers.Get("kinesis-sub-sequence-number") != "" || c.Payload[0] == 0xF3 {
		t.Errorf("copy %q under key %q with headers %v; want u-2 under a, retry count 1, plain", c.Payload, c.PartitionKey, c.Headers)
	}
	if m := s.ms["u-3"]; m.ExplicitHashKey != "12345" || m.SubSequenceNumber != 3 {
		t.Errorf("u-3: explicit hash key %q, sub-sequence %d", m.ExplicitHashKey, m.SubSequenceNumber)
	}
	for _, p := range []string{"before", "u-0", "u-1", "u-3", "u-4", "after"} {
		if s.n[p] != 1 {
			t.Errorf("%s handled %d times, want 1", p, s.n[p])
		}
	}
}
