package lambdaadapter_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// byStream collects what a handler got: payloads by the stream they came from.
type byStream struct {
	mu sync.Mutex
	by map[string][]string // StreamARN -> payloads
}

func (s *byStream) handler(tag string) lambdaadapter.Handler {
	return lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.by == nil {
			s.by = map[string][]string{}
		}
		s.by[m.StreamARN] = append(s.by[m.StreamARN], tag+":"+string(m.Payload))
		return lambdaadapter.Ack()
	})
}

func (s *byStream) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.by {
		n += len(p)
	}
	return n
}

// TestServiceSeveralStreams: one service reads three streams, two with the
// service's handler and one (given by ARN) with its own; two instances
// share the three streams' leases (3 shards in all: 2 and 1, not 3 and 0)
// and every record is handled once, by its stream's handler. Owned names
// the leases by stream, and Seek reaches a shard of one stream.
func TestServiceSeveralStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := awsfake.NewKinesis()
		arnA := k.CreateStream("a", 1)
		arnB := k.CreateStream("b", 1)
		arnC := k.CreateStream("c", 1)
		shard := "shardId-000000000000"
		mem := lease.NewMemory()
		var got byStream
		start := func(owner string) (*lambdaadapter.Service, func()) {
			s, err := lambdaadapter.NewService(got.handler("shared"),
				lambdaadapter.WithStream("a"), lambdaadapter.WithStreams("b"),
				lambdaadapter.WithStreamHandler(arnC, got.handler("own")),
				lambdaadapter.WithKinesisClient(k), lambdaadapter.WithLeaseStore(mem), lambdaadapter.WithOwnerID(owner),
				lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()), lambdaadapter.WithLeaseDuration(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			return s, func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}
		}
		s1, stop1 := start("w1")
		s2, stop2 := start("w2")
		var first string // b's first record
		for i := range 3 {
			for _, st := range []string{"a", "b", "c"} {
				seq := k.PutTo(st, shard, "k", fmt.Appendf(nil, "%s%d", st, i))
				if st == "b" && i == 0 {
					first = seq
				}
			}
		}
		for range 600 {
			n1, n2 := len(s1.Owned()), len(s2.Owned())
			if got.count() >= 9 && n1+n2 == 3 && n1 > 0 && n2 > 0 {
				break
			}
			time.Sleep(time.Second)
		}
		owned := append(s1.Owned(), s2.Owned()...)
		slices.Sort(owned)
		if want := []string{"a:" + shard, "b:" + shard, "c:" + shard}; !slices.Equal(owned, want) {
			t.Errorf("owned %v, want %v, shared over both", owned, want)
		}
		if n1, n2 := len(s1.Owned()), len(s2.Owned()); n1 == 0 || n2 == 0 {
			t.Errorf("one instance holds every lease: %d and %d", n1, n2)
		}
		got.mu.Lock()
		for arn, want := range map[string][]string{
			arnA: {"shared:a0", "shared:a1", "shared:a2"},
			arnB: {"shared:b0", "shared:b1", "shared:b2"},
			arnC: {"own:c0", "own:c1", "own:c2"},
		} {
			if !slices.Equal(got.by[arn], want) {
				t.Errorf("stream %s handled %v, want %v", arn, got.by[arn], want)
			}
		}
		got.mu.Unlock()

		// Seek one stream's shard by its key: only that stream reads it again.
		holder := s1
		if !slices.Contains(s1.Owned(), "b:"+shard) {
			holder = s2
		}
		if err := holder.Seek(t.Context(), lambdaadapter.AtSequence("b:"+shard, first)); err != nil {
			t.Fatalf("Seek: %v", err)
		}
		if err := holder.Seek(t.Context(), lambdaadapter.AtSequence("z:"+shard, first)); err == nil {
			t.Error("Seek of a shard of no stream succeeded")
		}
		for range 600 {
			if got.count() >= 12 {
				break
			}
			time.Sleep(time.Second)
		}
		got.mu.Lock()
		if n := len(got.by[arnB]); n != 6 {
			t.Errorf("stream b handled %d records after the seek, want 3 + 3", n)
		}
		if n := len(got.by[arnA]) + len(got.by[arnC]); n != 6 {
			t.Errorf("streams a and c handled %d records, want 6 (the seek was b's)", n)
		}
		got.mu.Unlock()
		stop1()
		stop2()
	})
}

