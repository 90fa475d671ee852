//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lease"
)

// Enhanced fan-out against kinesis-local. The consumer runs in process
// (lambdaadapter.NewService, long-running mode) with a Kinesis client that works
// around two gaps of the stand-in, in this test code only, never in the
// adapter:
//
//   - kinesis-local 0.6.2 answers SubscribeToShard without the event
//     stream's "initial-response" message that the Go SDK waits for
//     ("deserialize initial response: expected initial-response, got
//     SubscribeToShardEvent"). The client wraps the SDK's protocol (o.Protocol)
//     so that HasInitialEventMessage reports false, per SubscribeToShard call.
//   - kinesis-local never ends a closed shard's subscription: its events
//     carry no ChildShards and always a continuation. AWS sends, at the end
//     of a closed shard, an event naming the children without a
//     continuation. The wrapper turns an empty event into that one when a
//     GetRecords after the last record the subscription delivered finds the
//     shard closed and read to its end (NextShardIterator nil): only then,
//     so no record is cut off.
//
// A subscription lasts five minutes on AWS and on kinesis-local, which has
// no setting to shorten it; the wrapper ends each subscription cleanly (as
// AWS does at five minutes) after efoRenewAfter, so a test sees many
// renewals.

// efoRenewAfter is how long the test client lets a subscription run.
const efoRenewAfter = 2 * time.Second

// efoClient is the stand-in's Kinesis client with the SubscribeToShard
// workarounds above. Its counters are safe for concurrent use.
type efoClient struct {
	*kinesis.Client
	renewAfter time.Duration // 0: subscriptions run as long as the stand-in lets them
	noEnds     bool          // no shard-end check (a stream that is not resharded: no extra calls)

	subscriptions atomic.Int64 // SubscribeToShard calls
	renewals      atomic.Int64 // subscriptions ended by the wrapper
	ends          atomic.Int64 // shard-end events made from kinesis-local's empty ones
}

func (c *efoClient) SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	c.subscriptions.Add(1)
	p := &efoProtocol{c: c, shard: aws.ToString(in.ShardId), stream: efoStreamName(aws.ToString(in.ConsumerARN)), opened: time.Now()}
	if in.StartingPosition != nil {
		p.start = *in.StartingPosition
	}
	shim := func(o *kinesis.Options) {
		p.ClientProtocol = o.Protocol
		o.Protocol = p
	}
	return c.Client.SubscribeToShard(ctx, in, append(optFns, shim)...)
}

// efoStreamName returns the stream's name in a consumer ARN
// (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME/consumer/CONSUMER:TS).
func efoStreamName(consumerARN string) string {
	_, rest, _ := strings.Cut(consumerARN, ":stream/")
	name, _, _ := strings.Cut(rest, "/consumer/")
	return name
}

// efoProtocol is the SDK's protocol for one subscription, with the
// kinesis-local workarounds. The SDK calls DeserializeEventMessage from one
// goroutine per subscription, one message at a time.
type efoProtocol struct {
	smithyhttp.ClientProtocol
	c             *efoClient
	shard, stream string
	start         kinesistypes.StartingPosition
	opened        time.Time
	last          string // the last record delivered on this subscription
}

// HasInitialEventMessage is false: kinesis-local sends no initial-response
// message.
func (p *efoProtocol) HasInitialEventMessage() bool { return false }

func (p *efoProtocol) DeserializeEventMessage(schema *smithy.Schema, types *smithy.TypeRegistry, r io.Reader) (smithy.Deserializable, error) {
	if p.c.renewAfter > 0 && time.Since(p.opened) >= p.c.renewAfter {
		p.c.renewals.Add(1)
		return nil, io.EOF // the clean end AWS gives a subscription after five minutes
	}
	ev, err := p.ClientProtocol.DeserializeEventMessage(schema, types, r)
	e, ok := ev.(*kinesistypes.SubscribeToShardEvent)
	if err != nil || !ok {
		return ev, err
	}
	if n := len(e.Records); n > 0 {
		p.last = aws.ToString(e.Records[n-1].SequenceNumber)
		return ev, nil
	}
	if p.c.noEnds {
		return ev, nil
	}
	if children, ended := p.ended(); ended {
		e.ContinuationSequenceNumber, e.ChildShards = nil, children
		p.c.ends.Add(1)
	}
	return ev, nil
}

// ended reports whether the shard is closed and holds nothing after the
// last record this subscription delivered, and returns its children.
func (p *efoProtocol) ended() ([]kinesistypes.ChildShard, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
	defer cancel()
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(p.stream), ShardId: aws.String(p.shard), ShardIteratorType: p.start.Type,
		StartingSequenceNumber: p.start.SequenceNumber, Timestamp: p.start.Timestamp}
	if p.last != "" {
		in.ShardIteratorType, in.StartingSequenceNumber, in.Timestamp = kinesistypes.ShardIteratorTypeAfterSequenceNumber, aws.String(p.last), nil
	}
	it, err := p.c.Client.GetShardIterator(ctx, in)
	if err != nil {
		return nil, false
	}
	res, err := p.c.Client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
	if err != nil || len(res.Records) > 0 || res.NextShardIterator != nil {
		return nil, false
	}
	return res.ChildShards, true
}

