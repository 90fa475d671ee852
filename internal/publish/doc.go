// Package publish holds every write lambdaadapter makes to AWS: records to
// Kinesis streams (Publisher: PutRecord, PutRecords) and messages to SQS
// queues (Queue: SendMessage, SendMessageBatch), and the data formats of
// what it writes there (dead letters, durable delays, retry copies).
// Deciding what to write, and when, is not its business: the adapter's
// settlement engine does that for both modes.
//
// # Clients
//
// A Publisher takes a KinesisAPI and a Queue an SQSAPI: small interfaces
// that *kinesis.Client and *sqs.Client satisfy, and that tests satisfy with
// hand-written fakes.
//
//	p, err := publish.NewPublisher(kinesis.NewFromConfig(cfg))
//	...
//	res, err := p.Put(ctx, publish.Record{Stream: arn, PartitionKey: "user-42", Payload: data})
//	results := p.PutBatch(ctx, records) // results[i] belongs to records[i]
//
// # Guarantees
//
// A record or message is reported written (a nil error) only when the
// service acknowledged it. The reverse does not hold: a call cut short by its
// context or the network may have been applied, so an error means "not
// known to be written", and a caller retrying it may write a duplicate.
// The same holds inside one call: when an attempt gets no answer (a reset or
// cut connection, a timeout, an unreadable answer), the publisher or the
// SDK's retryer makes the next, and the record may then be written twice
// although its result says written once. Result.Unanswered and
// QueueResult.Unanswered report it, per record, so that a caller can count
// or log the duplicates it may have made; an AWS error answer (throttling, a
// 5xx, a failed entry) and a connection that was never made are taken as
// not applied and do not set it.
//
// Limits are checked before any call: a record over the record size (data,
// envelope included, plus partition key; 1 MiB by default) or with a
// partition key over 256 characters fails with ErrTooLarge, a message over
// the queue's size with ErrMessageTooLarge. Neither is retried.
//
// Throttling, 5xx responses and transport failures are retried with
// exponential backoff and full jitter until the context ends; the wait is
// skipped, and the write fails at once, when the next attempt could not
// start before the context's deadline, so a Lambda function keeps its last
// moments for itself. A write that ran out of time while throttled matches
// ErrThrottled. A missing stream or queue (ErrStreamNotFound,
// ErrQueueNotFound) and other client errors are not retried. These retries
// come on top of the SDK client's own.
//
// Every error is wrapped once with its context, e.g.
//
//	publish: put to stream "orders": stream not found: ResourceNotFoundException: ...
//
// and matches its sentinel, the underlying error and, when time ran out, the
// context's error, with errors.Is. AWS errors are classified with errors.As
// on the SDK's typed exceptions and smithy.APIError, never by message.
//
// # Partition keys
//
// A record's partition key is the first that is not empty of: the record's
// PartitionKey, its partition-key header, the publisher's policy key
// (WithPartitionKey), and a generated key unique within the process, which
// spreads keyless records over the shards. The partition-key header never
// enters the envelope.
//
// # Formats
//
// The formats below are a stable contract: other programs (operators' tools,
// a replayer) may read and write them. A change that is not an addition of a
// header or of a JSON member comes with a new version.
//
// A dead letter to a Kinesis stream (DeadLetterRecord) is the original
// payload under an RSK1 envelope carrying the original user headers followed
// by x-dead-letter-reason, x-dead-letter-source-stream,
// x-dead-letter-shard-id, x-dead-letter-sequence-number,
// x-dead-letter-attempts and x-dead-letter-first-arrival (and, for a user
// record of a KPL aggregate, x-dead-letter-sub-sequence-number), written
// with the original partition key. The delivery headers (partition-key,
// kinesis-sequence-number, kinesis-shard-id, kinesis-sub-sequence-number)
// are not carried.
//
// A dead letter to an SQS queue (DeadLetterBody, ParseDeadLetterBody) is one
// JSON object:
//
//	{"version":1,"reason":"handler: bad input","source_stream_arn":"arn:aws:kinesis:eu-west-1:123456789012:stream/orders",
//	 "shard_id":"shardId-000000000001","sequence_number":"49590338271490256608559692538361571095921575989136588898",
//	 "partition_key":"user-42","attempts":3,"first_arrival":"2024-05-01T12:00:00.123Z",
//	 "dead_lettered_at":"2024-05-01T12:00:05.000Z","headers":[{"name":"content-type","value":"application/json"}],
//	 "payload_base64":"eyJpZCI6MX0="}
//
// (one line, no spaces, in the order shown). A durable delay (Delayed,
// ParseDelayed) is the SQS body the same binary forwards to the stream once
// it is due:
//
//	{"kind":"lambdaadapter.delay/v1","stream_arn":"arn:aws:kinesis:eu-west-1:123456789012:stream/orders",
//	 "partition_key":"user-42","not_before":"2024-05-01T12:15:00.000Z",
//	 "headers":[{"name":"x-ruststream-retry-count","value":"1"}],"payload_base64":"eyJpZCI6MX0="}
//
// Times are RFC 3339 in UTC with milliseconds (TimeFormat); an unknown time
// is "". Payloads are standard base64 with padding. Readers ignore members
// they do not know.
//
// A counted retry copy (written by the adapter's settlement engine, not by a
// function of this package) is the delivered record republished to its own
// stream with its partition key, its payload and its user headers (the
// delivery headers dropped), x-ruststream-retry-count set to the attempt
// that failed ("1" on the first copy of an original, as ruststream-kinesis
// writes it), FirstArrivalHeader carrying the original's arrival time and
// OriginHeader carrying the original's coordinates
// ("SHARD_ID#SEQUENCE_NUMBER#SUB_SEQUENCE_NUMBER") from the first copy on. A
// durable delay carries the same headers. A dead letter carries neither
// (FirstArrivalHeader becomes its first-arrival field or header).
//
// ForwardDelayed is the delay-queue forwarding both modes share: it writes
// the due delay messages to their streams with one PutBatch and sends the
// ones not yet due round the delay queue again.
//
// # Concurrency
//
// Publisher and Queue are safe for concurrent use, start no goroutines and
// need no closing. The format functions are pure.
package publish
