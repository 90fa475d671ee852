//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// The tests below run the bootstrap binary under the Lambda Runtime Interface
// Emulator the way Lambda runs it behind a Kinesis event source mapping:
// lambdaadaptertest.EventSource reads the kinesis-local stream shard by
// shard, invokes the emulator with real-shaped events, and checkpoints by
// the partial batch responses; its SQS side invokes the same emulator with
// the delay queue's messages. A few hundred records with every kind of
// outcome go through it: plain acks, poison records (dropped, or retried
// until the cap) that must land in the dead-letter target with their
// payload, transient failures that come back once as counted copies and then
// succeed, long delays that come back through the delay queue, and replies.
// The function logs one JSON line per record it handles (through
// aws-lambda-go's lambdacontext handler: "message":"record", with the
// payload's id and the attempt); the tests collect them from the emulator's
// output. At the end every shard's checkpoint is its last record, copies
// included, and every id was either acked or dead-lettered.

// Settings and bounds of the event-source tests.
const (
	// esFunctionTimeout is the emulator's function timeout (seconds):
	// generous, no invocation here comes near it.
	esFunctionTimeout = 60
	// esBatchSize is the event source's BatchSize.
	esBatchSize = 100
	// esMaxAttempts is LAMBDAADAPTER_MAX_ATTEMPTS.
	esMaxAttempts = 3
	// esDelay is the delay the delayed records ask for: longer than
	// esMaxInProcessDelay, so it goes through the delay queue.
	esDelay = 2 * time.Second
	// esMaxInProcessDelay is LAMBDAADAPTER_MAX_INPROCESS_DELAY.
	esMaxInProcessDelay = time.Second
	// esRunTimeout bounds the whole event-source loop, from the first round
	// until every record reached its end (a loaded 2-core machine takes
	// seconds; a stuck record fails the test here).
	esRunTimeout = 3 * time.Minute
	// esIdle is the pause after a round that invoked nothing.
	esIdle = 100 * time.Millisecond
	// esProgressEvery is how often the loop logs where it is.
	esProgressEvery = 15 * time.Second
	// esVisibility is the event source's visibility timeout for the delay
	// queue's messages (SQS's default).
	esVisibility = 30 * time.Second
	// esIdleLimit is how long the loop may find nothing to do while records
	// are still missing attempts before it fails: far longer than the
	// delay, and longer than the visibility timeout, after which SQS
	// delivers again a message that was received and not deleted — so only
	// a record that will never come again gets there. (Once, in a loaded
	// make test, seven delay messages written together were not received
	// within a 30 s limit while every other went through; the failure
	// now also prints the queue's visible, in-flight and delayed counts.)
	esIdleLimit = esVisibility + 20*time.Second
	// esMaxRoundErrors is how many rounds in a row may fail to read the
	// stream or the queue (each is logged) before the test fails.
	esMaxRoundErrors = 5
)

// esClass is what a record asks of the demonstration handler, and what must
// come of it.
type esClass struct {
	name string
	// command is the payload without its id: the demo handler's JSON.
	command string
	// attempts are the attempts at which the record is handled: 1, then one
	// more per counted copy.
	attempts int
	// deadLetter: its last attempt ends in the dead-letter target.
	deadLetter bool
	// delayed: its copy comes through the delay queue.
	delayed bool
	// reply: the handler publishes a reply.
	reply bool
}

// The mix of records (out of every 20, see esClassOf).
var (
	esAck       = esClass{name: "ack", command: ``, attempts: 1}
	esDrop      = esClass{name: "drop", command: `"outcome":"drop"`, attempts: 1, deadLetter: true}
	esPoison    = esClass{name: "poison", command: `"outcome":"retry"`, attempts: esMaxAttempts, deadLetter: true}
	esTransient = esClass{name: "transient", command: `"outcome":"retry","until_attempt":2`, attempts: 2}
	esPanic     = esClass{name: "panic once", command: `"outcome":"panic","until_attempt":2`, attempts: 2}
	esDelayed   = esClass{name: "delayed", command: fmt.Sprintf(`"outcome":"retry_after","delay_ms":%d,"until_attempt":2`, esDelay.Milliseconds()), attempts: 2, delayed: true}
	esReply     = esClass{name: "reply", command: `"reply":"answer"`, attempts: 1, reply: true}
)

