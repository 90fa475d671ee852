// Package lambdaadapter runs a per-record Go handler over Amazon Kinesis Data
// Streams records, with exact per-record settlement: in AWS Lambda (the
// default) or as a long-running service that reads the stream itself
// (WithMode(ModeECS)). Both modes go through one settlement engine, so an
// outcome means the same in each; where they differ, the table below says
// how.
//
// Wrap a handler and start the Lambda runtime loop:
//
//	func main() {
//		lambdaadapter.Handle(lambdaadapter.HandlerFunc(
//			func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
//				if err := process(ctx, m.Payload); err != nil {
//					return lambdaadapter.Retry(err)
//				}
//				return lambdaadapter.Ack()
//			}), lambdaadapter.WithConcurrency(32))
//	}
//
// The event source mapping must have ReportBatchItemFailures enabled
// (FunctionResponseTypes: [ReportBatchItemFailures]).
//
// # What happens to a batch
//
// Each invocation's records are handled in lanes: records with the same
// partition key one after another in stream order, different keys in
// parallel (WithConcurrency). Each shard keeps a watermark: the run of
// settled records from its oldest one. The response names exactly one
// record per shard: the first that is not settled. Lambda checkpoints just
// before it and delivers it again with everything after it, so nothing
// after an unsettled record is ever reported done, whatever order lanes
// finish in. Once a record is left unsettled, later records of its shard
// that have not started are not started: Lambda delivers them again anyway.
//
// A handler panic is recovered, logged with its stack, and counts as Retry
// for that record only. At the invocation deadline minus the deadline
// margin (WithDeadlineMargin) no record is started any more, the context of
// running handlers is cancelled, and the response goes out with what settled
// by then; a handler that returns later changes nothing.
//
// # Outcomes
//
// What each outcome does, by mode and configuration. "Counted" means
// WithMaxAttempts or a dead-letter target is set (a dead-letter target alone
// caps at 3 attempts). A counted copy is written to the record's own stream
// (the stream of an enhanced fan-out consumer ARN) with the same payload,
// user headers and partition key, x-ruststream-retry-count set to the
// attempt that failed ("1" on the first copy), and x-lambdaadapter-origin
// naming the original's shard, sequence number and sub-sequence number
// (kept on later copies: package idempotency's default key is derived from
// it, so an original and its copies share one key); the original settles only
// once its copy, delay message or dead letter is written, and stays
// unsettled when that write fails. No record is ever lost; delivery is at
// least once.
//
//	outcome            Lambda mode                           long-running mode (WithMode(ModeECS))
//	Ack()              settles                               settles; the checkpoint may pass it
//	Drop(err)          settles, err logged (dead-lettered     same
//	                   first with WithDeadLetterDrops)
//	Retry(err),        unsettled: reported in the response;  unsettled: holds the shard's checkpoint
//	not counted        Lambda redelivers it and all after it  and is delivered again in process after
//	                                                         a backoff (WithRetryBackoff), Attempt + 1;
//	                                                         later records of its key wait for it
//	Retry(err),        copy written, then settles; the n-th  same
//	counted            failed attempt is dead-lettered, or
//	                   retired (logged) without a target
//	Retry/RetryAfter   unsettled, counted or not: reported   unsettled, counted or not: delivered
//	with err matching  as above; no copy, delay message or   again in process after a backoff with
//	idempotency.       dead letter                           the same Attempt (no attempt counted);
//	ErrInProgress                                            nothing written
//	(held elsewhere)
//	RetryAfter(d,err)  d ≤ 5s and before deadline - margin:  d ≤ 5s: copy written after d (the record
//	                   copy written after d; longer: delay   holds the checkpoint meanwhile); longer:
//	                   queue (WithDelayQueue), else as       delay queue, else as Retry with a warning
//	                   Retry with a warning naming it
//	panic              as Retry, logged with the stack       same
//	zero Outcome{}     as Retry, logged as a handler bug     same
//	a failed write     unsettled: reported (as above)        delivered again in process (as above)
//	(copy, delay,
//	dead letter, reply)
//	still running at   unsettled (reported); its context     (no deadline) at shutdown: waited for up
//	deadline - margin  is cancelled                          to WithShutdownTimeout, then cancelled;
//	                                                         it comes again from the checkpoint
//
// In long-running mode only the record is delivered again, not its shard:
// records that settled are not handled twice. Every in-process delivery
// counts as an attempt toward the cap, except that of a record held by a run
// in progress elsewhere (idempotency.ErrInProgress): its handler did not
// run, so it counts none. If the shard is handed over, lost or
// stopped while a record waits for its next attempt, the record comes again
// from the checkpoint, on the shard's next owner.
//
// In Lambda mode, writes (copies, delay messages, dead letters) go out in
// shard order, in batches: a record's write goes out once every earlier
// record of its shard has settled or has its own write under way, in
// PutRecords calls of up to 500 entries (SendMessageBatch of 10), one round
// at a time, only failed entries retried. A write that fails for good leaves
// its record unsettled; Lambda delivers it again with the records after it.
// Writes of those later records made in the same call are remembered (up to
// 20,000 records, in the execution environment's memory), and those records
// settle without their handler when they come again to the same execution
// environment; delivered to another one, they are handled again and written
// again (the one bound on "one copy chain per record"). A RetryAfter delay
// holds back the writes of later records of its shard. Writes stop a fifth
// of the margin before the deadline; what is not written by then stays
// unsettled and is reported. In long-running mode writes are batched freely
// (PutRecords of up to 500 records, several calls at once) while the lanes
// go on, and a write that fails is made again after the retry backoff
// without running the handler again or counting an attempt.
//
// A record whose copy or delay message can never be written (the added
// headers push it over the size limit) ends at once, as at the cap: to the
// dead-letter target (a dead-letter stream gets it as it arrived when its
// dead letter is too large too), else retired with an error log.
//
// A durable delay is an SQS message (DelaySeconds up to 15 minutes, chained
// for longer) that is forwarded to the stream as the counted copy once due.
// In Lambda mode the same function receives it from the delay queue: the
// adapter recognises the SQS event and answers with an SQS partial batch
// response. In long-running mode the service polls its delay queue itself
// and deletes a message only after its record was written.
//
// Oversize writes lose nothing either: a copy or dead letter that exceeds
// the Kinesis record limit (1 MiB) or the SQS message limit
// (WithMaxMessageSize, default 1 MiB; the dead-letter body is JSON with a
// base64 payload, so records above about 750 KiB do not fit) is not written,
// and its record stays unsettled with an error log. Use a dead-letter stream
// for large records.
//
// # Maximum record age
//
// WithMaxRecordAge(d): a record older than d by its arrival time when its
// turn comes is not handled but dead-lettered (reason "max record age",
// payload and headers kept) or, without a dead-letter target, settled with
// a warning, in both modes. Unlike Lambda's MaximumRecordAgeInSeconds,
// which discards silently, nothing goes without a trace.
//
// # Observing
//
// WithHooks adds hooks (package observe) that receive what becomes of each
// record, each write, each Lambda invocation, and in long-running mode each
// read, lease change and checkpoint, and are flushed once per invocation
// (inside the deadline margin) or every WithMetricsInterval. observe/emf
// writes them as CloudWatch Embedded Metric Format lines. Without hooks
// there is no cost.
//
// # KPL aggregated records
//
// A record written by the Kinesis Producer Library as an aggregate (data
// starting with the magic bytes F3 89 9A C2, a protobuf AggregatedRecord
// and its MD5) becomes one Message per user record, in both modes: its own
// payload (RSK1 envelope opened), partition key (lanes keep order per
// user-record key) and ExplicitHashKey, the parent's SequenceNumber,
// Aggregated set, SubSequenceNumber its index, and the header
// kinesis-sub-sequence-number.
//
//	                   Lambda mode                           long-running mode
//	settlement         each user record on its own; the      same; the checkpoint never passes an
//	                   parent settles once all have: the     unsettled user record
//	                   response names the parent
//	Retry, not counted the parent is reported and Lambda     only that user record comes again, in
//	                   redelivers it whole: settled user     process
//	                   records are handled again
//	counted retry,     per user record: a plain copy under   same
//	dead letter        its own key; the dead letter carries
//	                   x-dead-letter-sub-sequence-number
//	restart inside     -                                     the lease stores the sub-sequence: the next
//	an aggregate                                             owner skips the user records up to the
//	                                                         first unsettled one; the rest come again
//	wrong MD5          an ordinary record                    same
//	MD5 matches, body  poison: not handed to the handler;    same
//	malformed          like Drop with an error naming it
//	                   (dead-lettered with its raw data
//	                   under WithDeadLetterDrops)
//
// # Replies
//
// A handler may publish records with Message.Reply (one PutRecord, encoded
// into a buffer reused per lane), in either mode. The record being handled
// settles only if every reply succeeded. A reply's partition key is the one
// given in the call, else its partition-key header, else
// WithReplyPartitionKey, else a generated key that spreads replies over the
// shards.
//
// # Messages
//
// A Message carries the payload with any RSK1 envelope removed (records
// written by the Rust crate ruststream-kinesis or by this module's publisher
// carry user headers that way), the user headers, and the delivery headers
// partition-key, kinesis-sequence-number and kinesis-shard-id. Attempt is 1
// on a first delivery and x-ruststream-retry-count + 1 on a counted copy; in
// long-running mode each in-process delivery adds one (except after a Retry
// matching idempotency.ErrInProgress, which attempted nothing). (Lambda does not say
// how often it delivered a record: a record it delivers again after an
// uncounted Retry has the same Attempt as before.) A counted retry gives up
// the record's place in its key's order, since its copy is appended to the
// stream; an uncounted Retry keeps it.
//
// A Message, its Payload and its Headers are the handler's to keep: they
// stay valid and unchanged after it returned, in both modes and in
// BatchHandlers; a record handled again in process gets a new Message.
// WithRecycledMessages trades that for speed on large batches: the adapter
// then reuses their memory once it finished with the record, and a handler
// must copy what it keeps.
//
// # Options and modes
//
// New validates the options once. An option that belongs to the other mode
// is an error naming it and its mode (matching ErrWrongMode): WithLeaseTable
// and the other long-running options in Lambda mode, WithDeadlineMargin in
// long-running mode. OnlyIn(mode, opts...) applies options in one mode only,
// so one program can carry both sets and choose its mode at start (Handle
// reads -mode and LAMBDAADAPTER_MODE).
//
// # Long-running mode
//
// WithMode(ModeECS) runs the same handler as a service (ECS or any host):
// the package consumer reads the shards itself (GetRecords ≤ 1,000 per call,
// at most 5 calls per second per shard, one channel of 64 deliveries that
// the handlers drain, the same lanes), shares them with other instances
// through DynamoDB leases (package lease: fenced by owner and counter,
// expiry by local observation of the counter, never by wall clocks; leases
// move to a joining instance by a planned hand-over that re-delivers nothing
// that settled), starts child shards only after their parents are SHARD_END
// or trimmed away, and writes a shard's checkpoint only when its watermark
// moves, only while its lease is held, at most once per
// WithCheckpointInterval. Handle blocks until SIGTERM or SIGINT, then stops
// gracefully: reading stops, records in flight settle, checkpoints are
// written and the leases released, so other instances take them at once.
// Nothing the adapter started runs after Run returns, except a handler
// that ignores its cancelled context (logged).
//
// Leases fence themselves: an instance hands a shard's records to the
// handler only while its lease is fresh. With lease duration D
// (WithLeaseDuration, 10s), renewals every D/3 and a margin of D/10, a lease
// whose last successful write started more than D − D/10 ago on the
// instance's monotonic clock is dropped locally — reading stops, no further
// record starts, running handlers' contexts are cancelled, nothing more is
// written for it — while another instance counts it expired only D after
// it saw that write's counter. The check runs before every hand-off to a
// lane, so an instance cut off from DynamoDB, or paused (SIGSTOP, a frozen
// container, a long GC) and resumed, never handles a shard at the same time
// as the instance that took it over. The bound assumes monotonic clocks that
// advance while a process is paused and differ in rate by far less than
// 10 %; a handler already running may finish, and what it returns changes
// nothing.
//
// WithEnhancedFanOut(name) reads with enhanced fan-out instead of
// GetRecords: the stream consumer name is registered (or found registered)
// and waited for until ACTIVE at start, and each owned shard is read with
// SubscribeToShard, renewed after the last record handed to the handlers;
// everything else is as with polling. Kinesis bills each registered
// consumer per consumer-shard hour and per GB retrieved. In Lambda mode an
// event source mapping on a consumer ARN needs nothing of the adapter: the
// stream's ARN is derived from the consumer ARN.
//
// The package lambdaadaptertest builds realistic events and runs handlers
// through the adapter in tests.
package lambdaadapter
