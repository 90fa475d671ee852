package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
)

// Defaults.
const (
	// DefaultTTL is how long a completed record is remembered (the item's
	// expiration), as in Powertools.
	DefaultTTL = time.Hour
	// DefaultInProgressExpiry is how long a claim holds when neither
	// WithInProgressExpiry nor the context's deadline says otherwise (in
	// long-running mode, where a handler's context has no deadline).
	DefaultInProgressExpiry = time.Minute
	// DefaultKeyPrefix is the prefix of the ids outside Lambda (no
	// AWS_LAMBDA_FUNCTION_NAME).
	DefaultKeyPrefix = "lambdaadapter"
)

// Bounds.
const (
	// maxKeyBytes is the longest key used as it is in an id; a longer one
	// is replaced by "sha256:" and its hex SHA-256 (DynamoDB allows 2,048
	// bytes of partition key).
	maxKeyBytes = 1024
	// maxPrefixBytes is the longest prefix WithKeyPrefix accepts.
	maxPrefixBytes = 255
	// writeTimeout bounds the completion and the release of a claim. They
	// run on a context that is not cancelled with the handler's, so that a
	// result returned at the deadline is still recorded.
	writeTimeout = 5 * time.Second
	// claimAttempts bounds the claims of one delivery when the item that
	// refused the claim changes before it is read.
	claimAttempts = 3
)

// Log attribute keys: those of lambdaadapter's own log lines, and the id.
const (
	attrLogID      = "idempotency_id"
	attrLogShardID = "shard_id"
	attrLogSeq     = "sequence_number"
	attrLogOutcome = "outcome"
	attrLogError   = "error"
)

// KeyFunc derives a record's key from the message. It is called once per
// delivery, from many goroutines at once (as the handler is), and must not
// keep the message.
type KeyFunc func(m *lambdaadapter.Message) (string, error)

// Option configures a Handler.
type Option func(*config)

type config struct {
	keyFunc          KeyFunc
	prefix           string
	prefixSet        bool
	ttl              time.Duration
	inProgressExpiry time.Duration
	validate         bool
	logger           *slog.Logger
}

// WithKeyFunc derives each record's key with f instead of the default
// (DefaultKey: stream ARN, shard id, sequence number and sub-sequence number
// of the original record, which its counted copies share). A key taken from
// the payload, such as an order id, also recognises records a producer
// wrote twice, which have sequence numbers of their own. When f returns an error or "", the record stays
// unsettled: the Handler returns Retry with an error matching ErrKey (and
// f's error) without running the handler.
func WithKeyFunc(f KeyFunc) Option {
	return func(c *config) { c.keyFunc = f }
}

// WithKeyPrefix sets the prefix of every id: "PREFIX#KEY". The default is
// the Lambda function's name (AWS_LAMBDA_FUNCTION_NAME, as aws-lambda-go's
// lambdacontext reads it), else DefaultKeyPrefix. Give every consumer
// application that shares a table its own prefix: two consumers of one
// stream with the same prefix would take each other's records as handled.
// The prefix must not be empty, contain '#', or exceed 255 bytes.
func WithKeyPrefix(p string) Option {
	return func(c *config) { c.prefix, c.prefixSet = p, true }
}

// WithTTL sets how long a completed record is remembered (default
// DefaultTTL, one hour): a delivery of the same key after that runs the
// handler again. The item's expiration is set to the completion time plus
// d; DynamoDB deletes it some time after that, and reads ignore it at once.
func WithTTL(d time.Duration) Option {
	return func(c *config) { c.ttl = d }
}

// WithInProgressExpiry sets how long a claim holds before another delivery
// of the same key may take it over (a crashed or frozen run leaves its claim
// behind). Without it: the time left until the handler context's deadline
// (in Lambda mode, the invocation's deadline less the adapter's margin),
// or DefaultInProgressExpiry when the context has none (long-running mode).
// A handler still running when its claim expires may run at the same time
// as another delivery of its record, so keep it above the longest run; in
// long-running mode, a shorter expiry lets the next owner of a crashed
// worker's shard handle its interrupted records sooner. It never exceeds
// the TTL.
func WithInProgressExpiry(d time.Duration) Option {
	return func(c *config) { c.inProgressExpiry = d }
}

