// Package emf exports lambdaadapter's metrics as CloudWatch Embedded Metric
// Format (EMF) lines: JSON log lines from which CloudWatch Logs extracts
// metrics, with no agent and no API call. In Lambda the lines go to stdout,
// which Lambda sends to the function's log group; in ECS, the awslogs
// driver does the same.
//
// An Exporter is a hook for lambdaadapter.WithHooks (see package observe):
// it aggregates the events in memory and writes them on Flush, which the
// adapter calls once per Lambda invocation, inside the deadline margin, and
// in long-running mode every flush interval (DefaultInterval unless the
// adapter is told otherwise) and at shutdown.
//
//	e := emf.New(os.Stdout, emf.Environment(os.Getenv)...)
//	a, err := lambdaadapter.NewFunction(handler, lambdaadapter.WithHooks(e))
//
// # Documents
//
// Every Flush writes one group of documents per stream (and, with
// WithShardDimension, per shard), each document one line:
//
//	{"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"lambdaadapter",
//	  "Dimensions":[["service","Stream"]],"Metrics":[{"Name":"RecordsHandled","Unit":"Count"},…]}]},
//	 "service":"orders","Stream":"orders","OldestHandledShardId":"shardId-000000000000",…,
//	 "RecordsHandled":150,…,"HandlerDuration":[1.25,0.5,…]}
//
// The first document of a group carries every count and gauge, the first
// 100 values of every value array and the group's searchable root members;
// a value array with more than 100 values (or more than fit in a line of
// 200 KiB) continues in further documents of the same dimensions, which
// CloudWatch adds up. A document holds at most 100 metrics.
//
// In Lambda mode the first Flush also writes, once per Exporter, a separate
// ColdStart document (Count 1, dimensions function_name and service), as
// Powertools for AWS Lambda does, so that its dashboards carry over.
//
// # Dimensions
//
// Dimensions are few, so that metrics stay cheap: service (WithService;
// with Environment POWERTOOLS_SERVICE_NAME, else AWS_LAMBDA_FUNCTION_NAME;
// else "lambdaadapter") and Stream, the stream's name (taken from its ARN).
// WithShardDimension adds ShardId: the metrics of records, writes, reads
// and checkpoints are then published both per stream and per shard. An
// event whose stream is unknown (an invocation with no Kinesis records)
// is published with service only. WithServiceDimension (set by
// Environment when LAMBDAADAPTER_STREAM names several streams) publishes
// every stream's metrics under [service] too, one series over all the
// streams. The namespace is "lambdaadapter"
// (WithNamespace; with Environment POWERTOOLS_METRICS_NAMESPACE).
//
// Shard ids and sequence numbers are root members of the first document,
// not dimensions, so CloudWatch Logs Insights can find them
// (filter LastPoisonShardId = "shardId-…"):
// OldestHandledShardId and OldestHandledSequenceNumber (the oldest record
// handled in the interval, by arrival time), LastPoisonShardId and
// LastPoisonSequenceNumber, LastWriteFailureKind, LastWriteFailureShardId
// and LastWriteFailureSequenceNumber, and MillisBehindLatestShardId (the
// shard furthest behind).
//
// # Metrics
//
// Counts are written only when not zero (an alarm on them treats missing
// data as not breaching); durations and ages are value arrays in
// Milliseconds (microsecond precision), from which CloudWatch computes
// percentiles.
//
//	RecordsHandled            Count  records concluded (the handler returned, or the adapter concluded without it)
//	RecordsHandledAck         Count  … whose outcome was Ack
//	RecordsHandledDrop        Count  … Drop (poison records and records past the maximum record age included)
//	RecordsHandledRetry       Count  … Retry (handler panics and zero outcomes included)
//	RecordsHandledRetryAfter  Count  … RetryAfter
//	RecordsDropped            Count  Drop outcomes settled without a dead letter: their data is gone
//	RecordsUnsettled          Count  records left unsettled (reported in Lambda mode; delivered again in long-running mode)
//	RecordsRetired            Count  records that reached the attempt cap without a dead-letter target
//	PoisonRecords             Count  malformed KPL aggregates
//	RecordsExpired            Count  records past the maximum record age
//	Copies                    Count  counted (or delayed) copies written
//	DelayMessages             Count  durable delay messages written
//	DeadLetters               Count  dead letters written
//	Replies                   Count  replies written
//	WriteFailures             Count  copies, delay messages, dead letters and replies that could not be written
//	HandlerDuration           Milliseconds  how long each handler ran (a batch handler: its batch, once per record)
//	RecordAge                 Milliseconds  each record's age when its handler returned (WithRecordAge only)
//	InvocationDuration        Milliseconds  Lambda: each invocation, from its start to its response
//	BatchItemFailures         Count  Lambda: item identifiers reported in the partial batch response
//	InvocationsCut            Count  Lambda: invocations that reached the deadline margin with records still running
//	OldestRecordAge           Milliseconds  now minus the arrival time of the oldest record: in Lambda mode of each
//	                                 invocation at its end, in long-running mode of the records in flight at each Flush
//	RecordsRead               Count  long-running: records read by GetRecords
//	MillisBehindLatest        Milliseconds  long-running: per shard read, the highest MillisBehindLatest it reported
//	RecordsInFlight           Count  long-running: records read and not yet settled, at the last Flush
//	LeasesHeld                Count  long-running: leases held, last value in the interval
//	LeaseTakes                Count  long-running: free or expired leases taken
//	LeaseSteals               Count  long-running: leases taken from a live worker
//	LeaseHandoffs             Count  long-running: leases received from their previous owner
//	LeaseLosses               Count  long-running: leases found owned by another worker
//	CheckpointWrites          Count  long-running: checkpoints written
//	CheckpointFailures        Count  long-running: checkpoint writes that failed
//	ColdStart                 Count  Lambda: 1, in its own document, on the first Flush
//
// A value array holds at most WithMaxValues values per metric and group in
// one interval (1000 by default): beyond that, it keeps a uniform random
// sample, so percentiles stay right while SampleCount stops counting;
// count records with RecordsHandled.
//
// # Flush
//
// Flush writes straight to the writer, one Write call per line (never
// through a logger or its level filter), and resets the aggregates. An
// interval without events writes nothing: the gauges (OldestRecordAge,
// RecordsInFlight, LeasesHeld) are written in each interval that reports
// them, which long-running mode does before each Flush and Lambda mode
// once per invocation. When ctx is done, Flush still writes every
// document that carries counts or gauges (they are already encoded, and
// writing them is quick), and skips the further documents of long value
// arrays.
//
// An Exporter starts no goroutine. All its methods are safe for
// concurrent use; an event costs a mutex and a few counter updates, and
// does not allocate once the Exporter has seen its streams.
package emf

