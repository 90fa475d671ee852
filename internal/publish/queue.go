package publish

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
)

// SQS limits the queue enforces.
const (
	// MaxMessageSize is the default and largest message size, body plus
	// attributes in bytes: 1 MiB (1,048,576), the SQS limit since 2025. A
	// queue configured with a lower MaximumMessageSize needs
	// WithMaxMessageSize.
	MaxMessageSize = 1 << 20
	// MaxMessageAttributes is the most attributes a message may carry.
	MaxMessageAttributes = 10
	// MaxBatchMessages is the most entries SendBatch puts in one
	// SendMessageBatch request.
	MaxBatchMessages = 10
	// MaxDelay is the longest delay SQS applies to a message, 15 minutes.
	// Longer delays are capped: a caller that needs more chains messages,
	// sending the next delayed message when one comes due.
	MaxDelay = 900 * time.Second
)

// SQSAPI is the part of *sqs.Client the queue uses. Production code passes a
// *sqs.Client; tests pass a fake. An implementation must copy what it keeps
// of an input, and be safe for concurrent use when the Queue is used
// concurrently.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// QueueMessage is one message to send to an SQS queue.
type QueueMessage struct {
	// Body is the message body: at least one character, only characters
	// SQS accepts (XML 1.0 characters), at most the size limit together
	// with the attributes.
	Body string
	// Delay postpones the message's delivery. It is sent as DelaySeconds:
	// rounded up to a whole second and capped at MaxDelay (900 s); a
	// negative Delay is 0. A FIFO queue refuses a per-message delay, so
	// leave Delay zero for one.
	Delay time.Duration
	// Attributes are optional String message attributes, at most
	// MaxMessageAttributes, with non-empty names and values. Their names,
	// the type name "String" and their values count towards the size.
	Attributes map[string]string
}

// QueueResult is the outcome of sending one message. Err is nil exactly when
// SQS acknowledged the message; MessageID is then its ID.
type QueueResult struct {
	MessageID string
	Err       error
	// Unanswered is true when an attempt to send the message got no answer
	// (see Result.Unanswered): the queue may then hold it once more than
	// Err says.
	Unanswered bool
}

// queueConfig is what the QueueOptions of a Queue set.
type queueConfig struct {
	maxSize int
	backoff backoff
	logger  *slog.Logger
}

// QueueOption configures a Queue.
type QueueOption func(*queueConfig)

// WithMaxMessageSize sets the largest message the queue sends, body plus
// attributes in bytes. The default is MaxMessageSize (1 MiB); set it to the
// queue's MaximumMessageSize when that is lower. It also bounds the total of
// one SendMessageBatch request. NewQueue refuses a size below 1 or above
// MaxMessageSize.
func WithMaxMessageSize(n int) QueueOption {
	return func(c *queueConfig) { c.maxSize = n }
}

// WithQueueBackoff sets the backoff between attempts, as WithBackoff does
// for a Publisher.
func WithQueueBackoff(base, max time.Duration) QueueOption {
	return func(c *queueConfig) { c.backoff.base, c.backoff.max = base, max }
}

// WithQueueLogger sets the logger that receives the queue's logs: one debug
// line per retry. The default discards them; nil means the default.
func WithQueueLogger(l *slog.Logger) QueueOption {
	return func(c *queueConfig) { c.logger = l }
}

// Queue sends messages to SQS queues: one with Send, many with SendBatch. It
// refuses what SQS would refuse for its size or shape, and retries
// throttling and transient failures with backoff until the context ends.
//
// A Queue is safe for concurrent use. It keeps no goroutine of its own and
// needs no closing.
type Queue struct {
	c   SQSAPI
	cfg queueConfig
}

