// Command demo is the driver of `make demo` (scripts/demo.sh): it runs the
// demonstration handler of cmd/bootstrap end to end against the local
// stand-ins for AWS (kinesis-local, dynalite, fauxqs), in both modes.
//
// Phase 1, Lambda: the bootstrap binary runs under the AWS Lambda Runtime
// Interface Emulator; lambdaadaptertest.EventSource reads the stream shard by
// shard as Lambda's Kinesis event source mapping does, invokes the emulator
// with real-shaped events, checkpoints by the partial batch responses, and
// feeds the delay queue back to the same function as an SQS event source.
//
// Phase 2, long-running: two `bootstrap -mode=ecs` workers share a second
// stream through a DynamoDB lease table (created with `bootstrap leases
// init`) and are stopped with SIGTERM at the end.
//
// Each phase writes a batch of sample records whose JSON payloads tell the
// demonstration handler what to do: most are acknowledged; poison ones are
// dropped or retried until the attempt cap and land in the dead-letter target
// (a stream in phase 1, an SQS queue in phase 2) with their payload; transient
// ones fail once (a retry or a panic) and come back as counted copies; delayed
// ones ask to come back after 2 s, longer than the in-process limit, and come
// back through the delay queue; some publish a reply. The driver follows the
// function's own log lines (one per record handled, with its id and attempt),
// the streams and queues, and every shard's checkpoint, shows a live progress
// line, and prints a summary per phase. A phase ends when every record reached
// its end (acknowledged at its last attempt, or dead-lettered) and every
// shard's checkpoint is its last record, copies included.
//
// It talks only to the endpoints in AWS_ENDPOINT_URL_KINESIS, _SQS and
// _DYNAMODB, which must be http:// on a loopback address (scripts/standins.sh
// env prints them), with dummy credentials; the processes it starts get the
// same endpoints and credentials and no other AWS configuration. It stops
// every process it started when it ends, also on Ctrl-C.
//
// Usage (scripts/demo.sh runs it):
//
//	eval "$(scripts/standins.sh env)"
//	(cd integration && go build -o ../bin/demo ./demo)
//	bin/demo -bootstrap bin/bootstrap -rie bin/aws-lambda-rie
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/lease"
)

// Settings of the demonstration.
const (
	region          = "us-east-1"
	accessKeyID     = "test" // dummy credentials: the stand-ins check none
	secretAccessKey = "test"

	maxAttempts       = 3               // LAMBDAADAPTER_MAX_ATTEMPTS
	maxInProcessDelay = time.Second     // LAMBDAADAPTER_MAX_INPROCESS_DELAY
	delay             = 2 * time.Second // what delayed records ask for: through the delay queue
	functionTimeout   = 60              // AWS_LAMBDA_FUNCTION_TIMEOUT (seconds)
	batchSize         = 100             // the event source's BatchSize
)

// class is a kind of sample record: what its payload asks of the
// demonstration handler and what must come of it.
type class struct {
	name    string
	command string // the handler's JSON, without the id
	// attempts is how often it is handled: 1, then once per counted copy.
	attempts   int
	deadLetter bool // its last attempt ends in the dead-letter target
	delayed    bool // its copy comes through the delay queue
	reply      bool // the handler publishes a reply
}

var (
	classAck       = &class{name: "ack", attempts: 1}
	classDrop      = &class{name: "poison: drop", command: `"outcome":"drop"`, attempts: 1, deadLetter: true}
	classPoison    = &class{name: "poison: retry always", command: `"outcome":"retry"`, attempts: maxAttempts, deadLetter: true}
	classTransient = &class{name: "transient: retry once", command: `"outcome":"retry","until_attempt":2`, attempts: 2}
	classPanic     = &class{name: "transient: panic once", command: `"outcome":"panic","until_attempt":2`, attempts: 2}
	classDelayed   = &class{name: "delayed 2s once", command: fmt.Sprintf(`"outcome":"retry_after","delay_ms":%d,"until_attempt":2`, delay.Milliseconds()), attempts: 2, delayed: true}
	classReply     = &class{name: "reply", command: `"reply":"answer"`, attempts: 1, reply: true}

	classes = []*class{classAck, classDrop, classPoison, classTransient, classPanic, classDelayed, classReply}
)

// classOf returns the class of the i-th record: per 20, 11 acks, 1 drop, 1
// poison, 2 transient retries, 1 transient panic, 2 delayed, 2 replies.
func classOf(i int) *class {
	switch i % 20 {
	case 3:
		return classDrop
	case 7:
		return classPoison
	case 5, 15:
		return classTransient
	case 11:
		return classPanic
	case 9, 18:
		return classDelayed
	case 1, 13:
		return classReply
	default:
		return classAck
	}
}

type options struct {
	bootstrap, rie, logDir, pidFile string
	lambdaRecords, ecsRecords       int
	lambdaShards, ecsShards         int
	phaseTimeout                    time.Duration
}

func main() {
	os.Exit(run())
}