// esClassOf returns the class of the i-th record: per 20 records, 11 acks,
// 1 drop, 1 poison, 2 transient, 1 panic once, 2 delayed, 2 replies.
func esClassOf(i int) esClass {
	switch i % 20 {
	case 3:
		return esDrop
	case 7:
		return esPoison
	case 5, 15:
		return esTransient
	case 11:
		return esPanic
	case 9, 18:
		return esDelayed
	case 1, 13:
		return esReply
	default:
		return esAck
	}
}

// esRecord is one record the test wrote.
type esRecord struct {
	id      string
	class   esClass
	payload []byte
	shardID string // where PutRecords put it
	seq     string
}

// esLogLine is one JSON line the function printed through the lambdacontext
// handler (only the fields the tests read).
type esLogLine struct {
	Message   string `json:"message"`
	Level     string `json:"level"`
	RequestID string `json:"requestId"`
	ShardID   string `json:"shard_id"`
	Seq       string `json:"sequence_number"`
	Attempt   int    `json:"attempt"`
	ID        string `json:"id"`
}

// esHandled parses the emulator's output and returns, per id, the attempts
// of its "record" lines in the order printed. Lines that are not JSON (the
// emulator's own) are skipped. Every record line must carry a request id:
// the lambdacontext handler adds it.
func esHandled(t *testing.T, out string) map[string][]int {
	t.Helper()
	handled := map[string][]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var l esLogLine
		if err := json.Unmarshal(line, &l); err != nil || l.Message != "record" {
			continue
		}
		if l.RequestID == "" {
			t.Fatalf("record line without a requestId (AWS_LAMBDA_LOG_FORMAT=JSON not applied?): %s", line)
		}
		handled[l.ID] = append(handled[l.ID], l.Attempt)
	}
	return handled
}

// esObserver wraps the Function the event source invokes: it counts the
// invocations of each kind, the function errors (each makes the event
// source retry the whole batch, so duplicates are expected after one), and
// the ids whose delay messages the delay queue handed back.
type esObserver struct {
	fn lambdaadaptertest.Function
	t  *testing.T

	mu          sync.Mutex
	kinesis     int // Kinesis invocations
	sqs         int // SQS invocations
	errs        []string
	delayedBack map[string]int // id -> delay messages delivered
}

