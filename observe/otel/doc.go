// Package otel exports lambdaadapter's traces and metrics through
// OpenTelemetry, for teams that run a collector. It is a module of its own
// (github.com/shardsettle/lambdaadapter/observe/otel), so the adapter's
// module never requires OpenTelemetry.
//
// A Tracer and a Metrics are hooks for lambdaadapter.WithHooks (see
// package observe); either may be used without the other:
//
//	tracer := otel.NewTracer(tp)            // a trace.TracerProvider
//	metrics, err := otel.NewMetrics(mp)     // a metric.MeterProvider
//	…
//	a, err := lambdaadapter.NewFunction(handler, lambdaadapter.WithHooks(tracer, metrics))
//
// Without a Tracer the adapter starts no span and reads no trace header.
//
// # Spans
//
// The spans follow the messaging semantic conventions for push-based
// batch consumers (as the AWS Lambda conventions do for SQS events):
//
//	process orders   CONSUMER  Lambda mode only: the invocation, parent of its records' spans;
//	  │                        links to every record's producer context and to the invocation's X-Ray trace
//	  ├ process orders CONSUMER  one per record: the handler runs in it; linked to its producer
//	  └ process orders CONSUMER  …
//
// In long-running mode there is no invocation: each record's span has no
// parent (unless the context given to Run holds a span). A record
// delivered again (an uncounted Retry in long-running mode, a counted
// copy, Lambda's redelivery) gets a new span each time. A record concluded
// without its handler (a malformed KPL aggregate, one past the maximum
// record age) gets its span too, ended with what became of it. Each record
// of a batch handler's batch gets a span over the batch's call (the batch
// handler itself runs in the context Run was given).
//
// A record's producer context is read from its RSK1 headers with the W3C
// Trace Context propagator (traceparent, tracestate; WithPropagator for
// another). Following the conventions, it is a link, never the parent: one
// invocation handles records of many producers, and the handler already
// runs in the invocation's trace. A reply written with Message.Reply
// carries the traceparent of its record's span (Inject); counted copies,
// delay messages and dead letters keep the record's own headers, so they
// carry the producer's traceparent on.
//
// The invocation's X-Ray trace header is read from the context
// aws-lambda-go gives the handler (the "x-amzn-trace-id" key), never from
// the _X_AMZN_TRACE_ID environment variable, which is wrong when one
// process serves concurrent invocations. Root=1-5759e988-bd862e3fe1be46a994272793
// becomes the W3C trace id 5759e988bd862e3fe1be46a994272793 and Parent the
// span id. It is a link (attribute lambdaadapter.link.source = "aws.xray")
// by default, because the X-Ray segment it names reaches only X-Ray: as a
// parent it would leave a hole in any other backend, and an X-Ray header
// with Sampled=0 would make a parent-based sampler drop every span of the
// invocation. When the spans go to X-Ray, WithXRayParent makes it the
// parent, so the spans nest under the function's segment as the AWS Lambda
// conventions show. A span already in the invocation's context (an
// otellambda SERVER span, say) is always the parent.
//
// Span attributes:
//
//	messaging.system                    "aws.kinesis" (DefaultSystem; WithSystem)           both spans
//	messaging.operation.name            "process"                                           both
//	messaging.operation.type            "process"                                           both
//	messaging.destination.name          the stream's name (on an invocation: if all records share it)  both
//	aws.kinesis.stream_name             the same                                            both
//	messaging.batch.message_count       records in the invocation                           invocation
//	faas.trigger                        "pubsub"                                            invocation
//	faas.invocation_id                  the Lambda request id (from lambdacontext)          invocation
//	aws.lambda.invoked_arn              the invoked function's ARN                          invocation
//	lambdaadapter.batch_item_failures   item identifiers reported                           invocation, at its end
//	lambdaadapter.cut                   true: the deadline margin cut the invocation (status Error)  invocation
//	messaging.destination.partition.id  the shard id                                        record
//	messaging.message.id                the sequence number; SEQ/SUB for a user record of a KPL aggregate  record
//	aws.kinesis.partition_key           the partition key (not registered by the conventions)  record
//	lambdaadapter.sub_sequence_number   a KPL user record's index in its aggregate          record
//	lambdaadapter.attempt               1 on a first delivery                               record
//	lambdaadapter.outcome               ack, drop, retry, retry_after                       record, at its end
//	lambdaadapter.action                settled, copy, delay, dead_letter, retired, unsettled  record, at its end
//	lambdaadapter.reason                malformed aggregate, max record age                 record, at its end
//	error.type                          the action, when it is unsettled, dead_letter or retired  record
//
// A record whose action is unsettled, dead_letter or retired ends with
// status Error (the description is the outcome's error); the outcome's
// error, if any, is also recorded as an exception event, whatever the
// action (a Drop's, a counted Retry's).
//
// Kinesis has no registered messaging.system value. The conventions name a
// cloud service after its provider and product ("aws.dynamodb"; for
// messaging "aws.sns", registered after the older "aws_sqs"), and
// aws.kinesis is already the namespace of aws.kinesis.stream_name: hence
// "aws.kinesis". WithSystem("aws_kinesis") suits a backend that expects
// the underscore form.
//
// # Metrics
//
// Every metric carries messaging.system and messaging.destination.name, the
// name of the stream consumed (on writes too: the stream of the record the
// write was for). With WithShardAttribute, the metrics of records, writes,
// reads and checkpoints carry messaging.destination.partition.id as well.
// Durations and ages are in seconds.
//
//	messaging.client.consumed.messages      counter    {message}     records concluded (handler returned, or concluded without it),
//	                                                                 by lambdaadapter.outcome and lambdaadapter.action; messaging.operation.name
//	                                                                 "process"; error.type = the action when unsettled, dead_letter or retired
//	messaging.process.duration              histogram  s             how long the handler ran (same attributes; not for records concluded
//	                                                                 without it; a batch handler: its batch, once per record)
//	lambdaadapter.record.age                histogram  s             each record's age (now − arrival) when its handler returned
//	lambdaadapter.records.oldest_age        gauge      s             now − arrival of the oldest record: of each invocation at its end
//	                                                                 (Lambda), of the records in flight at each flush (long-running)
//	lambdaadapter.writes                    counter    {record}      copies, delay messages, dead letters, replies (lambdaadapter.write.kind);
//	                                                                 error.type when the write failed
//	lambdaadapter.invocation.duration       histogram  s             Lambda: each invocation, start to response
//	lambdaadapter.invocation.batch_item_failures counter {record}    Lambda: item identifiers reported
//	lambdaadapter.invocation.cuts           counter    {invocation}  Lambda: invocations the deadline margin cut
//	lambdaadapter.records.read              counter    {record}      long-running: records returned by GetRecords or a subscription
//	lambdaadapter.records.in_flight         gauge      {record}      long-running: read and not yet settled, at each flush
//	lambdaadapter.shard.behind_latest       gauge      s             long-running: MillisBehindLatest of each held shard's last read
//	                                                                 (always per shard; a shard stops being reported when its lease is
//	                                                                 lost, handed on or released)
//	lambdaadapter.leases.held               gauge      {lease}       long-running: leases held
//	lambdaadapter.lease.changes             counter    {change}      long-running: by lambdaadapter.lease.change (taken, stolen, received,
//	                                                                 lost, handed_on, released)
//	lambdaadapter.checkpoint.writes         counter    {checkpoint}  long-running: checkpoint writes; error.type when one failed
//
// The error.type of a failed write or checkpoint is the AWS error code
// when there is one (ProvisionedThroughputExceededException), else the
// adapter's error it matches: throttled, stream_not_found, too_large,
// invalid_record, queue_not_found, message_too_large, invalid_message,
// lease_lost, lease_not_found, lease_table_not_found, timeout, canceled;
// else _OTHER.
//
// # Flush
//
// The provider's reader and span processor export on their own schedule.
// Lambda mode calls Flush once per invocation, after the invocation span
// ended and before the response, inside the deadline margin; long-running
// mode every flush interval and at shutdown. Flush calls ForceFlush on a
// provider that has it (the SDK's MeterProvider and TracerProvider do), so
// that nothing is left in a batch processor when Lambda freezes the
// execution environment. Errors go to the global OpenTelemetry error
// handler (otel.Handle). Shut the providers down yourself when the program
// ends.
//
// A Tracer and a Metrics start no goroutine and are safe for concurrent
// use.
package otel
