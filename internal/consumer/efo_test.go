package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lease"
)

// fakeSub is a subscription whose events the test sends one by one.
type fakeSub struct {
	events chan kinesistypes.SubscribeToShardEventStream
	closed chan struct{}
	once   sync.Once
	err    error // the stream's error; set before events is closed
}

func newFakeSub() *fakeSub {
	return &fakeSub{events: make(chan kinesistypes.SubscribeToShardEventStream), closed: make(chan struct{})}
}

func (s *fakeSub) Events() <-chan kinesistypes.SubscribeToShardEventStream { return s.events }
func (s *fakeSub) Err() error                                              { return s.err }
func (s *fakeSub) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// send delivers an event; it reports false when the reader closed the
// subscription first.
func (s *fakeSub) send(e kinesistypes.SubscribeToShardEvent) bool {
	select {
	case s.events <- &kinesistypes.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: e}:
		return true
	case <-s.closed:
		return false
	}
}

// finish ends the event stream, cleanly (nil) or with err.
func (s *fakeSub) finish(err error) {
	s.err = err
	close(s.events)
}

func (s *fakeSub) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// subscriber stands in for SubscribeToShard: each call takes the next
// scripted reply (an error or a subscription); without one left it opens a
// subscription that sends nothing.
type subscriber struct {
	mu      sync.Mutex
	calls   []subscribeCall
	replies []any // error or *fakeSub
	opened  []*fakeSub
}

// subscribeCall is one SubscribeToShard call the subscriber answered.
type subscribeCall struct {
	arn, shard string
	start      string // type and sequence number
	at         time.Time
}

func positionString(p *kinesistypes.StartingPosition) string {
	if s := aws.ToString(p.SequenceNumber); s != "" {
		return string(p.Type) + " " + s
	}
	return string(p.Type)
}

func (sb *subscriber) open(_ context.Context, in *kinesis.SubscribeToShardInput) (subscription, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.calls = append(sb.calls, subscribeCall{aws.ToString(in.ConsumerARN), aws.ToString(in.ShardId), positionString(in.StartingPosition), time.Now()})
	var r any = newFakeSub()
	if len(sb.replies) > 0 {
		r, sb.replies = sb.replies[0], sb.replies[1:]
	}
	if err, ok := r.(error); ok {
		return nil, err
	}
	sub := r.(*fakeSub)
	sb.opened = append(sb.opened, sub)
	return sub, nil
}

func (sb *subscriber) starts() []string {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	var out []string
	for _, c := range sb.calls {
		out = append(out, c.start)
	}
	return out
}

func (sb *subscriber) callTimes() []time.Time {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	var out []time.Time
	for _, c := range sb.calls {
		out = append(out, c.at)
	}
	return out
}

// fanOutStream is the test stream with stream consumers: registered
// consumers are ACTIVE at once. Its SubscribeToShard is never called (the
// tests replace the consumer's fan.open); it is there to make it a
// FanOutAPI.
type fanOutStream struct {
	*stream
	mu        sync.Mutex
	consumers map[string]string // name -> consumer ARN
	registers int
}

func newFanOutStream(shards int) *fanOutStream {
	return &fanOutStream{stream: newStream(shards), consumers: map[string]string{}}
}

func (f *fanOutStream) RegisterStreamConsumer(_ context.Context, in *kinesis.RegisterStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := aws.ToString(in.ConsumerName)
	if _, ok := f.consumers[name]; ok {
		return nil, &kinesistypes.ResourceInUseException{Message: aws.String("consumer exists")}
	}
	f.registers++
	arn := fmt.Sprintf("%s/consumer/%s:%d", aws.ToString(in.StreamARN), name, 1700000000+f.registers)
	f.consumers[name] = arn
	return &kinesis.RegisterStreamConsumerOutput{Consumer: &kinesistypes.Consumer{ConsumerARN: aws.String(arn), ConsumerName: in.ConsumerName, ConsumerStatus: kinesistypes.ConsumerStatusCreating}}, nil
}