// TestServiceStreamsValidated: the stream list is checked when the
// service is built.
func TestServiceStreamsValidated(t *testing.T) {
	k := awsfake.NewKinesis()
	h := lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome { return lambdaadapter.Ack() })
	for i, c := range []struct {
		opts []lambdaadapter.ServiceOption
		want string
	}{
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreams("a", "b:c")}, "not valid"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStream("a b")}, "not valid"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStream("orders#1")}, "not valid"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreams(strings.Repeat("s", 129))}, "not valid"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreams("arn:aws:sqs:eu-west-1:1:stream/x")}, "not a Kinesis stream ARN"},
		// An enhanced fan-out consumer's ARN, and ARNs whose names no
		// stream has (a comma would split the leader row's list).
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStream("arn:aws:kinesis:eu-west-1:1:stream/a/consumer/c:1700000000")}, "not a Kinesis stream ARN"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreams("arn:aws:kinesis:eu-west-1:1:stream/a,b")}, "not a Kinesis stream ARN"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreamHandler("arn:aws:kinesis:eu-west-1:1:stream/a b", h)}, "not a Kinesis stream ARN"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreamHandler("a", h), lambdaadapter.WithStreamHandler("a", h)}, "two handlers"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreamHandler("a", nil)}, "nil handler"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreamARN("arn:aws:kinesis:eu-west-1:1:stream/a")}, "needs WithStream"},
		// WithStreamARN is WithStream's stream's: with WithStreams alone it
		// was silently ignored.
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreams("a", "b"), lambdaadapter.WithStreamARN("arn:aws:kinesis:eu-west-1:1:stream/a")}, "needs WithStream"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStream("a"), lambdaadapter.WithStreamARN("arn:aws:kinesis:eu-west-1:1:stream/b")}, "is not stream a's"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStream("a"), lambdaadapter.WithStreamARN("a")}, "not a Kinesis stream ARN"},
		// One name, two streams (accounts or regions): lease keys use the
		// name, so one of them was silently dropped.
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreams("arn:aws:kinesis:eu-west-1:1:stream/a", "arn:aws:kinesis:eu-west-1:2:stream/a")}, "two ARNs"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStream("arn:aws:kinesis:eu-west-1:1:stream/a"), lambdaadapter.WithStreamHandler("arn:aws:kinesis:us-east-1:1:stream/a", h)}, "two ARNs"},
		// A stream named twice was read once, in silence: a copied list
		// or a misspelt stream goes unnoticed.
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreams("a", "b", "a")}, "stream a is named twice"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStreams("arn:aws:kinesis:eu-west-1:1:stream/a", "b", "a")}, "stream a is named twice"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStream("a"), lambdaadapter.WithStreams("b", "a")}, "stream a is named twice"},
		{[]lambdaadapter.ServiceOption{lambdaadapter.WithStream("a"), lambdaadapter.WithStreamARN("arn:aws:kinesis:eu-west-1:1:stream/a"), lambdaadapter.WithStreams("arn:aws:kinesis:eu-west-1:1:stream/a")}, "stream a is named twice"},
		{nil, "needs the stream"},
	} {
		_, err := lambdaadapter.NewService(h, append(c.opts, lambdaadapter.WithKinesisClient(k))...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewService(%d options) case %d: %v, want %q", len(c.opts), i, err, c.want)
		}
	}
	// WithStreamHandler names a listed stream again to give it its
	// handler, before or after the list.
	s, err := lambdaadapter.NewService(h, lambdaadapter.WithStreamHandler("b", h), lambdaadapter.WithStreams("arn:aws:kinesis:eu-west-1:1:stream/a", "b"),
		lambdaadapter.WithStreamHandler("a", h), lambdaadapter.WithKinesisClient(k))
	if err != nil {
		t.Fatal(err)
	}
	if s.Owner() == "" {
		t.Error("no owner id")
	}
}
