//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/internal/publish"
)

// The tests below run the bootstrap binary under the Lambda Runtime Interface
// Emulator against the local stand-ins (kinesis-local, fauxqs) and read back
// everything the function wrote: counted copies in the source stream, dead
// letters in a stream or a queue, durable delay messages, replies. Every
// event is built from records read back from a real stream (or a message
// received from a real queue), shaped exactly as Lambda's event source
// mapping shapes it. No test runs in parallel: each emulator takes one
// invocation at a time.

// Bounds of the retry tests.
const (
	// retryTimeout is the function timeout (seconds) of invocations that
	// are not about the deadline.
	retryTimeout = 10
	// settleRead is how long a read waits for records or messages beyond
	// the expected ones: every write of an invocation is done before it
	// answers, so anything extra would already be there.
	settleRead = 750 * time.Millisecond
	// awaitRead bounds waiting for records or messages that must arrive.
	awaitRead = 20 * time.Second
	// sdkTimeout bounds one SDK call of a test (the stand-ins answer in
	// milliseconds).
	sdkTimeout = 30 * time.Second
)

// Headers the adapter writes on counted copies.
const (
	retryCountHeader   = envelope.RetryCountHeader
	firstArrivalHeader = "x-lambdaadapter-first-arrival"
	originHeader       = "x-lambdaadapter-origin"
)

// originOf is the x-lambdaadapter-origin of orig's copies: its shard,
// sequence number and sub-sequence number (0: a plain record).
func originOf(orig standin.Record) string {
	return orig.ShardID + "#" + aws.ToString(orig.SequenceNumber) + "#0"
}

// retryEmulator starts an emulator whose function talks to the stand-ins of
// env, with the function timeout and LAMBDAADAPTER_* settings given.
func retryEmulator(t *testing.T, env *standin.Env, timeoutSeconds int, settings ...string) *emulator {
	t.Helper()
	return startEmulator(t, timeoutSeconds, append(env.Environ(), settings...)...)
}

// sdkContext returns a context for the test's own SDK calls.
func sdkContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), sdkTimeout)
	t.Cleanup(cancel)
	return ctx
}

// enveloped returns payload in the RSK1 envelope with the headers given as
// name, value pairs (the payload itself when there are none).
func enveloped(t *testing.T, payload string, nameValues ...string) []byte {
	t.Helper()
	var h envelope.Headers
	for i := 0; i+1 < len(nameValues); i += 2 {
		h.Set(nameValues[i], nameValues[i+1])
	}
	b, err := envelope.Encode(h, []byte(payload))
	if err != nil {
		t.Fatalf("envelope.Encode(%v, %q): %v", h, payload, err)
	}
	return b
}

// putRecords writes entries to the stream with PutRecords, at most 500 per
// call, and fails the test unless every entry was written.
func putRecords(t testing.TB, env *standin.Env, stream string, entries []kinesistypes.PutRecordsRequestEntry) {
	t.Helper()
	ctx := sdkContext(t)
	for len(entries) > 0 {
		n := min(len(entries), 500)
		out, err := env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries[:n]})
		if err != nil {
			t.Fatalf("PutRecords of %d records to %s: %v", n, stream, err)
		}
		if c := aws.ToInt32(out.FailedRecordCount); c != 0 {
			for _, r := range out.Records {
				if r.ErrorCode != nil {
					t.Fatalf("PutRecords to %s: %d of %d failed, first %s: %s", stream, c, n, aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))
				}
			}
		}
		entries = entries[n:]
	}
}

// putRecord writes one record with PutRecord.
func putRecord(t *testing.T, env *standin.Env, stream, key string, data []byte) {
	t.Helper()
	_, err := env.Kinesis.PutRecord(sdkContext(t), &kinesis.PutRecordInput{
		StreamName: aws.String(stream), PartitionKey: aws.String(key), Data: data,
	})
	if err != nil {
		t.Fatalf("PutRecord key %q to %s: %v", key, stream, err)
	}
}

// sighting is when a watcher first saw a record, or why it stopped.
type sighting struct {
	at  time.Time
	err error
}