import (
	"context"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/shardsettle/lambdaadapter/observe"
)

// DefaultInterval is the flush interval long-running mode should use for an
// Exporter unless configured otherwise: CloudWatch's standard resolution.
const DefaultInterval = 60 * time.Second

// DefaultNamespace is the namespace used when neither WithNamespace nor
// POWERTOOLS_METRICS_NAMESPACE sets one.
const DefaultNamespace = "lambdaadapter"

// DefaultService is the service dimension used when neither WithService,
// POWERTOOLS_SERVICE_NAME nor AWS_LAMBDA_FUNCTION_NAME sets one.
const DefaultService = "lambdaadapter"

// DefaultMaxValues is the default of WithMaxValues.
const DefaultMaxValues = 1000

// Option configures an Exporter.
type Option func(*config)

type config struct {
	namespace string
	service   string
	function  string
	shardDim  bool
	svcDim    bool
	recordAge bool
	maxValues int
	now       func() time.Time
	limit     int
}

// Environment returns the options that the environment of a Lambda
// function (or a Powertools-configured service) implies, read with getenv
// (os.Getenv in production): WithNamespace(POWERTOOLS_METRICS_NAMESPACE),
// WithService(POWERTOOLS_SERVICE_NAME, else AWS_LAMBDA_FUNCTION_NAME) and
// WithFunctionName(AWS_LAMBDA_FUNCTION_NAME), each only when set to a valid
// value, and WithServiceDimension when LAMBDAADAPTER_STREAM names several
// streams (a,b: a service reading several streams). Options after them win:
//
//	emf.New(os.Stdout, emf.Environment(os.Getenv)...)
//
// New itself reads no environment variable.
func Environment(getenv func(string) string) []Option {
	var opts []Option
	if ns := getenv("POWERTOOLS_METRICS_NAMESPACE"); validNamespace(ns) {
		opts = append(opts, WithNamespace(ns))
	}
	fn := getenv("AWS_LAMBDA_FUNCTION_NAME")
	for _, s := range []string{getenv("POWERTOOLS_SERVICE_NAME"), fn} {
		if validDimension(s) {
			opts = append(opts, WithService(s))
			break
		}
	}
	if validDimension(fn) {
		opts = append(opts, WithFunctionName(fn))
	}
	if strings.Contains(getenv("LAMBDAADAPTER_STREAM"), ",") {
		opts = append(opts, WithServiceDimension())
	}
	return opts
}