func (f *fanOutStream) DescribeStreamConsumer(_ context.Context, in *kinesis.DescribeStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	arn, ok := f.consumers[aws.ToString(in.ConsumerName)]
	if !ok {
		return nil, &kinesistypes.ResourceNotFoundException{Message: aws.String("no such consumer")}
	}
	return &kinesis.DescribeStreamConsumerOutput{ConsumerDescription: &kinesistypes.ConsumerDescription{
		ConsumerARN: aws.String(arn), ConsumerName: in.ConsumerName, ConsumerStatus: kinesistypes.ConsumerStatusActive, StreamARN: in.StreamARN,
	}}, nil
}

func (f *fanOutStream) SubscribeToShard(context.Context, *kinesis.SubscribeToShardInput, ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	return nil, errors.New("fanOutStream: SubscribeToShard is the test's subscriber's")
}

// deregister removes a stream consumer, as DeregisterStreamConsumer would.
func (f *fanOutStream) deregister(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.consumers, name)
}

func (f *fanOutStream) registered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.registers
}

// fanOutShard returns a shard of a consumer reading f with enhanced
// fan-out as "app" (registered), whose subscriptions sb answers.
func fanOutShard(t *testing.T, f *fanOutStream, id string, sb *subscriber) *shard {
	t.Helper()
	c := newConsumer(t, Config{Kinesis: f, StreamARN: f.arn, EnhancedFanOut: "app", Owner: "w1"}, handler(newRecorder()))
	c.fan.open = sb.open
	if err := c.startFanOut(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &shard{c: c, id: id}
}

// subscribeIn runs s.subscribe from pos in the background; the returned
// channel is closed when it returned.
func subscribeIn(ctx context.Context, s *shard, pos Position, out chan<- batch) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.subscribe(ctx, pos, out)
	}()
	return done
}

func rec(seq string) kinesistypes.Record {
	return kinesistypes.Record{SequenceNumber: aws.String(seq), PartitionKey: aws.String("k"), Data: []byte("d" + seq)}
}

// event is an event with records of the sequence numbers seqs and the
// continuation cont ("" for none).
func event(cont string, seqs ...string) kinesistypes.SubscribeToShardEvent {
	e := kinesistypes.SubscribeToShardEvent{MillisBehindLatest: aws.Int64(0), Records: []kinesistypes.Record{}}
	if cont != "" {
		e.ContinuationSequenceNumber = aws.String(cont)
	}
	for _, s := range seqs {
		e.Records = append(e.Records, rec(s))
	}
	return e
}

func seqsOf(b batch) []string {
	var out []string
	for _, r := range b.records {
		out = append(out, aws.ToString(r.SequenceNumber))
	}
	return out
}

// receive takes the next batch from out.
func receive(t *testing.T, out <-chan batch) batch {
	t.Helper()
	select {
	case b := <-out:
		return b
	case <-time.After(time.Hour): // fake time: only when nothing can come
		t.Fatal("no batch")
		return batch{}
	}
}

func TestStartingPosition(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		name string
		pos  Position
		want kinesistypes.StartingPosition
	}{
		{"trim horizon", TrimHorizon(), kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeTrimHorizon}},
		{"latest", Latest(), kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeLatest}},
		{"timestamp", AtTimestamp(at), kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(at)}},
		{"checkpoint", Position{kind: posSequence, seq: "49"}, kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String("49")}},
		{"seek or aggregate", Position{kind: posAtSequence, seq: "49", skip: 2}, kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String("49")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := startingPosition(tt.pos)
			if got.Type != tt.want.Type || aws.ToString(got.SequenceNumber) != aws.ToString(tt.want.SequenceNumber) || !aws.ToTime(got.Timestamp).Equal(aws.ToTime(tt.want.Timestamp)) {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}

// TestSubscribeRenewsAfterLastRecord: a subscription that ends (cleanly, as
// after Kinesis's five minutes, or with an error) is renewed after the last
// record passed on, never from the start position again; empty events pass
// nothing on.
func TestSubscribeRenewsAfterLastRecord(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(1)
		sub1, sub2, sub3 := newFakeSub(), newFakeSub(), newFakeSub()
		sb := &subscriber{replies: []any{sub1, sub2, sub3}}
		s := fanOutShard(t, f, shardID(0), sb)
		ctx, cancel := context.WithCancel(t.Context())
		out := make(chan batch)
		done := subscribeIn(ctx, s, TrimHorizon(), out)

		sub1.send(event("s2", "s1", "s2"))
		if got := seqsOf(receive(t, out)); !slices.Equal(got, []string{"s1", "s2"}) {
			t.Errorf("first batch %v", got)
		}
		sub1.send(event("s2")) // nothing new
		sub1.send(event("s3", "s3"))
		if got := seqsOf(receive(t, out)); !slices.Equal(got, []string{"s3"}) {
			t.Errorf("second batch %v", got)
		}
		sub1.finish(nil) // Kinesis ends the subscription
		sub2.send(event("s4", "s4"))
		if got := seqsOf(receive(t, out)); !slices.Equal(got, []string{"s4"}) {
			t.Errorf("third batch %v", got)
		}
		sub2.finish(&kinesistypes.InternalFailureException{Message: aws.String("stream broke")})
		synctest.Wait()
		if !sub3.send(event("s4")) {
			t.Error("third subscription closed")
		}
		want := []string{"TRIM_HORIZON", "AFTER_SEQUENCE_NUMBER s3", "AFTER_SEQUENCE_NUMBER s4"}
		if diff := cmp.Diff(want, sb.starts()); diff != "" {
			t.Errorf("starting positions (-want +got):\n%s", diff)
		}
		if !sub1.isClosed() || !sub2.isClosed() {
			t.Error("an ended subscription was not closed")
		}
		times := sb.callTimes()
		for i := 1; i < len(times); i++ {
			if d := times[i].Sub(times[i-1]); d < subscribeInterval {
				t.Errorf("subscription %d came %v after the one before, want at least %v", i, d, subscribeInterval)
			}
		}
		cancel()
		<-done
		if !sub3.isClosed() {
			t.Error("the last subscription was left open")
		}
	})
}

