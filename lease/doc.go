// Package lease is the lease layer of lambdaadapter's long-running mode
// (-mode=ecs): many worker processes share the shards of Kinesis streams,
// each shard held by at most one worker at a time, through one lease per
// shard in a lease table. It is the Go equivalent of the Kinesis Client
// Library's lease table, fenced on every write.
//
// A Store keeps the leases: Memory for a single instance (the default when
// no table is configured), DynamoDB for many. A Tracker decides which
// leases of other workers have expired. NewOwnerID names a worker.
//
//	store := lease.NewDynamoDB(dynamodb.NewFromConfig(cfg), "leases")
//	if err := store.Check(ctx); err != nil { ... } // names "bootstrap leases init" when missing
//	owner := lease.NewOwnerID(hostname, taskID)
//	tracker := lease.NewTracker(10 * time.Second)
//
//	for _, shard := range shards { store.Ensure(ctx, lease.Key{Stream: name, ShardID: shard.ID}, shard.Parents) }
//	ls, _ := store.List(ctx, name)
//	tracker.Observe(ls)
//	for _, l := range ls {
//		if l.Owner != owner && tracker.Expired(l) {
//			held, err := store.Take(ctx, l, owner) // ErrLeaseLost: someone else was faster
//			...
//		}
//	}
//	// while reading the shard, renew well within the lease duration:
//	held, err = store.Renew(ctx, held)           // ErrLeaseLost: stop reading at once
//	held, err = store.Checkpoint(ctx, held, seq) // same
//	held, err = store.Release(ctx, held)         // on graceful stop
//
// # Fencing
//
// Every lease has a Counter that every write (take, renew, checkpoint,
// release) bumps, and every such write is conditional on BOTH the owner and
// the counter of the lease the writer holds. A worker writes only what it
// read last: if anything changed in between — another worker stole the
// lease, or the worker itself wrote from a stale copy — the condition fails,
// the write changes nothing, and the error matches ErrLeaseLost.
//
// So a worker that was paused (GC, a network partition, a frozen container)
// past its lease duration and lost its lease can never checkpoint, renew or
// release it afterwards: its counter is stale the moment another worker
// takes the lease. The owner condition alone would not do: once the lease
// went round and came back to the same owner id, a write from an old copy
// (a slow checkpoint of the previous tenure) would pass. The counter alone
// would not either: any worker that merely read the lease could renew or
// checkpoint it. Together they make each held lease a one-time token: the
// next write consumes it and returns the next one. Concurrent writes from
// one held lease (say twenty workers taking a free lease they all read at
// counter 0) therefore have exactly one winner.
//
// Records handed out before the loss may still be settled by the old
// owner's handlers; its checkpoint write then fails, so the new owner
// restarts from the last checkpoint that was written by a holder, and those
// records are delivered again (at-least-once, never lost).
//
// # Expiry
//
// Expiry does not read anyone's wall clock (KCL's way). A Tracker notes, on
// this process's monotonic clock, when it first saw each lease's counter
// value; an owned lease is expired when its counter has not changed for the
// lease duration since. A live owner renews several times per duration, so
// its counter keeps moving. Clock skew between machines is harmless; only
// the rate of each process's own clock matters. A worker that just started
// knows no counter yet and so waits one lease duration before it takes
// owned leases; free leases (Owner == "") may be taken at once.
//
// A worker must stop using its lease before others may take it: it should
// renew at a fraction of the duration (a third, say) and treat a lease it
// could not renew within the duration as lost, even before a write tells it
// so. RenewedAt is stored for operators only and never used for expiry.
//
// # Table schema
//
// One DynamoDB table serves any number of streams; create it with
// DynamoDB.CreateTable (the command bootstrap leases init -table NAME does).
// Capacity is on demand (PAY_PER_REQUEST). Each row is one lease:
//
//	attribute        type     meaning
//	leaseKey         S        hash key: "stream:shardId" (Key.String), the stream's NAME, never its ARN
//	leaseOwner       S        owner id of the holder; absent when the lease is free
//	leaseCounter     N        fencing token, bumped by every take, renew, checkpoint and release
//	checkpoint       S        last settled sequence number, or SHARD_END; absent when none
//	parentShardIds   L of S   parents of a child shard (split or merge); absent when none
//	ownerSwitches    N        takes that changed the owner (for operators)
//	renewedAt        S        writer's wall clock at the last write, RFC 3339 UTC with milliseconds; display only
//	stream           S        the stream's name (List filters on it)
//
// Reads are strongly consistent (GetItem and Scan with ConsistentRead); List
// scans the table, page by page, with a filter on stream. Writes are single
// conditional requests:
//
//	Ensure      PutItem     attribute_not_exists(leaseKey), then GetItem if the row exists
//	Take        UpdateItem  leaseCounter = :c AND (leaseOwner = :o | attribute_not_exists(leaseOwner))
//	Renew       UpdateItem  leaseCounter = :c AND leaseOwner = :o
//	Checkpoint  UpdateItem  leaseCounter = :c AND leaseOwner = :o
//	Release     UpdateItem  leaseCounter = :c AND leaseOwner = :o  (REMOVE leaseOwner)
//	Delete      DeleteItem  unconditional
//
// UpdateItem returns the new row (ReturnValues ALL_NEW). A
// ConditionalCheckFailedException becomes ErrLeaseLost, a
// ResourceNotFoundException ErrTableNotFound. No transactions and no
// ReturnValuesOnConditionCheckFailure are used, so the package also runs
// against dynalite and DynamoDB Local.
package lease