func run() int {
	var o options
	flag.StringVar(&o.bootstrap, "bootstrap", "bin/bootstrap", "the bootstrap binary (CGO_ENABLED=0 go build -tags lambda.norpc ./cmd/bootstrap)")
	flag.StringVar(&o.rie, "rie", "bin/aws-lambda-rie", "the Lambda Runtime Interface Emulator (make tools)")
	flag.StringVar(&o.logDir, "logs", "", "directory for the processes' logs (default: a new temporary one, kept)")
	flag.StringVar(&o.pidFile, "pidfile", "", "file to append the pid of every process started to (for a caller's cleanup)")
	flag.IntVar(&o.lambdaRecords, "lambda-records", 2000, "records of the Lambda phase (0 skips it)")
	flag.IntVar(&o.ecsRecords, "ecs-records", 2000, "records of the long-running phase (0 skips it)")
	flag.IntVar(&o.lambdaShards, "lambda-shards", 2, "shards of the Lambda phase's stream")
	flag.IntVar(&o.ecsShards, "ecs-shards", 4, "shards of the long-running phase's stream")
	flag.DurationVar(&o.phaseTimeout, "phase-timeout", 100*time.Second, "longest a phase may take")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := newDemo(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer d.procs.stopAll()

	var results []*result
	failed := false
	for _, p := range []struct {
		n   int
		run func(context.Context) (*result, error)
	}{{o.lambdaRecords, d.lambdaPhase}, {o.ecsRecords, d.ecsPhase}} {
		if p.n <= 0 {
			continue
		}
		r, err := p.run(ctx)
		if r != nil {
			results = append(results, r)
		}
		d.procs.stopAll()
		if err != nil {
			failed = true
			if ctx.Err() != nil {
				fmt.Println()
				fmt.Println("demo: interrupted; stopping what it started")
				return 130
			}
			fmt.Fprintln(os.Stderr, "demo:", err)
			fmt.Fprintln(os.Stderr, "demo: logs of the processes are in", d.logDir)
			break
		}
	}
	printSummary(os.Stdout, results)
	if failed {
		return 1
	}
	return 0
}

// demo holds the clients and the processes of a run.
type demo struct {
	o         options
	endpoints map[string]string // service → endpoint
	kinesis   *kinesis.Client
	sqs       *sqs.Client
	dynamodb  *dynamodb.Client
	logDir    string
	suffix    string
	procs     *procs
	tty       bool
}

func newDemo(o options) (*demo, error) {
	d := &demo{o: o, endpoints: map[string]string{}}
	for _, s := range []string{"KINESIS", "SQS", "DYNAMODB"} {
		name := "AWS_ENDPOINT_URL_" + s
		raw := os.Getenv(name)
		if raw == "" {
			return nil, fmt.Errorf("%s is not set; run: eval \"$(scripts/standins.sh env)\"", name)
		}
		if err := checkLoopback(raw); err != nil {
			return nil, fmt.Errorf("%s=%q: %v (the demo only talks to local stand-ins)", name, raw, err)
		}
		d.endpoints[s] = strings.TrimSuffix(raw, "/")
	}
	for _, p := range []*string{&o.bootstrap, &o.rie} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(abs); err != nil || fi.Mode().Perm()&0o111 == 0 {
			return nil, fmt.Errorf("%s is missing or not executable (make build tools)", abs)
		}
		*p = abs
	}
	d.o = o
	cfg := aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(accessKeyID, secretAccessKey, ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 5
				o.MaxBackoff = 500 * time.Millisecond
				o.RateLimiter = ratelimit.None
			})
		},
	}
	d.kinesis = kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(d.endpoints["KINESIS"]) })
	d.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(d.endpoints["SQS"]) })
	d.dynamodb = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(d.endpoints["DYNAMODB"]) })
	var b [3]byte
	_, _ = rand.Read(b[:])
	d.suffix = hex.EncodeToString(b[:])
	d.logDir = o.logDir
	if d.logDir == "" {
		dir, err := os.MkdirTemp("", "lambdaadapter-demo-")
		if err != nil {
			return nil, err
		}
		d.logDir = dir
	}
	if err := os.MkdirAll(d.logDir, 0o755); err != nil {
		return nil, err
	}
	d.procs = &procs{pidFile: o.pidFile}
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		d.tty = true
	}
	return d, nil
}

// checkLoopback returns an error unless raw is an http:// URL on a loopback
// IP address with a port.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	ip := net.ParseIP(u.Hostname())
	switch {
	case u.Scheme != "http":
		return errors.New("want http://")
	case ip == nil || !ip.IsLoopback():
		return errors.New("want a loopback IP address such as 127.0.0.1")
	case u.Port() == "":
		return errors.New("want a port")
	}
	return nil
}

// childEnv returns the whole environment of a process the demo starts: the
// stand-ins' endpoints, dummy credentials, no shared AWS configuration, and
// settings.
func (d *demo) childEnv(settings ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"TMPDIR=" + os.TempDir(),
		"AWS_ENDPOINT_URL_KINESIS=" + d.endpoints["KINESIS"],
		"AWS_ENDPOINT_URL_SQS=" + d.endpoints["SQS"],
		"AWS_ENDPOINT_URL_DYNAMODB=" + d.endpoints["DYNAMODB"],
		"AWS_REGION=" + region,
		"AWS_ACCESS_KEY_ID=" + accessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + secretAccessKey,
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
	return append(env, settings...)
}

// ---------------------------------------------------------------------------
// Resources

func (d *demo) newStream(ctx context.Context, name string, shards int) (arn string, err error) {
	_, err = d.kinesis.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(name), ShardCount: aws.Int32(int32(shards)),
		StreamModeDetails: &kinesistypes.StreamModeDetails{StreamMode: kinesistypes.StreamModeProvisioned},
	})
	if err != nil {
		return "", fmt.Errorf("create stream %s: %w", name, err)
	}
	for {
		out, err := d.kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			return "", fmt.Errorf("stream %s: %w", name, err)
		}
		if s := out.StreamDescriptionSummary; s.StreamStatus == kinesistypes.StreamStatusActive {
			return aws.ToString(s.StreamARN), nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return "", err
		}
	}
}

