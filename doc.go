// Package lambdaadapter runs a per-record Go handler over Amazon Kinesis Data
// Streams records with exact per-record settlement: in AWS Lambda, or as a
// long-running service (ECS or any host) that reads the stream itself. Both
// run the handler through one settlement engine, so an outcome means the same
// in each; where the modes differ, the table below says how.
//
// A Handler returns an Outcome for each record: Ack, Drop, Retry or
// RetryAfter. Records with the same partition key are handled one after
// another in stream order, different keys in parallel (WithConcurrency).
// Each shard keeps a watermark, the run of settled records from its oldest
// one: in Lambda mode the partial batch response names exactly the first
// record that is not settled, so Lambda checkpoints just before it, and
// nothing after an unsettled record is ever reported done, whatever order
// the lanes finish in; in long-running mode the watermark is the checkpoint.
//
// # Two doors
//
// NewFunction returns a Function, which runs a Handler in Lambda mode. It is
// an aws-lambda-go lambda.Handler (Invoke decodes the event without
// reflection); HandleEvent takes a decoded event:
//
//	f, err := lambdaadapter.NewFunction(h, lambdaadapter.WithAWSConfig(cfg), lambdaadapter.WithMaxAttempts(5))
//	if err != nil {
//		log.Fatal(err)
//	}
//	lambda.Start(f)
//
// The event source mapping must report batch item failures
// (FunctionResponseTypes: [ReportBatchItemFailures]), or Lambda ignores the
// response.
//
// NewService returns a Service, which runs a Handler in long-running mode
// (NewBatchService: a BatchHandler, several records at once). It reads the
// stream itself and shares its shards with the other instances through a
// DynamoDB lease table (WithLeaseTable); Run blocks until its context ends,
// then stops gracefully, and Seek, Owned and Owner act on the running
// instance:
//
//	s, err := lambdaadapter.NewService(h, lambdaadapter.WithAWSConfig(cfg),
//		lambdaadapter.WithStream("orders"), lambdaadapter.WithLeaseTable("orders-leases"))
//	if err != nil {
//		return err
//	}
//	return s.Run(ctx) // until ctx ends, then a graceful stop
//
// Options are typed per door. A SharedOption (WithConcurrency,
// WithMaxAttempts, WithDeadLetterStream, ...) fits either; a FunctionOption
// (WithDeadlineMargin) fits only NewFunction and a ServiceOption (WithStream,
// WithLeaseTable, WithEnhancedFanOut, ...) only NewService, so an option of
// the other mode does not compile. The constructors validate the options once
// and return an error for contradictory or out-of-range ones. They read no
// environment variable and load no AWS configuration: give WithAWSConfig, or
// the clients (WithKinesisClient, WithSQSClient, WithDynamoDBClient). A
// Function that only acknowledges, drops and retries needs no AWS client.
//
// # Handle
//
// Handle is the whole main of a program that runs in either mode:
//
//	func main() {
//		lambdaadapter.Handle(h, lambdaadapter.WithMaxAttempts(5), lambdaadapter.WithDeadLetterStream("orders-dlq"))
//	}
//
// It picks the mode at start (LAMBDAADAPTER_MODE, a -mode=ecs argument, or
// WithMode), reads the LAMBDAADAPTER_* environment, loads the default AWS
// configuration, names a service instance after its ECS task or host, logs
// warnings and errors (NewLogger), and then either starts the Lambda runtime
// with a Function or runs a Service until SIGTERM. It takes any Option and
// ignores those of the mode it did not pick, so one program carries the
// options of both; OnlyIn applies shared options in one mode only.
//
// # Outcomes
//
// "Counted" means WithMaxAttempts or a dead-letter target is set (a
// dead-letter target alone caps at 3 attempts, counting the first delivery).
// A counted copy is the record written again to its own stream, with its
// payload, user headers and partition key and x-ruststream-retry-count set
// to the attempt that failed; the original settles once its copy, delay
// message or dead letter is written, and stays unsettled when that write
// fails. No record is ever lost; delivery is at least once.
//
//	outcome            Lambda mode                           long-running mode
//	Ack()              settles                               settles; the checkpoint may pass it
//	Drop(err)          settles, err logged (dead-lettered    same
//	                   first with WithDeadLetterDrops)
//	Retry(err),        unsettled: reported in the response;  unsettled: holds the shard's checkpoint
//	not counted        Lambda redelivers it and all after it  and is delivered again in process after
//	                                                         a backoff (WithRetryBackoff), Attempt + 1;
//	                                                         later records of its key wait for it
//	Retry(err),        copy written, then settles; the n-th  same
//	counted            failed attempt is dead-lettered, or
//	                   retired (logged) without a target
//	Retry/RetryAfter   unsettled, counted or not: reported;  unsettled, counted or not: delivered
//	with err matching  no copy, delay message or dead        again in process with the same Attempt
//	idempotency.       letter                                (no attempt counted); nothing written
//	ErrInProgress
//	RetryAfter(d,err)  d ≤ 5s and before deadline - margin:  d ≤ 5s: copy written after d (the record
//	                   copy written after d; longer: delay   holds the checkpoint meanwhile); longer:
//	                   queue (WithDelayQueue), else as       the delay queue, which the service
//	                   Retry with a warning naming it        forwards itself, else as Retry
//	panic              as Retry, logged with the stack       same
//	zero Outcome{}     as Retry, logged as a handler bug     same
//	its write fails    unsettled: reported (as above)        the write is made again after the
//	(copy, delay,                                            backoff, without running the handler
//	dead letter,                                             or counting an attempt
//	reply)
//	its copy can       to the dead-letter target at once,    same
//	never be written   else retired with an error log
//	(too large)
//	still running at   unsettled (reported); its context     at shutdown: waited for up to
//	deadline - margin  is cancelled                          WithShutdownTimeout, then cancelled;
//	                                                         it comes again from the checkpoint
//
// The README's semantics table is the full statement, checked by one
// conformance suite run through both doors; docs/lambda.md adds how Lambda
// mode orders its writes and docs/long-running.md how a service reads,
// balances, hands over and checkpoints.
//
// # Messages
//
// A Message carries the payload with any RSK1 envelope removed (records
// written by the Rust crate ruststream-kinesis carry user headers that way),
// the user headers, the delivery headers partition-key,
// kinesis-sequence-number and kinesis-shard-id, and Attempt. A Message, its
// Payload and its Headers are the handler's to keep: they stay valid and
// unchanged after it returned, in both modes; WithRecycledMessages trades
// that for speed on large batches. A handler may publish records in answer
// with Message.Reply. JSON decodes payloads for the handler and drops those
// that do not decode. Records aggregated by the Kinesis Producer Library
// become one Message per user record.
//
// # More
//
// The documentation pages, in the repository's docs directory: handlers.md
// (outcomes, messages, replies, delays, testing), lambda.md,
// long-running.md, kpl.md, idempotency.md, deployment.md, operations.md
// (metrics, alarms, traces), configuration.md (every option and environment
// variable), faults.md (bad input, faults and the dead-letter formats),
// migration.md and development.md. Package lambdaadaptertest runs handlers
// through a real Function in tests; package idempotency runs a handler once
// per record; package observe and observe/emf report metrics (WithHooks).
package lambdaadapter