// TestSubscribeContinuation: with no record read since the start, a
// renewal starts after the last event's continuation sequence number
// (which moves on while nothing is written), not at LATEST again.
func TestSubscribeContinuation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(1)
		sub1 := newFakeSub()
		sb := &subscriber{replies: []any{sub1}}
		s := fanOutShard(t, f, shardID(0), sb)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		out := make(chan batch)
		done := subscribeIn(ctx, s, Latest(), out)
		sub1.send(event("c1"))
		sub1.send(event("c2"))
		sub1.finish(nil)
		time.Sleep(subscribeInterval) // calls are a second apart
		synctest.Wait()
		if diff := cmp.Diff([]string{"LATEST", "AFTER_SEQUENCE_NUMBER c2"}, sb.starts()); diff != "" {
			t.Errorf("starting positions (-want +got):\n%s", diff)
		}
		select {
		case b := <-out:
			t.Errorf("empty events passed on: %+v", b)
		default:
		}
		cancel()
		<-done
	})
}

// TestSubscribeResourceInUse: a SubscribeToShard answered
// ResourceInUseException (the previous subscription is still open) is
// retried with a growing backoff, from the same position.
func TestSubscribeResourceInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(1)
		inUse := &kinesistypes.ResourceInUseException{Message: aws.String("another subscription is active")}
		sub := newFakeSub()
		sb := &subscriber{replies: []any{inUse, inUse, inUse, sub}}
		s := fanOutShard(t, f, shardID(0), sb)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		out := make(chan batch)
		done := subscribeIn(ctx, s, Position{kind: posSequence, seq: "s9"}, out)
		sub.send(event("s10", "s10"))
		if got := seqsOf(receive(t, out)); !slices.Equal(got, []string{"s10"}) {
			t.Errorf("batch %v", got)
		}
		starts := sb.starts()
		for _, st := range starts {
			if st != "AFTER_SEQUENCE_NUMBER s9" {
				t.Errorf("starting positions %v, want AFTER_SEQUENCE_NUMBER s9 each time", starts)
				break
			}
		}
		times := sb.callTimes()
		var gaps []time.Duration
		for i := 1; i < len(times); i++ {
			gaps = append(gaps, times[i].Sub(times[i-1]))
		}
		if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, gaps); diff != "" {
			t.Errorf("waits between the calls (-want +got):\n%s", diff)
		}
		cancel()
		<-done
	})
}