// watchAfter polls the shard of after, from just after it, until a record
// shows, and sends the time it first saw one (or the error that stopped it).
// It polls every 20 ms (a throttled poll is made again) and ends with the
// test.
func watchAfter(t *testing.T, env *standin.Env, stream string, after standin.Record) <-chan sighting {
	t.Helper()
	ctx := t.Context()
	it, err := env.Kinesis.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName:             aws.String(stream),
		ShardId:                aws.String(after.ShardID),
		ShardIteratorType:      kinesistypes.ShardIteratorTypeAfterSequenceNumber,
		StartingSequenceNumber: after.SequenceNumber,
	})
	if err != nil {
		t.Fatalf("watching %s: %v", stream, err)
	}
	out := make(chan sighting, 1)
	iter := it.ShardIterator
	go func() {
		for {
			res, err := env.Kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			var throttled *kinesistypes.ProvisionedThroughputExceededException
			switch {
			case errors.As(err, &throttled):
				// Polled too often: look again after the pause.
			case err != nil:
				out <- sighting{err: err}
				return
			case len(res.Records) > 0:
				out <- sighting{at: time.Now()}
				return
			default:
				iter = res.NextShardIterator
			}
			select {
			case <-ctx.Done():
				out <- sighting{err: ctx.Err()}
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return out
}

// readExactly reads the whole stream and fails the test, listing what it
// read, unless it holds exactly n records.
func readExactly(t *testing.T, env *standin.Env, stream string, n int) []standin.Record {
	t.Helper()
	recs := env.ReadAll(t.Context(), t, stream, n+1, settleRead)
	if len(recs) != n {
		t.Fatalf("stream %s holds %d records, want %d:\n%s", stream, len(recs), n, describeRecords(recs))
	}
	return recs
}

// awaitRecords reads the stream until it holds at least n records and
// fails the test, listing what it read, unless it holds exactly n.
func awaitRecords(t testing.TB, env *standin.Env, stream string, n int) []standin.Record {
	t.Helper()
	recs := env.ReadAll(t.Context(), t, stream, n, awaitRead)
	if len(recs) != n {
		t.Fatalf("stream %s holds %d records after %v, want %d:\n%s", stream, len(recs), awaitRead, n, describeRecords(recs))
	}
	return recs
}

// without returns the records of all whose sequence numbers are not in
// seen.
func without(all []standin.Record, seen ...standin.Record) []standin.Record {
	old := map[string]bool{}
	for _, r := range seen {
		old[aws.ToString(r.SequenceNumber)] = true
	}
	var out []standin.Record
	for _, r := range all {
		if !old[aws.ToString(r.SequenceNumber)] {
			out = append(out, r)
		}
	}
	return out
}

// describeRecords lists records for a failure message: shard, sequence
// number, key, decoded headers and payload.
func describeRecords(recs []standin.Record) string {
	if len(recs) == 0 {
		return "\t(none)"
	}
	var b strings.Builder
	for i, r := range recs {
		if i == 20 && len(recs) > 21 {
			fmt.Fprintf(&b, "\t... and %d more\n", len(recs)-i)
			break
		}
		h, p := envelope.Decode(r.Data)
		fmt.Fprintf(&b, "\t%s %s key %q headers %v payload %q\n", r.ShardID, aws.ToString(r.SequenceNumber), aws.ToString(r.PartitionKey), h, p)
	}
	return b.String()
}

// arrivalMillis returns the record's arrival time to the millisecond, as
// Lambda reports it.
func arrivalMillis(r standin.Record) time.Time {
	return time.UnixMilli(aws.ToTime(r.ApproximateArrivalTimestamp).UnixMilli()).UTC()
}

// kinesisEventRecord is one record of a Lambda Kinesis event, its members in
// the order Lambda writes them.
type kinesisEventRecord struct {
	Kinesis struct {
		KinesisSchemaVersion        string      `json:"kinesisSchemaVersion"`
		PartitionKey                string      `json:"partitionKey"`
		SequenceNumber              string      `json:"sequenceNumber"`
		Data                        string      `json:"data"`
		ApproximateArrivalTimestamp json.Number `json:"approximateArrivalTimestamp"`
	} `json:"kinesis"`
	EventSource       string `json:"eventSource"`
	EventVersion      string `json:"eventVersion"`
	EventID           string `json:"eventID"`
	EventName         string `json:"eventName"`
	InvokeIdentityArn string `json:"invokeIdentityArn"`
	AWSRegion         string `json:"awsRegion"`
	EventSourceARN    string `json:"eventSourceARN"`
}

// kinesisEvent returns the invocation payload Lambda's event source mapping
// sends for records read from the stream streamARN: base64 data, float
// seconds with milliseconds as arrival time, eventID shardId:sequenceNumber.
func kinesisEvent(t testing.TB, streamARN string, recs []standin.Record) []byte {
	t.Helper()
	ev := struct {
		Records []kinesisEventRecord `json:"Records"`
	}{Records: make([]kinesisEventRecord, len(recs))}
	for i, r := range recs {
		e := &ev.Records[i]
		seq := aws.ToString(r.SequenceNumber)
		e.Kinesis.KinesisSchemaVersion = "1.0"
		e.Kinesis.PartitionKey = aws.ToString(r.PartitionKey)
		e.Kinesis.SequenceNumber = seq
		e.Kinesis.Data = base64.StdEncoding.EncodeToString(r.Data)
		ms := arrivalMillis(r).UnixMilli()
		e.Kinesis.ApproximateArrivalTimestamp = json.Number(strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64))
		e.EventSource = "aws:kinesis"
		e.EventVersion = "1.0"
		e.EventID = r.ShardID + ":" + seq
		e.EventName = "aws:kinesis:record"
		e.InvokeIdentityArn = "arn:aws:iam::000000000000:role/lambdaadapter-integration"
		e.AWSRegion = standin.Region
		e.EventSourceARN = streamARN
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("marshal Kinesis event: %v", err)
	}
	return b
}

// sqsEventAttribute is a message attribute as Lambda writes it in an SQS
// event.
type sqsEventAttribute struct {
	StringValue      *string  `json:"stringValue,omitempty"`
	BinaryValue      []byte   `json:"binaryValue,omitempty"`
	StringListValues []string `json:"stringListValues"`
	BinaryListValues [][]byte `json:"binaryListValues"`
	DataType         string   `json:"dataType"`
}

// sqsEventRecord is one record of a Lambda SQS event, its members in the
// order Lambda writes them.
type sqsEventRecord struct {
	MessageID              string                       `json:"messageId"`
	ReceiptHandle          string                       `json:"receiptHandle"`
	Body                   string                       `json:"body"`
	Attributes             map[string]string            `json:"attributes"`
	MessageAttributes      map[string]sqsEventAttribute `json:"messageAttributes"`
	MD5OfMessageAttributes *string                      `json:"md5OfMessageAttributes,omitempty"`
	MD5OfBody              string                       `json:"md5OfBody"`
	EventSource            string                       `json:"eventSource"`
	EventSourceARN         string                       `json:"eventSourceARN"`
	AWSRegion              string                       `json:"awsRegion"`
}

// sqsEvent returns the invocation payload Lambda's event source mapping
// sends for messages received from the queue queueARN.
func sqsEvent(t *testing.T, queueARN string, msgs []sqstypes.Message) []byte {
	t.Helper()
	ev := struct {
		Records []sqsEventRecord `json:"Records"`
	}{Records: make([]sqsEventRecord, len(msgs))}
	for i, m := range msgs {
		body := aws.ToString(m.Body)
		if sum := md5.Sum([]byte(body)); aws.ToString(m.MD5OfBody) != hex.EncodeToString(sum[:]) {
			t.Fatalf("message %s: MD5OfBody %s does not match its body %q", aws.ToString(m.MessageId), aws.ToString(m.MD5OfBody), body)
		}
		attrs := make(map[string]sqsEventAttribute, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			attrs[k] = sqsEventAttribute{
				StringValue: v.StringValue, BinaryValue: v.BinaryValue,
				StringListValues: append([]string{}, v.StringListValues...),
				BinaryListValues: append([][]byte{}, v.BinaryListValues...),
				DataType:         aws.ToString(v.DataType),
			}
		}
		ev.Records[i] = sqsEventRecord{
			MessageID:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   body,
			Attributes:             m.Attributes,
			MessageAttributes:      attrs,
			MD5OfMessageAttributes: m.MD5OfMessageAttributes,
			MD5OfBody:              aws.ToString(m.MD5OfBody),
			EventSource:            "aws:sqs",
			EventSourceARN:         queueARN,
			AWSRegion:              standin.Region,
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		t.Fatalf("marshal SQS event: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// queueARN returns the ARN of the queue at url.
func queueARN(t *testing.T, env *standin.Env, url string) string {
	t.Helper()
	out, err := env.SQS.GetQueueAttributes(sdkContext(t), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("GetQueueAttributes QueueArn of %s: %v", url, err)
	}
	arn := out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if arn == "" {
		t.Fatalf("queue %s has no QueueArn attribute: %v", url, out.Attributes)
	}
	return arn
}

// invokeWant invokes the function with payload and fails the test unless
// it answers want exactly. It returns when the invocation started and how
// long it took.
func invokeWant(t *testing.T, e *emulator, what string, payload []byte, want string) (start time.Time, elapsed time.Duration) {
	t.Helper()
	start = time.Now()
	got, elapsed := e.invoke(t, payload)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: response after %v (-want +got):\n%s", what, elapsed, diff)
	}
	return start, elapsed
}

// header builds an envelope.Headers from name, value pairs.
func header(nameValues ...string) envelope.Headers {
	var h envelope.Headers
	for i := 0; i+1 < len(nameValues); i += 2 {
		h = append(h, envelope.Header{Name: nameValues[i], Value: nameValues[i+1]})
	}
	return h
}

// checkCopy fails the test unless c is a counted copy of orig with retry
// count n: same partition key and shard, same payload, the original's user
// headers followed by the retry count and the original's first arrival, no
// delivery headers.
func checkCopy(t *testing.T, c, orig standin.Record, n int, userHeaders ...string) {
	t.Helper()
	if !bytes.HasPrefix(c.Data, []byte(envelope.Magic)) {
		t.Errorf("copy %s is not in the RSK1 envelope: %q", aws.ToString(c.SequenceNumber), c.Data)
	}
	_, origPayload := envelope.Decode(orig.Data)
	h, payload := envelope.Decode(c.Data)
	type view struct {
		PartitionKey, ShardID, Payload string
		Headers                        envelope.Headers
	}
	want := view{
		PartitionKey: aws.ToString(orig.PartitionKey),
		ShardID:      orig.ShardID,
		Payload:      string(origPayload),
		Headers: append(header(userHeaders...), header(
			retryCountHeader, strconv.Itoa(n),
			firstArrivalHeader, arrivalMillis(orig).Format(publish.TimeFormat),
			originHeader, originOf(orig),
		)...),
	}
	got := view{PartitionKey: aws.ToString(c.PartitionKey), ShardID: c.ShardID, Payload: string(payload), Headers: h}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copy %d of %s (-want +got):\n%s", n, aws.ToString(orig.SequenceNumber), diff)
	}
}

// TestRetryCountedCopies follows one record that always asks for a retry,
// with LAMBDAADAPTER_MAX_ATTEMPTS=3, through its three deliveries: the
// first two write counted copies (retry count 1, then 2) to the same shard,
// the third reaches the cap and writes a dead letter to the target (a
// stream or a queue) instead of another copy. Each invocation is built from
// the record the previous one wrote.
func TestRetryCountedCopies(t *testing.T) {
	env := standin.Require(t)
	for _, target := range []string{"stream", "queue"} {
		t.Run("dead-letter "+target, func(t *testing.T) {
			src, srcARN := env.NewStream(t, 2)
			var dlStream, dlQueue string
			setting := ""
			if target == "stream" {
				dlStream, _ = env.NewStream(t, 1)
				setting = "LAMBDAADAPTER_DEAD_LETTER_STREAM=" + dlStream
			} else {
				dlQueue = env.NewQueue(t, nil)
				setting = "LAMBDAADAPTER_DEAD_LETTER_QUEUE=" + dlQueue
			}
			e := retryEmulator(t, env, retryTimeout, "LAMBDAADAPTER_MAX_ATTEMPTS=3", setting)

			const key, payload = "customer-42", `{"outcome":"retry","order":42}`
			putRecord(t, env, src, key, enveloped(t, payload, "x-tenant", "acme"))
			orig := awaitRecords(t, env, src, 1)[0]
			if want := env.ShardOf(t.Context(), t, src, key); orig.ShardID != want {
				t.Fatalf("the original landed in %s, but key %q hashes to %s", orig.ShardID, key, want)
			}

			// Deliveries 1 and 2: a copy each, the original settled.
			seen := []standin.Record{orig}
			delivered := orig
			for n := 1; n <= 2; n++ {
				invokeWant(t, e, fmt.Sprintf("delivery %d", n), kinesisEvent(t, srcARN, []standin.Record{delivered}), noFailures)
				fresh := without(readExactly(t, env, src, n+1), seen...)
				if len(fresh) != 1 {
					t.Fatalf("delivery %d: %d new records in %s, want 1 copy:\n%s", n, len(fresh), src, describeRecords(fresh))
				}
				checkCopy(t, fresh[0], orig, n, "x-tenant", "acme")
				seen = append(seen, fresh[0])
				delivered = fresh[0]
			}

			// Delivery 3 is the cap: a dead letter, no further copy.
			start, elapsed := invokeWant(t, e, "delivery 3", kinesisEvent(t, srcARN, []standin.Record{delivered}), noFailures)
			end := start.Add(elapsed)
			if extra := without(readExactly(t, env, src, 3), seen...); len(extra) != 0 {
				t.Fatalf("delivery 3 wrote to the source stream:\n%s", describeRecords(extra))
			}
			const reason = "cap reached after 3 attempts: demo: asked to retry"
			firstArrival := arrivalMillis(orig)
			if target == "stream" {
				dl := readExactly(t, env, dlStream, 1)[0]
				if !bytes.HasPrefix(dl.Data, []byte(envelope.Magic)) {
					t.Errorf("dead letter is not in the RSK1 envelope: %q", dl.Data)
				}
				h, p := envelope.Decode(dl.Data)
				type view struct {
					PartitionKey, Payload string
					Headers               envelope.Headers
				}
				want := view{key, payload, header(
					"x-tenant", "acme",
					retryCountHeader, "2",
					publish.DeadLetterReasonHeader, reason,
					publish.DeadLetterSourceStreamHeader, srcARN,
					publish.DeadLetterShardIDHeader, orig.ShardID,
					publish.DeadLetterSequenceNumberHeader, aws.ToString(delivered.SequenceNumber),
					publish.DeadLetterAttemptsHeader, "3",
					publish.DeadLetterFirstArrivalHeader, firstArrival.Format(publish.TimeFormat),
				)}
				got := view{aws.ToString(dl.PartitionKey), string(p), h}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("dead letter in %s (-want +got):\n%s", dlStream, diff)
				}
				return
			}
			msgs := env.ReceiveAll(t.Context(), t, dlQueue, 2, settleRead)
			if len(msgs) != 1 {
				t.Fatalf("dead-letter queue got %d messages, want 1: %+v", len(msgs), msgs)
			}
			body := aws.ToString(msgs[0].Body)
			dl, err := publish.ParseDeadLetterBody([]byte(body))
			if err != nil {
				t.Fatalf("dead-letter body %s: %v", body, err)
			}
			if lo, hi := start.Truncate(time.Millisecond), end; dl.DeadLetteredAt.Before(lo) || dl.DeadLetteredAt.After(hi) {
				t.Errorf("dead_lettered_at %v, want within the invocation [%v, %v]; body %s", dl.DeadLetteredAt, lo, hi, body)
			}
			dl.DeadLetteredAt = time.Time{}
			want := publish.DeadLetter{
				Reason:          reason,
				SourceStreamARN: srcARN,
				ShardID:         orig.ShardID,
				SequenceNumber:  aws.ToString(delivered.SequenceNumber),
				PartitionKey:    key,
				Attempts:        3,
				FirstArrival:    firstArrival,
				Headers:         header("x-tenant", "acme", retryCountHeader, "2"),
				Payload:         []byte(payload),
			}
			if diff := cmp.Diff(want, dl); diff != "" {
				t.Errorf("dead-letter body (-want +got):\n%s\nbody: %s", diff, body)
			}
		})
	}
}

// TestRetryDurableDelay sends a record that asks to come again in 3 s to a
// function that cannot wait that long, once because of its 2 s timeout and
// once because of LAMBDAADAPTER_MAX_INPROCESS_DELAY=1s. The record settles
// at once; the delay queue holds a delay message that becomes visible only
// after 3 s; the same function, invoked with the SQS event Lambda would
// send for it, writes the counted copy to the source stream.
func TestRetryDurableDelay(t *testing.T) {
	env := standin.Require(t)
	const delay = 3 * time.Second
	tests := []struct {
		name     string
		timeout  int
		settings []string
	}{
		{"past the deadline", 2, nil},
		{"past the in-process limit", retryTimeout, []string{"LAMBDAADAPTER_MAX_INPROCESS_DELAY=1s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, srcARN := env.NewStream(t, 1)
			queue := env.NewQueue(t, nil)
			e := retryEmulator(t, env, tc.timeout, append(tc.settings, "LAMBDAADAPTER_DELAY_QUEUE="+queue)...)

			const key = "device-7"
			payload := fmt.Sprintf(`{"outcome":"retry_after","delay_ms":%d}`, delay.Milliseconds())
			putRecord(t, env, src, key, []byte(payload))
			orig := awaitRecords(t, env, src, 1)[0]

			start, elapsed := invokeWant(t, e, "Kinesis invocation", kinesisEvent(t, srcARN, []standin.Record{orig}), noFailures)
			t.Logf("Kinesis invocation answered after %v", elapsed)
			if extra := without(readExactly(t, env, src, 1), orig); len(extra) != 0 {
				t.Fatalf("a copy was written at once instead of through the delay queue:\n%s", describeRecords(extra))
			}
			early, err := env.SQS.ReceiveMessage(sdkContext(t), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), WaitTimeSeconds: 0})
			if err != nil {
				t.Fatalf("ReceiveMessage: %v", err)
			}
			if len(early.Messages) != 0 {
				t.Fatalf("the delay message was visible at once (%v after the invocation started): %+v", time.Since(start), early.Messages)
			}

			msgs := env.ReceiveAll(t.Context(), t, queue, 1, awaitRead)
			received := time.Since(start)
			if len(msgs) != 1 {
				t.Fatalf("delay queue: %d messages after %v, want 1", len(msgs), awaitRead)
			}
			m := msgs[0]
			t.Logf("delay message received %v after the invocation started", received)
			if received < delay {
				t.Errorf("delay message received %v after the invocation started, want at least %v", received, delay)
			}
			// The queue's own clock: first receive at least DelaySeconds
			// after the send (less 100 ms for timer granularity).
			sent, err1 := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64)
			first, err2 := strconv.ParseInt(m.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("delay message attributes %v: want SentTimestamp and ApproximateFirstReceiveTimestamp in ms", m.Attributes)
			}
			if visible := time.Duration(first-sent) * time.Millisecond; visible < delay-100*time.Millisecond {
				t.Errorf("delay message first received %v after it was sent, want about %v (DelaySeconds=3)", visible, delay)
			}
			body := aws.ToString(m.Body)
			d, ours, err := publish.ParseDelayed([]byte(body))
			if !ours || err != nil {
				t.Fatalf("delay message body %s: ours %v, err %v", body, ours, err)
			}
			if lo, hi := start.Add(delay).Truncate(time.Millisecond), start.Add(elapsed+delay); d.NotBefore.Before(lo) || d.NotBefore.After(hi) {
				t.Errorf("not_before %v, want the invocation time plus %v, within [%v, %v]", d.NotBefore, delay, lo, hi)
			}
			d.NotBefore = time.Time{}
			wantDelayed := publish.Delayed{
				StreamARN:    srcARN,
				PartitionKey: key,
				Headers:      header(retryCountHeader, "1", firstArrivalHeader, arrivalMillis(orig).Format(publish.TimeFormat), originHeader, originOf(orig)),
				Payload:      []byte(payload),
			}
			if diff := cmp.Diff(wantDelayed, d); diff != "" {
				t.Errorf("delay message (-want +got):\n%s\nbody: %s", diff, body)
			}

			invokeWant(t, e, "SQS invocation", sqsEvent(t, queueARN(t, env, queue), msgs), noFailures)
			fresh := without(readExactly(t, env, src, 2), orig)
			if len(fresh) != 1 {
				t.Fatalf("after the SQS invocation: %d new records, want the copy:\n%s", len(fresh), describeRecords(fresh))
			}
			checkCopy(t, fresh[0], orig, 1)
			if more := env.ReceiveAll(t.Context(), t, queue, 1, settleRead); len(more) != 0 {
				t.Errorf("the forwarded message came back to the delay queue: %+v", more)
			}
		})
	}

	// A delay shorter than the in-process limit and the time left is
	// waited in the invocation: the copy lands directly, the delay queue
	// stays empty.
	t.Run("short delay in process", func(t *testing.T) {
		const short = 300 * time.Millisecond
		src, srcARN := env.NewStream(t, 1)
		queue := env.NewQueue(t, nil)
		e := retryEmulator(t, env, retryTimeout, "LAMBDAADAPTER_DELAY_QUEUE="+queue)
		// Warm up, so the timed invocation has no cold start in it.
		invokeWant(t, e, "warm-up", readFixture(t, "all_ack.json"), noFailures)

		putRecord(t, env, src, "device-8", []byte(fmt.Sprintf(`{"outcome":"retry_after","delay_ms":%d}`, short.Milliseconds())))
		orig := awaitRecords(t, env, src, 1)[0]
		// When the copy lands is watched on this test's clock: a poller
		// reads after the original and notes when the copy first shows.
		// (kinesis-local's ApproximateArrivalTimestamp is not that clock:
		// on a loaded machine it stamped a copy up to 4 s before it was
		// written.) A copy written before the delay shows early; a slow
		// poll can only see it later.
		seen := watchAfter(t, env, src, orig)
		start, elapsed := invokeWant(t, e, "Kinesis invocation", kinesisEvent(t, srcARN, []standin.Record{orig}), noFailures)
		t.Logf("answered after %v", elapsed)
		if elapsed < short {
			t.Errorf("answered after %v, want at least the %v delay", elapsed, short)
		}
		fresh := without(readExactly(t, env, src, 2), orig)
		if len(fresh) != 1 {
			t.Fatalf("%d new records, want the copy:\n%s", len(fresh), describeRecords(fresh))
		}
		checkCopy(t, fresh[0], orig, 1)
		select {
		case r := <-seen:
			if r.err != nil {
				t.Fatalf("watching for the copy: %v", r.err)
			}
			if after := r.at.Sub(start); after < short {
				t.Errorf("copy visible %v after the invocation started, want at least %v", after, short)
			}
		case <-time.After(awaitRead):
			t.Fatalf("the copy read above did not show to the watcher within %v", awaitRead)
		}
		if msgs := env.ReceiveAll(t.Context(), t, queue, 1, settleRead); len(msgs) != 0 {
			t.Errorf("a short delay went to the delay queue: %+v", msgs)
		}
	})
}

