// Package lambdaadapter runs a per-record Go handler over Amazon Kinesis Data
// Streams records in AWS Lambda, with exact per-record settlement.
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
// record: the first that is not settled. Lambda checkpoints just before it
// and delivers it again with everything after it, so nothing after an
// unsettled record is ever reported done, whatever order lanes finish in.
// Once a record is left unsettled, later records of its shard that have not
// started are not started: Lambda delivers them again anyway.
//
// A handler panic is recovered, logged with its stack, and counts as Retry
// for that record only. At the invocation deadline minus the deadline
// margin (WithDeadlineMargin) no record is started any more, the context of
// running handlers is cancelled, and the response goes out with what settled
// by then; a handler that returns later changes nothing.
//
// # Outcomes
//
// What each outcome does in Lambda mode, by configuration. "Counted" means
// WithMaxAttempts or a dead-letter target is set (a dead-letter target alone
// caps at 3 attempts). A copy is written to the record's own stream (the
// stream of an enhanced fan-out consumer ARN) with the same payload, user
// headers and partition key and x-ruststream-retry-count incremented; the
// original settles only once its copy, delay message or dead letter is
// written, and stays unsettled (reported, so Lambda delivers it again) when
// that write fails. No record is ever lost; delivery is at least once.
//
//	outcome            not counted                         counted (WithMaxAttempts n / dead-letter target)
//	Ack()              settles                             settles
//	Drop(err)          settles, err logged (poison)        settles; with WithDeadLetterDrops: dead letter
//	Retry(err)         unsettled: reported, Lambda         copy written, original settles; the n-th
//	                   redelivers it and all after it      failed attempt goes to the dead-letter target,
//	                                                       or is retired (logged) without one
//	RetryAfter(d,err)  d ≤ 5s and before the deadline      same, and the cap applies as for Retry
//	                   minus the margin: copy written
//	                   after d; longer: delay queue
//	                   (WithDelayQueue), or as Retry with
//	                   a warning naming the option
//	panic              as Retry, logged with the stack     as Retry
//	zero Outcome{}     as Retry, logged as a handler bug   as Retry
//	still running at   unsettled (reported), context       unsettled
//	deadline - margin  cancelled
//
// Long-running mode (-mode=ecs) is not built yet; it will apply the same
// decisions, holding the shard's checkpoint where Lambda mode reports the
// record.
//
// A durable delay is an SQS message (DelaySeconds up to 15 minutes, chained
// for longer) that the same function receives from the delay queue and
// forwards to the stream as the counted copy; the adapter recognises the SQS
// event and answers with an SQS partial batch response.
//
// Oversize writes lose nothing either: a copy or dead letter that exceeds
// the Kinesis record limit (1 MiB) or the SQS message limit
// (WithMaxMessageSize, default 1 MiB; the dead-letter body is JSON with a
// base64 payload, so records above about 750 KiB do not fit) is not written,
// and its record stays unsettled with an error log. Use a dead-letter stream
// for large records.
//
// # Replies
//
// A handler may publish records with Message.Reply (one PutRecord, encoded
// into a buffer reused per lane). The record being handled settles only if
// every reply succeeded. A reply's partition key is the one given in the
// call, else its partition-key header, else WithReplyPartitionKey, else a
// generated key that spreads replies over the shards.
//
// # Messages
//
// A Message carries the payload with any RSK1 envelope removed (records
// written by the Rust crate ruststream-kinesis or by this module's publisher
// carry user headers that way), the user headers, and the delivery headers
// partition-key, kinesis-sequence-number and kinesis-shard-id. Attempt is 1 on
// a first delivery and x-ruststream-retry-count + 1 on a counted copy.
//
// The package lambdaadaptertest builds realistic events and runs handlers
// through the adapter in tests.
package lambdaadapter