// TestSubscribeShardEnd: the event that names the child shards and has no
// continuation ends the shard: its records and the end go out in one
// batch, and reading stops with the subscription closed. An event with
// neither a continuation nor children is not an end: the shard is
// subscribed to again after the last record.
func TestSubscribeShardEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(1)
		sub1, sub2 := newFakeSub(), newFakeSub()
		sb := &subscriber{replies: []any{sub1, sub2}}
		s := fanOutShard(t, f, shardID(0), sb)
		out := make(chan batch)
		done := subscribeIn(t.Context(), s, TrimHorizon(), out)
		sub1.send(event("", "s1")) // no continuation, no children
		if b := receive(t, out); b.end || !slices.Equal(seqsOf(b), []string{"s1"}) {
			t.Errorf("batch %+v, want s1 without the end", b)
		}
		end := event("", "s2", "s3")
		end.ChildShards = []kinesistypes.ChildShard{{ShardId: aws.String(shardID(1)), ParentShards: []string{shardID(0)}}}
		sub2.send(end)
		b := receive(t, out)
		if !b.end || b.gone || !slices.Equal(seqsOf(b), []string{"s2", "s3"}) {
			t.Errorf("batch %+v, want s2, s3 and the end", b)
		}
		<-done
		if !sub1.isClosed() || !sub2.isClosed() {
			t.Error("a subscription was left open")
		}
		if diff := cmp.Diff([]string{"TRIM_HORIZON", "AFTER_SEQUENCE_NUMBER s1"}, sb.starts()); diff != "" {
			t.Errorf("starting positions (-want +got):\n%s", diff)
		}
	})
}

// TestSubscribeGoneShard: SubscribeToShard answers ResourceNotFoundException
// for a shard trimmed away: the reader learns that the shard is gone.
func TestSubscribeGoneShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(1)
		parent := shardID(0)
		f.Split(testStream, parent)
		f.Trim(testStream, parent)
		missing := &kinesistypes.ResourceNotFoundException{Message: aws.String("shard not found")}
		sb := &subscriber{replies: []any{missing}}
		s := fanOutShard(t, f, parent, sb)
		out := make(chan batch)
		done := subscribeIn(t.Context(), s, TrimHorizon(), out)
		if b := receive(t, out); !b.gone || b.end || len(b.records) != 0 {
			t.Errorf("batch %+v, want gone", b)
		}
		<-done
	})
}

// TestSubscribeMissingConsumer: ResourceNotFoundException for a shard that
// exists means the stream consumer is gone (deregistered under the
// worker): it is registered again, and the shard is subscribed to with the
// new consumer ARN.
func TestSubscribeMissingConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(1)
		missing := &kinesistypes.ResourceNotFoundException{Message: aws.String("consumer not found")}
		sub := newFakeSub()
		sb := &subscriber{replies: []any{missing, sub}}
		s := fanOutShard(t, f, shardID(0), sb)
		old := s.c.fan.consumerARN()
		f.deregister("app")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		out := make(chan batch)
		done := subscribeIn(ctx, s, TrimHorizon(), out)
		sub.send(event("s1", "s1"))
		receive(t, out)
		sb.mu.Lock()
		arns := []string{sb.calls[0].arn, sb.calls[1].arn}
		sb.mu.Unlock()
		if arns[0] != old || arns[1] == old || !strings.Contains(arns[1], "/consumer/app:") || f.registered() != 2 {
			t.Errorf("subscribed as %v (registered %d times), want %s, then a new ARN of app", arns, f.registered(), old)
		}
		cancel()
		<-done
	})
}

// TestSubscribeCancelMidEvent: ctx ends while an event's records wait to be
// passed on: nothing was passed, so the resume point stays before them;
// the subscription is closed and nothing keeps running.
func TestSubscribeCancelMidEvent(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(1)
		sub := newFakeSub()
		sb := &subscriber{replies: []any{sub}}
		s := fanOutShard(t, f, shardID(0), sb)
		ctx, cancel := context.WithCancel(t.Context())
		at := resumePoint{start: TrimHorizon(), last: "s0", continuation: "s0"}
		out := make(chan batch) // nobody receives
		var done, stopped bool
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			done, _ = s.subscription(ctx, s.c.fan.consumerARN(), at.position(), &at, out)
		}()
		if !sub.send(event("s2", "s1", "s2")) {
			t.Fatal("subscription closed before the event")
		}
		synctest.Wait() // blocked passing it on
		cancel()
		<-finished
		stopped = done
		if !stopped {
			t.Error("subscription did not report the stop")
		}
		if at.last != "s0" || at.continuation != "s0" {
			t.Errorf("resume point moved to %+v, want it before the event not passed on", at)
		}
		if p := positionString(at.position()); p != "AFTER_SEQUENCE_NUMBER s0" {
			t.Errorf("next subscription would start at %s", p)
		}
		if !sub.isClosed() {
			t.Error("the subscription was left open")
		}
		// The same through subscribe: it returns and closes its stream.
		sub2 := newFakeSub()
		sb.mu.Lock()
		sb.replies = []any{sub2}
		sb.mu.Unlock()
		ctx, cancel = context.WithCancel(t.Context())
		d := subscribeIn(ctx, s, TrimHorizon(), out)
		sub2.send(event("s1", "s1"))
		synctest.Wait()
		cancel()
		<-d
		if !sub2.isClosed() {
			t.Error("subscribe left its subscription open")
		}
	})
}