// NewQueue returns a Queue sending through c. It panics when c is nil (a
// programmer error) and returns an error for invalid options.
func NewQueue(c SQSAPI, opts ...QueueOption) (*Queue, error) {
	if c == nil {
		panic("publish: NewQueue with a nil SQSAPI")
	}
	cfg := queueConfig{maxSize: MaxMessageSize, backoff: newBackoff()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxSize < 1 || cfg.maxSize > MaxMessageSize {
		return nil, fmt.Errorf("publish: max message size %d is outside [1, %d]", cfg.maxSize, MaxMessageSize)
	}
	if err := cfg.backoff.validate(); err != nil {
		return nil, err
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	return &Queue{c: c, cfg: cfg}, nil
}

// DelaySeconds returns the DelaySeconds a delay is sent as: d rounded up to
// a whole second, 0 for a negative d, and at most 900.
func DelaySeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	if d >= MaxDelay {
		return int32(MaxDelay / time.Second)
	}
	return int32((d + time.Second - 1) / time.Second)
}

// MessageSize returns the size SQS counts for m: the body's bytes plus, per
// attribute, its name, the type name "String" and its value.
func MessageSize(m *QueueMessage) int {
	n := len(m.Body)
	for k, v := range m.Attributes {
		n += len(k) + len("String") + len(v)
	}
	return n
}

// Check reports the error Send would refuse m with before any call (an
// empty URL or body, bad attributes: ErrInvalidMessage; too large:
// ErrMessageTooLarge), or nil.
func (q *Queue) Check(url string, m *QueueMessage) error {
	return q.check(queueOp(url), url, m)
}

// check returns the error m fails with before any call, or nil.
func (q *Queue) check(op target, url string, m *QueueMessage) error {
	invalid := func(what string) error { return op.fail(awserr.Invalid, what, nil, ErrInvalidMessage) }
	switch {
	case url == "":
		return invalid("queue URL is empty")
	case m.Body == "":
		return invalid("body is empty")
	case len(m.Attributes) > MaxMessageAttributes:
		return invalid(fmt.Sprintf("%d attributes, more than %d", len(m.Attributes), MaxMessageAttributes))
	}
	for k, v := range m.Attributes {
		if k == "" {
			return invalid("attribute name is empty")
		}
		if v == "" {
			return invalid("attribute " + strconv.Quote(k) + " is empty")
		}
	}
	if n := MessageSize(m); n > q.cfg.maxSize {
		return op.fail(awserr.TooLarge,
			fmt.Sprintf("message too large: %d bytes of body and attributes, more than %d", n, q.cfg.maxSize), nil, ErrMessageTooLarge)
	}
	return nil
}

func attributes(m *QueueMessage) map[string]sqstypes.MessageAttributeValue {
	if len(m.Attributes) == 0 {
		return nil
	}
	attrs := make(map[string]sqstypes.MessageAttributeValue, len(m.Attributes))
	for k, v := range m.Attributes {
		attrs[k] = sqstypes.MessageAttributeValue{DataType: &stringType, StringValue: &v}
	}
	return attrs
}

var stringType = "String"

// Send sends m to the queue at url with SendMessage, one call per attempt,
// and returns its message ID. It refuses, without a call, a message over the
// size limit (ErrMessageTooLarge) or of a shape SQS refuses
// (ErrInvalidMessage). It retries throttling (ErrThrottled once out of
// time), 5xx responses and transport failures with backoff; it does not
// retry a missing queue (ErrQueueNotFound) or any other error.
//
// Send returns when the message is sent, when it fails for good, when ctx
// ends, or as soon as the next backoff would outlast ctx's deadline. A nil
// error means SQS acknowledged the message; a non-nil one does not prove it
// was not sent (a call cut short may have reached the queue). Send is safe
// for concurrent use.
func (q *Queue) Send(ctx context.Context, url string, m QueueMessage) (messageID string, err error) {
	op := queueOp(url)
	if err := q.check(op, url, &m); err != nil {
		return "", err
	}
	in := &sqs.SendMessageInput{
		QueueUrl:          &url,
		MessageBody:       &m.Body,
		DelaySeconds:      DelaySeconds(m.Delay),
		MessageAttributes: attributes(&m),
	}
	var (
		last     error
		lastKind awserr.Kind
	)
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return "", gaveUp(op, last, lastKind, err)
		}
		out, err := q.c.SendMessage(ctx, in)
		if err == nil {
			if out != nil && deref(out.MessageId) != "" {
				return *out.MessageId, nil
			}
			err = badResponse("response without a message ID")
		}
		k, c := classifyCall(ctx, err)
		switch c {
		case classNotFound:
			return "", op.fail(k, "", err, nil)
		case classPermanent:
			return "", op.refused(k, err)
		case classCanceled:
			if last == nil {
				last, lastKind = err, awserr.Canceled
			}
			return "", gaveUp(op, last, lastKind, ctx.Err())
		}
		last, lastKind = err, k
		d, werr := q.cfg.backoff.wait(ctx, attempt)
		if werr != nil {
			return "", gaveUp(op, last, lastKind, werr)
		}
		q.logRetry(ctx, url, attempt+1, d, 1, err)
	}
}

func (q *Queue) logRetry(ctx context.Context, url string, attempt int, d time.Duration, entries int, err error) {
	if !q.cfg.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	q.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "publish: retrying send",
		slog.String(AttrQueueURL, url), slog.Int(AttrAttempt, attempt),
		slog.Duration(AttrDelay, d), slog.Int(AttrEntries, entries), slog.String(AttrError, err.Error()))
}

// qitem is one message of a SendBatch on its way.
type qitem struct {
	idx  int
	id   string
	size int
	attempts
}