// WithPayloadValidation stores the SHA-256 of each payload in the item's
// validation attribute and checks it when a delivery finds its key
// completed: a different payload under the same key (a key function that
// maps two records to one key) is not acknowledged as handled but dropped
// with an error matching ErrPayloadMismatch, so that it shows in the logs
// (and on the dead-letter target with WithDeadLetterDrops).
func WithPayloadValidation() Option {
	return func(c *config) { c.validate = true }
}

// WithLogger sets the logger of the Handler's own lines (default: discard):
// store failures that do not show in the outcome (a completion or release
// that failed) at error level, claims refused because the record is in
// progress elsewhere at info level, and records acknowledged without
// running the handler at debug level.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// Handler wraps a lambdaadapter.Handler so that a record already handled
// successfully (Ack or Drop) is acknowledged without running the handler
// again. Build it with New. A Handler is safe for concurrent use, as the
// adapter requires.
type Handler struct {
	next  lambdaadapter.Handler
	store store
	cfg   config

	// unanswered holds, per id, this process's claims whose call ended
	// with no answer (a deadline, a reset, a 5xx after the client's
	// retries): DynamoDB may have applied them, and no handler ran under
	// them (see earlierClaim).
	mu         sync.Mutex
	unanswered map[string][]pendingClaim
}

// pendingClaim is a claim that got no answer, with what it wrote.
type pendingClaim struct {
	c          claimOf
	expiration int64
	validation string
}

// maxUnanswered bounds the ids whose unanswered claims are kept; beyond it
// the oldest are forgotten (their records then wait for the claim's
// in-progress expiry, as any claim of another run does).
const maxUnanswered = 10000

var _ lambdaadapter.Handler = (*Handler)(nil)

