package publish

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/awserr"
)

// Kinesis limits the publisher enforces.
const (
	// MaxRecordSize is the default largest record, data (envelope included)
	// plus partition key in bytes: 1 MiB, the limit of a stream whose
	// maximum record size was never raised.
	MaxRecordSize = 1 << 20
	// MaxRecordSizeLimit is the largest value WithMaxRecordSize accepts:
	// 10 MiB, the largest maximum record size a stream can be given.
	MaxRecordSizeLimit = 10 << 20
	// MaxPartitionKeyLen is the longest partition key, in Unicode
	// characters (code points).
	MaxPartitionKeyLen = 256
	// MaxBatchRecords is the most entries PutBatch puts in one PutRecords
	// request.
	MaxBatchRecords = 500
	// MaxBatchBytes is the most bytes (data plus partition keys) PutBatch
	// puts in one PutRecords request. A single record larger than this
	// (possible only with WithMaxRecordSize) travels in a request of its
	// own.
	MaxBatchBytes = 5 << 20
)

// Log attribute keys of the publisher's and the queue's logs. They are
// stable: dashboards and alarms may rely on them.
const (
	AttrStream   = "stream"
	AttrQueueURL = "queue_url"
	AttrAttempt  = "attempt"
	AttrDelay    = "delay"
	AttrEntries  = "entries"
	AttrError    = "error"
)

// KinesisAPI is the part of *kinesis.Client the publisher uses. Production
// code passes a *kinesis.Client; tests pass a fake.
//
// The publisher reuses the memory of an input (Data, Records, the entries'
// slices) once the call has returned: an implementation must copy what it
// keeps. Implementations must be safe for concurrent use when the Publisher
// is used concurrently.
type KinesisAPI interface {
	PutRecord(ctx context.Context, in *kinesis.PutRecordInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error)
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

// Record is one record to write to a Kinesis stream.
type Record struct {
	// Stream is the stream's name or ARN. A value starting with "arn:" is
	// sent as the request's StreamARN, anything else as its StreamName.
	Stream string
	// PartitionKey is the record's partition key. When empty, the key is
	// taken from Headers, then from the publisher's policy key, and is
	// otherwise generated; see Publisher.PartitionKey.
	PartitionKey string
	// ExplicitHashKey, when not empty, overrides the partition key's hash
	// to choose the shard.
	ExplicitHashKey string
	// Headers are the user headers. The RSK1 envelope is written only when
	// there is a header other than envelope.PartitionKeyHeader; otherwise
	// the record's data is Payload unchanged.
	Headers envelope.Headers
	// Payload is the record's data after the envelope.
	Payload []byte
}

// Result is the outcome of writing one record. Err is nil exactly when
// Kinesis acknowledged the record; ShardID and SequenceNumber are then what
// it returned.
type Result struct {
	ShardID        string
	SequenceNumber string
	Err            error
	// Unanswered is true when an attempt to write the record got no answer
	// (a connection reset or cut, a timeout, an answer that could not be
	// read), whether the publisher or the SDK's retryer made the next one:
	// Kinesis may then hold the record once more than Err says — twice
	// when Err is nil, once when it is not. An AWS error answer
	// (throttling, a 5xx, a failed entry) is taken as not written and
	// does not set it; neither does a connection that was never made.
	Unanswered bool
}

// config is what the Options of a Publisher set.
type config struct {
	policyKey string
	backoff   backoff
	logger    *slog.Logger
	maxRecord int
}

// Option configures a Publisher.
type Option func(*config)

// WithPartitionKey sets the policy key: the partition key of a record that
// has none of its own, neither in Record.PartitionKey nor in its
// partition-key header. The empty string (the default) means no policy key:
// such records get a generated key. NewPublisher refuses a key over
// MaxPartitionKeyLen characters.
func WithPartitionKey(key string) Option {
	return func(c *config) { c.policyKey = key }
}

// WithBackoff sets the backoff between attempts: before retry n (counted from
// 0) the publisher waits a random duration between 0 and min(max, base·2ⁿ)
// ("full jitter"). The defaults are DefaultBackoffBase and DefaultBackoffMax.
// NewPublisher refuses a base that is not positive or a max below base.
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) { c.backoff.base, c.backoff.max = base, max }
}

// WithLogger sets the logger that receives the publisher's logs: one debug
// line per retry. The default discards them; nil means the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithMaxRecordSize sets the largest record the publisher sends, data
// (envelope included) plus partition key in bytes. The default is
// MaxRecordSize (1 MiB), the limit of every stream unless raised with
// UpdateMaxRecordSize; set it to the stream's limit when it was raised.
// NewPublisher refuses a size below 1 or above MaxRecordSizeLimit.
func WithMaxRecordSize(n int) Option {
	return func(c *config) { c.maxRecord = n }
}

