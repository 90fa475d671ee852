// Package lambdaadaptertest helps users test lambdaadapter handlers the way
// net/http/httptest helps test HTTP handlers: build realistic Kinesis events,
// run a Handler through a real Function (raw JSON in, raw JSON out, exactly
// as Lambda would), and inspect the partial batch response.
//
//	b := lambdaadaptertest.NewBatch("orders")
//	b.Add("user-1", []byte(`{"id":1}`))
//	b.Add("user-2", []byte(`{"id":2}`), "x-tenant", "acme")
//	res := lambdaadaptertest.Run(t, handler, b)
//	if !res.AllSettled() { t.Fatalf("failed: %v", res.Failures) }
//
// Sequence numbers look like real ones: 56 decimal digits, growing per shard
// by irregular steps.
package lambdaadaptertest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// DefaultShardID is the shard records go to unless Batch.OnShard says
// otherwise.
const DefaultShardID = "shardId-000000000000"

// Batch builds one Kinesis invocation. It is not safe for concurrent use.
type Batch struct {
	streamARN string
	region    string
	shard     string
	seq       map[string]string // shard -> last sequence number
	rng       *rand.Rand
	arrival   time.Time
	records   []events.KinesisEventRecord
}

// NewBatch returns an empty batch of records from the stream named stream
// in us-east-1, account 123456789012. Its sequence numbers are
// deterministic: the same calls build the same event.
func NewBatch(stream string) *Batch {
	return &Batch{
		streamARN: "arn:aws:kinesis:us-east-1:123456789012:stream/" + stream,
		region:    "us-east-1",
		shard:     DefaultShardID,
		seq:       map[string]string{},
		rng:       rand.New(rand.NewPCG(1, uint64(len(stream)))),
		arrival:   time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC),
	}
}

// WithEventSourceARN sets the event source ARN of the records added from now
// on, e.g. an enhanced fan-out consumer ARN. It returns b.
func (b *Batch) WithEventSourceARN(arn string) *Batch {
	b.streamARN = arn
	return b
}

// OnShard makes the records added from now on come from shardID. It returns
// b.
func (b *Batch) OnShard(shardID string) *Batch {
	b.shard = shardID
	return b
}

// Add appends a record with the given partition key and payload. headers
// are name, value pairs; when there are any (other than partition-key) the
// data is wrapped in the RSK1 envelope, as a ruststream or lambdaadapter
// publisher would write it. Add returns the record's sequence number. It
// panics on an odd number of header arguments or a header the envelope
// cannot carry.
func (b *Batch) Add(partitionKey string, payload []byte, headers ...string) string {
	if len(headers)%2 != 0 {
		panic("lambdaadaptertest: Add needs name, value pairs")
	}
	var h envelope.Headers
	for i := 0; i < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	data, err := envelope.Encode(h, payload)
	if err != nil {
		panic(fmt.Sprintf("lambdaadaptertest: %v", err))
	}
	return b.AddRaw(partitionKey, data)
}

// AddRaw appends a record whose data is taken as is (no envelope is added).
// It returns the record's sequence number.
func (b *Batch) AddRaw(partitionKey string, data []byte) string {
	seq := b.nextSeq(b.shard)
	b.arrival = b.arrival.Add(time.Duration(1+b.rng.IntN(50)) * time.Millisecond)
	b.records = append(b.records, events.KinesisEventRecord{
		AwsRegion:         b.region,
		EventID:           b.shard + ":" + seq,
		EventName:         "aws:kinesis:record",
		EventSource:       "aws:kinesis",
		EventSourceArn:    b.streamARN,
		EventVersion:      "1.0",
		InvokeIdentityArn: "arn:aws:iam::123456789012:role/lambda-kinesis-role",
		Kinesis: events.KinesisRecord{
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: b.arrival},
			Data:                        append([]byte(nil), data...),
			PartitionKey:                partitionKey,
			SequenceNumber:              seq,
			KinesisSchemaVersion:        "1.0",
		},
	})
	return seq
}

// Generate appends n records spread round-robin over keys partition keys
// ("key-0", "key-1", ...), each with a payload of size bytes; when
// withHeaders is true every other record carries two RSK1 headers. It
// returns b.
func (b *Batch) Generate(n, keys, size int, withHeaders bool) *Batch {
	if keys < 1 {
		keys = 1
	}
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	for i := range n {
		key := "key-" + strconv.Itoa(i%keys)
		if withHeaders && i%2 == 1 {
			b.Add(key, payload, "content-type", "application/json", "x-request-id", strconv.Itoa(i))
		} else {
			b.AddRaw(key, payload)
		}
	}
	return b
}

// Len returns the number of records added so far.
func (b *Batch) Len() int { return len(b.records) }

// Event returns the batch as an events.KinesisEvent. The records are copied
// only shallowly: do not modify their Data.
func (b *Batch) Event() events.KinesisEvent {
	return events.KinesisEvent{Records: append([]events.KinesisEventRecord(nil), b.records...)}
}

// JSON returns the batch as the raw invocation payload Lambda would send.
func (b *Batch) JSON() []byte {
	raw, err := json.Marshal(b.Event())
	if err != nil {
		panic(fmt.Sprintf("lambdaadaptertest: %v", err))
	}
	return raw
}

// SequenceNumbers returns the sequence numbers of the records added so far,
// in order.
func (b *Batch) SequenceNumbers() []string {
	out := make([]string, len(b.records))
	for i, r := range b.records {
		out[i] = r.Kinesis.SequenceNumber
	}
	return out
}