// New returns a Handler that runs next at most once per key, keeping its
// state in the DynamoDB table named table (see the package documentation
// for its layout and CreateTable to create it), through client. It does no
// I/O. It panics when next or client is nil, and returns an error for an
// empty table name or an invalid option.
func New(next lambdaadapter.Handler, client DynamoDBAPI, table string, opts ...Option) (*Handler, error) {
	if next == nil {
		panic("idempotency: New with a nil handler")
	}
	if client == nil {
		panic("idempotency: New with a nil DynamoDB client")
	}
	cfg := config{ttl: DefaultTTL, prefix: lambdacontext.FunctionName}
	if cfg.prefix == "" {
		cfg.prefix = DefaultKeyPrefix
	}
	for _, o := range opts {
		o(&cfg)
	}
	var errs []error
	if table == "" {
		errs = append(errs, errors.New("idempotency: empty table name"))
	}
	switch {
	case cfg.prefix == "":
		errs = append(errs, errors.New("idempotency: WithKeyPrefix: empty prefix"))
	case strings.Contains(cfg.prefix, "#"):
		errs = append(errs, fmt.Errorf("idempotency: WithKeyPrefix(%q): the prefix must not contain '#'", cfg.prefix))
	case len(cfg.prefix) > maxPrefixBytes:
		errs = append(errs, fmt.Errorf("idempotency: WithKeyPrefix: the prefix has %d bytes, want at most %d", len(cfg.prefix), maxPrefixBytes))
	}
	if cfg.ttl < time.Second {
		errs = append(errs, fmt.Errorf("idempotency: WithTTL(%v): want at least 1s", cfg.ttl))
	}
	if cfg.inProgressExpiry < 0 || (cfg.inProgressExpiry > 0 && cfg.inProgressExpiry < time.Millisecond) {
		errs = append(errs, fmt.Errorf("idempotency: WithInProgressExpiry(%v): want at least 1ms", cfg.inProgressExpiry))
	} else if cfg.inProgressExpiry > cfg.ttl && cfg.ttl >= time.Second {
		errs = append(errs, fmt.Errorf("idempotency: WithInProgressExpiry(%v) exceeds the TTL (%v)", cfg.inProgressExpiry, cfg.ttl))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.keyFunc == nil {
		cfg.keyFunc = DefaultKey
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{next: next, store: store{client: client, table: table}, cfg: cfg}, nil
}

// DefaultKey is the key of a record unless WithKeyFunc says otherwise:
// "STREAM_ARN#SHARD_ID#SEQUENCE_NUMBER#SUB_SEQUENCE_NUMBER", e.g.
// "arn:aws:kinesis:us-east-1:123456789012:stream/orders#shardId-000000000000#49590338271490256608559692538361571095921575989136588898#0".
// The sub-sequence number is the index of a KPL user record in its
// aggregate (0 for an ordinary record). The coordinates are those of the
// original record: a counted copy (or a durable delay's copy) carries them
// in its x-lambdaadapter-origin header (
// "SHARD_ID#SEQUENCE_NUMBER#SUB_SEQUENCE_NUMBER"), and its key is the
// original's, not one of its own new sequence number. So the key
// identifies one record across Lambda's redeliveries, the next owner of a
// shard in long-running mode, the user records of a KPL aggregate that
// Lambda redelivers whole, and the original's counted copies; not a record
// a producer wrote twice. A header that is not of that form (not written
// by the adapter) is ignored: the record's own coordinates are used.
func DefaultKey(m *lambdaadapter.Message) (string, error) {
	if v, ok := m.Headers.Lookup(publish.OriginHeader); ok && validOrigin(v) {
		return m.StreamARN + "#" + v, nil
	}
	if m.ShardID == "" || m.SequenceNumber == "" {
		return "", errors.New("the message has no shard id or sequence number")
	}
	return m.StreamARN + "#" + m.ShardID + "#" + m.SequenceNumber + "#" + strconv.Itoa(m.SubSequenceNumber), nil
}

// validOrigin reports whether v has the form of publish.OriginHeader: a
// shard id without '#', then a sequence number and a sub-sequence number
// of decimal digits.
func validOrigin(v string) bool {
	shard, rest, ok := strings.Cut(v, "#")
	if !ok || shard == "" {
		return false
	}
	seq, sub, ok := strings.Cut(rest, "#")
	return ok && digits(seq) && digits(sub)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ID returns the id of m's item in the table: "PREFIX#KEY", where a key
// longer than 1,024 bytes is replaced by "sha256:" and its SHA-256 in hex.
// It returns an error matching ErrKey when the key cannot be derived.
func (h *Handler) ID(m *lambdaadapter.Message) (string, error) {
	key, err := h.cfg.keyFunc(m)
	if err == nil && key == "" {
		err = errors.New("the key function returned an empty key")
	}
	if err != nil {
		return "", &keyError{shardID: m.ShardID, seq: m.SequenceNumber, cause: err}
	}
	if len(key) > maxKeyBytes {
		sum := sha256.Sum256([]byte(key))
		key = "sha256:" + hex.EncodeToString(sum[:])
	}
	return h.cfg.prefix + "#" + key, nil
}

// HandleRecord runs the wrapped handler on m unless m's key was completed
// before:
//
//   - the key is new, expired, or its claim's in-progress expiry passed: it
//     is claimed (an INPROGRESS item) and the handler runs. Ack or Drop,
//     with every reply the handler wrote successful: the item becomes
//     COMPLETED, remembered for the TTL, and the outcome is returned. Retry,
//     RetryAfter, the zero Outcome, a failed reply or a panic: the claim is
//     deleted and the outcome (or the panic) passes on, so the adapter's
//     retry path runs and the next delivery runs the handler again.
//   - the key is COMPLETED: the handler is not run; Ack is returned, or,
//     when the first run returned Drop, Drop with an error matching
//     ErrDuplicate.
//   - the key is claimed by a run in progress: the handler is not run;
//     Retry with an error matching ErrInProgress is returned (the record
//     stays unsettled, even under a cap or a dead-letter target, without
//     counting an attempt: it is never dropped, retired or copied for it).
//   - the key cannot be derived: Retry with an error matching ErrKey.
//   - the claim, or the read after a refused claim, fails (DynamoDB error,
//     throttling, ctx ended): Retry with an error matching ErrStore and the
//     SDK's error; like ErrInProgress it stays unsettled even under a cap
//     or a dead-letter target, without counting an attempt (a store outage
//     never retires or dead-letters a record unhandled).
//
// The handler is handed a copy of m whose Reply goes through m (so the
// runner's bookkeeping of replies is unchanged) and is watched for failures.
//
// When the completion fails after the handler succeeded, the handler's
// outcome is still returned (its side effect happened), and the failure is
// logged: the claim stays until its in-progress expiry, and a delivery of
// the key after that runs the handler again. A release that fails is
// logged too; the claim then holds off other deliveries until its expiry.
func (h *Handler) HandleRecord(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
	id, err := h.ID(m)
	if err != nil {
		return lambdaadapter.Retry(err)
	}
	if err := ctx.Err(); err != nil {
		return lambdaadapter.Retry(fmt.Errorf("idempotency: %s: not claimed: %w", id, err))
	}
	validation := ""
	if h.cfg.validate {
		sum := sha256.Sum256(m.Payload)
		validation = hex.EncodeToString(sum[:])
	}
	for range claimAttempts {
		now := time.Now()
		expiry := h.inProgressExpiry(ctx, now)
		c := claimOf{token: rand.Text(), ms: now.Add(expiry).UnixMilli()}
		expiration := now.Add(h.cfg.ttl).Unix()
		claimed, old, err := h.store.claim(ctx, id, now, expiration, c, validation)
		if err != nil {
			h.noteUnanswered(id, pendingClaim{c: c, expiration: expiration, validation: validation})
			h.log(ctx, slog.LevelWarn, "idempotency: claim failed", id, m, slog.String(attrLogError, err.Error()))
			return lambdaadapter.Retry(&unattemptedError{err})
		}
		if claimed {
			h.forgetUnanswered(id)
			return h.run(ctx, m, id, c)
		}
		if old == nil { // the service did not return the item
			if old, err = h.store.get(ctx, id); err != nil {
				h.log(ctx, slog.LevelWarn, "idempotency: read failed", id, m, slog.String(attrLogError, err.Error()))
				return lambdaadapter.Retry(&unattemptedError{err})
			}
			if old == nil {
				continue // released in between: claim again
			}
		}
		earlier := h.earlierClaim(id, old)
		switch {
		case ownClaim(old, c, expiration, validation):
			// The claim was applied and its answer lost: the SDK's retry
			// of it found this very claim in place.
			h.log(ctx, slog.LevelDebug, "idempotency: the claim's answer was lost; the item is this delivery's claim", id, m)
			return h.run(ctx, m, id, c)
		case claimable(old, now):
			// The item read is one the claim would have replaced: it
			// changed after the claim was refused. Claim again.
		case earlier != nil:
			// An earlier claim of this process for id got no answer but
			// was applied; no handler ran under it, and no other run can
			// hold it. The handler runs under it now.
			h.forgetUnanswered(id)
			h.log(ctx, slog.LevelInfo, "idempotency: an earlier claim of this process got no answer but was applied; the handler runs under it", id, m)
			return h.run(ctx, m, id, earlier.c)
		case old.status == statusCompleted:
			return h.replay(ctx, m, id, old, validation)
		case old.status == statusInProgress:
			until := time.UnixMilli(old.inProgressExpiration)
			if old.inProgressExpiration == 0 { // a claim without one holds until the item expires
				until = time.Unix(old.expiration, 0)
			}
			h.log(ctx, slog.LevelInfo, "idempotency: in progress elsewhere", id, m, slog.Time("in_progress_until", until))
			return lambdaadapter.Retry(fmt.Errorf("%w: %s (until %s)", ErrInProgress, id, until.UTC().Format(time.RFC3339Nano)))
		default:
			err := storeError(opClaim, id, fmt.Errorf("item with status %q", old.status))
			h.log(ctx, slog.LevelWarn, "idempotency: claim failed", id, m, slog.String(attrLogError, err.Error()))
			return lambdaadapter.Retry(err)
		}
	}
	return lambdaadapter.Retry(fmt.Errorf("%w: %s (its item kept changing; claimed %d times)", ErrInProgress, id, claimAttempts))
}

// noteUnanswered remembers pc, a claim of id whose call got no answer.
func (h *Handler) noteUnanswered(id string, pc pendingClaim) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unanswered == nil {
		h.unanswered = map[string][]pendingClaim{}
	}
	if _, ok := h.unanswered[id]; !ok && len(h.unanswered) >= maxUnanswered {
		for k := range h.unanswered { // an arbitrary one
			delete(h.unanswered, k)
			break
		}
	}
	ps := append(h.unanswered[id], pc)
	h.unanswered[id] = ps[max(len(ps)-4, 0):]
}

// forgetUnanswered forgets the unanswered claims of id.
func (h *Handler) forgetUnanswered(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.unanswered, id)
}

// earlierClaim returns the unanswered claim of id that wrote r, if any: r
// carries its token (new for each claim, written only by it), and the
// expiries and validation it wrote. Nil otherwise.
func (h *Handler) earlierClaim(id string, r *record) *pendingClaim {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, pc := range h.unanswered[id] {
		if ownClaim(r, pc.c, pc.expiration, pc.validation) {
			return &pc
		}
	}
	return nil
}

// claimable reports whether the claim condition holds for r at now (as
// claimCondition evaluates it).
func claimable(r *record, now time.Time) bool {
	return r.expiration < now.Unix() ||
		(r.status == statusInProgress && r.inProgressExpiration != 0 && r.inProgressExpiration < now.UnixMilli())
}

// inProgressExpiry returns how long a claim made now holds.
func (h *Handler) inProgressExpiry(ctx context.Context, now time.Time) time.Duration {
	d := h.cfg.inProgressExpiry
	if d == 0 {
		d = DefaultInProgressExpiry
		if dl, ok := ctx.Deadline(); ok {
			d = dl.Sub(now)
		}
	}
	return min(max(d, time.Millisecond), h.cfg.ttl)
}

// run runs the handler under the claim c of id and records its result.
func (h *Handler) run(ctx context.Context, m *lambdaadapter.Message, id string, c claimOf) lambdaadapter.Outcome {
	// The handler gets a copy of m whose replies go through m and are
	// watched: a failed reply leaves the record unsettled whatever the
	// handler returns, so it must not be recorded as completed.
	var replies replyWatch
	replies.orig = m
	mc := *m
	message.Bind(&mc, &replies)

	returned := false
	defer func() {
		if !returned { // a panic (or runtime.Goexit): the adapter retries
			h.release(ctx, m, id, c)
		}
	}()
	out := h.next.HandleRecord(ctx, &mc)
	returned = true

	if !out.Settles() || replies.failed.Load() {
		h.release(ctx, m, id, c)
		return out
	}
	res := result{Outcome: out.Kind().String()}
	if out.Kind() == lambdaadapter.KindDrop && out.Err() != nil {
		res.Reason = out.Err().Error()
		if len(res.Reason) > maxReason {
			res.Reason = res.Reason[:maxReason]
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if err := h.store.complete(wctx, id, c, time.Now().Add(h.cfg.ttl).Unix(), res); err != nil {
		h.log(ctx, slog.LevelError, "idempotency: the handler succeeded but its result was not recorded; a delivery after the claim's expiry runs it again", id, m,
			slog.String(attrLogOutcome, out.Kind().String()), slog.String(attrLogError, err.Error()))
	}
	return out
}

// release deletes the claim c of id, logging a failure.
func (h *Handler) release(ctx context.Context, m *lambdaadapter.Message, id string, c claimOf) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if err := h.store.release(wctx, id, c); err != nil {
		h.log(ctx, slog.LevelError, "idempotency: the claim of a failed run was not deleted; it holds off other deliveries until its expiry", id, m,
			slog.String(attrLogError, err.Error()))
	}
}

// replay returns the outcome of a completed item without running the
// handler.
func (h *Handler) replay(ctx context.Context, m *lambdaadapter.Message, id string, old *record, validation string) lambdaadapter.Outcome {
	if validation != "" && old.validation != "" && old.validation != validation {
		return lambdaadapter.Drop(fmt.Errorf("%w: %s", ErrPayloadMismatch, id))
	}
	var res result
	_ = json.Unmarshal([]byte(old.data), &res) // anything but a drop acknowledges
	h.log(ctx, slog.LevelDebug, "idempotency: completed before, not run again", id, m, slog.String(attrLogOutcome, res.Outcome))
	if res.Outcome == lambdaadapter.KindDrop.String() {
		if res.Reason != "" {
			return lambdaadapter.Drop(fmt.Errorf("%w: %s: dropped then: %s", ErrDuplicate, id, res.Reason))
		}
		return lambdaadapter.Drop(fmt.Errorf("%w: %s: dropped then", ErrDuplicate, id))
	}
	return lambdaadapter.Ack()
}

func (h *Handler) log(ctx context.Context, level slog.Level, msg, id string, m *lambdaadapter.Message, attrs ...slog.Attr) {
	if !h.cfg.logger.Enabled(ctx, level) {
		return
	}
	attrs = append(attrs, slog.String(attrLogID, id), slog.String(attrLogShardID, m.ShardID), slog.String(attrLogSeq, m.SequenceNumber))
	h.cfg.logger.LogAttrs(ctx, level, msg, attrs...)
}

// replyWatch passes the replies of the handler's copy of a message on to
// the original (whose runner knows it) and notes a failure.
type replyWatch struct {
	orig   *lambdaadapter.Message
	failed atomic.Bool
}

func (w *replyWatch) Reply(ctx context.Context, _ *message.Message, r message.Reply) error {
	err := w.orig.Reply(ctx, r)
	if err != nil {
		w.failed.Store(true)
	}
	return err
}