// TestRetryReplies: a handler's replies land in the reply stream with the
// key it chose, or a generated one that differs from reply to reply, and
// the header it set.
func TestRetryReplies(t *testing.T) {
	env := standin.Require(t)
	src, srcARN := env.NewStream(t, 1)
	replies, repliesARN := env.NewStream(t, 2)
	e := retryEmulator(t, env, retryTimeout, "LAMBDAADAPTER_REPLY_STREAM="+repliesARN)

	putRecords(t, env, src, []kinesistypes.PutRecordsRequestEntry{
		{PartitionKey: aws.String("a"), Data: []byte(`{"reply":"pong","reply_key":"k-explicit"}`)},
		{PartitionKey: aws.String("b"), Data: []byte(`{"reply":"generated-1"}`)},
		{PartitionKey: aws.String("c"), Data: []byte(`{"reply":"generated-2"}`)},
	})
	recs := awaitRecords(t, env, src, 3)
	invokeWant(t, e, "first invocation", kinesisEvent(t, srcARN, recs), noFailures)
	// A later invocation of the same process generates yet another key.
	putRecord(t, env, src, "d", []byte(`{"reply":"generated-3"}`))
	later := without(awaitRecords(t, env, src, 4), recs...)
	invokeWant(t, e, "second invocation", kinesisEvent(t, srcARN, later), noFailures)
	recs = append(recs, later...)

	got := readExactly(t, env, replies, 4)
	byPayload := map[string]standin.Record{}
	for _, r := range got {
		_, p := envelope.Decode(r.Data)
		byPayload[string(p)] = r
	}
	keys := map[string]string{}
	for i, payload := range []string{"pong", "generated-1", "generated-2", "generated-3"} {
		r, ok := byPayload[payload]
		if !ok {
			t.Fatalf("no reply %q in %s:\n%s", payload, replies, describeRecords(got))
		}
		h, _ := envelope.Decode(r.Data)
		if diff := cmp.Diff(header("x-in-reply-to", aws.ToString(recs[i].SequenceNumber)), h); diff != "" {
			t.Errorf("reply %q headers (-want +got):\n%s", payload, diff)
		}
		key := aws.ToString(r.PartitionKey)
		if want := env.ShardOf(t.Context(), t, replies, key); r.ShardID != want {
			t.Errorf("reply %q with key %q is in %s, want %s", payload, key, r.ShardID, want)
		}
		if i == 0 {
			if key != "k-explicit" {
				t.Errorf("reply %q has key %q, want k-explicit", payload, key)
			}
			continue
		}
		if key == "" || key == "k-explicit" {
			t.Errorf("reply %q without reply_key has key %q, want a generated one", payload, key)
		}
		if other, dup := keys[key]; dup {
			t.Errorf("replies %q and %q share the generated key %q", other, payload, key)
		}
		keys[key] = payload
	}
	if extra := without(readExactly(t, env, src, 4), recs...); len(extra) != 0 {
		t.Errorf("acked records were copied to the source stream:\n%s", describeRecords(extra))
	}
}