// TestSubscribeIdle: a subscription that delivers nothing for
// subscriptionIdle is given up and the shard subscribed to again.
func TestSubscribeIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(1)
		sub1 := newFakeSub()
		sb := &subscriber{replies: []any{sub1}}
		s := fanOutShard(t, f, shardID(0), sb)
		ctx, cancel := context.WithCancel(t.Context())
		out := make(chan batch)
		done := subscribeIn(ctx, s, TrimHorizon(), out)
		sub1.send(event("s1", "s1"))
		receive(t, out)
		time.Sleep(subscriptionIdle + 5*time.Second)
		synctest.Wait()
		if !sub1.isClosed() || len(sb.starts()) != 2 || sb.starts()[1] != "AFTER_SEQUENCE_NUMBER s1" {
			t.Errorf("after a silent minute: closed %v, subscriptions %v", sub1.isClosed(), sb.starts())
		}
		cancel()
		<-done
	})
}

// regFake is a stream consumer registry with a script: how many looks the
// consumer stays CREATING, and whether someone else registers it first.
type regFake struct {
	mu                   sync.Mutex
	arn                  string // "" while not registered
	creating             int    // DescribeStreamConsumer calls left answering CREATING
	racer                bool   // another worker registers it just before this one
	phantom              bool   // RegisterStreamConsumer says it exists, DescribeStreamConsumer never finds it
	failing              error  // every DescribeStreamConsumer fails with it
	describes, registers int
}

func (r *regFake) DescribeStreamConsumer(_ context.Context, in *kinesis.DescribeStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.describes++
	switch {
	case r.failing != nil:
		return nil, r.failing
	case r.arn == "":
		return nil, &kinesistypes.ResourceNotFoundException{Message: aws.String("not found")}
	}
	status := kinesistypes.ConsumerStatusActive
	if r.creating > 0 {
		r.creating--
		status = kinesistypes.ConsumerStatusCreating
	}
	return &kinesis.DescribeStreamConsumerOutput{ConsumerDescription: &kinesistypes.ConsumerDescription{ConsumerARN: aws.String(r.arn), ConsumerName: in.ConsumerName, ConsumerStatus: status}}, nil
}

func (r *regFake) RegisterStreamConsumer(_ context.Context, in *kinesis.RegisterStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registers++
	if r.phantom {
		return nil, &kinesistypes.ResourceInUseException{Message: aws.String("consumer exists")}
	}
	if r.racer {
		r.arn = aws.ToString(in.StreamARN) + "/consumer/" + aws.ToString(in.ConsumerName) + ":1"
		return nil, &kinesistypes.ResourceInUseException{Message: aws.String("consumer exists")}
	}
	r.arn = aws.ToString(in.StreamARN) + "/consumer/" + aws.ToString(in.ConsumerName) + ":2"
	return &kinesis.RegisterStreamConsumerOutput{Consumer: &kinesistypes.Consumer{ConsumerARN: aws.String(r.arn), ConsumerStatus: kinesistypes.ConsumerStatusCreating}}, nil
}

func (r *regFake) SubscribeToShard(context.Context, *kinesis.SubscribeToShardInput, ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	return nil, errors.New("regFake: no subscriptions")
}

