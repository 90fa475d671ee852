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
//	outcome          Lambda mode (now)                            long-running mode (-mode=ecs)
//	Ack()            settles; the checkpoint may pass it          not built yet
//	Drop(err)        settles and logs err; the checkpoint passes  not built yet
//	                 it (use it for poison records)
//	Retry(err)       stays unsettled: reported in the response,   not built yet
//	                 Lambda redelivers it and every later record
//	                 of its shard (counted copies, max attempts
//	                 and dead letters: not built yet)
//	RetryAfter(d,e)  same as Retry; d is not waited out yet       not built yet
//	                 (durable delays: not built yet)
//	panic            same as Retry, logged with the stack         not built yet
//	zero Outcome{}   same as Retry, logged as a handler bug       not built yet
//	still running    unsettled (reported), context cancelled      not built yet
//	at the deadline
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