// efoLog collects the adapter's log lines (level, message), for checks and
// for the failure report.
type efoLog struct {
	mu    sync.Mutex
	lines []string
	count map[string]int // by message
}

func (l *efoLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *efoLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *efoLog) WithGroup(string) slog.Handler            { return l }
func (l *efoLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == nil {
		l.count = map[string]int{}
	}
	l.count[r.Message]++
	if r.Level >= slog.LevelInfo {
		l.lines = append(l.lines, b.String())
	}
	return nil
}

func (l *efoLog) n(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count[msg]
}

func (l *efoLog) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if (strings.HasPrefix(s, "WARN") || strings.HasPrefix(s, "ERROR")) && !transportRace(s) {
			out = append(out, s)
		}
	}
	return out
}

// transportRace reports whether s is the warning of a subscription that
// net/http's closed-connection race broke (see internal/getrecords'
// client_test.go and aws-sdk-go-v2#2949): on a loaded machine it hits a
// few subscriptions over loopback, and the consumer subscribes again from
// its position, which the tests check by what was handled.
func transportRace(s string) bool {
	return strings.HasPrefix(s, "WARN consumer: subscription failed; will retry") && strings.Contains(s, "use of closed network connection")
}

// efoHandled records what the handler handled: each record's id and shard,
// in handling order, and when it was handled.
type efoHandled struct {
	mu    sync.Mutex
	order []efoRecord
	count map[string]int
}

type efoRecord struct {
	id, shard string
	at        time.Time
	arrival   time.Time
}

func (h *efoHandled) handle(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
	var p struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return lambdaadapter.Drop(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count == nil {
		h.count = map[string]int{}
	}
	h.order = append(h.order, efoRecord{p.ID, m.ShardID, time.Now(), m.ArrivalTime})
	h.count[p.ID]++
	return lambdaadapter.Ack()
}

func (h *efoHandled) counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := make(map[string]int, len(h.count))
	for id, c := range h.count {
		n[id] = c
	}
	return n
}

func (h *efoHandled) records() []efoRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]efoRecord(nil), h.order...)
}

// efoRun runs a long-running adapter over stream with enhanced fan-out as
// the stream consumer name, and returns a function that stops it and checks
// that Run returned nil in time. Its lease store is a fresh DynamoDB table.
func efoRun(t *testing.T, env *standin.Env, client *efoClient, stream, name string, h *efoHandled, log *efoLog, opts ...lambdaadapter.ServiceOption) (*lease.DynamoDB, func()) {
	t.Helper()
	_, store := ecsNewLeaseTable(t, env, false)
	all := append([]lambdaadapter.ServiceOption{
		lambdaadapter.WithKinesisClient(client),
		lambdaadapter.WithStream(stream), lambdaadapter.WithEnhancedFanOut(name), lambdaadapter.WithLeaseStore(store),
		lambdaadapter.WithOwnerID("w1"), lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
		lambdaadapter.WithLeaseDuration(ecsLeaseDuration), lambdaadapter.WithListInterval(time.Second),
		lambdaadapter.WithShutdownTimeout(ecsShutdownTimeout), lambdaadapter.WithLogger(slog.New(log)),
	}, opts...)
	a, err := lambdaadapter.NewService(lambdaadapter.HandlerFunc(h.handle), all...)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-ran:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(ecsExitTimeout):
				t.Errorf("Run did not return within %v of the stop", ecsExitTimeout)
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			log.mu.Lock()
			t.Logf("adapter log (info and above):\n\t%s", strings.Join(log.lines, "\n\t"))
			log.mu.Unlock()
		}
	})
	return store, stop
}

// efoAwaitHandled waits until every id was handled at least once.
func efoAwaitHandled(t *testing.T, h *efoHandled, ids []string, within time.Duration) time.Duration {
	t.Helper()
	return ecsEventually(t, within, fmt.Sprintf("all %d records handled", len(ids)), func() (bool, string) {
		n, first := ecsMissingIDs(ids, h.counts())
		return n == 0, fmt.Sprintf("%d not handled yet, first %v", n, first)
	})
}