// Publisher writes records to Kinesis streams: one at a time with Put and
// PutBuffer, many at once with PutBatch. It encodes the RSK1 envelope,
// resolves partition keys, refuses what Kinesis would refuse, and retries
// throttling and transient failures with backoff until the context ends.
//
// A Publisher is safe for concurrent use. It keeps no goroutine of its own
// and needs no closing.
type Publisher struct {
	k   KinesisAPI
	cfg config
}

// NewPublisher returns a Publisher writing through k. It panics when k is nil
// (a programmer error) and returns an error for invalid options.
func NewPublisher(k KinesisAPI, opts ...Option) (*Publisher, error) {
	if k == nil {
		panic("publish: NewPublisher with a nil KinesisAPI")
	}
	cfg := config{backoff: newBackoff(), maxRecord: MaxRecordSize}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.backoff.validate(); err != nil {
		return nil, err
	}
	if n := utf8.RuneCountInString(cfg.policyKey); n > MaxPartitionKeyLen {
		return nil, fmt.Errorf("publish: policy partition key has %d characters, more than %d", n, MaxPartitionKeyLen)
	}
	if cfg.maxRecord < 1 || cfg.maxRecord > MaxRecordSizeLimit {
		return nil, fmt.Errorf("publish: max record size %d is outside [1, %d]", cfg.maxRecord, MaxRecordSizeLimit)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	return &Publisher{k: k, cfg: cfg}, nil
}

// PartitionKey returns the partition key r is written with, the first that
// is not empty of: r.PartitionKey; r's partition-key header; the policy key
// (WithPartitionKey); a generated key. A generated key is unique within the
// process (a random 16-hex-digit prefix drawn once per process, a dash, and
// a counter in hex), so that records without a key spread over the shards;
// each call generates a new one. Put and PutBatch resolve the key once per
// record and keep it across retries.
func (p *Publisher) PartitionKey(r *Record) string {
	if r.PartitionKey != "" {
		return r.PartitionKey
	}
	if k := r.Headers.Get(envelope.PartitionKeyHeader); k != "" {
		return k
	}
	if p.cfg.policyKey != "" {
		return p.cfg.policyKey
	}
	return generatedKey()
}

var (
	keyPrefix = sync.OnceValue(func() string {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
		return hex.EncodeToString(b[:])
	})
	keyCounter atomic.Uint64
)

func generatedKey() string {
	var buf [16 + 1 + 16]byte
	b := append(buf[:0], keyPrefix()...)
	b = append(b, '-')
	b = strconv.AppendUint(b, keyCounter.Add(1), 16)
	return string(b)
}

// bufPool holds encoding buffers (*[]byte) for Put and PutBatch.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooled is the largest buffer capacity returned to bufPool.
const maxPooled = MaxBatchBytes

func putBuf(bp *[]byte) {
	if cap(*bp) <= maxPooled {
		*bp = (*bp)[:0]
		bufPool.Put(bp)
	}
}

// Check reports the error Put would refuse r with before any call (a
// missing stream, a partition key or record too large: ErrInvalidRecord,
// ErrTooLarge), or nil.
func (p *Publisher) Check(r *Record) error {
	_, _, err := p.check(r)
	return err
}

// check resolves r's key and validates r. It returns the key and the size of
// r's data (envelope included), or the error r fails with.
func (p *Publisher) check(r *Record) (key string, dataLen int, err error) {
	op := streamOp(r.Stream)
	if r.Stream == "" {
		return "", 0, op.fail(awserr.Invalid, "stream is empty", nil, ErrInvalidRecord)
	}
	key = p.PartitionKey(r)
	if n := utf8.RuneCountInString(key); n > MaxPartitionKeyLen {
		return "", 0, op.fail(awserr.TooLarge, fmt.Sprintf("partition key has %d characters, more than %d", n, MaxPartitionKeyLen), nil, ErrTooLarge)
	}
	dataLen = envelope.EncodedLen(r.Headers, r.Payload)
	if size := dataLen + len(key); size > p.cfg.maxRecord {
		return "", 0, op.fail(awserr.TooLarge,
			fmt.Sprintf("record too large: %d bytes of data and partition key, more than %d", size, p.cfg.maxRecord), nil, ErrTooLarge)
	}
	return key, dataLen, nil
}

// encode returns r's data: its payload itself when it carries no envelope,
// otherwise the envelope appended to dst. It returns the extended dst.
func encode(dst []byte, r *Record, dataLen int) (data, grown []byte, err error) {
	if dataLen == len(r.Payload) {
		// EncodedLen adds at least 3 bytes per header that is written, so
		// equal lengths mean no envelope.
		return r.Payload, dst, nil
	}
	start := len(dst)
	grown, err = envelope.Append(dst, r.Headers, r.Payload)
	if err != nil {
		return nil, dst, streamOp(r.Stream).fail(awserr.Invalid, "", err, ErrInvalidRecord)
	}
	return grown[start:len(grown):len(grown)], grown, nil
}

// streamField returns the StreamName and StreamARN fields for *stream.
func streamField(stream *string) (name, arn *string) {
	if strings.HasPrefix(*stream, "arn:") {
		return nil, stream
	}
	return stream, nil
}

// putRecordsRequest is a PutRecords input with the stream it points to.
type putRecordsRequest struct {
	in     kinesis.PutRecordsInput
	stream string
}

// putRequest is a PutRecord input with the strings it points to.
type putRequest struct {
	in                   kinesis.PutRecordInput
	key, stream, hashKey string
}

// Put writes r with PutRecord, one call per attempt, and returns where it was
// written. The envelope is encoded into a pooled buffer. Put refuses, without
// a call, a record whose partition key has more than MaxPartitionKeyLen
// characters or whose data and key exceed the record size (ErrTooLarge), and
// one without a stream or with a header the envelope refuses
// (ErrInvalidRecord).
// It retries throttling (ErrThrottled once out of time), 5xx responses and
// transport failures with backoff; it does not retry a missing stream
// (ErrStreamNotFound) or any other error.
//
// Put returns when the record is written, when it fails for good, when ctx
// ends, or as soon as the next backoff would outlast ctx's deadline. It then
// returns the error, also set in Result.Err, which matches ctx's error (or
// context.DeadlineExceeded) as well as the last failure. A nil error means
// Kinesis acknowledged the record; a non-nil one does not prove that it was
// not written (a call cut short may still have reached the stream), so a
// retry of the caller may write a duplicate. Put is safe for concurrent use.
func (p *Publisher) Put(ctx context.Context, r Record) (Result, error) {
	bp := bufPool.Get().(*[]byte)
	res, err := p.put(ctx, &r, bp)
	putBuf(bp)
	return res, err
}

// PutBuffer is Put encoding the envelope into *buf, from its start, instead
// of a pooled buffer: *buf is grown as needed and kept, so a caller that
// owns one buffer per goroutine (a lane) reuses it across records. A nil buf
// makes PutBuffer the same as Put. PutBuffer is safe for concurrent use with
// distinct buffers.
func (p *Publisher) PutBuffer(ctx context.Context, r Record, buf *[]byte) (Result, error) {
	if buf == nil {
		return p.Put(ctx, r)
	}
	return p.put(ctx, &r, buf)
}

func (p *Publisher) put(ctx context.Context, r *Record, buf *[]byte) (Result, error) {
	var unanswered bool // an attempt got no answer (noAnswer)
	fail := func(err error) (Result, error) { return Result{Err: err, Unanswered: unanswered}, err }
	key, dataLen, err := p.check(r)
	if err != nil {
		return fail(err)
	}
	data, grown, err := encode((*buf)[:0], r, dataLen)
	*buf = grown[:0]
	if err != nil {
		return fail(err)
	}
	op := streamOp(r.Stream)
	// One allocation holds the input and the strings it points to.
	req := &putRequest{key: key, stream: r.Stream, hashKey: r.ExplicitHashKey}
	in := &req.in
	in.Data, in.PartitionKey = data, &req.key
	in.StreamName, in.StreamARN = streamField(&req.stream)
	if req.hashKey != "" {
		in.ExplicitHashKey = &req.hashKey
	}
	var (
		last     error
		lastKind awserr.Kind
	)
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fail(gaveUp(op, last, lastKind, err))
		}
		n := getNote()
		out, err := p.k.PutRecord(ctx, in, n.kinesis[:]...)
		unanswered = n.done(err) || unanswered
		if err == nil {
			if out != nil && out.SequenceNumber != nil && *out.SequenceNumber != "" {
				return Result{ShardID: deref(out.ShardId), SequenceNumber: *out.SequenceNumber, Unanswered: unanswered}, nil
			}
			err = badResponse("response without a sequence number")
			unanswered = true
		}
		k, c := classifyCall(ctx, err)
		switch c {
		case classNotFound:
			return fail(op.fail(k, "", err, nil))
		case classPermanent:
			return fail(op.refused(k, err))
		case classCanceled:
			if last == nil {
				// The call itself was cut short: report its error.
				last, lastKind = err, awserr.Canceled
			}
			return fail(gaveUp(op, last, lastKind, ctx.Err()))
		}
		last, lastKind = err, k
		d, werr := p.cfg.backoff.wait(ctx, attempt)
		if werr != nil {
			return fail(gaveUp(op, last, lastKind, werr))
		}
		p.logRetry(ctx, r.Stream, attempt+1, d, 1, err)
	}
}

