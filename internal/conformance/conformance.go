// Package conformance is the one suite of outcome semantics that both modes
// pass: every row of the semantics table (README, package lambdaadapter's
// documentation) is a Case, run end to end through the public doors
// (NewFunction, NewService) by a
// Driver per mode — Lambda mode behind a local event-source loop
// (lambdaadaptertest.EventSource: Kinesis and the delay queue wired back to
// the function), long-running mode as a consumer with its own readers and
// leases — over the same in-memory Kinesis and SQS, in a synctest bubble
// (virtual time: delays and backoffs cost nothing).
//
// A Case says what its handler returns and what must hold once every
// record settled for good (every shard checkpointed at its last record,
// copies included, and the delay queue empty). Where the two modes differ
// by design, the Case says so explicitly (Expect.LambdaAttempts); nothing
// else may differ.
package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/idempotency"
	"github.com/shardsettle/lambdaadapter/internal/kpl"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
)

// Names of the world's streams and queues.
const (
	Stream           = "source"
	DeadLetterStream = "dead-letters"
	ReplyStream      = "replies"
	DelayQueue       = "https://sqs.us-east-1.amazonaws.com/123456789012/delays"
	DeadLetterQueue  = "https://sqs.us-east-1.amazonaws.com/123456789012/dead-letters"
)

// World is the AWS a case runs against.
type World struct {
	Kinesis *awsfake.Kinesis
	SQS     *awsfake.SQS
	Shards  int
}

// NewWorld creates the streams: the source with shards shards, the
// dead-letter and reply streams with one each.
func NewWorld(shards int) *World {
	k := awsfake.NewKinesis()
	k.CreateStream(Stream, shards)
	k.CreateStream(DeadLetterStream, 1)
	k.CreateStream(ReplyStream, 1)
	return &World{Kinesis: k, SQS: awsfake.NewSQS(), Shards: shards}
}

// Options are the options every driver passes: the world's clients.
func (w *World) Options() []lambdaadapter.SharedOption {
	return []lambdaadapter.SharedOption{lambdaadapter.WithKinesisClient(w.Kinesis), lambdaadapter.WithSQSClient(w.SQS)}
}

// Settled reports whether every shard of the source stream is checkpointed
// at its last record (checkpoint gives a shard's checkpoint) and the delay
// queue is empty: nothing is left to handle.
//
// The delay queue is looked at first: a delay message leaves the queue only
// after its record was written back to the stream, so once it is empty the
// stream read next holds every copy. (Read the other way round, a copy
// written and its message deleted between the two reads looked settled.)
func (w *World) Settled(checkpoint func(shardID string) string) bool {
	if w.SQS.Waiting(DelayQueue) != 0 {
		return false
	}
	last := map[string]string{}
	for _, r := range w.Kinesis.Records(Stream) {
		last[r.ShardID] = r.SequenceNumber
	}
	for shard, seq := range last {
		if checkpoint(shard) != seq {
			return false
		}
	}
	return true
}

// Driver runs a handler in one mode until the world settled.
type Driver interface {
	// Mode is the mode driven.
	Mode() lambdaadapter.Mode
	// Drive builds an adapter for h with opts (plus the world's clients and
	// the mode's own wiring) and runs it until w.Settled, within a virtual
	// deadline; it fails t if the world never settles. It runs inside a
	// synctest bubble, and nothing it started runs after it returns.
	Drive(t *testing.T, w *World, h lambdaadapter.Handler, opts []lambdaadapter.SharedOption)
}

// Handling is one call of the handler.
type Handling struct {
	Payload    string
	Key        string
	Shard      string
	Attempt    int
	RetryCount string // x-ruststream-retry-count, "" on an original
	Sub        string // kinesis-sub-sequence-number, "" on a plain record
	Aggregated bool
	At         time.Time
	Call       int    // 0-based index among the handlings of this payload
	DefaultKey string // idempotency.DefaultKey of the message ("" when it has none)
}

// Log records every handling, in order.
type Log struct {
	mu sync.Mutex
	hs []Handling
	n  map[string]int
}

// Handler returns a handler that records each call and returns what script
// says for it.
func (l *Log) Handler(script func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome) lambdaadapter.Handler {
	return lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		l.mu.Lock()
		if l.n == nil {
			l.n = map[string]int{}
		}
		p := string(m.Payload)
		key, _ := idempotency.DefaultKey(m)
		h := Handling{Payload: p, Key: m.PartitionKey, Shard: m.ShardID, Attempt: m.Attempt,
			RetryCount: m.Headers.Get(envelope.RetryCountHeader), At: time.Now(), Call: l.n[p],
			Sub: m.Headers.Get(envelope.SubSequenceNumberHeader), Aggregated: m.Aggregated, DefaultKey: key}
		l.n[p]++
		l.hs = append(l.hs, h)
		l.mu.Unlock()
		return script(h, m)
	})
}