// nextSeq returns the next realistic 56-digit sequence number of shard.
func (b *Batch) nextSeq(shard string) string {
	last, ok := b.seq[shard]
	if !ok {
		// 49 + 54 digits: the shape Kinesis uses. The shard's index seeds
		// the middle digits so shards differ.
		last = "4959033827149025660855969253836157109592157598913658" + fmt.Sprintf("%04d", len(b.seq)%10000)
	}
	next := addDecimal(last, uint64(1+b.rng.IntN(1<<20))*1_000_000_000)
	b.seq[shard] = next
	return next
}

// addDecimal adds n to the decimal string s.
func addDecimal(s string, n uint64) string {
	d := []byte(s)
	carry := n
	for i := len(d) - 1; i >= 0 && carry > 0; i-- {
		v := uint64(d[i]-'0') + carry%10
		carry /= 10
		if v >= 10 {
			v -= 10
			carry++
		}
		d[i] = byte('0' + v)
	}
	if carry > 0 {
		d = append([]byte(strconv.FormatUint(carry, 10)), d...)
	}
	return string(d)
}

// Result is what one run of a batch produced.
type Result struct {
	// Raw is the JSON response exactly as the adapter returned it.
	Raw []byte
	// Response is Raw decoded.
	Response events.KinesisEventResponse
	// Failures are the reported item identifiers, in order.
	Failures []string
	// Kinesis and SQS are the fakes the adapter wrote copies, dead letters,
	// delay messages and replies to, unless the options passed to Run named
	// clients of their own (inspect those instead).
	Kinesis *Kinesis
	SQS     *SQS
}

// AllSettled reports whether the response reported no failure.
func (r *Result) AllSettled() bool { return len(r.Failures) == 0 }

// Run runs the batch through a new Function for h with opts, via the raw
// Invoke path Lambda uses, and returns the result. The Function writes to
// in-memory fakes (Result.Kinesis, Result.SQS) unless opts set clients. It
// fails the test on any error, including an invalid option. The invocation
// context is t.Context() unless RunContext is used.
func Run(t testing.TB, h lambdaadapter.Handler, b *Batch, opts ...lambdaadapter.FunctionOption) *Result {
	t.Helper()
	return RunContext(t.Context(), t, h, b, opts...)
}

// RunContext is Run with an explicit invocation context, e.g. one with a
// deadline to exercise the deadline margin.
func RunContext(ctx context.Context, t testing.TB, h lambdaadapter.Handler, b *Batch, opts ...lambdaadapter.FunctionOption) *Result {
	t.Helper()
	res := &Result{Kinesis: NewKinesis(), SQS: NewSQS()}
	all := append([]lambdaadapter.FunctionOption{lambdaadapter.WithKinesisClient(res.Kinesis), lambdaadapter.WithSQSClient(res.SQS)}, opts...)
	a, err := lambdaadapter.NewFunction(h, all...)
	if err != nil {
		t.Fatalf("lambdaadaptertest: NewFunction: %v", err)
	}
	raw, err := a.Invoke(ctx, b.JSON())
	if err != nil {
		t.Fatalf("lambdaadaptertest: Invoke: %v", err)
	}
	res.Raw = raw
	if err := json.Unmarshal(raw, &res.Response); err != nil {
		t.Fatalf("lambdaadaptertest: response %q is not JSON: %v", raw, err)
	}
	for _, f := range res.Response.BatchItemFailures {
		res.Failures = append(res.Failures, f.ItemIdentifier)
	}
	return res
}

// UserRecord is one user record of a KPL aggregated record (AddAggregate,
// Aggregate).
type UserRecord struct {
	// PartitionKey is the user record's own key.
	PartitionKey string
	// ExplicitHashKey is optional.
	ExplicitHashKey string
	// Payload is the user record's payload; Headers (name, value pairs),
	// when there are any, wrap it in the RSK1 envelope as Add does.
	Payload []byte
	Headers []string
}

// Aggregate returns the data of a KPL aggregated record holding users, in
// the format the Kinesis Producer Library writes: the magic bytes
// F3 89 9A C2, the AggregatedRecord protobuf (partition key and explicit
// hash key tables, one entry per distinct key) and the MD5 of the protobuf.
// It panics on a header the envelope cannot carry or an odd number of
// header arguments.
func Aggregate(users ...UserRecord) []byte {
	recs := make([]kpl.Record, len(users))
	for i, u := range users {
		if len(u.Headers)%2 != 0 {
			panic("lambdaadaptertest: UserRecord.Headers needs name, value pairs")
		}
		var h envelope.Headers
		for j := 0; j < len(u.Headers); j += 2 {
			h.Set(u.Headers[j], u.Headers[j+1])
		}
		data, err := envelope.Encode(h, u.Payload)
		if err != nil {
			panic(fmt.Sprintf("lambdaadaptertest: %v", err))
		}
		recs[i] = kpl.Record{PartitionKey: u.PartitionKey, ExplicitHashKey: u.ExplicitHashKey, Data: data}
	}
	return kpl.Aggregate(recs)
}

// AddAggregate appends one Kinesis record holding users as a KPL aggregated
// record, under the first user record's partition key (as the KPL does),
// and returns its sequence number. It panics when users is empty.
func (b *Batch) AddAggregate(users ...UserRecord) string {
	if len(users) == 0 {
		panic("lambdaadaptertest: AddAggregate needs at least one user record")
	}
	return b.AddRaw(users[0].PartitionKey, Aggregate(users...))
}