func (d *demo) newQueue(ctx context.Context, name string) (string, error) {
	out, err := d.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// ---------------------------------------------------------------------------
// Sample records and what became of them

// item is one sample record.
type item struct {
	id      string
	class   *class
	payload []byte
	shardID string
	seq     string

	handled   []int // attempts, in the order the function logged them
	dead      int   // dead letters seen
	replies   int   // replies seen
	delayBack int   // delay messages the delay queue handed to the function (Lambda)
}

// done reports whether the record reached its end: dead-lettered, or
// handled at its last attempt (which acks it).
func (it *item) done() bool {
	if it.class.deadLetter {
		return it.dead > 0
	}
	return slices.Contains(it.handled, it.class.attempts)
}

// tracker is what the driver knows about one phase's records. It is safe
// for concurrent use.
type tracker struct {
	mu       sync.Mutex
	items    map[string]*item
	order    []*item
	calls    int // handler calls logged
	unknown  int // log lines, dead letters or replies naming no sample record
	copies   int // counted copies seen in the source stream
	sqsCalls int // SQS invocations (Lambda)
	errors   int // function errors (Lambda: whole batches again)
}

// produce writes n sample records (ids prefix-000000 and up, also their
// partition keys) to the stream in shuffled order.
func (d *demo) produce(ctx context.Context, stream, prefix string, n int) (*tracker, error) {
	tr := &tracker{items: map[string]*item{}}
	for i := range n {
		id := fmt.Sprintf("%s-%06d", prefix, i)
		c := classOf(i)
		p := `{"id":"` + id + `"`
		if c.command != "" {
			p += "," + c.command
		}
		if c.reply {
			p += `,"reply_key":"` + id + `"`
		}
		it := &item{id: id, class: c, payload: []byte(p + "}")}
		tr.items[id] = it
		tr.order = append(tr.order, it)
	}
	recs := slices.Clone(tr.order)
	mrand.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	for from := 0; from < len(recs); from += 500 {
		part := recs[from:min(from+500, len(recs))]
		entries := make([]kinesistypes.PutRecordsRequestEntry, len(part))
		for i, it := range part {
			entries[i] = kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String(it.id), Data: it.payload}
		}
		out, err := d.kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			return nil, fmt.Errorf("PutRecords to %s: %w", stream, err)
		}
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				return nil, fmt.Errorf("PutRecords to %s: %s: %s", stream, aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))
			}
			part[i].shardID, part[i].seq = aws.ToString(r.ShardId), aws.ToString(r.SequenceNumber)
		}
	}
	return tr, nil
}

// mixLine describes the mix of records.
func (tr *tracker) mixLine() string {
	n := map[*class]int{}
	for _, it := range tr.order {
		n[it.class]++
	}
	var parts []string
	for _, c := range classes {
		if n[c] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[c], c.name))
		}
	}
	return strings.Join(parts, ", ")
}

// expected returns how many records the source stream ends with (copies
// included), and how many dead letters and replies there must be.
func (tr *tracker) expected() (stream, deadLetters, replies int) {
	for _, it := range tr.order {
		stream += it.class.attempts
		if it.class.deadLetter {
			deadLetters++
		}
		if it.class.reply {
			replies++
		}
	}
	return
}

func (tr *tracker) handledLine(id string, attempt int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.calls++
	if it := tr.items[id]; it != nil {
		it.handled = append(it.handled, attempt)
	} else {
		tr.unknown++
	}
}

func (tr *tracker) deadLetter(payload []byte) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if it := tr.items[idOf(payload)]; it != nil {
		it.dead++
	} else {
		tr.unknown++
	}
}

func (tr *tracker) reply(key string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if it := tr.items[key]; it != nil {
		it.replies++
	} else {
		tr.unknown++
	}
}

func (tr *tracker) sourceRecord(data []byte) {
	h, _ := envelope.Decode(data)
	if h.Get(envelope.RetryCountHeader) == "" {
		return
	}
	tr.mu.Lock()
	tr.copies++
	tr.mu.Unlock()
}

func idOf(payload []byte) string {
	var v struct{ ID string }
	_ = json.Unmarshal(payload, &v)
	return v.ID
}

// counts is a snapshot of a tracker.
type counts struct {
	records, done, handledIDs, calls, duplicates, unknown int
	copies, deadLetters, deadPoison, deadDrop, delays     int
	delayed, replies, lost                                int
	sqsCalls, errors                                      int
}

func (tr *tracker) counts() counts {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	c := counts{records: len(tr.order), calls: tr.calls, unknown: tr.unknown, copies: tr.copies, sqsCalls: tr.sqsCalls, errors: tr.errors}
	for _, it := range tr.order {
		if it.done() {
			c.done++
		} else {
			c.lost++ // until it is done
		}
		if len(it.handled) > 0 {
			c.handledIDs++
		}
		seen := map[int]bool{}
		for _, a := range it.handled {
			if seen[a] {
				c.duplicates++
			}
			seen[a] = true
		}
		c.deadLetters += it.dead
		if it.dead > 0 {
			if it.class == classDrop {
				c.deadDrop++
			} else {
				c.deadPoison++
			}
		}
		if it.class.delayed {
			c.delayed++
			if slices.Contains(it.handled, 2) {
				c.delays++
			}
		}
		c.replies += it.replies
	}
	return c
}

