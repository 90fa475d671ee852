// Package faultnet puts faults between an AWS SDK client and a local
// stand-in (kinesis-local, dynalite, fauxqs): the throttling, 5xx answers,
// partial batch failures, lost and cut answers, latency, resets, black holes
// and partitions that the stand-ins never produce, shaped as AWS sends them,
// so that the SDK's own retryer and the adapter's error handling meet real
// errors. It is test harness code: it lives in the nested module soak/, so
// that toxiproxy and its dependencies stay out of the library's go.mod.
//
// A Route is one client's path to one stand-in:
//
//	client → TCP (toxiproxy, in process) → AWS (HTTP, AWS-shaped errors) → stand-in
//
// Give each worker its own Route per service, so one worker can lose
// DynamoDB while the others keep it:
//
//	r, err := faultnet.NewRoute(faultnet.DynamoDB, "http://127.0.0.1:4569")
//	defer r.Close()
//	// the worker: o.BaseEndpoint = aws.String(r.URL()), or AWS_ENDPOINT_URL_DYNAMODB=r.URL()
//	remove := r.AWS.Inject(faultnet.Rule{Ops: []string{"UpdateItem"}, Fault: faultnet.Throttled(), Times: 5})
//	restore := r.TCP.Cut() // the worker loses DynamoDB ...
//	restore()              // ... and gets it back
//	remove()
//
// # The AWS layer
//
// An AWS is a reverse proxy that, with no rule, forwards every call and its
// answer unchanged, flushing answer bytes as they arrive (Kinesis
// SubscribeToShard's event stream passes through live). Rules pick calls by
// operation (the part of X-Amz-Target after the dot: "GetRecords",
// "PutItem", "SendMessageBatch"), by an optional filter on the request body,
// by a count (Times) and by a probability drawn from the layer's seeded
// generator (Rate, SetSeed). Calls counts, per operation, the calls
// received, forwarded and faulted.
//
// Every made-up error answer carries the service's headers —
// Content-Type application/x-amz-json-1.1 (Kinesis) or 1.0 (DynamoDB, SQS),
// x-amzn-RequestId, Kinesis's x-amz-id-2, DynamoDB's x-amz-crc32 of the body
// (which the SDK checks) — and a JSON body {"__type": ..., "message": ...}.
// The code is in __type: bare for Kinesis, after the service's namespace for
// DynamoDB ("com.amazonaws.dynamodb.v20120810#Code") and SQS
// ("com.amazonaws.sqs#Code"), as the SDK's AWS JSON deserializer expects
// ("namespace#Code" → Code). SQS answers also carry x-amzn-query-error
// ("Code;Sender" or "Code;Receiver"), from which the SDK (SQS is
// query-compatible) takes the error's code and fault side. No answer carries
// X-Amzn-ErrorType: the stand-ins send none, nor do AWS's documented DynamoDB
// and SQS examples; the SDK would read the code from it first.
//
// The faults on the wire, and what the SDK (aws-sdk-go-v2, standard
// retryer) makes of them; "typed" means errors.As finds the SDK's exception
// type (for example *kinesis/types.ProvisionedThroughputExceededException):
//
//   - Throttled: Kinesis and DynamoDB 400 ProvisionedThroughputExceededException
//     (DynamoDB's with ThrottlingReasons Table{Read|Write}ProvisionedThroughputExceeded
//     and the table's ARN), SQS as SQSThrottled. Typed; retried as throttling.
//   - LimitExceeded: Kinesis 400 LimitExceededException. Typed; retried as
//     throttling.
//   - ExpiredIterator: Kinesis 400 ExpiredIteratorException. Typed; not retried.
//   - KMSThrottling: Kinesis 400 KMSThrottlingException. Typed; not retried
//     (its code is not among the SDK's throttling codes).
//   - InternalFailure: Kinesis 500 InternalFailure, DynamoDB 500
//     InternalServerError (typed), SQS 500 with x-amzn-query-error
//     InternalError;Receiver. Retried (5xx).
//   - ServiceUnavailable: 503 ServiceUnavailable on all three (SQS with
//     ServiceUnavailable;Receiver). Retried (5xx).
//   - ThrottlingException: DynamoDB 400, __type
//     com.amazon.coral.availability#ThrottlingException. Typed; retried as
//     throttling.
//   - RequestLimitExceeded: DynamoDB 400, with ThrottlingReasons
//     Table{Read|Write}AccountLimitExceeded. Typed; retried as throttling.
//   - SQSThrottled: SQS 403 RequestThrottled, x-amzn-query-error
//     RequestThrottled;Sender. Typed; retried as throttling.
//   - APIError(status, code, message): any other error in the service's shape;
//     classified by the SDK as it classifies code.
//   - PartialFailure(n, code): Kinesis PutRecords, SQS SendMessageBatch,
//     DeleteMessageBatch and ChangeMessageVisibilityBatch forward all but
//     every n-th entry; the answer is 200 with those entries failed
//     (PutRecords: FailedRecordCount and ErrorCode/ErrorMessage in their
//     places; SQS: Failed entries with Code, SenderFault false). The caller
//     must retry the failed entries itself, as with AWS.
//   - CutBody: forwarded; the stand-in's status, headers and half its body,
//     then the connection closes. A deserialization error with
//     io.ErrUnexpectedEOF.
//   - LostResponse: forwarded, so the write happens; then DynamoDB 400
//     ConditionalCheckFailedException (typed: as if the answer had been
//     lost and the retry's condition had failed), Kinesis and SQS their 500.
//   - Latency(d): forwarded after d.
//
// Every error's code is also the smithy.APIError's ErrorCode. A fault on SubscribeToShard is
// answered before any event, as AWS answers LimitExceededException or
// ResourceInUseException. A rule whose fault has no answer for the layer's
// service panics at Inject (a programmer's error); PartialFailure applies
// only to the batch writes it names and skips other calls.
//
// The shapes follow the AWS documentation: the errors common to all AWS
// APIs (InternalFailure 500, ServiceUnavailable 503); the Kinesis Data
// Streams API reference (each operation's errors; PutRecordsResultEntry,
// whose ErrorCode is ProvisionedThroughputExceededException or
// InternalFailure, the latter with message "Internal Service Failure"); the
// DynamoDB API reference (errors with the namespaced __type, ThrottlingReason:
// ResourceType+OperationType+LimitType and the table's ARN); the SQS
// developer guide's "Interpreting Amazon SQS JSON API responses"
// (x-amzn-query-error, namespaced __type) and the SQS service model as the
// SDK carries it (RequestThrottled: HTTP 403, query code RequestThrottled).
// Each shape is checked against the real SDK clients in this package's
// tests, without and with the stand-ins.
//
// Approximate, and said so here: messages are AWS's where its
// documentation or its known answers give them, made up otherwise (a
// throttled GetRecords says "Rate exceeded for shard." without naming the
// shard, which only AWS knows from the iterator); the __type of SQS's 5xx
// answers and of ServiceUnavailable on DynamoDB is not documented (the code
// the SDK reports is); ARNs and messages use account 000000000000 and
// us-east-1, as the stand-ins do.
//
// # The TCP layer
//
// A TCP is a toxiproxy v2.5.0 proxy run in process by toxiproxy's Go library
// (no daemon, no HTTP API). Its faults, each removed by the function it
// returns:
//
//	Latency(l, j)   the answers' bytes delayed by l ± j (latency toxic, toward the client)
//	Bandwidth(kb)   kb KB/s each way (bandwidth toxic)
//	ResetPeer(d)    the answer's first bytes dropped and the connection reset (RST) after d
//	                (reset_peer toxic); the request reached the upstream, so its effect happened
//	BlackHole()     nothing passes either way and connections stay open: calls time out
//	                (timeout toxic, timeout 0); removing it closes those connections
//	Cut()           proxy disabled: connections refused, open ones closed; restore
//	                listens on the same port again
//
// # Lifecycle
//
// Every type is safe for concurrent use. Close ends the calls in flight
// (their clients see the connection closed) and waits for the layer's own
// goroutines. The goroutines toxiproxy runs per connection, and those of the
// AWS layer's HTTP transport, end as their connections close, which Close
// causes; the libraries give no handle to wait for them, so a goroutine-leak
// check after Close must allow them a moment (the tests poll goleak).
package faultnet