// SendBatch sends ms to the queue at url with SendMessageBatch and returns
// one QueueResult per message: result i belongs to ms[i], and its Err is nil
// exactly when SQS acknowledged ms[i]. Messages go in requests of at most
// MaxBatchMessages entries whose sizes add up to at most the size limit, one
// request at a time; an entry's ID is its index in ms. Messages refused by
// Send's checks fail alone, without a call.
//
// Failed entries are retried with backoff, only those, unless SQS blames the
// sender (SenderFault) for them; so are all the entries of a call that
// failed with throttling, a 5xx response or a transport failure. An entry
// the response does not mention is retried too, never taken as sent. A
// missing queue fails every message; any other error fails the entries of
// that request. Everything is bounded by ctx as for PutBatch. SendBatch is
// safe for concurrent use.
func (q *Queue) SendBatch(ctx context.Context, url string, ms []QueueMessage) []QueueResult {
	results := make([]QueueResult, len(ms))
	op := queueOp(url)
	items := make([]qitem, 0, len(ms))
	for i := range ms {
		if err := q.check(op, url, &ms[i]); err != nil {
			results[i].Err = err
			continue
		}
		results[i].Err = errUnsettled
		items = append(items, qitem{idx: i, id: strconv.Itoa(i), size: MessageSize(&ms[i])})
	}
	b := qbatch{q: q, ms: ms, url: url, op: op, results: results, items: items,
		entries: make([]sqstypes.SendMessageBatchRequestEntry, 0, min(len(items), MaxBatchMessages))}
	chunk := make([]int, 0, MaxBatchMessages)
	bytes := 0
	for j := range items {
		if len(chunk) > 0 && (len(chunk) == MaxBatchMessages || bytes+items[j].size > q.cfg.maxSize) {
			b.send(ctx, chunk)
			chunk, bytes = chunk[:0], 0
		}
		chunk = append(chunk, j)
		bytes += items[j].size
	}
	b.send(ctx, chunk)
	return results
}

// qbatch is the state of one SendBatch call.
type qbatch struct {
	q        *Queue
	ms       []QueueMessage
	url      string
	op       target
	results  []QueueResult
	items    []qitem
	entries  []sqstypes.SendMessageBatchRequestEntry
	notFound error

	in   sqs.SendMessageBatchInput // the request being sent
	byID map[string]int            // entry ID → index in the pending entries
	sent []string                  // the last request's message IDs, by position ("" not sent)
}

func (b *qbatch) send(ctx context.Context, pending []int) {
	if len(pending) == 0 {
		return
	}
	if b.notFound != nil {
		for _, j := range pending {
			b.fail(j, b.notFound)
		}
		return
	}
	b.in = sqs.SendMessageBatchInput{QueueUrl: &b.url}
	if b.byID == nil {
		b.byID = make(map[string]int, len(pending))
	}
	sendBatch(ctx, b, b.op, &b.q.cfg.backoff, pending)
}

// request sends the pending items in one SendMessageBatch call
// (batchRequests). An entry is sent only when the response lists it as
// successful and not also as failed; an entry the response does not
// mention is retried.
func (b *qbatch) request(ctx context.Context, pending []int, n *note) ([]entryOutcome, error) {
	b.entries = b.entries[:0]
	clear(b.byID)
	for k, j := range pending {
		it := &b.items[j]
		m := &b.ms[it.idx]
		b.entries = append(b.entries, sqstypes.SendMessageBatchRequestEntry{
			Id:                &it.id,
			MessageBody:       &m.Body,
			DelaySeconds:      DelaySeconds(m.Delay),
			MessageAttributes: attributes(m),
		})
		b.byID[it.id] = k
	}
	b.in.Entries = b.entries
	out, err := b.q.c.SendMessageBatch(ctx, &b.in, n.sqs[:]...)
	if err == nil && out == nil {
		err = badResponse("empty response")
	}
	if err != nil {
		return nil, err
	}
	b.sent = slices.Grow(b.sent[:0], len(pending))[:len(pending)]
	clear(b.sent)
	for _, s := range out.Successful {
		if k, ok := b.byID[deref(s.Id)]; ok && deref(s.MessageId) != "" {
			b.sent[k] = *s.MessageId
		}
	}
	outs := make([]entryOutcome, len(pending))
	for k := range outs {
		if b.sent[k] == "" {
			outs[k] = entryOutcome{err: &EntryError{Message: "entry missing from the response"}, k: awserr.NoAnswer, c: classRetryable}
		}
	}
	for f := range out.Failed {
		if k, ok := b.byID[deref(out.Failed[f].Id)]; ok {
			fe := &out.Failed[f]
			ee := &EntryError{Code: deref(fe.Code), Message: deref(fe.Message)}
			kind, c := classifyEntry(ee.Code, fe.SenderFault)
			outs[k] = entryOutcome{err: ee, k: kind, c: c}
		}
	}
	return outs, nil
}

func (b *qbatch) written(j, k int) {
	it := &b.items[j]
	b.results[it.idx] = QueueResult{MessageID: b.sent[k], Unanswered: it.unanswered}
}

func (b *qbatch) attempts(j int) *attempts { return &b.items[j].attempts }

func (b *qbatch) fail(j int, err error) {
	it := &b.items[j]
	b.results[it.idx] = QueueResult{Err: err, Unanswered: it.unanswered}
}

func (b *qbatch) missing(cause error, call bool) error {
	err := b.op.fail(awserr.NotFound, "", cause, nil)
	if call {
		b.notFound = err
	}
	return err
}

func (b *qbatch) logRetry(ctx context.Context, attempt int, d time.Duration, n int, err error) {
	b.q.logRetry(ctx, b.url, attempt, d, n, err)
}