// WithNamespace sets the CloudWatch namespace (default DefaultNamespace;
// Environment gives POWERTOOLS_METRICS_NAMESPACE). New panics if ns is empty, longer than
// 255 bytes, starts with "AWS/" or ":" or holds a control character.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithService sets the service dimension (default DefaultService;
// Environment gives POWERTOOLS_SERVICE_NAME, else AWS_LAMBDA_FUNCTION_NAME). New panics if name
// is empty, longer than 1024 bytes, or not valid UTF-8.
func WithService(name string) Option { return func(c *config) { c.service = name } }

// WithFunctionName sets the function_name dimension of the ColdStart
// document (Environment gives AWS_LAMBDA_FUNCTION_NAME). Without one, ColdStart has
// the service dimension only.
func WithFunctionName(name string) Option { return func(c *config) { c.function = name } }

// WithShardDimension publishes the metrics of records, writes, reads and
// checkpoints per shard too: their documents declare the dimension sets
// [service, Stream] and [service, Stream, ShardId]. It multiplies the
// number of metrics (and their cost) by the number of shards.
func WithShardDimension() Option { return func(c *config) { c.shardDim = true } }

// WithServiceDimension publishes every stream's metrics under [service]
// too, beside [service, Stream]: CloudWatch then adds up the counts and
// takes the highest age (MillisBehindLatest, OldestRecordAge) over every
// stream, so that one alarm or one scaling policy watches a service that
// reads several streams. It adds one metric per metric name, whatever the
// number of streams. Environment sets it when LAMBDAADAPTER_STREAM names
// several streams.
func WithServiceDimension() Option { return func(c *config) { c.svcDim = true } }

// WithRecordAge adds RecordAge, the age of each record when its handler
// returned, as a value array: one value per record.
func WithRecordAge() Option { return func(c *config) { c.recordAge = true } }

// WithMaxValues caps the values a value array keeps per interval and group
// of dimension values (default DefaultMaxValues): beyond n, a uniform
// random sample of n is kept. 0 keeps every value. New panics if n is
// negative.
func WithMaxValues(n int) Option { return func(c *config) { c.maxValues = n } }

// WithClock sets the clock of the documents' Timestamp (default time.Now).
// New panics if now is nil.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// Exporter aggregates the adapter's events and writes them as EMF lines on
// Flush. It implements observe.RecordHook, WriteHook, InvocationHook,
// ReadHook, LeaseHook, CheckpointHook, InFlightHook and Flusher. All
// methods are safe for concurrent use.
type Exporter struct {
	w   io.Writer
	cfg config

	mu          sync.Mutex
	cur         *interval
	lambda      bool              // a Lambda-mode event was seen
	shardStream map[string]string // shard id → stream name of its last record, for writes
	lastStream  string            // stream name of the last record

	flushMu   sync.Mutex // held by Flush; guards what follows
	spare     *interval
	coldStart bool // the ColdStart document was written
	enc       encoder
	order     []*entry
}

