// Package consumer is lambdaadapter's long-running mode: a Kinesis consumer
// that reads a stream's shards itself, shares them with other instances
// through leases (package lease), and runs the same message.Handler with the
// same settlement as Lambda mode. It is the Go equivalent of the Kinesis
// Client Library, without its flaws.
//
//	c, err := consumer.New(consumer.Config{
//		Stream:  "orders",
//		Kinesis: kinesis.NewFromConfig(cfg),
//		Store:   lease.NewDynamoDB(dynamodb.NewFromConfig(cfg), "orders-leases"),
//		Handler: handler,
//		Start:   consumer.TrimHorizon(),
//	})
//	...
//	err = c.Run(ctx) // until ctx is cancelled (SIGTERM), then a graceful stop
//
// Most users reach it through lambdaadapter.Handle with
// WithMode(ModeECS).
//
// # What it guarantees
//
//   - Leases: every write that matters (take, renew, checkpoint, release) is
//     conditional on the owner and the lease counter, so a worker that lost a
//     lease can never checkpoint it. Expiry is judged by each worker's own
//     monotonic clock watching a lease's counter not change for
//     Config.LeaseDuration; wall clocks of different hosts never meet.
//     Renewal runs on its own timer (every third of the lease duration),
//     independent of reading, so a reader blocked on a full channel does not
//     lose its lease.
//   - Balance: shards are listed (paginated) at start and every
//     Config.ListInterval; each live worker aims at ceil(shards / workers)
//     leases, takes free and expired ones first, and steals at most one lease
//     at a time from the most-loaded worker. At start-up lease rows are
//     written (parents before children) and free leases taken concurrently,
//     eight store calls at a time.
//   - Reading: one reader per owned shard, starting after the checkpoint
//     (AFTER_SEQUENCE_NUMBER) or at Config.Start (LATEST by default); at most
//     5 GetRecords calls per second per shard, Limit Config.Limit (≤ 10,000);
//     a one-second wait after an empty read; throttling backs off and keeps
//     the iterator; an expired iterator is replaced by one after the last
//     read record (never a rewind to the checkpoint, never LATEST). Each
//     reader fetches one batch ahead: the next GetRecords call runs while the
//     records of the last one are handed off, so a shard holds at most two
//     batches beyond what the handlers got (memory: 2 × Limit records per
//     owned shard at most).
//   - Pace: all readers feed one channel of 64 deliveries; a reader waits
//     while it is full. Lanes keep order per partition key (a key always
//     maps to the same lane) with Config.Concurrency lanes. A BatchHandler
//     gets up to Config.BatchSize records, closed 50 ms after the first; every
//     element settles on its own.
//   - Checkpoints: each shard has a settle.Watermark. Its checkpoint is
//     written only when the watermark moves, only while the lease is held,
//     with at most one write in flight (the newest value wins) and at most one
//     write per Config.CheckpointInterval, and always on shutdown. A kill -9
//     re-delivers about one interval of records; a graceful stop none.
//   - Retries: as in Lambda mode. Copies and dead letters to a stream go
//     through a batching writer (PutRecords; the lane moves on, the record
//     holds the checkpoint until written). A long RetryAfter becomes a
//     durable delay message on Config.DelayQueue, which Run forwards itself
//     with Config.DelayReceiver: due messages are written to their stream and
//     deleted only after the write.
//   - Resharding: a closed shard is checkpointed SHARD_END only once every
//     delivery settled; a child starts only when each parent is SHARD_END or
//     trimmed away.
//   - Seek: Consumer.Seek moves running readers; the shard's watermark starts
//     afresh, records read before the seek are dropped on their way out of
//     the channel, and their late settlements change nothing.
//   - Shutdown: Run stops reading, lets deliveries in flight settle (at most
//     Config.ShutdownTimeout), writes the checkpoints and releases the
//     leases.
package consumer