// Of returns the handlings of payload, in order.
func (l *Log) Of(payload string) []Handling {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Handling
	for _, h := range l.hs {
		if h.Payload == payload {
			out = append(out, h)
		}
	}
	return out
}

// All returns every handling, in order.
func (l *Log) All() []Handling {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hs)
}

// Attempts returns the Attempt of each handling of payload.
func (l *Log) Attempts(payload string) []int {
	var out []int
	for _, h := range l.Of(payload) {
		out = append(out, h.Attempt)
	}
	return out
}

// Record is one record a case puts on the source stream before it runs.
type Record struct {
	Shard   int    // index of the shard (PutTo), whatever the key's hash
	Key     string // partition key
	Payload string
	Headers []string // name, value pairs (RSK1 envelope)
	// Users, when set, makes the record a KPL aggregate of these user
	// records (their Shard is ignored); Payload and Headers are then
	// ignored too, and Raw, when set, is put instead of the aggregate.
	Users []Record
	// Raw, when set, is the record's data as is (no envelope).
	Raw []byte
}

// Case is one row of the semantics table.
type Case struct {
	Name    string
	Row     string // the table row it proves, as the README names it
	Shards  int    // default 1
	Records []Record
	Options []lambdaadapter.SharedOption
	// Setup, when set, runs after the world is made (e.g. to make writes fail).
	Setup func(w *World)
	// Wait, when set, passes (in the bubble's time) after Records are put,
	// and Later are put after it: Records are then Wait older than Later.
	Wait  time.Duration
	Later []Record
	// Script answers each handling.
	Script func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome
	// Check tests what must hold once the world settled.
	Check func(t *testing.T, r *Result)
}

// Result is what a case observes.
type Result struct {
	Mode  lambdaadapter.Mode
	World *World
	Log   *Log
	Start time.Time
}

// Copies returns the counted copies on the source stream (records with a
// retry count), in stream order per shard.
func (r *Result) Copies() []Copy {
	var out []Copy
	for _, c := range r.StreamRecords(Stream) {
		if c.RetryCount != "" {
			out = append(out, c)
		}
	}
	return out
}

// Copy is a record on one of the world's streams, opened.
type Copy struct {
	Payload    string
	RetryCount string
	Key        string
	Shard      string
	Arrived    time.Time
	Headers    envelope.Headers
}

// StreamRecords returns the records of a stream of the world, opened.
func (r *Result) StreamRecords(stream string) []Copy {
	var out []Copy
	for _, rec := range r.World.Kinesis.Records(stream) {
		out = append(out, Copy{Payload: string(rec.Payload), RetryCount: rec.Headers.Get(envelope.RetryCountHeader),
			Key: rec.PartitionKey, Shard: rec.ShardID, Arrived: rec.ApproximateArrivalTimestamp, Headers: rec.Headers})
	}
	return out
}

// Run runs every case with d, each in its own synctest bubble and world.
func Run(t *testing.T, d Driver, cases []Case) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				shards := max(c.Shards, 1)
				w := NewWorld(shards)
				if c.Setup != nil {
					c.Setup(w)
				}
				for _, rec := range c.Records {
					w.Kinesis.PutTo(Stream, ShardID(rec.Shard), rec.Key, recordData(t, rec))
				}
				time.Sleep(c.Wait)
				for _, rec := range c.Later {
					w.Kinesis.PutTo(Stream, ShardID(rec.Shard), rec.Key, recordData(t, rec))
				}
				log := &Log{}
				start := time.Now()
				d.Drive(t, w, log.Handler(c.Script), c.Options)
				if t.Failed() {
					return
				}
				c.Check(t, &Result{Mode: d.Mode(), World: w, Log: log, Start: start})
			})
		})
	}
}

// recordData is the data a case's record is put with.
func recordData(t *testing.T, rec Record) []byte {
	t.Helper()
	switch {
	case rec.Raw != nil:
		return rec.Raw
	case rec.Users != nil:
		users := make([]kpl.Record, len(rec.Users))
		for i, u := range rec.Users {
			users[i] = kpl.Record{PartitionKey: u.Key, Data: recordData(t, u)}
		}
		return kpl.Aggregate(users)
	}
	var h envelope.Headers
	for i := 0; i+1 < len(rec.Headers); i += 2 {
		h.Set(rec.Headers[i], rec.Headers[i+1])
	}
	data, err := envelope.Encode(h, []byte(rec.Payload))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// ShardID is the id of the source stream's i-th shard.
func ShardID(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// payloads lists payloads p-0 … p-(n-1).
func payloads(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// describe formats handlings for failure messages.
func describe(hs []Handling) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "\n  %s key=%s attempt=%d retry-count=%q call=%d", h.Payload, h.Key, h.Attempt, h.RetryCount, h.Call)
	}
	return b.String()
}