// TestRetryNothingLost: when the write a record's settlement depends on
// cannot be done because its target does not exist, the record is not
// settled: the response names it, so Lambda delivers it again, and it
// arrives well before the timeout. The record sits between two acked ones.
// In the dead-letter cases the cap is the default one (3 attempts) of a
// dead-letter target without LAMBDAADAPTER_MAX_ATTEMPTS, reached by a record
// already carrying retry count 2.
func TestRetryNothingLost(t *testing.T) {
	env := standin.Require(t)
	const timeout = 5
	missing := fmt.Sprintf("missing-xyz-%d", time.Now().UnixNano())
	missingQueue := env.SQSEndpoint + "/000000000000/" + missing
	tests := []struct {
		name     string
		settings []string
		data     func(t *testing.T) []byte // the middle record
		// eventARN, when set, is the event's source instead of the real
		// stream: a stream that is gone by the time the copy is written.
		eventARN string
	}{
		{
			name:     "dead-letter stream",
			settings: []string{"LAMBDAADAPTER_DEAD_LETTER_STREAM=" + missing},
			data:     func(t *testing.T) []byte { return enveloped(t, `{"outcome":"retry"}`, retryCountHeader, "2") },
		},
		{
			name:     "dead-letter queue",
			settings: []string{"LAMBDAADAPTER_DEAD_LETTER_QUEUE=" + missingQueue},
			data:     func(t *testing.T) []byte { return enveloped(t, `{"outcome":"retry"}`, retryCountHeader, "2") },
		},
		{
			name:     "source stream of the copy",
			settings: []string{"LAMBDAADAPTER_MAX_ATTEMPTS=3"},
			data:     func(*testing.T) []byte { return []byte(`{"outcome":"retry"}`) },
			eventARN: "arn:aws:kinesis:" + standin.Region + ":000000000000:stream/" + missing,
		},
		{
			name:     "delay queue",
			settings: []string{"LAMBDAADAPTER_DELAY_QUEUE=" + missingQueue, "LAMBDAADAPTER_MAX_INPROCESS_DELAY=1s"},
			data:     func(*testing.T) []byte { return []byte(`{"outcome":"retry_after","delay_ms":3000}`) },
		},
		{
			name:     "reply stream",
			settings: []string{"LAMBDAADAPTER_REPLY_STREAM=" + missing},
			data:     func(*testing.T) []byte { return []byte(`{"reply":"lost?"}`) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, srcARN := env.NewStream(t, 1)
			e := retryEmulator(t, env, timeout, tc.settings...)
			putRecords(t, env, src, []kinesistypes.PutRecordsRequestEntry{
				{PartitionKey: aws.String("k-1"), Data: []byte(`{"outcome":"ack"}`)},
				{PartitionKey: aws.String("k-2"), Data: tc.data(t)},
				{PartitionKey: aws.String("k-3"), Data: []byte(`{"outcome":"ack"}`)},
			})
			recs := awaitRecords(t, env, src, 3)
			arn := srcARN
			if tc.eventARN != "" {
				arn = tc.eventARN
			}
			unsettled := aws.ToString(recs[1].SequenceNumber)
			start := time.Now()
			got, elapsed := e.invoke(t, kinesisEvent(t, arn, recs))
			t.Logf("answered after %v", elapsed)
			if diff := cmp.Diff(failure(unsettled), got); diff != "" {
				t.Errorf("response after %v (-want +got):\n%s", elapsed, diff)
			}
			if limit := time.Duration(timeout) * time.Second; time.Since(start) >= limit {
				t.Errorf("answered after %v, want before the %v timeout", elapsed, limit)
			}
			if extra := without(readExactly(t, env, src, 3), recs...); len(extra) != 0 {
				t.Errorf("the record was copied instead of staying unsettled:\n%s", describeRecords(extra))
			}
		})
	}
}