// TestEFOReshardAndRenewal reads 2,000 records written over four shards
// while they are written, with enhanced fan-out (SubscribeToShard through
// kinesis-local), through many subscription renewals and a split of one
// shard in the middle of the writing: every record is handled, none twice,
// no record of a child before the last of its parent, and the parent's
// lease ends at SHARD_END. The stream consumer is registered by the
// adapter itself.
func TestEFOReshardAndRenewal(t *testing.T) {
	env := standin.Require(t)
	stream, streamARN := env.NewStream(t, 4)
	client := &efoClient{Client: env.Kinesis, renewAfter: efoRenewAfter}
	h, log := &efoHandled{}, &efoLog{}
	store, stop := efoRun(t, env, client, stream, "efo-test", h, log)

	const total = 2000
	// About ten seconds of writing: several renewals of every shard.
	f := ecsStartFeeder(t, env, stream, "efo", 100, 500*time.Millisecond, total)
	ecsEventually(t, ecsSettleTimeout, "1,000 records written", func() (bool, string) {
		return f.count() >= 1000, fmt.Sprint(f.count())
	})
	shards := ecsListShards(t, env, stream)
	parent := aws.ToString(shards[0].ShardId)
	ecsSplitShard(t, env, stream, shards[0])
	t.Logf("split %s at %d records written", parent, f.count())
	ids := f.wait(t, 90*time.Second)
	took := efoAwaitHandled(t, h, ids, 90*time.Second)
	t.Logf("all %d records handled %v after the last was written", len(ids), took)

	var children []string
	for _, s := range ecsListShards(t, env, stream) {
		if aws.ToString(s.ParentShardId) == parent {
			children = append(children, aws.ToString(s.ShardId))
		}
	}
	if len(children) != 2 {
		t.Fatalf("the split of %s left children %v, want two", parent, children)
	}
	ecsEventually(t, 30*time.Second, "the parent at SHARD_END", func() (bool, string) {
		ls := ecsLeases(t, store, stream)
		return ls[parent].Checkpoint == lease.ShardEnd, ecsDescribeLeases(ls)
	})
	stop()

	if d, dup := ecsDuplicates(h.counts()); d != 0 {
		t.Errorf("%d records handled more than once, e.g. %v: a renewal must start after the last record read", d, dup)
	}
	first, last := map[string]int{}, map[string]int{}
	perShard := map[string]int{}
	for i, r := range h.records() {
		if _, ok := first[r.shard]; !ok {
			first[r.shard] = i
		}
		last[r.shard] = i
		perShard[r.shard]++
	}
	for _, c := range children {
		if perShard[c] == 0 {
			t.Errorf("child %s: no record handled; the test wants records written after the split", c)
		}
		if first[c] < last[parent] {
			t.Errorf("record %d (in handling order) of child %s handled before record %d, the last of its parent %s", first[c], c, last[parent], parent)
		}
	}
	t.Logf("records per shard %v", perShard)
	subs, renewals, ends := client.subscriptions.Load(), client.renewals.Load(), client.ends.Load()
	t.Logf("%d SubscribeToShard calls, %d subscriptions renewed, %d shard ends, %d retries on ResourceInUseException",
		subs, renewals, ends, log.n("consumer: subscription still in use; will retry"))
	if renewals < 8 {
		t.Errorf("%d subscriptions renewed, want at least two per shard: the test proves little about renewals", renewals)
	}
	if ends < 1 {
		t.Errorf("no shard end reached the adapter")
	}
	if n := log.n("consumer: enhanced fan-out consumer registered"); n != 1 {
		t.Errorf("the stream consumer was registered %d times, want once", n)
	}
	if w := log.warnings(); len(w) > 0 {
		t.Errorf("%d warnings or errors logged:\n\t%s", len(w), strings.Join(w, "\n\t"))
	}
	out, err := env.Kinesis.DescribeStreamConsumer(sdkContext(t), &kinesis.DescribeStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("efo-test")})
	if err != nil || out.ConsumerDescription.ConsumerStatus != kinesistypes.ConsumerStatusActive {
		t.Errorf("the stream consumer after the run: %v, %v", out, err)
	}
}

// TestEFOReusesConsumer: a stream consumer registered before the adapter
// starts is used as it is (no second registration), and the adapter reads
// with it from the checkpoint-less start.
func TestEFOReusesConsumer(t *testing.T) {
	env := standin.Require(t)
	stream, streamARN := env.NewStream(t, 2)
	reg, err := env.Kinesis.RegisterStreamConsumer(sdkContext(t), &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("existing")})
	if err != nil {
		t.Fatalf("RegisterStreamConsumer: %v", err)
	}
	ids := ecsWrite(t, env, stream, ecsNumbered("reuse", 0, 200))
	client := &efoClient{Client: env.Kinesis}
	h, log := &efoHandled{}, &efoLog{}
	_, stop := efoRun(t, env, client, stream, "existing", h, log)
	efoAwaitHandled(t, h, ids, ecsHandledTimeout)
	stop()
	if n := log.n("consumer: enhanced fan-out consumer registered"); n != 0 {
		t.Errorf("registered %d times, want the existing consumer reused", n)
	}
	if !strings.Contains(strings.Join(log.lines, "\n"), aws.ToString(reg.Consumer.ConsumerARN)) {
		t.Errorf("the log does not name the existing consumer %s", aws.ToString(reg.Consumer.ConsumerARN))
	}
	if d, dup := ecsDuplicates(h.counts()); d != 0 {
		t.Errorf("%d duplicates, e.g. %v", d, dup)
	}
}