func TestFanOutRegistration(t *testing.T) {
	const stream = "arn:aws:kinesis:us-east-1:123456789012:stream/s"
	denied := errors.New("AccessDeniedException: not allowed")
	for _, tt := range []struct {
		name                 string
		reg                  *regFake
		wantARN              string
		wantErr              func(error) bool // nil: none
		describes, registers int
		waited               time.Duration // at least
	}{
		{"existing ACTIVE consumer reused", &regFake{arn: stream + "/consumer/app:7"}, stream + "/consumer/app:7", nil, 1, 0, 0},
		{"new consumer registered and waited for", &regFake{creating: 2}, stream + "/consumer/app:2", nil, 4, 1, registerPoll + 2*registerPoll},
		{"registered concurrently by another worker", &regFake{racer: true, creating: 1}, stream + "/consumer/app:1", nil, 3, 1, registerPoll + 2*registerPoll},
		{"describe keeps failing", &regFake{failing: denied}, "", func(err error) bool { return errors.Is(err, denied) }, registerAttempts, 0, 0},
		{"lookup and registration keep contradicting each other", &regFake{phantom: true}, "", inUse, registerAttempts, registerAttempts, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fanOut{api: tt.reg, name: "app"}
				start := time.Now()
				err := f.register(t.Context(), slog.New(slog.DiscardHandler), stream, "")
				if (tt.wantErr == nil) != (err == nil) || err != nil && !tt.wantErr(err) {
					t.Fatalf("register: %v", err)
				}
				if err != nil && !strings.Contains(err.Error(), `"app"`) {
					t.Errorf("error %q does not name the consumer", err)
				}
				if got := f.consumerARN(); got != tt.wantARN {
					t.Errorf("consumer ARN %q, want %q", got, tt.wantARN)
				}
				if tt.reg.describes != tt.describes || tt.reg.registers != tt.registers {
					t.Errorf("%d describes and %d registers, want %d and %d", tt.reg.describes, tt.reg.registers, tt.describes, tt.registers)
				}
				if waited := time.Since(start); waited < tt.waited {
					t.Errorf("waited %v, want at least %v", waited, tt.waited)
				}
			})
		})
	}
}

// TestFanOutRegistrationStopsWithContext: the wait for ACTIVE ends with ctx.
func TestFanOutRegistrationStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fanOut{api: &regFake{creating: 1 << 30}, name: "app"}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := f.register(ctx, slog.New(slog.DiscardHandler), "arn:aws:kinesis:us-east-1:1:stream/s", ""); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("register: %v, want the context's error", err)
		}
	})
}

// noDescribe hides every method of a Kinesis client but the consumer's
// KinesisAPI and FanOutAPI (no DescribeStreamSummary: the stream's ARN
// cannot be learnt).
type noDescribe struct {
	KinesisAPI
	FanOutAPI
}