// New returns an Exporter writing to w (os.Stdout in production). It
// panics if w is nil or an option is invalid.
func New(w io.Writer, opts ...Option) *Exporter {
	if w == nil {
		panic("emf: nil writer")
	}
	c := config{
		namespace: DefaultNamespace,
		service:   DefaultService,
		maxValues: DefaultMaxValues,
		now:       time.Now,
		limit:     lineLimit,
	}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case !validNamespace(c.namespace):
		panic("emf: invalid namespace " + `"` + c.namespace + `"`)
	case !validDimension(c.service):
		panic("emf: invalid service name " + `"` + c.service + `"`)
	case c.function != "" && !validDimension(c.function):
		panic("emf: invalid function name " + `"` + c.function + `"`)
	case c.maxValues < 0:
		panic("emf: negative WithMaxValues")
	case c.now == nil:
		panic("emf: nil clock")
	}
	e := &Exporter{w: w, cfg: c, cur: newInterval(), spare: newInterval(), shardStream: map[string]string{}}
	e.enc.limit = c.limit
	return e
}

func validNamespace(s string) bool {
	return s != "" && len(s) <= 255 && !strings.HasPrefix(s, "AWS/") && s[0] != ':' && printable(s)
}

func validDimension(s string) bool {
	return s != "" && len(s) <= 1024 && s[0] != ':' && printable(s)
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// key identifies a group of documents: a stream name and, with
// WithShardDimension, a shard.
type key struct{ stream, shard string }

// series is a value array with a reservoir: n values were offered, v holds
// min(n, cap) of them.
type series struct {
	v []float64
	n int64
}

func (s *series) add(v float64, max int) {
	s.n++
	if max == 0 || len(s.v) < max {
		s.v = append(s.v, v)
		return
	}
	if j := rand.Int64N(s.n); j < int64(max) {
		s.v[j] = v
	}
}

type gauge struct {
	v   int64
	set bool
}

// entry is the aggregate of one key in one interval.
type entry struct {
	key
	used bool // an event arrived in this interval

	c      [numCounters]int64
	g      [numGauges]gauge
	s      [numSeries]series
	behind map[string]int64 // shard → highest MillisBehindLatest
	// behindVals is the buffer of the MillisBehindLatest values at Flush.
	behindVals []float64

	oldestAge              time.Duration
	oldestShard, oldestSeq string
	poisonShard, poisonSeq string
	failKind               observe.WriteKind
	failShard, failSeq     string
}

func (en *entry) reset() {
	en.used = false
	en.c = [numCounters]int64{}
	en.g = [numGauges]gauge{}
	for i := range en.s {
		en.s[i].v = en.s[i].v[:0]
		en.s[i].n = 0
	}
	clear(en.behind)
	en.oldestAge = 0
	en.oldestShard, en.oldestSeq = "", ""
	en.poisonShard, en.poisonSeq = "", ""
	en.failKind, en.failShard, en.failSeq = "", "", ""
}

// interval is the aggregates of one flush interval. The Exporter keeps two
// and swaps them on Flush, so that events go on while Flush encodes, and
// the entries (with their buffers) are reused.
type interval struct {
	entries map[key]*entry
	// last is the entry of the last event, with the raw stream reference
	// and shard it was looked up by: events come in runs.
	last               *entry
	lastRaw, lastShard string
}

func newInterval() *interval { return &interval{entries: map[key]*entry{}} }

// entry returns the entry of the stream (an ARN or a name) and shard,
// creating it when new.
func (iv *interval) entry(raw, shard string) *entry {
	if l := iv.last; l != nil && raw == iv.lastRaw && shard == iv.lastShard {
		return l
	}
	k := key{streamName(raw), shard}
	if k.stream == "" {
		k.shard = ""
	}
	en := iv.entries[k]
	if en == nil {
		en = &entry{key: k}
		iv.entries[k] = en
	}
	en.used = true
	iv.last, iv.lastRaw, iv.lastShard = en, raw, shard
	return en
}

// reset prepares iv for reuse: entries without events in the interval are
// forgotten, the others zeroed with their buffers kept.
func (iv *interval) reset() {
	for k, en := range iv.entries {
		if !en.used {
			delete(iv.entries, k)
			continue
		}
		en.reset()
	}
	iv.last, iv.lastRaw, iv.lastShard = nil, "", ""
}

// streamName is the name of a stream given by name or ARN
// (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME, or an enhanced fan-out
// consumer's …:stream/NAME/consumer/C:TS).
func streamName(s string) string {
	if !strings.HasPrefix(s, "arn:") {
		return s
	}
	i := strings.Index(s, ":stream/")
	if i < 0 {
		return s
	}
	s = s[i+len(":stream/"):]
	if j := strings.IndexByte(s, '/'); j >= 0 {
		s = s[:j]
	}
	return s
}

// ms converts d to milliseconds, rounded down to the microsecond; negative
// durations count as 0.
func ms(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(d/time.Microsecond) / 1000
}

// shard is the shard part of a key for an event of shardID.
func (e *Exporter) shard(shardID string) string {
	if e.cfg.shardDim {
		return shardID
	}
	return ""
}

// OnRecord counts a record that was concluded: see the package
// documentation for the metrics it feeds.
func (e *Exporter) OnRecord(r observe.Record) {
	e.mu.Lock()
	en := e.cur.entry(r.Stream, e.shard(r.ShardID))
	if r.Mode == observe.ModeLambda {
		e.lambda = true
	}
	if r.ShardID != "" && en.stream != "" {
		if e.shardStream[r.ShardID] != en.stream {
			e.shardStream[r.ShardID] = en.stream
		}
		e.lastStream = en.stream
	}
	c := &en.c
	c[cHandled]++
	switch r.Outcome {
	case "ack":
		c[cAck]++
	case "drop":
		c[cDrop]++
	case "retry_after":
		c[cRetryAfter]++
	default: // "retry"; an invalid outcome is retried too
		c[cRetry]++
	}
	switch r.Action {
	case observe.ActionSettled:
		if r.Outcome == "drop" {
			c[cDropped]++
		}
	case observe.ActionUnsettled:
		c[cUnsettled]++
	case observe.ActionRetired:
		c[cRetired]++
	}
	switch r.Reason {
	case "malformed aggregate":
		c[cPoison]++
		en.poisonShard, en.poisonSeq = r.ShardID, r.SequenceNumber
	case "max record age":
		c[cExpired]++
	}
	if r.Handled > 0 {
		en.s[sHandler].add(ms(r.Handled), e.cfg.maxValues)
	}
	if r.Age > 0 {
		if e.cfg.recordAge {
			en.s[sRecordAge].add(ms(r.Age), e.cfg.maxValues)
		}
		if r.Age > en.oldestAge {
			en.oldestAge, en.oldestShard, en.oldestSeq = r.Age, r.ShardID, r.SequenceNumber
		}
	}
	e.mu.Unlock()
}

// OnWrite counts a copy, delay message, dead letter or reply, written or
// failed. A Write does not name its stream: it is counted under the stream
// of the last record seen on its shard (or of the last record seen at all).
func (e *Exporter) OnWrite(w observe.Write) {
	e.mu.Lock()
	if w.Mode == observe.ModeLambda {
		e.lambda = true
	}
	stream := w.Stream
	if stream == "" {
		var ok bool
		if stream, ok = e.shardStream[w.ShardID]; !ok {
			stream = e.lastStream
		}
	}
	en := e.cur.entry(stream, e.shard(w.ShardID))
	c := &en.c
	if w.Err != nil {
		c[cWriteFailures]++
		en.failKind, en.failShard, en.failSeq = w.Kind, w.ShardID, w.SequenceNumber
	} else {
		switch w.Kind {
		case observe.WriteCopy:
			c[cCopies]++
		case observe.WriteDelay:
			c[cDelays]++
		case observe.WriteDeadLetter:
			c[cDeadLetters]++
		case observe.WriteReply:
			c[cReplies]++
		}
	}
	e.mu.Unlock()
}

// OnInvocation records a Lambda invocation: InvocationDuration,
// OldestRecordAge (when it had records), BatchItemFailures and
// InvocationsCut.
func (e *Exporter) OnInvocation(i observe.Invocation) {
	e.mu.Lock()
	e.lambda = true
	en := e.cur.entry(i.Stream, "")
	en.s[sInvocation].add(ms(i.Duration), e.cfg.maxValues)
	if i.Records > 0 {
		en.s[sOldest].add(ms(i.OldestAge), e.cfg.maxValues)
	}
	en.c[cBatchItemFailures] += int64(i.Failures)
	if i.Cut {
		en.c[cInvocationsCut]++
	}
	e.mu.Unlock()
}

// OnRead records a GetRecords answer: RecordsRead and, per shard, the
// highest MillisBehindLatest of the interval.
func (e *Exporter) OnRead(r observe.Read) {
	e.mu.Lock()
	en := e.cur.entry(r.Stream, e.shard(r.ShardID))
	en.c[cRead] += int64(r.Records)
	if en.behind == nil {
		en.behind = map[string]int64{}
	}
	if m, ok := en.behind[r.ShardID]; !ok || r.MillisBehindLatest > m {
		en.behind[r.ShardID] = r.MillisBehindLatest
	}
	e.mu.Unlock()
}

// OnLease records a change of the leases held: LeaseTakes, LeaseSteals,
// LeaseHandoffs, LeaseLosses and the LeasesHeld gauge.
func (e *Exporter) OnLease(l observe.Lease) {
	e.mu.Lock()
	en := e.cur.entry(l.Stream, "")
	switch l.Kind {
	case observe.LeaseTaken:
		en.c[cLeaseTakes]++
	case observe.LeaseStolen:
		en.c[cLeaseSteals]++
	case observe.LeaseReceived:
		en.c[cLeaseHandoffs]++
	case observe.LeaseLost:
		en.c[cLeaseLosses]++
	}
	en.g[gLeasesHeld] = gauge{v: int64(l.Held), set: true}
	e.mu.Unlock()
}

// OnCheckpoint counts a checkpoint write: CheckpointWrites or
// CheckpointFailures.
func (e *Exporter) OnCheckpoint(cp observe.Checkpoint) {
	e.mu.Lock()
	en := e.cur.entry(cp.Stream, e.shard(cp.ShardID))
	if cp.Err != nil {
		en.c[cCheckpointFailures]++
	} else {
		en.c[cCheckpointWrites]++
	}
	e.mu.Unlock()
}

// OnInFlight records a long-running worker's snapshot: OldestRecordAge and
// the RecordsInFlight and LeasesHeld gauges.
func (e *Exporter) OnInFlight(f observe.InFlight) {
	e.mu.Lock()
	en := e.cur.entry(f.Stream, "")
	en.s[sOldest].add(ms(f.OldestAge), e.cfg.maxValues)
	en.g[gInFlight] = gauge{v: int64(f.Records), set: true}
	en.g[gLeasesHeld] = gauge{v: int64(f.LeasesHeld), set: true}
	e.mu.Unlock()
}

// Flush writes the aggregates of the interval since the last Flush as EMF
// lines, one Write call per line, and resets them; an interval without
// events writes nothing. In Lambda mode the first Flush also writes the
// ColdStart document. Events that arrive during Flush count toward the
// next interval. When ctx is done, Flush still writes the documents that
// carry counts and gauges, and skips further documents of long value
// arrays; it never waits for anything but the writer. A write error ends
// the Flush (the rest of its lines are lost). Flushes are serialized.
func (e *Exporter) Flush(ctx context.Context) {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()

	e.mu.Lock()
	iv := e.cur
	e.cur = e.spare
	lambda := e.lambda
	e.mu.Unlock()

	enc := &e.enc
	enc.begin(e.cfg.namespace, e.cfg.now().UnixMilli())
	if lambda && !e.coldStart {
		e.coldStart = true
		if e.cfg.function != "" {
			enc.dimensions([]string{dimFunction, dimService})
			enc.dimension(dimFunction, e.cfg.function)
		} else {
			enc.dimensions([]string{dimService})
		}
		enc.dimension(dimService, e.cfg.service)
		enc.addScalar(metricColdStart, unitCount, 1)
		enc.flush()
	}

	e.order = e.order[:0]
	for _, en := range iv.entries {
		if en.used {
			e.order = append(e.order, en)
		}
	}
	slices.SortFunc(e.order, func(a, b *entry) int {
		if c := strings.Compare(a.stream, b.stream); c != 0 {
			return c
		}
		return strings.Compare(a.shard, b.shard)
	})
	for _, en := range e.order {
		e.encode(en)
	}
	clear(e.order)

	e.write(ctx)
	iv.reset()
	e.spare = iv
}

var (
	dimsService     = []string{dimService}
	dimsStream      = []string{dimService, dimStream}
	dimsStreamShard = []string{dimService, dimStream, dimShard}
)

// encode adds the documents of en to the encoder.
func (e *Exporter) encode(en *entry) {
	enc := &e.enc
	switch {
	case en.stream == "":
		enc.dimensions(dimsService)
	case en.shard == "" && e.cfg.svcDim:
		enc.dimensions(dimsStream, dimsService)
	case en.shard == "":
		enc.dimensions(dimsStream)
	case e.cfg.svcDim:
		enc.dimensions(dimsStream, dimsStreamShard, dimsService)
	default:
		enc.dimensions(dimsStream, dimsStreamShard)
	}
	enc.dimension(dimService, e.cfg.service)
	if en.stream != "" {
		enc.dimension(dimStream, en.stream)
		if en.shard != "" {
			enc.dimension(dimShard, en.shard)
		}
	}
	enc.member(memberOldestShard, en.oldestShard)
	enc.member(memberOldestSequence, en.oldestSeq)
	enc.member(memberPoisonShard, en.poisonShard)
	enc.member(memberPoisonSequence, en.poisonSeq)
	enc.member(memberFailureKind, string(en.failKind))
	enc.member(memberFailureShard, en.failShard)
	enc.member(memberFailureSequence, en.failSeq)

	for i, n := range en.c {
		if n != 0 {
			enc.addScalar(counterNames[i], unitCount, n)
		}
	}
	for i, g := range en.g {
		if g.set {
			enc.addScalar(gaugeNames[i], unitCount, g.v)
		}
	}
	for i := range en.s {
		enc.addValues(seriesNames[i], unitMilliseconds, en.s[i].v)
	}
	if len(en.behind) > 0 {
		vals := en.behindVals[:0]
		var far string
		var farMs int64
		for shard, v := range en.behind {
			vals = append(vals, float64(v))
			if far == "" || v > farMs || v == farMs && shard < far {
				far, farMs = shard, v
			}
		}
		en.behindVals = vals
		if farMs > 0 {
			enc.member(memberBehindShard, far)
		}
		enc.addValues(metricMillisBehindLatest, unitMilliseconds, vals)
	}
	enc.flush()
}

// write writes the encoded lines: those with counts and gauges first, then,
// while ctx is not done, the others.
func (e *Exporter) write(ctx context.Context) {
	enc := &e.enc
	for pass := 0; pass < 2; pass++ {
		for _, l := range enc.lines {
			if l.priority != (pass == 0) {
				continue
			}
			if pass == 1 && ctx.Err() != nil {
				return
			}
			if _, err := e.w.Write(enc.out[l.start:l.end]); err != nil {
				return
			}
		}
	}
}