// ---------------------------------------------------------------------------
// Streams and queues, followed

// tail follows every shard of a stream from TRIM_HORIZON, calling onRecord
// for each record, and keeps each shard's sequence numbers for positions.
type tail struct {
	d        *demo
	stream   string
	onRecord func(shardID string, r kinesistypes.Record)

	mu     sync.Mutex
	shards map[string][]string // shard → sequence numbers in order
	total  int
	err    error
}

func (d *demo) follow(ctx context.Context, stream string, onRecord func(string, kinesistypes.Record)) *tail {
	t := &tail{d: d, stream: stream, onRecord: onRecord, shards: map[string][]string{}}
	go t.run(ctx)
	return t
}

func (t *tail) run(ctx context.Context) {
	its := map[string]*string{}
	for ctx.Err() == nil {
		out, err := t.d.kinesis.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(t.stream)})
		if err != nil {
			t.fail(err)
			_ = sleep(ctx, 200*time.Millisecond)
			continue
		}
		for _, s := range out.Shards {
			id := aws.ToString(s.ShardId)
			t.mu.Lock()
			if _, ok := t.shards[id]; !ok {
				t.shards[id] = nil
			}
			t.mu.Unlock()
			if _, ok := its[id]; ok {
				continue
			}
			it, err := t.d.kinesis.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
				StreamName: aws.String(t.stream), ShardId: aws.String(id), ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				t.fail(err)
				continue
			}
			its[id] = it.ShardIterator
		}
		break
	}
	for ctx.Err() == nil {
		got := 0
		for id, it := range its {
			if it == nil {
				continue
			}
			out, err := t.d.kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(10000)})
			if err != nil {
				t.fail(err)
				continue
			}
			its[id] = out.NextShardIterator
			for _, r := range out.Records {
				if t.onRecord != nil {
					t.onRecord(id, r)
				}
			}
			t.mu.Lock()
			for _, r := range out.Records {
				t.shards[id] = append(t.shards[id], aws.ToString(r.SequenceNumber))
			}
			t.total += len(out.Records)
			t.mu.Unlock()
			got += len(out.Records)
		}
		if got == 0 {
			_ = sleep(ctx, 150*time.Millisecond)
		}
	}
}

func (t *tail) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !errors.Is(err, context.Canceled) {
		t.err = err
	}
}

// count returns how many records were read.
func (t *tail) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// shardIDs returns the shards found, sorted.
func (t *tail) shardIDs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id := range t.shards {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// position returns how many of the shard's records are at or before the
// checkpoint cp, how many it holds so far, and its last sequence number.
func (t *tail) position(shardID, cp string) (at, total int, last string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seqs := t.shards[shardID]
	total = len(seqs)
	if total > 0 {
		last = seqs[total-1]
	}
	switch cp {
	case "", lease.TrimHorizon:
		return 0, total, last
	case lease.ShardEnd:
		return total, total, last
	}
	at, _ = slices.BinarySearchFunc(seqs, cp, compareSeq)
	if at < total && seqs[at] == cp {
		at++
	}
	return at, total, last
}

// compareSeq compares two decimal sequence numbers.
func compareSeq(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// drainQueue receives and deletes the dead letters of a queue until ctx
// ends, handing each body to onBody.
func (d *demo) drainQueue(ctx context.Context, queue string, onBody func(string)) {
	for ctx.Err() == nil {
		out, err := d.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			_ = sleep(ctx, 200*time.Millisecond)
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			onBody(aws.ToString(m.Body))
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		_, _ = d.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queue), Entries: del})
	}
}