func TestFanOutConfig(t *testing.T) {
	f := newFanOutStream(1)
	e := newConsumer(t, Config{Kinesis: f}, handler(newRecorder())).cfg.Engine
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"client without FanOutAPI", Config{Kinesis: f.stream, EnhancedFanOut: "app"}, "FanOutAPI"},
		{"bad consumer name", Config{Kinesis: f, EnhancedFanOut: "my app"}, `"my app"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Stream, tt.cfg.Engine = testStream, e
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error naming %s", err, tt.want)
			}
		})
	}
	// Without the stream's ARN, Run cannot subscribe: it says so at once.
	c := newConsumer(t, Config{Kinesis: noDescribe{f, f}, EnhancedFanOut: "app", Owner: "w1"}, handler(newRecorder()))
	if err := c.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "ARN") {
		t.Errorf("Run without the stream's ARN: %v", err)
	}
}

// efoServer serves the in-memory stream to subscriptions as Kinesis would:
// an event every 200ms with the records that arrived (at most perEvent),
// the continuation sequence number, and at a closed shard's end an event
// naming the children; it ends every subscription after renewEvery events.
type efoServer struct {
	f                    *fanOutStream
	perEvent, renewEvery int

	mu    sync.Mutex
	calls int
	wg    sync.WaitGroup
}

func (srv *efoServer) open(ctx context.Context, in *kinesis.SubscribeToShardInput) (subscription, error) {
	srv.mu.Lock()
	srv.calls++
	srv.mu.Unlock()
	k := srv.f.Kinesis // not the counting GetRecords of the test stream
	id := aws.ToString(in.ShardId)
	p := in.StartingPosition
	it, err := k.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName: aws.String(testStream), ShardId: in.ShardId, ShardIteratorType: p.Type,
		StartingSequenceNumber: p.SequenceNumber, Timestamp: p.Timestamp,
	})
	if err != nil {
		return nil, err
	}
	cont := aws.ToString(p.SequenceNumber)
	if cont == "" || p.Type == kinesistypes.ShardIteratorTypeAtSequenceNumber {
		ls, err := k.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(testStream)})
		if err != nil {
			return nil, err
		}
		for _, s := range ls.Shards {
			if aws.ToString(s.ShardId) == id {
				cont = aws.ToString(s.SequenceNumberRange.StartingSequenceNumber)
			}
		}
	}
	sub := newFakeSub()
	srv.wg.Go(func() {
		iter := it.ShardIterator
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for range srv.renewEvery {
			select {
			case <-sub.closed:
				return
			case <-tick.C:
			}
			res, err := k.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(int32(srv.perEvent))})
			if err != nil {
				sub.finish(err)
				return
			}
			ev := kinesistypes.SubscribeToShardEvent{Records: res.Records, MillisBehindLatest: res.MillisBehindLatest}
			if n := len(res.Records); n > 0 {
				cont = aws.ToString(res.Records[n-1].SequenceNumber)
			}
			if res.NextShardIterator == nil {
				ev.ChildShards = res.ChildShards
			} else {
				ev.ContinuationSequenceNumber = aws.String(cont)
			}
			if !sub.send(ev) {
				return
			}
			if res.NextShardIterator == nil {
				break
			}
			iter = res.NextShardIterator
		}
		sub.finish(nil)
	})
	return sub, nil
}

// TestFanOutConsumer reads four shards with enhanced fan-out through many
// subscription renewals and a split: every record is handled once, the
// parent's records all before its children's, the parent ends at
// SHARD_END, the stream consumer is registered once, and no GetRecords call
// of the consumer's own is made.
func TestFanOutConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(4)
		last := f.fill(4, 100)
		parent := shardID(1)
		store := lease.NewMemory()
		h := newRecorder()
		var mu sync.Mutex
		parentDone, childEarly := 0, 0
		h.outcome = func(m *message.Message) message.Outcome {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case m.ShardID == parent:
				parentDone++
			case m.ShardID > shardID(3) && parentDone < 150:
				childEarly++
			}
			return message.Ack()
		}
		srv := &efoServer{f: f, perEvent: 25, renewEvery: 3}
		c := newConsumer(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", EnhancedFanOut: "app", ListInterval: 2 * time.Second}, handler(h))
		c.fan.open = srv.open
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- c.Run(ctx) }()
		waitFor(t, "200 records", func() bool { return h.count() >= 200 })
		for i := range 50 {
			f.put(parent, "k"+strconv.Itoa(i%7), fmt.Sprintf("%s-%d", parent, 100+i))
		}
		left, right := f.Split(testStream, parent)
		for i := range 30 {
			f.put(left, "k", fmt.Sprintf("%s-%d", left, i))
			f.put(right, "k", fmt.Sprintf("%s-%d", right, i))
		}
		waitFor(t, "510 records", func() bool { return h.count() == 510 })
		time.Sleep(3 * time.Second) // checkpoints
		cancel()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		srv.wg.Wait()
		if childEarly != 0 {
			t.Errorf("%d child records handled before the parent's 150", childEarly)
		}
		for p, n := range h.times() {
			if n != 1 {
				t.Errorf("record %s handled %d times", p, n)
			}
		}
		if cp := checkpointOf(t, store, parent); cp != lease.ShardEnd {
			t.Errorf("parent checkpoint %q, want SHARD_END", cp)
		}
		for _, id := range []string{shardID(0), shardID(2), shardID(3)} {
			if cp := checkpointOf(t, store, id); cp != last[id] {
				t.Errorf("%s checkpoint %q, want %q", id, cp, last[id])
			}
		}
		if n := f.registered(); n != 1 {
			t.Errorf("stream consumer registered %d times, want once", n)
		}
		if n := f.read.Load(); n != 0 {
			t.Errorf("the consumer read %d records with GetRecords", n)
		}
		srv.mu.Lock()
		calls := srv.calls
		srv.mu.Unlock()
		if calls < 20 {
			t.Errorf("%d subscriptions, want many renewals", calls)
		}
	})
}