func (p *Publisher) logRetry(ctx context.Context, stream string, attempt int, d time.Duration, entries int, err error) {
	if !p.cfg.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	p.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "publish: retrying put",
		slog.String(AttrStream, stream), slog.Int(AttrAttempt, attempt),
		slog.Duration(AttrDelay, d), slog.Int(AttrEntries, entries), slog.String(AttrError, err.Error()))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// item is one record of a PutBatch on its way.
type item struct {
	idx     int // index in the caller's slice
	key     string
	size    int // data plus key
	dataLen int
	data    []byte
	attempts
}

// errUnsettled marks a result not yet settled. It never escapes PutBatch
// unless PutBatch has a bug, in which case the entry reads as failed rather
// than written.
var errUnsettled = errors.New("publish: entry not settled")

// PutBatch writes rs with PutRecords and returns one Result per record:
// Result i belongs to rs[i], and its Err is nil exactly when Kinesis
// acknowledged rs[i]. Records are grouped by stream, in order of first
// appearance, and each stream's records are sent in requests of at most
// MaxBatchRecords entries and MaxBatchBytes of data and partition keys, one
// request at a time. Records refused by Put's checks fail alone, without a
// call.
//
// Entries that fail (a per-entry ErrorCode) are retried with backoff, only
// those; so are all the entries of a call that failed as a whole with
// throttling (ProvisionedThroughputExceededException, LimitExceededException,
// KMSThrottlingException), a 5xx response or a transport failure. A missing
// stream (ErrStreamNotFound) fails every record of that stream; any other
// error fails the entries of that request. Everything is bounded by ctx:
// once it ends, or once the next backoff would outlast its deadline, every
// entry not yet written fails (ErrThrottled when its last failure was
// throttling), and later requests still go out if ctx has time left. An
// entry is never reported written when it was not; one reported failed may
// have been written by a call cut short, so retrying it may duplicate it.
// Result.Unanswered says which entries a call without an answer carried, so
// that a caller can tell where duplicates may be.
//
// PutBatch encodes into pooled buffers and is safe for concurrent use.
func (p *Publisher) PutBatch(ctx context.Context, rs []Record) []Result {
	results := make([]Result, len(rs))
	s := scratchPool.Get().(*scratch)
	defer s.release()
	items, streams := s.items[:0], s.streams[:0] // streams: distinct, in order of first appearance
	for i := range rs {
		results[i].Err = errUnsettled
		key, dataLen, err := p.check(&rs[i])
		if err != nil {
			results[i].Err = err
			continue
		}
		items = append(items, item{idx: i, key: key, size: dataLen + len(key), dataLen: dataLen})
		if len(streams) == 0 || (streams[len(streams)-1] != rs[i].Stream && !slices.Contains(streams, rs[i].Stream)) {
			streams = append(streams, rs[i].Stream)
		}
	}
	s.items, s.streams = items, streams
	if len(items) == 0 {
		return results
	}
	b := batch{p: p, rs: rs, results: results, items: items, s: s}
	chunk := s.chunk[:0]
	for _, stream := range streams {
		b.stream, b.op, b.notFound = stream, streamOp(stream), nil
		chunk, bytes := chunk[:0], 0
		for j := range items {
			it := &items[j]
			if rs[it.idx].Stream != stream {
				continue
			}
			if len(chunk) > 0 && (len(chunk) == MaxBatchRecords || bytes+it.size > MaxBatchBytes) {
				b.send(ctx, chunk)
				chunk, bytes = chunk[:0], 0
			}
			chunk = append(chunk, j)
			bytes += it.size
		}
		b.send(ctx, chunk)
		s.chunk = chunk
	}
	return results
}