// queueEmpty reports whether a queue holds no message, visible, in flight
// or delayed.
func (d *demo) queueEmpty(ctx context.Context, queue string) bool {
	out, err := d.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queue),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return false
	}
	for _, v := range out.Attributes {
		if v != "0" {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Processes

// procs are the processes the demo started.
type procs struct {
	mu      sync.Mutex
	list    []*proc
	pidFile string
}

type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	rie    bool // a Runtime Interface Emulator: its function process is its child
}

// start starts cmd in a process group of its own (Ctrl-C reaches the demo,
// which stops it), records its pid, and stops it with stopAll.
func (p *procs) start(name string, cmd *exec.Cmd, rie bool) (*proc, error) {
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	pr := &proc{name: name, cmd: cmd, exited: make(chan struct{}), rie: rie}
	go func() {
		_ = cmd.Wait()
		close(pr.exited)
	}()
	p.mu.Lock()
	p.list = append(p.list, pr)
	p.mu.Unlock()
	if p.pidFile != "" {
		if f, err := os.OpenFile(p.pidFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%d %s\n", cmd.Process.Pid, name)
			f.Close()
		}
	}
	return pr, nil
}

// running reports whether the process has not exited.
func (pr *proc) running() bool {
	select {
	case <-pr.exited:
		return false
	default:
		return true
	}
}

// terminate sends SIGTERM and waits up to grace for the exit, then kills.
// It returns the exit status, or an error when it had to kill.
func (pr *proc) terminate(grace time.Duration) error {
	if !pr.running() {
		return nil
	}
	if pr.rie {
		// The function runs in a process group of its own, as the RIE's
		// child: kill it first (found in /proc on Linux), then the RIE.
		// (On SIGTERM the RIE kills it too, but takes 1.7 s to exit.)
		kids := childPIDs(pr.cmd.Process.Pid)
		for _, pid := range kids {
			killPID(pid)
		}
		if len(kids) > 0 {
			deadline := time.Now().Add(grace)
			for _, pid := range kids {
				for processExists(pid) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			_ = pr.cmd.Process.Kill()
			<-pr.exited
			return nil
		}
	}
	_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pr.exited:
		if pr.rie {
			return nil
		}
		if c := pr.cmd.ProcessState.ExitCode(); c != 0 {
			return fmt.Errorf("%s exited with %v after SIGTERM", pr.name, pr.cmd.ProcessState)
		}
		return nil
	case <-time.After(grace):
		_ = pr.cmd.Process.Kill()
		<-pr.exited
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", pr.name, grace)
	}
}

// stopAll stops every process still running.
func (p *procs) stopAll() {
	p.mu.Lock()
	list := slices.Clone(p.list)
	p.list = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, pr := range list {
		wg.Go(func() { _ = pr.terminate(10 * time.Second) })
	}
	wg.Wait()
}

// childPIDs returns the pids of the direct children of pid, from /proc
// (Linux); nil elsewhere.
func childPIDs(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

func processExists(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// logLines is an io.Writer that copies a process's output to a file and
// hands every complete line to onLine.
type logLines struct {
	mu      sync.Mutex
	file    io.Writer
	partial []byte
	onLine  func([]byte)
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.file.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.onLine(l.partial[:i])
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

// recordLine reads a "record" line of the demonstration handler: JSON with
// "message" (Lambda's lambdacontext handler) or "msg" (long-running mode).
func recordLine(tr *tracker) func([]byte) {
	return func(line []byte) {
		if len(line) == 0 || line[0] != '{' {
			return
		}
		var l struct {
			Message string `json:"message"`
			Msg     string `json:"msg"`
			ID      string `json:"id"`
			Attempt int    `json:"attempt"`
		}
		if json.Unmarshal(line, &l) != nil || (l.Message != "record" && l.Msg != "record") {
			return
		}
		tr.handledLine(l.ID, l.Attempt)
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ---------------------------------------------------------------------------
// Progress

// progress prints one line of where a phase is: every 250 ms over the same
// line on a terminal, else every 3 s on a line of its own.
type progress struct {
	d      *demo
	phase  string
	start  time.Time
	tr     *tracker
	lastN  int
	lastT  time.Time
	rate   float64
	last   time.Time
	shards func() string // per-shard positions
}

func (p *progress) tick(final bool) {
	now := time.Now()
	every := 3 * time.Second
	if p.d.tty {
		every = 250 * time.Millisecond
	}
	if !final && now.Sub(p.last) < every {
		return
	}
	p.last = now
	c := p.tr.counts()
	if dt := now.Sub(p.lastT).Seconds(); dt >= 0.2 {
		p.rate = float64(c.calls-p.lastN) / dt
		p.lastN, p.lastT = c.calls, now
	}
	if final {
		p.rate = float64(c.calls) / now.Sub(p.start).Seconds()
	}
	line := fmt.Sprintf("%-6s %5.1fs  %4d/%d done  %5.0f rec/s  %s  copies %d  dead letters %d  delays %d/%d",
		p.phase, now.Sub(p.start).Seconds(), c.done, c.records, p.rate, p.shards(), c.copies, c.deadLetters, c.delays, c.delayed)
	if p.d.tty {
		fmt.Printf("\r\033[K%s", line)
		if final {
			fmt.Println()
		}
		return
	}
	fmt.Println(line)
}

// shortShard turns shardId-000000000003 into s3.
func shortShard(id string) string {
	n := strings.TrimLeft(strings.TrimPrefix(id, "shardId-"), "0")
	if n == "" {
		n = "0"
	}
	return "s" + n
}

// ---------------------------------------------------------------------------
// Phase 1: Lambda

// result is what a phase did.
type result struct {
	name    string
	shards  int
	c       counts
	elapsed time.Duration
}

func (d *demo) lambdaPhase(ctx context.Context) (*result, error) {
	o := d.o
	fmt.Printf("\n== Phase 1, Lambda: bin/bootstrap under the Runtime Interface Emulator, fed by lambdaadaptertest.EventSource\n")
	stream := "demo-lambda-" + d.suffix
	streamARN, err := d.newStream(ctx, stream, o.lambdaShards)
	if err != nil {
		return nil, err
	}
	dlStream := stream + "-dead-letters"
	replyStream := stream + "-replies"
	for _, s := range []string{dlStream, replyStream} {
		if _, err := d.newStream(ctx, s, 1); err != nil {
			return nil, err
		}
	}
	delayQueue, err := d.newQueue(ctx, stream+"-delays")
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	tr, err := d.produce(ctx, stream, "lam", o.lambdaRecords)
	if err != nil {
		return nil, err
	}
	fmt.Printf("   stream %s (%d shards), dead letters to stream %s, delay queue %s, replies to %s\n",
		stream, o.lambdaShards, dlStream, queueName(delayQueue), replyStream)
	fmt.Printf("   produced %d records in %v: %s\n", o.lambdaRecords, time.Since(t0).Round(time.Millisecond), tr.mixLine())

	invokeAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	settings := []string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(functionTimeout),
		"AWS_LAMBDA_LOG_FORMAT=JSON",
		"AWS_LAMBDA_LOG_LEVEL=DEBUG",
		"LAMBDAADAPTER_LOG_LEVEL=debug",
		"LAMBDAADAPTER_MAX_ATTEMPTS=" + strconv.Itoa(maxAttempts),
		"LAMBDAADAPTER_DEAD_LETTER_STREAM=" + dlStream,
		"LAMBDAADAPTER_DEAD_LETTER_DROPS=true",
		"LAMBDAADAPTER_DELAY_QUEUE=" + delayQueue,
		"LAMBDAADAPTER_MAX_INPROCESS_DELAY=" + maxInProcessDelay.String(),
		"LAMBDAADAPTER_REPLY_STREAM=" + replyStream,
	}
	logFile, err := os.Create(filepath.Join(d.logDir, "lambda-rie.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	out := &logLines{file: logFile, onLine: recordLine(tr)}
	cmd := exec.Command(o.rie, "--runtime-interface-emulator-address", invokeAddr, "--runtime-api-address", apiAddr, o.bootstrap)
	cmd.Env = d.childEnv(settings...)
	cmd.Stdout, cmd.Stderr = out, out
	rie, err := d.procs.start("aws-lambda-rie", cmd, true)
	if err != nil {
		return nil, err
	}
	if err := waitListening(ctx, rie, invokeAddr, apiAddr); err != nil {
		return nil, err
	}
	fmt.Printf("   emulator listening on %s, running %s\n", invokeAddr, o.bootstrap)
	printSettings("function environment", settings)

	// Followers: the source stream (copies), the dead letters, the replies.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := d.follow(fctx, stream, func(_ string, r kinesistypes.Record) { tr.sourceRecord(r.Data) })
	d.follow(fctx, dlStream, func(_ string, r kinesistypes.Record) {
		_, p := envelope.Decode(r.Data)
		tr.deadLetter(p)
	})
	d.follow(fctx, replyStream, func(_ string, r kinesistypes.Record) { tr.reply(aws.ToString(r.PartitionKey)) })

	invoke := lambdaadaptertest.InvokeAPI("http://"+invokeAddr+"/2015-03-31/functions/function/invocations",
		&http.Client{Timeout: 2 * functionTimeout * time.Second})
	fn := func(ctx context.Context, payload []byte) ([]byte, error) {
		resp, err := invoke(ctx, payload)
		tr.mu.Lock()
		if bytes.Contains(payload, []byte(`"eventSource":"aws:sqs"`)) {
			tr.sqsCalls++
		}
		if err != nil && ctx.Err() == nil {
			tr.errors++
		}
		tr.mu.Unlock()
		return resp, err
	}
	es := &lambdaadaptertest.EventSource{
		StreamARN: streamARN, Kinesis: d.kinesis, BatchSize: batchSize,
		Timeout: 2 * functionTimeout * time.Second, MaxConcurrency: 1, // one emulator: one invocation at a time
		QueueURL: delayQueue, SQS: d.sqs,
	}
	var (
		cpMu sync.Mutex
		cps  = map[string]string{}
	)
	positions := func() (string, bool) {
		cpMu.Lock()
		defer cpMu.Unlock()
		var parts []string
		all := true
		for _, id := range src.shardIDs() {
			at, total, last := src.position(id, cps[id])
			all = all && cps[id] == last
			parts = append(parts, fmt.Sprintf("%s %d/%d", shortShard(id), at, total))
		}
		return strings.Join(parts, " "), all && len(parts) > 0
	}
	pr := &progress{d: d, phase: "lambda", start: time.Now(), tr: tr, lastT: time.Now(), last: time.Now(),
		shards: func() string { s, _ := positions(); return s }}
	wantStream, wantDL, wantReplies := tr.expected()

	pctx, pcancel := context.WithTimeout(ctx, o.phaseTimeout)
	defer pcancel()
	start := time.Now()
	var (
		roundErr    error
		invocations int
	)
	for {
		st, err := es.Round(pctx, fn)
		invocations += st.Invocations
		if err != nil && pctx.Err() == nil {
			roundErr = err
		}
		cpMu.Lock()
		for _, id := range src.shardIDs() {
			cps[id] = es.Checkpoint(id)
		}
		cpMu.Unlock()
		pr.tick(false)
		c := tr.counts()
		_, atEnd := positions()
		if c.lost == 0 && src.count() >= wantStream && atEnd && !es.Pending() &&
			c.deadLetters >= wantDL && c.replies >= wantReplies && d.queueEmpty(pctx, delayQueue) {
			break
		}
		if pctx.Err() != nil {
			pr.tick(true)
			r := &result{name: "Lambda (RIE)", shards: o.lambdaShards, c: tr.counts(), elapsed: time.Since(start)}
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			return r, fmt.Errorf("phase 1 did not finish within %v (%d records not done; last round error: %v)", o.phaseTimeout, c.lost, roundErr)
		}
		if st.Invocations == 0 {
			_ = sleep(pctx, 100*time.Millisecond)
		}
	}
	elapsed := time.Since(start)
	pr.tick(true)
	if err := rie.terminate(10 * time.Second); err != nil {
		return nil, err
	}
	c := tr.counts()
	fmt.Printf("   done in %v: %d Kinesis and %d SQS invocations, %d function errors; every shard's checkpoint is its last record\n",
		elapsed.Round(time.Millisecond), invocations-c.sqsCalls, c.sqsCalls, c.errors)
	return &result{name: "Lambda (RIE)", shards: o.lambdaShards, c: c, elapsed: elapsed}, nil
}

// waitListening waits until the emulator accepts connections on addrs.
func waitListening(ctx context.Context, pr *proc, addrs ...string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok := true
		for _, a := range addrs {
			c, err := net.DialTimeout("tcp", a, 100*time.Millisecond)
			if err != nil {
				ok = false
				break
			}
			c.Close()
		}
		if ok {
			return nil
		}
		if !pr.running() {
			return fmt.Errorf("%s exited before listening", pr.name)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %v after 15s", pr.name, addrs)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

func queueName(u string) string { return u[strings.LastIndexByte(u, '/')+1:] }

// ---------------------------------------------------------------------------
// Phase 2: long-running

func (d *demo) ecsPhase(ctx context.Context) (*result, error) {
	o := d.o
	fmt.Printf("\n== Phase 2, long-running: two bin/bootstrap -mode=ecs workers sharing the shards through a DynamoDB lease table\n")
	stream := "demo-ecs-" + d.suffix
	if _, err := d.newStream(ctx, stream, o.ecsShards); err != nil {
		return nil, err
	}
	replyStream := stream + "-replies"
	if _, err := d.newStream(ctx, replyStream, 1); err != nil {
		return nil, err
	}
	dlQueue, err := d.newQueue(ctx, stream+"-dead-letters")
	if err != nil {
		return nil, err
	}
	delayQueue, err := d.newQueue(ctx, stream+"-delays")
	if err != nil {
		return nil, err
	}
	table := stream + "-leases"
	init := exec.CommandContext(ctx, o.bootstrap, "leases", "init", "-table", table)
	init.Env = d.childEnv()
	initOut, err := init.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("bootstrap leases init -table %s: %v\n%s", table, err, initOut)
	}
	fmt.Printf("   $ bootstrap leases init -table %s\n   %s", table, initOut)
	t0 := time.Now()
	tr, err := d.produce(ctx, stream, "ecs", o.ecsRecords)
	if err != nil {
		return nil, err
	}
	fmt.Printf("   stream %s (%d shards), dead letters to queue %s, delay queue %s, replies to %s\n",
		stream, o.ecsShards, queueName(dlQueue), queueName(delayQueue), replyStream)
	fmt.Printf("   produced %d records in %v: %s\n", o.ecsRecords, time.Since(t0).Round(time.Millisecond), tr.mixLine())

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := d.follow(fctx, stream, func(_ string, r kinesistypes.Record) { tr.sourceRecord(r.Data) })
	d.follow(fctx, replyStream, func(_ string, r kinesistypes.Record) { tr.reply(aws.ToString(r.PartitionKey)) })
	go d.drainQueue(fctx, dlQueue, func(body string) {
		dl, err := publish.ParseDeadLetterBody([]byte(body))
		if err != nil {
			tr.mu.Lock()
			tr.unknown++
			tr.mu.Unlock()
			return
		}
		tr.deadLetter(dl.Payload)
	})

	settings := []string{
		"LAMBDAADAPTER_STREAM=" + stream,
		"LAMBDAADAPTER_LEASE_TABLE=" + table,
		"LAMBDAADAPTER_START=trim_horizon",
		"LAMBDAADAPTER_LEASE_DURATION=3s",
		"LAMBDAADAPTER_LIST_INTERVAL=2s",
		"LAMBDAADAPTER_CHECKPOINT_INTERVAL=500ms",
		"LAMBDAADAPTER_SHUTDOWN_TIMEOUT=5s",
		"LAMBDAADAPTER_LOG_LEVEL=debug",
		"LAMBDAADAPTER_MAX_ATTEMPTS=" + strconv.Itoa(maxAttempts),
		"LAMBDAADAPTER_DEAD_LETTER_QUEUE=" + dlQueue,
		"LAMBDAADAPTER_DEAD_LETTER_DROPS=true",
		"LAMBDAADAPTER_DELAY_QUEUE=" + delayQueue,
		"LAMBDAADAPTER_MAX_INPROCESS_DELAY=" + maxInProcessDelay.String(),
		"LAMBDAADAPTER_REPLY_STREAM=" + replyStream,
	}
	var workers []*proc
	for _, name := range []string{"worker-1", "worker-2"} {
		f, err := os.Create(filepath.Join(d.logDir, "ecs-"+name+".log"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		out := &logLines{file: f, onLine: recordLine(tr)}
		cmd := exec.Command(o.bootstrap, "-mode=ecs")
		cmd.Env = d.childEnv(append(settings, "LAMBDAADAPTER_OWNER_ID="+name)...)
		cmd.Stdout, cmd.Stderr = out, out
		w, err := d.procs.start(name, cmd, false)
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
	}
	fmt.Printf("   started worker-1 and worker-2: %s -mode=ecs\n", o.bootstrap)
	printSettings("environment", settings)

	store := lease.NewDynamoDB(d.dynamodb, table)
	var (
		lmu    sync.Mutex
		leases = map[string]lease.Lease{}
	)
	readLeases := func(ctx context.Context) {
		ls, err := leasesOf(store.Snapshot(ctx, stream))
		if err != nil {
			return
		}
		lmu.Lock()
		defer lmu.Unlock()
		for _, l := range ls {
			leases[l.Key.ShardID] = l
		}
	}
	positions := func() (string, bool) {
		lmu.Lock()
		defer lmu.Unlock()
		var parts []string
		all := true
		for _, id := range src.shardIDs() {
			l := leases[id]
			at, total, last := src.position(id, l.Checkpoint)
			all = all && l.Checkpoint == last
			owner := strings.TrimPrefix(l.Owner, "worker-")
			if owner == "" {
				owner = "-"
			}
			parts = append(parts, fmt.Sprintf("%s %d/%d (w%s)", shortShard(id), at, total, owner))
		}
		return strings.Join(parts, " "), all && len(parts) > 0
	}
	pr := &progress{d: d, phase: "ecs", start: time.Now(), tr: tr, lastT: time.Now(), last: time.Now(),
		shards: func() string { s, _ := positions(); return s }}
	wantStream, wantDL, wantReplies := tr.expected()

	pctx, pcancel := context.WithTimeout(ctx, o.phaseTimeout)
	defer pcancel()
	start := time.Now()
	for {
		readLeases(pctx)
		pr.tick(false)
		for _, w := range workers {
			if !w.running() {
				return &result{name: "ECS (2 workers)", c: tr.counts(), elapsed: time.Since(start)},
					fmt.Errorf("%s exited on its own (%v); see %s", w.name, w.cmd.ProcessState, d.logDir)
			}
		}
		c := tr.counts()
		_, atEnd := positions()
		if c.lost == 0 && src.count() >= wantStream && atEnd &&
			c.deadLetters >= wantDL && c.replies >= wantReplies && d.queueEmpty(pctx, delayQueue) {
			break
		}
		if pctx.Err() != nil {
			pr.tick(true)
			r := &result{name: "ECS (2 workers)", shards: o.ecsShards, c: tr.counts(), elapsed: time.Since(start)}
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			return r, fmt.Errorf("phase 2 did not finish within %v (%d records not done)", o.phaseTimeout, c.lost)
		}
		_ = sleep(pctx, 100*time.Millisecond)
	}
	elapsed := time.Since(start)
	pr.tick(true)

	show := exec.CommandContext(ctx, o.bootstrap, "leases", "-table", table, "-stream", stream, "-lease-duration", "3s")
	show.Env = d.childEnv()
	showOut, err := show.CombinedOutput()
	fmt.Printf("   $ bootstrap leases -table %s -stream %s\n", table, stream)
	for _, l := range strings.Split(strings.TrimRight(string(showOut), "\n"), "\n") {
		fmt.Println(strings.TrimRight("   "+l, " "))
	}
	if err != nil {
		return nil, fmt.Errorf("bootstrap leases: %v", err)
	}
	t1 := time.Now()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, w := range workers {
		wg.Go(func() {
			if err := w.terminate(20 * time.Second); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	stopped := time.Since(t1)
	ls, err := leasesOf(store.Snapshot(ctx, stream))
	if err != nil {
		return nil, fmt.Errorf("list the leases after the workers stopped: %w", err)
	}
	held := 0
	for _, l := range ls {
		if l.Owner != "" {
			held++
		}
	}
	if held > 0 {
		return nil, fmt.Errorf("%d of %d leases still owned after both workers stopped with SIGTERM", held, len(ls))
	}
	fmt.Printf("   done in %v; both workers stopped with SIGTERM in %v: exit status 0, all %d leases released\n",
		elapsed.Round(time.Millisecond), stopped.Round(time.Millisecond), len(ls))
	return &result{name: "ECS (2 workers)", shards: o.ecsShards, c: tr.counts(), elapsed: elapsed}, nil
}

// ---------------------------------------------------------------------------
// Summary

func printSummary(w io.Writer, rs []*result) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Summary")
	row := func(name string, v func(*result) string) {
		fmt.Fprintf(w, "   %-30s", name)
		for _, r := range rs {
			fmt.Fprintf(w, "%18s", v(r))
		}
		fmt.Fprintln(w)
	}
	num := func(f func(counts) int) func(*result) string {
		return func(r *result) string { return strconv.Itoa(f(r.c)) }
	}
	row("", func(r *result) string { return r.name })
	row("records produced", num(func(c counts) int { return c.records }))
	row("handled (distinct records)", num(func(c counts) int { return c.handledIDs }))
	row("handler calls", num(func(c counts) int { return c.calls }))
	row("counted copies", num(func(c counts) int { return c.copies }))
	row("dead letters", num(func(c counts) int { return c.deadLetters }))
	row("  poison, retried to the cap", num(func(c counts) int { return c.deadPoison }))
	row("  poison, dropped", num(func(c counts) int { return c.deadDrop }))
	row("delays (back via the queue)", num(func(c counts) int { return c.delays }))
	row("replies", num(func(c counts) int { return c.replies }))
	row("duplicates", num(func(c counts) int { return c.duplicates }))
	row("lost", num(func(c counts) int { return c.lost }))
	row("time", func(r *result) string { return fmt.Sprintf("%.1fs", r.elapsed.Seconds()) })
	row("handler calls/s", func(r *result) string {
		return fmt.Sprintf("%.0f", float64(r.c.calls)/r.elapsed.Seconds())
	})
	for _, r := range rs {
		if r.c.unknown > 0 {
			fmt.Fprintf(w, "   warning: %s: %d log lines, dead letters or replies named no sample record\n", r.name, r.c.unknown)
		}
	}
}

// printSettings prints KEY=value settings, wrapped, under a title.
func printSettings(title string, settings []string) {
	line := "   " + title + ":"
	for _, s := range settings {
		if len(line)+1+len(s) > 118 {
			fmt.Println(line)
			line = "     "
		}
		line += " " + s
	}
	fmt.Println(line)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leasesOf returns a snapshot's leases.
func leasesOf(s lease.Snapshot, err error) ([]lease.Lease, error) { return s.Leases, err }