func (o *esObserver) invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var ev struct {
		Records []struct {
			EventSource string `json:"eventSource"`
			Body        string `json:"body"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(payload, &ev); err != nil || len(ev.Records) == 0 {
		o.t.Errorf("the event source built an event that is not one: %v: %.200s", err, payload)
	}
	isSQS := len(ev.Records) > 0 && ev.Records[0].EventSource == "aws:sqs"
	var ids []string
	if isSQS {
		for _, r := range ev.Records {
			d, ours, err := publish.ParseDelayed([]byte(r.Body))
			if !ours || err != nil {
				o.t.Errorf("the delay queue holds a message that is not a delay message (ours %v, %v): %s", ours, err, r.Body)
				continue
			}
			var cmd struct{ ID string }
			_ = json.Unmarshal(d.Payload, &cmd)
			ids = append(ids, cmd.ID)
		}
	}
	resp, err := o.fn(ctx, payload)
	o.mu.Lock()
	defer o.mu.Unlock()
	if isSQS {
		o.sqs++
		for _, id := range ids {
			o.delayedBack[id]++
		}
	} else {
		o.kinesis++
	}
	if err != nil {
		o.errs = append(o.errs, err.Error())
		o.t.Logf("function error (the event source retries the whole batch): %v", err)
	}
	return resp, err
}

func (o *esObserver) snapshot() (kinesis, sqs int, errs []string, delayedBack map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.kinesis, o.sqs, slices.Clone(o.errs), maps.Clone(o.delayedBack)
}

// esWrite writes n records of the mix, with ids prefix-000000 and up as
// their partition keys, in shuffled order, and returns them with the shard
// and sequence number PutRecords gave each.
func esWrite(t *testing.T, env *standin.Env, stream, prefix string, n int) []esRecord {
	t.Helper()
	recs := make([]esRecord, n)
	for i := range recs {
		id := fmt.Sprintf("%s-%06d", prefix, i)
		c := esClassOf(i)
		cmd := `{"id":"` + id + `"`
		if c.command != "" {
			cmd += "," + c.command
		}
		if c.reply {
			cmd += `,"reply_key":"` + id + `"`
		}
		recs[i] = esRecord{id: id, class: c, payload: []byte(cmd + "}")}
	}
	rand.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	ctx := sdkContext(t)
	for from := 0; from < len(recs); from += 500 {
		part := recs[from:min(from+500, len(recs))]
		entries := make([]kinesistypes.PutRecordsRequestEntry, len(part))
		for i, r := range part {
			entries[i] = kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String(r.id), Data: r.payload}
		}
		out, err := env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			t.Fatalf("PutRecords of %d records to %s: %v", len(entries), stream, err)
		}
		for i, res := range out.Records {
			if res.ErrorCode != nil {
				t.Fatalf("PutRecords to %s: record %s failed: %s: %s", stream, part[i].id, aws.ToString(res.ErrorCode), aws.ToString(res.ErrorMessage))
			}
			part[i].shardID, part[i].seq = aws.ToString(res.ShardId), aws.ToString(res.SequenceNumber)
		}
	}
	return recs
}

// esTotals returns how many records the source stream must hold at the end
// (originals and counted copies), how many dead letters and replies there
// must be, and how many records are delayed.
func esTotals(recs []esRecord) (stream, deadLetters, replies, delayed int) {
	for _, r := range recs {
		stream += r.class.attempts
		if r.class.deadLetter {
			deadLetters++
		}
		if r.class.reply {
			replies++
		}
		if r.class.delayed {
			delayed++
		}
	}
	return
}

// esComplete reports whether every record was handled at every attempt its
// class expects, and otherwise describes the first ones still missing.
func esComplete(recs []esRecord, handled map[string][]int) (bool, string) {
	var missing []string
	n := 0
	for _, r := range recs {
		for a := 1; a <= r.class.attempts; a++ {
			if !slices.Contains(handled[r.id], a) {
				n++
				if len(missing) < 8 {
					missing = append(missing, fmt.Sprintf("%s (%s) attempt %d", r.id, r.class.name, a))
				}
				break
			}
		}
	}
	return n == 0, fmt.Sprintf("%d records not through yet, e.g. %s", n, strings.Join(missing, ", "))
}

// esQueueState describes what a queue holds, for a failure: its visible,
// in-flight and delayed messages.
func esQueueState(env *standin.Env, url string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := env.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}})
	if err != nil {
		return "cannot read its attributes: " + err.Error()
	}
	a := out.Attributes
	return fmt.Sprintf("%s visible, %s in flight, %s delayed", a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"], a["ApproximateNumberOfMessagesDelayed"])
}

// esLastSequences returns the sequence number of each shard's last record.
func esLastSequences(recs []standin.Record) map[string]string {
	last := map[string]string{}
	for _, r := range recs {
		if s := aws.ToString(r.SequenceNumber); ecsSeqCompare(s, last[r.ShardID]) > 0 || last[r.ShardID] == "" {
			last[r.ShardID] = s
		}
	}
	return last
}

// esCheckpointsAtEnd reports whether every shard's checkpoint is its last
// record, and describes the shards where it is not.
func esCheckpointsAtEnd(src *lambdaadaptertest.EventSource, last map[string]string) (bool, string) {
	var behind []string
	for shard, seq := range last {
		if cp := src.Checkpoint(shard); cp != seq {
			behind = append(behind, fmt.Sprintf("%s at %q, last record %s", shard, cp, seq))
		}
	}
	sort.Strings(behind)
	return len(behind) == 0 && !src.Pending(), strings.Join(behind, "; ")
}

// esDeadLetter is one dead letter read back, from a stream or a queue.
type esDeadLetter struct {
	payload  []byte
	headers  envelope.Headers // user headers (retry count) and, in a stream, the diagnostic ones
	attempts int
	reason   string
	seq      string // the dead-lettered record's sequence number
}

// TestEventSource runs a few hundred records of every kind through the
// event-source loop into the bootstrap binary under the emulator, with the
// dead-letter target a stream and then a queue.
func TestEventSource(t *testing.T) {
	env := standin.Require(t)
	for _, tc := range []struct {
		target  string
		shards  int
		records int
	}{
		{"dead-letter stream", 2, 400},
		{"dead-letter queue", 3, 300},
	} {
		t.Run(tc.target, func(t *testing.T) {
			esRun(t, env, tc.target == "dead-letter queue", tc.shards, tc.records)
		})
	}
}

func esRun(t *testing.T, env *standin.Env, dlQueue bool, shards, n int) {
	stream, streamARN := env.NewStream(t, shards)
	replyStream, _ := env.NewStream(t, 1)
	delayQueue := env.NewQueue(t, nil)
	settings := []string{
		"AWS_LAMBDA_LOG_FORMAT=JSON",
		"AWS_LAMBDA_LOG_LEVEL=DEBUG",
		"LAMBDAADAPTER_LOG_LEVEL=debug",
		fmt.Sprintf("LAMBDAADAPTER_MAX_ATTEMPTS=%d", esMaxAttempts),
		"LAMBDAADAPTER_DEAD_LETTER_DROPS=true",
		"LAMBDAADAPTER_DELAY_QUEUE=" + delayQueue,
		"LAMBDAADAPTER_MAX_INPROCESS_DELAY=" + esMaxInProcessDelay.String(),
		"LAMBDAADAPTER_REPLY_STREAM=" + replyStream,
	}
	var dlStream, dlQueueURL string
	if dlQueue {
		dlQueueURL = env.NewQueue(t, nil)
		settings = append(settings, "LAMBDAADAPTER_DEAD_LETTER_QUEUE="+dlQueueURL)
	} else {
		dlStream, _ = env.NewStream(t, 1)
		settings = append(settings, "LAMBDAADAPTER_DEAD_LETTER_STREAM="+dlStream)
	}
	e := startEmulator(t, esFunctionTimeout, append(env.Environ(), settings...)...)

	recs := esWrite(t, env, stream, "es", n)
	byID := map[string]esRecord{}
	perShard := map[string]int{}
	for _, r := range recs {
		byID[r.id] = r
		perShard[r.shardID]++
	}
	if len(perShard) != shards {
		t.Fatalf("the %d records landed in %d shards (%v), want all %d", n, len(perShard), perShard, shards)
	}
	wantStream, wantDL, wantReplies, wantDelayed := esTotals(recs)
	t.Logf("wrote %d records to %s over %d shards %v: the stream must end with %d records (copies included), %d dead letters, %d replies, %d delayed",
		n, stream, shards, perShard, wantStream, wantDL, wantReplies, wantDelayed)

	obs := &esObserver{
		fn:          lambdaadaptertest.InvokeAPI(e.url, &http.Client{Timeout: 2 * esFunctionTimeout * time.Second}),
		t:           t,
		delayedBack: map[string]int{},
	}
	src := &lambdaadaptertest.EventSource{
		StreamARN:         streamARN,
		Kinesis:           env.Kinesis,
		BatchSize:         esBatchSize,
		Timeout:           2 * esFunctionTimeout * time.Second,
		MaxConcurrency:    1, // one emulator takes one invocation at a time
		QueueURL:          delayQueue,
		SQS:               env.SQS,
		VisibilityTimeout: esVisibility,
	}

	// The loop: rounds until every record went through all its attempts
	// (from the function's log lines), then until every shard's checkpoint
	// is its last record.
	ctx, cancel := context.WithTimeout(t.Context(), esRunTimeout)
	defer cancel()
	start := time.Now()
	lastLog := start
	var (
		stats     lambdaadaptertest.Stats
		rounds    int
		roundErrs int
		final     []standin.Record // the whole source stream, once complete
		last      map[string]string
		busy      = time.Now() // the last round that invoked the function
	)
	for {
		if ctx.Err() != nil {
			_, progress := esComplete(recs, esHandled(t, e.out.String()))
			_, behind := esCheckpointsAtEnd(src, last)
			t.Fatalf("the records did not all go through within %v (%d rounds, %+v): %s; checkpoints behind: %s",
				esRunTimeout, rounds, stats, progress, behind)
		}
		st, err := src.Round(ctx, obs.invoke)
		rounds++
		stats.Invocations += st.Invocations
		stats.Records += st.Records
		stats.Checkpointed += st.Checkpointed
		if err != nil && ctx.Err() == nil {
			roundErrs++
			t.Logf("round %d: %v", rounds, err)
			if roundErrs >= esMaxRoundErrors {
				t.Fatalf("%d rounds in a row failed to read the stream or the queue; last: %v", roundErrs, err)
			}
		} else {
			roundErrs = 0
		}
		if final == nil {
			if ok, _ := esComplete(recs, esHandled(t, e.out.String())); ok {
				// Every copy was written before the attempt it carries was
				// handled, and the last attempts write none: the stream is
				// complete.
				final = readExactly(t, env, stream, wantStream)
				last = esLastSequences(final)
				t.Logf("every record went through all its attempts after %v (%d rounds)", time.Since(start).Round(time.Millisecond), rounds)
			}
		}
		if final != nil {
			if ok, _ := esCheckpointsAtEnd(src, last); ok {
				break
			}
		}
		if time.Since(lastLog) > esProgressEvery {
			lastLog = time.Now()
			_, progress := esComplete(recs, esHandled(t, e.out.String()))
			t.Logf("after %v: %d rounds, %+v; %s; delay queue: %s", time.Since(start).Round(time.Second), rounds, stats, progress, esQueueState(env, delayQueue))
		}
		if st.Invocations > 0 {
			busy = time.Now()
		} else if idle := time.Since(busy); idle > esIdleLimit && final == nil {
			_, progress := esComplete(recs, esHandled(t, e.out.String()))
			t.Fatalf("nothing to invoke for %v, but not every record went through all its attempts: %s (%d rounds, %+v); delay queue: %s",
				idle.Round(time.Second), progress, rounds, stats, esQueueState(env, delayQueue))
		}
		if st.Invocations == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(esIdle):
			}
		}
	}
	kin, sqsInv, fnErrs, delayedBack := obs.snapshot()
	t.Logf("done after %v: %d rounds, %d Kinesis and %d SQS invocations, %d records passed, %d function errors",
		time.Since(start).Round(time.Millisecond), rounds, kin, sqsInv, stats.Records, len(fnErrs))

	// One more round finds nothing to do: nothing is left in flight.
	if st, err := src.Round(t.Context(), obs.invoke); err != nil || st.Invocations != 0 {
		t.Errorf("a round after the end: %+v, %v; want no invocation", st, err)
	}
	for _, shard := range slices.Sorted(maps.Keys(last)) {
		t.Logf("%s: checkpoint %s, its last record", shard, src.Checkpoint(shard))
	}

	// Handling, from the function's log lines: every attempt at least
	// once, no attempt beyond the class's.
	handled := esHandled(t, e.out.String())
	dups := 0
	for _, r := range recs {
		got := handled[r.id]
		for _, a := range got {
			if a < 1 || a > r.class.attempts {
				t.Errorf("record %s (%s) handled at attempt %d, want attempts 1..%d; all: %v", r.id, r.class.name, a, r.class.attempts, got)
			}
		}
		dups += len(got) - r.class.attempts
	}
	for id := range handled {
		if _, ok := byID[id]; !ok {
			t.Errorf("the function handled a record with an unknown id %q", id)
		}
	}
	if dups != 0 {
		t.Logf("%d handlings beyond the expected ones (after %d function errors: whole batches again)", dups, len(fnErrs))
		if len(fnErrs) == 0 {
			t.Errorf("%d duplicate handlings without any function error", dups)
		}
	}

	// The source stream: every original, and one counted copy per retry
	// (retry count 1, 2, ...) with the original's key and payload.
	copies := map[string][]int{}
	for _, rec := range final {
		h, payload := envelope.Decode(rec.Data)
		var cmd struct{ ID string }
		if err := json.Unmarshal(payload, &cmd); err != nil {
			t.Fatalf("record %s in the source stream has payload %q: %v", aws.ToString(rec.SequenceNumber), payload, err)
		}
		r, ok := byID[cmd.ID]
		if !ok {
			t.Fatalf("record %s in the source stream has an unknown id %q", aws.ToString(rec.SequenceNumber), cmd.ID)
		}
		if string(payload) != string(r.payload) || aws.ToString(rec.PartitionKey) != r.id {
			t.Errorf("record %s of %s: key %q payload %q, want key %q payload %q",
				aws.ToString(rec.SequenceNumber), r.id, aws.ToString(rec.PartitionKey), payload, r.id, r.payload)
		}
		if rc := h.Get(retryCountHeader); rc != "" {
			var c int
			fmt.Sscan(rc, &c)
			copies[r.id] = append(copies[r.id], c)
			if rec.ShardID != r.shardID {
				t.Errorf("copy %d of %s is in %s, the original in %s", c, r.id, rec.ShardID, r.shardID)
			}
			if h.Get(publish.FirstArrivalHeader) == "" {
				t.Errorf("copy %d of %s has no %s header", c, r.id, publish.FirstArrivalHeader)
			}
		}
	}
	for _, r := range recs {
		got := slices.Sorted(slices.Values(copies[r.id]))
		var want []int
		for c := 1; c < r.class.attempts; c++ {
			want = append(want, c)
		}
		if !slices.Equal(got, want) {
			t.Errorf("record %s (%s): counted copies with retry counts %v, want %v", r.id, r.class.name, got, want)
		}
	}

	// The delay queue handed back exactly the delayed records' messages
	// (a message not yet due goes round again), and is empty now.
	for _, r := range recs {
		if got := delayedBack[r.id]; r.class.delayed != (got > 0) {
			t.Errorf("record %s (%s): %d delay messages came back through the delay queue", r.id, r.class.name, got)
		}
	}
	if left := env.ReceiveAll(t.Context(), t, delayQueue, 1, settleRead); len(left) != 0 {
		t.Errorf("the delay queue still holds a message: %s", aws.ToString(left[0].Body))
	}

	// The dead-letter target: every poison record, with its payload, once.
	dls := map[string][]esDeadLetter{}
	if dlQueue {
		// Every dead letter was written before its record settled, and every
		// record settled: all wantDL are in the queue now. Reading exactly
		// that many ends on the count, not on a quiet window (a short poll
		// of the SQS stand-in may answer empty while messages wait, which a
		// loaded machine turns into a missed message); extras are looked for
		// after.
		msgs := env.ReceiveAll(t.Context(), t, dlQueueURL, wantDL, awaitRead)
		if extra := env.ReceiveAll(t.Context(), t, dlQueueURL, 1, settleRead); len(extra) != 0 {
			t.Errorf("more dead letters than the %d poison records: %s", wantDL, aws.ToString(extra[0].Body))
		}
		for _, m := range msgs {
			d, err := publish.ParseDeadLetterBody([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatalf("dead-letter message %s: %v", aws.ToString(m.Body), err)
			}
			if d.SourceStreamARN != streamARN {
				t.Errorf("dead letter from %q, want %q", d.SourceStreamARN, streamARN)
			}
			dl := esDeadLetter{payload: d.Payload, headers: d.Headers, attempts: d.Attempts, reason: d.Reason, seq: d.SequenceNumber}
			var cmd struct{ ID string }
			_ = json.Unmarshal(d.Payload, &cmd)
			dls[cmd.ID] = append(dls[cmd.ID], dl)
		}
	} else {
		for _, rec := range readExactly(t, env, dlStream, wantDL) {
			h, payload := envelope.Decode(rec.Data)
			var attempts int
			fmt.Sscan(h.Get(publish.DeadLetterAttemptsHeader), &attempts)
			dl := esDeadLetter{payload: payload, headers: h, attempts: attempts,
				reason: h.Get(publish.DeadLetterReasonHeader), seq: h.Get(publish.DeadLetterSequenceNumberHeader)}
			if src := h.Get(publish.DeadLetterSourceStreamHeader); src != streamARN {
				t.Errorf("dead letter from %q, want %q", src, streamARN)
			}
			var cmd struct{ ID string }
			_ = json.Unmarshal(payload, &cmd)
			dls[cmd.ID] = append(dls[cmd.ID], dl)
		}
	}
	for id := range dls {
		if _, ok := byID[id]; !ok {
			t.Errorf("a dead letter with an unknown id %q", id)
		}
	}
	for _, r := range recs {
		got := dls[r.id]
		switch {
		case !r.class.deadLetter && len(got) != 0:
			t.Errorf("record %s (%s) was dead-lettered: %+v", r.id, r.class.name, got)
		case r.class.deadLetter && len(got) != 1:
			t.Errorf("record %s (%s): %d dead letters, want 1", r.id, r.class.name, len(got))
		case r.class.deadLetter:
			d := got[0]
			wantRetryCount := ""
			if r.class.attempts > 1 {
				wantRetryCount = fmt.Sprint(r.class.attempts - 1)
			}
			if string(d.payload) != string(r.payload) || d.attempts != r.class.attempts || d.reason == "" ||
				d.headers.Get(retryCountHeader) != wantRetryCount || (r.class.attempts == 1 && d.seq != r.seq) {
				t.Errorf("dead letter of %s (%s): payload %q attempts %d reason %q headers %v sequence %s; want payload %q, attempts %d, a reason, retry count %q, the original's sequence %s if never copied",
					r.id, r.class.name, d.payload, d.attempts, d.reason, d.headers, d.seq, r.payload, r.class.attempts, wantRetryCount, r.seq)
			}
		}
	}

	// The reply stream: one reply per asking record, naming it.
	replies := readExactly(t, env, replyStream, wantReplies)
	answered := map[string]int{}
	for _, rec := range replies {
		h, payload := envelope.Decode(rec.Data)
		key := aws.ToString(rec.PartitionKey)
		r, ok := byID[key]
		if !ok || !r.class.reply || string(payload) != "answer" || h.Get("x-in-reply-to") != r.seq {
			t.Errorf("reply with key %q payload %q headers %v: want key an asking record's id, payload \"answer\", x-in-reply-to its sequence number", key, payload, h)
			continue
		}
		answered[key]++
	}
	if len(answered) != wantReplies {
		t.Errorf("%d records answered, want %d", len(answered), wantReplies)
	}

	// Nothing lost: every id acked (all its attempts handled, the shard's
	// checkpoint past its last record) or dead-lettered.
	lost := 0
	for _, r := range recs {
		if len(dls[r.id]) > 0 {
			continue
		}
		if !slices.Contains(handled[r.id], r.class.attempts) {
			lost++
			t.Errorf("record %s (%s) is lost: handled at %v, not dead-lettered", r.id, r.class.name, handled[r.id])
		}
	}
	deliveries := 0
	for _, k := range delayedBack {
		deliveries += k
	}
	t.Logf("%d records: %d handlings, %d counted copies, %d dead letters, %d delayed through the queue (%d delay messages delivered), %d replies, %d lost",
		n, len(handledLines(handled)), len(final)-n, wantDL, len(delayedBack), deliveries, len(replies), lost)
}

// handledLines flattens handled into one entry per handling.
func handledLines(handled map[string][]int) []int {
	var all []int
	for _, as := range handled {
		all = append(all, as...)
	}
	return all
}