// scratch is the memory a PutBatch call reuses from earlier calls.
type scratch struct {
	items    []item
	streams  []string
	chunk    []int
	entries  []ktypes.PutRecordsRequestEntry
	outcomes []entryOutcome
	arena    []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledItems is the largest items capacity kept in scratchPool.
const maxPooledItems = 1 << 14

// release clears what points into the caller's records and returns s to the
// pool.
func (s *scratch) release() {
	clear(s.items)
	clear(s.streams)
	clear(s.entries[:cap(s.entries)]) // a retry may have shortened it
	clear(s.outcomes[:cap(s.outcomes)])
	s.items, s.streams, s.chunk, s.entries, s.outcomes, s.arena = s.items[:0], s.streams[:0], s.chunk[:0], s.entries[:0], s.outcomes[:0], s.arena[:0]
	if cap(s.items) > maxPooledItems {
		s.items, s.chunk = nil, nil
	}
	if cap(s.arena) > maxPooled {
		s.arena = nil
	}
	scratchPool.Put(s)
}

// batch is the state of one PutBatch call.
type batch struct {
	p       *Publisher
	rs      []Record
	results []Result
	items   []item
	s       *scratch

	stream   string
	op       target
	notFound error // the stream is missing: fail its later chunks without a call

	req putRecordsRequest              // the request of the chunk being sent
	out []ktypes.PutRecordsResultEntry // the last request's response entries
}

// send writes the items of one chunk (indices into b.items), retrying until
// each is settled.
func (b *batch) send(ctx context.Context, chunk []int) {
	if len(chunk) == 0 {
		return
	}
	if b.notFound != nil {
		for _, j := range chunk {
			b.results[b.items[j].idx].Err = b.notFound
		}
		return
	}
	// Encode the chunk's envelopes into the arena, sized once.
	need := 0
	for _, j := range chunk {
		it := &b.items[j]
		if it.dataLen != len(b.rs[it.idx].Payload) {
			need += it.dataLen
		}
	}
	arena := b.s.arena[:0]
	if cap(arena) < need {
		arena = make([]byte, 0, need)
	}
	pending := chunk[:0]
	for _, j := range chunk {
		it := &b.items[j]
		var err error
		it.data, arena, err = encode(arena, &b.rs[it.idx], it.dataLen)
		if err != nil {
			b.results[it.idx].Err = err
			continue
		}
		pending = append(pending, j)
	}
	b.s.arena = arena[:0]

	b.req = putRecordsRequest{stream: b.stream}
	b.req.in.StreamName, b.req.in.StreamARN = streamField(&b.req.stream)
	sendBatch(ctx, b, b.op, &b.p.cfg.backoff, pending)
}

// request sends the pending items in one PutRecords call (batchRequests).
func (b *batch) request(ctx context.Context, pending []int, n *note) ([]entryOutcome, error) {
	entries := b.s.entries[:0]
	for _, j := range pending {
		it := &b.items[j]
		e := ktypes.PutRecordsRequestEntry{Data: it.data, PartitionKey: &it.key}
		if h := &b.rs[it.idx].ExplicitHashKey; *h != "" {
			e.ExplicitHashKey = h
		}
		entries = append(entries, e)
	}
	b.s.entries, b.req.in.Records = entries, entries
	out, err := b.p.k.PutRecords(ctx, &b.req.in, n.kinesis[:]...)
	b.out = nil
	if err != nil {
		return nil, err
	}
	if out == nil || len(out.Records) != len(pending) {
		n := 0
		if out != nil {
			n = len(out.Records)
		}
		return nil, badResponse(fmt.Sprintf("response with %d entries for %d records", n, len(pending)))
	}
	b.out = out.Records
	outs := b.s.outcomes[:0]
	for _, e := range out.Records {
		if deref(e.ErrorCode) == "" && deref(e.SequenceNumber) != "" {
			outs = append(outs, entryOutcome{})
			continue
		}
		ee := &EntryError{Code: deref(e.ErrorCode), Message: deref(e.ErrorMessage)}
		if ee.Code == "" {
			ee.Message = "entry without error code or sequence number"
		}
		k, c := classifyEntry(ee.Code, false)
		outs = append(outs, entryOutcome{err: ee, k: k, c: c})
	}
	b.s.outcomes = outs
	return outs, nil
}

func (b *batch) written(j, k int) {
	it := &b.items[j]
	e := &b.out[k]
	b.results[it.idx] = Result{ShardID: deref(e.ShardId), SequenceNumber: *e.SequenceNumber, Unanswered: it.unanswered}
}

func (b *batch) attempts(j int) *attempts { return &b.items[j].attempts }

func (b *batch) fail(j int, err error) {
	it := &b.items[j]
	b.results[it.idx] = Result{Err: err, Unanswered: it.unanswered}
}

func (b *batch) missing(cause error, call bool) error {
	err := b.op.fail(awserr.NotFound, "", cause, nil)
	if call {
		b.notFound = err
	}
	return err
}

func (b *batch) logRetry(ctx context.Context, attempt int, d time.Duration, n int, err error) {
	b.p.logRetry(ctx, b.stream, attempt, d, n, err)
}
