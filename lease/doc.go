// Package lease is the lease layer of lambdaadapter's long-running mode
// (-mode=ecs): many worker processes share the shards of Kinesis streams,
// each shard held by at most one worker at a time, through one lease per
// shard in a lease table. It is the Go equivalent of the Kinesis Client
// Library's lease table, fenced on every write.
//
// A Store keeps the leases and the registered workers: Memory for a single
// instance (the default when no table is configured), DynamoDB for many. A
// Tracker decides which leases, and which workers, of others have expired.
// NewOwnerID names a worker.
//
//	store := lease.NewDynamoDB(dynamodb.NewFromConfig(cfg), "leases")
//	if err := store.Check(ctx); err != nil { ... } // names "bootstrap leases init" when missing
//	owner := lease.NewOwnerID(hostname, taskID)
//	tracker := lease.NewTracker(10 * time.Second)
//
//	for _, shard := range shards { store.Ensure(ctx, lease.Key{Stream: name, ShardID: shard.ID}, shard.Parents) }
//	store.Heartbeat(ctx, name, owner, load) // register (load may be nil); again at every renewal round
//	snap, _ := store.Snapshot(ctx, name) // one read: leases and workers
//	tracker.Observe(snap.Leases)
//	tracker.ObserveWorkers(snap.Workers)
//	for _, l := range snap.Leases {
//		if l.Owner != owner && tracker.Expired(l) {
//			held, err := store.Take(ctx, l, owner) // ErrLeaseLost: someone else was faster
//			...
//		}
//	}
//	// while reading the shard, renew well within the lease duration:
//	held, err = store.Renew(ctx, held)              // ErrLeaseLost: stop reading at once
//	held, err = store.Checkpoint(ctx, held, seq, 0) // same (sub > 0: inside a KPL aggregate)
//	held.Checkpoint, held.SubSequence = last, 0     // on graceful stop: the last checkpoint...
//	held, err = store.Release(ctx, held)            // ...goes with the release, one conditional write
//
// # Handoff
//
// Balancing moves leases between live workers without stealing them. A
// worker with fewer leases than its share asks a busier one for a lease:
// RequestHandoff sets the lease's Handoff to the requester, conditional on
// the owner alone and without touching the counter, so the owner's fenced
// writes go on as before. The owner sees the request in the lease its next
// Renew or Checkpoint returns, stops reading the shard, settles what it has
// in flight, and hands the lease over with Transfer, its last checkpoint
// set in the held lease (one write, fenced like any write). The requester finds itself the owner in a later
// Snapshot and only then reads the shard, from that checkpoint: a planned
// move need deliver no record twice. One request per lease stands at a time;
// Take, Transfer and Release clear it. A lease whose owner died is not handed
// over but expires and is taken, as before.
//
// # Workers
//
// Each worker registers itself for every stream it reads with Heartbeat, at
// every renewal round: one row per worker and stream, whose counter every
// heartbeat bumps. Workers count one another from Snapshot to share the
// shards evenly. A Tracker watches worker counters as it watches lease
// counters (ObserveWorkers, WorkerExpired); a worker whose counter stood
// still for the lease duration is dead, and any worker may remove its row
// with RemoveWorker, fenced by the counter observed. A worker removes its own
// row at shutdown the same way.
//
// # The leader and the owner index
//
// Snapshot scans the table: its cost grows with the rows of every stream
// in it, and when every worker scans at every balance interval, with
// workers × shards. Instead one worker per stream may plan for all: the
// leader, the holder of the stream's leader row (LeaderKey, a lease on a
// reserved key, taken, renewed and released like any other, that
// Snapshot returns as Snapshot.Leader and never among its Leases). The
// leader Snapshots the table each balance interval, takes free or expired
// leases on behalf of other workers (Take with their owner id) and asks
// owners to hand leases over (RequestHandoff). Every other worker only
// renews its leases, heartbeats, reads the leader row (Get) and finds the
// leases assigned to it with Owned: a Query of the table's owner index,
// which reads only the index entries of its own rows.
//
// The owner index, leaseOwner-index, is a global secondary index with hash
// key leaseOwner and projection KEYS_ONLY: each entry holds the row's
// leaseKey and leaseOwner, about 100 bytes. A free lease has no leaseOwner
// attribute and so no entry. Worker rows keep their leaseOwner attribute
// (older versions require it), so the index holds them, and held leader
// rows: Owned drops both by their key, which costs one small entry per
// stream the owner heartbeats in. The index is eventually consistent, and
// only so: a lease just handed over may be missing from its new owner's
// Owned for a moment, and still listed in the previous owner's; the
// fenced writes, not Owned, decide who holds a lease.
//
// DynamoDB.CreateTable creates the index with the table. A table created
// by an older version has none: every call works on it but Owned, whose
// error matches ErrNoOwnerIndex until the index is ACTIVE.
// DynamoDB.AddOwnerIndex adds it online (bootstrap leases init does, when
// run again on the table), and HasOwnerIndex tells whether it is usable.
//
// # Load
//
// With each Heartbeat a worker may publish its Load, for the leader's plan:
// its CPU utilization and the throughput of each lease it held over its
// last interval. The worker row keeps it in one map attribute, load:
// {cpu: N, shards: {shardId: [records/s, bytes/s, polls/s]}}, each value
// rounded to 3 significant digits and at most the 1,000 busiest shards, so
// a row stays under about 39 KB (about 37 bytes per shard: 1 KB with 20
// shards). A worker row without load (an older version's, or one that
// published none) has Load nil, and older versions ignore the attribute.
// The polls (Throughput.Polls, GetRecords calls per second) came later: a
// shard's list without them reads as Polls unknown (-1), and versions that
// read only records and bytes ignore the third element.
//
// # Trimmed shards
//
// Once Kinesis no longer lists a shard (its retention passed), its lease row
// is useless. Delete removes it, fenced by owner and counter like a write: a
// worker deletes such a row while it is free, expired or its own, with the
// lease as it read it, so a row that changed in between (renewed by a live
// owner, say) is not deleted.
//
// # Checkpoint values
//
// A checkpoint is a sequence number (the last settled record: reading
// resumes after it), or one of three sentinels. ShardEnd marks a closed
// shard read to its end: finished, never taken again, and its children may
// start. TrimHorizon and AtTimestamp record where a child shard (of a split
// or merge) started when it started from its first record, or from the
// consumer's start timestamp, because its parents were read: written before
// any of its records settled, they keep the child starting there after a
// restart even once its parents' rows are deleted, instead of at the
// consumer's configured start (LATEST, say). The long-running consumer
// deletes a trimmed parent's row only once it is ShardEnd or every child
// has a checkpoint of its own.
//
// # Fencing
//
// Every lease has a Counter that every write (take, renew, checkpoint,
// transfer, release) bumps, and every such write is conditional on BOTH the
// owner and the counter of the lease the writer holds; so is Delete. A worker writes only what it
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
//	leaseCounter     N        fencing token, bumped by every take, renew, checkpoint, transfer and release
//	checkpoint       S        last settled sequence number, SHARD_END, TRIM_HORIZON or AT_TIMESTAMP; absent when none
//	parentShardIds   L of S   parents of a child shard (split or merge); absent when none
//	ownerSwitches    N        takes and transfers that changed the owner (for operators)
//	handoff          S        owner id of the worker that asked for the lease (RequestHandoff); absent when none
//	renewedAt        S        writer's wall clock at the last write, RFC 3339 UTC with milliseconds; display only
//	stream           S        the stream's name (List filters on it)
//	writeToken       S        random token of the last take, renew, checkpoint, transfer or release (see below); absent before one
//
// Rows written before handoff existed have no handoff attribute and read as
// leases nobody asked for. A free lease has no leaseOwner attribute; a row
// an older writer left with an empty one (leaseOwner = "") reads as free
// too, and is taken and deleted as free. This version never writes an
// empty owner: DynamoDB refuses an empty string as an index key, so such a
// write would fail on a table with the owner index.
//
// The leader row of a stream (LeaderKey) is a lease row with key
// "stream:@leader", kind "leader" and workerStream in place of stream, so
// that an older version's Snapshot (which skips kinds it does not know)
// and its scans filtering on stream never see it.
//
// Each registered worker has a row of its own in the same table:
//
//	attribute        type     meaning
//	leaseKey         S        hash key: "stream:@worker:ownerId"; never a lease's, as no shard id starts with '@'
//	kind             S        "worker"; lease rows have no kind attribute
//	workerStream     S        the stream's name (Snapshot filters on it)
//	leaseOwner       S        the worker's owner id
//	leaseCounter     N        bumped by every heartbeat; watched for expiry
//	renewedAt        S        writer's wall clock at the last heartbeat, as for leases; display only
//	load             M        the worker's Load (see Load); absent when none
//
// A worker row has no stream attribute, so an older version's scan of the
// leases (which filters on stream) never sees it: workers of different
// versions may share a table during a rolling deployment.
//
// Reads are strongly consistent (GetItem and Scan with ConsistentRead), but
// for Owned, which queries the owner index (an index cannot be read
// consistently); Snapshot scans the table, page by page, with a filter on
// stream or workerStream, telling the rows apart by kind. Writes
// are single requests, all but Heartbeat conditional:
//
//	Ensure          PutItem     attribute_not_exists(leaseKey), then GetItem if the row exists
//	Take            UpdateItem  leaseCounter = :c AND (leaseOwner = :o | (attribute_not_exists(leaseOwner) OR leaseOwner = ""))  (REMOVE handoff)
//	Renew           UpdateItem  leaseCounter = :c AND leaseOwner = :o
//	Checkpoint      UpdateItem  leaseCounter = :c AND leaseOwner = :o
//	Transfer        UpdateItem  leaseCounter = :c AND leaseOwner = :o  (REMOVE handoff; SET checkpoint from the held lease)
//	Release         UpdateItem  leaseCounter = :c AND leaseOwner = :o  (REMOVE leaseOwner, handoff; SET checkpoint from the held lease)
//	RequestHandoff  UpdateItem  leaseOwner = :o AND (attribute_not_exists(handoff) OR handoff = :h)  (SET handoff only)
//	Delete          DeleteItem  leaseCounter = :c AND (leaseOwner = :o | (attribute_not_exists(leaseOwner) OR leaseOwner = ""))
//	Heartbeat       UpdateItem  none: SET kind, workerStream, leaseOwner, renewedAt (, load) ADD leaseCounter 1 (REMOVE load)
//	RemoveWorker    DeleteItem  leaseCounter = :c AND kind = "worker"
//	Owned           Query       leaseOwner-index, leaseOwner = :o, paginated; on a ValidationException, DescribeTable
//	AddOwnerIndex   UpdateTable GlobalSecondaryIndexUpdates Create, then DescribeTable until ACTIVE
//
// Every attribute name in an expression goes through
// ExpressionAttributeNames. UpdateItem returns the new row (ReturnValues
// ALL_NEW). A
// ConditionalCheckFailedException becomes ErrLeaseLost, a
// ResourceNotFoundException ErrTableNotFound.
//
// Take, Renew, Checkpoint, Transfer and Release also SET writeToken to a
// random token (crypto/rand.Text) new for each call and unchanged across
// the client's retries of its request. When such a write's answer is lost
// after DynamoDB applied it (a timeout, a reset connection, a 500 after
// the write), the SDK sends it again and the retry's condition fails: the
// counter already moved on. On every ConditionalCheckFailedException of a
// fenced write, DynamoDB reads the row back (GetItem, ConsistentRead) and,
// when it carries the call's token, counter held+1, the owner the write
// set and the checkpoint it wrote, returns it as the write's result
// instead of ErrLeaseLost. No other write can leave that token (another
// worker's, or this process's own earlier write from the same held lease,
// has a token of its own); a handoff requested after the write does not
// bump the counter and is returned as part of the row. A renewal or
// checkpoint that got no answer at all (its call ended in its deadline, a
// reset or a 5xx after the client's retries) may have been applied too;
// DynamoDB remembers such writes per lease until the next answered one.
// When the next write from the same held lease is refused and the row read
// back carries the token of one of them, counter held+1, the same owner and
// that write's checkpoint, the lease is still held one counter on: the
// write is made again from there (once). When the row cannot be read back
// the error stays ErrLeaseLost. This costs one GetItem per
// failed condition, and nothing otherwise. When DynamoDB refuses a
// Heartbeat as invalid (a ValidationException), Heartbeat calls Check to
// tell a table of another key schema (ErrNotLeaseTable) from another
// error. No transactions and no
// ReturnValuesOnConditionCheckFailure are used, so the package also runs
// against dynalite and DynamoDB Local.
//
// # Read cost
//
// DynamoDB bills a read by the size of the items it reads, rounded up to
// 4 KB per request (per page): 1 read unit per 4 KB strongly consistent,
// half eventually consistent. As encoded (TestItemSizes, with a 55-byte
// owner id): a held lease row about 280 bytes, a free one 110, a worker
// row 220 plus about 37 per shard of its load, the leader row 175, an
// owner index entry 100. So, for a table of S leases held by W workers
// publishing their load (S shard entries in all):
//
//	Snapshot (Scan, strongly consistent)  ceil((317·S + 220·W + 175) / 4096) units per call, counting every row of the table
//	Owned (Query, eventually consistent)  0.5 · ceil(100·(L + streams) / 4096) units: 0.5 while the owner's L leases are under ~40
//
// A Scan reads, and bills, every row of the table, whatever its filter:
// rows of other streams too. So a worker that reads several streams of one
// table reads them with one SnapshotStreams (one Scan, the cost of one
// Snapshot) rather than a Snapshot each. A Query of the index reads only
// the owner's entries. Writes that do not change leaseOwner (renewals, checkpoints,
// heartbeats) leave the index alone; takes, transfers and releases write
// its entry too.
//
// A call made with a deadline keeps the client's retryer (what is retryable,
// the retry quota) but spaces its attempts by the time left: up to eight
// attempts, full jitter, each backoff at most a quarter of the time left, so
// that a throttled lease write is tried again within its deadline instead
// of spending it in one of the SDK's backoffs (up to 1 s, then 2 s).
package lease