// sendDelayed sends the delay message of d to the queue at once (no
// DelaySeconds), as if an earlier invocation had written it, and returns its
// body.
func sendDelayed(t *testing.T, env *standin.Env, queue string, d publish.Delayed) string {
	t.Helper()
	body, err := d.Body()
	if err != nil {
		t.Fatalf("Delayed.Body: %v", err)
	}
	sendBody(t, env, queue, string(body))
	return string(body)
}

// sendBody sends a message with body to the queue at once.
func sendBody(t *testing.T, env *standin.Env, queue, body string) {
	t.Helper()
	_, err := env.SQS.SendMessage(sdkContext(t), &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatalf("SendMessage %q to %s: %v", body, queue, err)
	}
}

// failedIDs returns the item identifiers of a partial batch response,
// sorted, and fails the test when resp is not one.
func failedIDs(t *testing.T, resp string) []string {
	t.Helper()
	var r struct {
		BatchItemFailures *[]struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal([]byte(resp), &r); err != nil || r.BatchItemFailures == nil {
		t.Fatalf("response %q is not a partial batch response (%v)", resp, err)
	}
	ids := []string{}
	for _, f := range *r.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	sort.Strings(ids)
	return ids
}

// TestRetryDelayQueueMessages covers the messages a delay queue may hand
// the function besides a due delay message: one not yet due goes back to
// the queue for the rest of its delay, and is forwarded once due; a message
// that is not a delay message of the adapter, or whose stream does not
// exist, is reported failed (SQS delivers it again, its redrive policy moves
// it aside) while the good ones of the same event are forwarded.
func TestRetryDelayQueueMessages(t *testing.T) {
	env := standin.Require(t)

	t.Run("not yet due", func(t *testing.T) {
		const rest = 4 * time.Second
		src, srcARN := env.NewStream(t, 1)
		queue := env.NewQueue(t, nil)
		arn := queueARN(t, env, queue)
		e := retryEmulator(t, env, retryTimeout, "LAMBDAADAPTER_DELAY_QUEUE="+queue)

		notBefore := time.Now().Add(rest)
		body := sendDelayed(t, env, queue, publish.Delayed{
			StreamARN: srcARN, PartitionKey: "k-later", Headers: header(retryCountHeader, "1"),
			Payload: []byte("later"), NotBefore: notBefore,
		})
		msgs := env.ReceiveAll(t.Context(), t, queue, 1, awaitRead)
		if len(msgs) != 1 {
			t.Fatalf("delay queue: %d messages, want the one sent", len(msgs))
		}
		invokeWant(t, e, "early SQS invocation", sqsEvent(t, arn, msgs), noFailures)
		readExactly(t, env, src, 0)

		again := env.ReceiveAll(t.Context(), t, queue, 1, awaitRead)
		received := time.Now()
		if len(again) != 1 {
			t.Fatalf("the message not yet due did not come back to the delay queue within %v", awaitRead)
		}
		t.Logf("came back %v after its due time", received.Sub(notBefore))
		if early := notBefore.Sub(received); early > 100*time.Millisecond {
			t.Errorf("the message came back %v before it was due", early)
		}
		if got := aws.ToString(again[0].Body); got != body {
			t.Errorf("the message came back with body %s, want the original %s", got, body)
		}
		invokeWant(t, e, "SQS invocation when due", sqsEvent(t, arn, again), noFailures)
		recs := readExactly(t, env, src, 1)
		h, p := envelope.Decode(recs[0].Data)
		type view struct {
			PartitionKey, Payload string
			Headers               envelope.Headers
		}
		want := view{"k-later", "later", header(retryCountHeader, "1")}
		if diff := cmp.Diff(want, view{aws.ToString(recs[0].PartitionKey), string(p), h}); diff != "" {
			t.Errorf("forwarded record (-want +got):\n%s", diff)
		}
	})

	t.Run("foreign and unforwardable", func(t *testing.T) {
		src, srcARN := env.NewStream(t, 1)
		queue := env.NewQueue(t, nil)
		arn := queueARN(t, env, queue)
		e := retryEmulator(t, env, retryTimeout, "LAMBDAADAPTER_DELAY_QUEUE="+queue)

		missingARN := fmt.Sprintf("arn:aws:kinesis:%s:000000000000:stream/missing-xyz-%d", standin.Region, time.Now().UnixNano())
		sendBody(t, env, queue, `{"hello":"not a delay message"}`)
		sendDelayed(t, env, queue, publish.Delayed{StreamARN: missingARN, PartitionKey: "k-gone", Payload: []byte("gone")})
		sendDelayed(t, env, queue, publish.Delayed{StreamARN: srcARN, PartitionKey: "k-good", Payload: []byte("good")})
		msgs := env.ReceiveAll(t.Context(), t, queue, 3, awaitRead)
		if len(msgs) != 3 {
			t.Fatalf("delay queue: %d messages, want the 3 sent", len(msgs))
		}
		var want []string
		for _, m := range msgs {
			if !strings.Contains(aws.ToString(m.Body), "k-good") {
				want = append(want, aws.ToString(m.MessageId))
			}
		}
		sort.Strings(want)
		got, _ := e.invoke(t, sqsEvent(t, arn, msgs))
		if diff := cmp.Diff(want, failedIDs(t, got)); diff != "" {
			t.Errorf("failed message ids (-want +got):\n%s\nresponse: %s", diff, got)
		}
		recs := readExactly(t, env, src, 1)
		if _, p := envelope.Decode(recs[0].Data); string(p) != "good" || aws.ToString(recs[0].PartitionKey) != "k-good" {
			t.Errorf("forwarded record:\n%s", describeRecords(recs))
		}
		if back := env.ReceiveAll(t.Context(), t, queue, 1, settleRead); len(back) != 0 {
			t.Errorf("a message was sent back to the delay queue: %+v", back)
		}
	})
}

// TestRetryThousandCopies is the end-to-end side of the benchmark claim: one
// invocation with 1,000 real records that all ask for a retry settles them
// all and writes 1,000 counted copies, one per record, each with its
// record's key and payload. (Copies of one shard are written in shard order,
// one call per copy, so that a failed write never leaves a later copy
// behind it: TestThousandCopies counts the calls with a fake client.)
func TestRetryThousandCopies(t *testing.T) {
	const n = 1000
	env := standin.Require(t)
	src, srcARN := env.NewStream(t, 1)
	e := retryEmulator(t, env, 30, "LAMBDAADAPTER_MAX_ATTEMPTS=3")

	entries := make([]kinesistypes.PutRecordsRequestEntry, n)
	for i := range entries {
		entries[i] = kinesistypes.PutRecordsRequestEntry{
			PartitionKey: aws.String(fmt.Sprintf("k-%04d", i)),
			Data:         []byte(fmt.Sprintf(`{"outcome":"retry","n":%d}`, i)),
		}
	}
	putStart := time.Now()
	putRecords(t, env, src, entries)
	origs := awaitRecords(t, env, src, n)
	payload := kinesisEvent(t, srcARN, origs)
	t.Logf("wrote and read %d records in %v; event of %d bytes", n, time.Since(putStart), len(payload))

	_, elapsed := invokeWant(t, e, fmt.Sprintf("invocation with %d retries", n), payload, noFailures)
	t.Logf("invocation answered after %v", elapsed)

	readStart := time.Now()
	copies := without(readExactly(t, env, src, 2*n), origs...)
	t.Logf("read back %d records in %v", 2*n, time.Since(readStart))
	byN := map[int]standin.Record{}
	for _, r := range origs {
		var v struct{ N int }
		if err := json.Unmarshal(r.Data, &v); err != nil {
			t.Fatalf("original %q: %v", r.Data, err)
		}
		byN[v.N] = r
	}
	copied := map[int]bool{}
	for _, c := range copies {
		_, p := envelope.Decode(c.Data)
		var v struct{ N int }
		if err := json.Unmarshal(p, &v); err != nil {
			t.Fatalf("copy %s has payload %q: %v", aws.ToString(c.SequenceNumber), p, err)
		}
		if copied[v.N] {
			t.Fatalf("record %d was copied twice:\n%s", v.N, describeRecords(copies))
		}
		copied[v.N] = true
		orig, ok := byN[v.N]
		if !ok {
			t.Fatalf("copy %s of an unknown record %d", aws.ToString(c.SequenceNumber), v.N)
		}
		checkCopy(t, c, orig, 1)
		if t.Failed() {
			t.FailNow() // one bad copy explains the rest
		}
	}
	if len(copied) != n {
		var lost []int
		for i := range n {
			if !copied[i] {
				lost = append(lost, i)
			}
		}
		sort.Ints(lost)
		t.Fatalf("%d records have no copy: %v", len(lost), lost)
	}
}

// TestRetryCopiesAtDeadline: the deadline cuts a batch while its last
// record still sleeps. The copies of the records before it that asked for a
// retry are still written before the function answers, and the response
// names the sleeping record, whose handler was cancelled: an outcome
// returned after the cut-off changes nothing (package lambda's
// documentation), so the cut-off record gets no copy and uses up no
// attempt.
func TestRetryCopiesAtDeadline(t *testing.T) {
	const timeout = 2
	env := standin.Require(t)
	src, srcARN := env.NewStream(t, 1)
	e := retryEmulator(t, env, timeout, "LAMBDAADAPTER_MAX_ATTEMPTS=3")
	putRecords(t, env, src, []kinesistypes.PutRecordsRequestEntry{
		{PartitionKey: aws.String("a"), Data: []byte(`{"outcome":"retry","id":"a"}`)},
		{PartitionKey: aws.String("b"), Data: []byte(`{"outcome":"retry","id":"b"}`)},
		{PartitionKey: aws.String("c"), Data: []byte(`{"sleep_ms":10000,"id":"c"}`)},
	})
	recs := awaitRecords(t, env, src, 3)
	got, elapsed := e.invoke(t, kinesisEvent(t, srcARN, recs))
	t.Logf("answered after %v", elapsed)
	if strings.Contains(got, "Task timed out") {
		t.Fatalf("the emulator timed the function out: %q", got)
	}
	if diff := cmp.Diff(failure(aws.ToString(recs[2].SequenceNumber)), got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	copies := without(env.ReadAll(t.Context(), t, src, 6, settleRead), recs...)
	if len(copies) != 2 {
		t.Fatalf("%d copies, want 2 (of a and b):\n%s", len(copies), describeRecords(copies))
	}
	sort.Slice(copies, func(i, j int) bool {
		return aws.ToString(copies[i].PartitionKey) < aws.ToString(copies[j].PartitionKey)
	})
	checkCopy(t, copies[0], recs[0], 1)
	checkCopy(t, copies[1], recs[1], 1)
}

// TestRetryCopyFromConsumer: an event from an enhanced fan-out consumer
// names the consumer's ARN as its source; the copy still goes to the
// consumer's stream.
func TestRetryCopyFromConsumer(t *testing.T) {
	env := standin.Require(t)
	src, srcARN := env.NewStream(t, 1)
	out, err := env.Kinesis.RegisterStreamConsumer(sdkContext(t), &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(srcARN), ConsumerName: aws.String("lambda-efo"),
	})
	if err != nil {
		t.Fatalf("RegisterStreamConsumer on %s: %v", srcARN, err)
	}
	consumerARN := aws.ToString(out.Consumer.ConsumerARN)
	if !strings.HasPrefix(consumerARN, srcARN+"/consumer/") {
		t.Fatalf("consumer ARN %q does not extend the stream ARN %q", consumerARN, srcARN)
	}
	e := retryEmulator(t, env, retryTimeout, "LAMBDAADAPTER_MAX_ATTEMPTS=3")
	putRecord(t, env, src, "k-efo", []byte(`{"outcome":"retry"}`))
	orig := awaitRecords(t, env, src, 1)[0]
	invokeWant(t, e, "invocation from the consumer", kinesisEvent(t, consumerARN, []standin.Record{orig}), noFailures)
	fresh := without(readExactly(t, env, src, 2), orig)
	if len(fresh) != 1 {
		t.Fatalf("%d new records, want the copy:\n%s", len(fresh), describeRecords(fresh))
	}
	checkCopy(t, fresh[0], orig, 1)
}
