// Package consumer is lambdaadapter's long-running mode: a Kinesis consumer
// that reads a stream's shards itself, shares them with other instances
// through leases (package lease), and hands the records to the same
// settlement engine as Lambda mode, with the same outcome semantics. It is
// the Go equivalent of the Kinesis Client Library, without its flaws.
//
// Users reach it through the module root: the engine that Config.Engine
// needs is built there, from the handler and the retry options.
//
//	s, err := lambdaadapter.NewService(handler, lambdaadapter.WithAWSConfig(cfg),
//		lambdaadapter.WithStream("orders"),
//		lambdaadapter.WithLeaseTable("orders-leases"),
//		lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()))
//	...
//	err = s.Run(ctx) // until ctx is cancelled (SIGTERM), then a graceful stop
//	// s.Seek, s.Owned and s.Owner reach this package's Consumer.
//
// # What it guarantees
//
//   - Leases: every write that matters (take, renew, checkpoint, transfer,
//     release, delete) is conditional on the owner and the lease counter, so
//     a worker that lost a lease can never checkpoint it. Expiry is judged
//     by each worker's own monotonic clock watching a lease's counter not
//     change for Config.LeaseDuration; wall clocks of different hosts never
//     meet. Renewal runs on its own goroutine and timer (every third of the
//     lease duration; a tenth of it after a round in which a renewal failed,
//     so that a store failing for up to 0.9 × D − D/3 − D/10, about D/2,
//     from the worst moment costs no lease), independent of reading, listing and balancing, so a
//     reader blocked on a full channel does not lose its lease. Every
//     lease-store call has a deadline (a third of the lease duration, at
//     least 1s), and a shard's lease writes wait in turn without holding
//     the lease value, so a hung store call delays a renewal by at most one
//     call deadline. A lease write whose answer was lost after DynamoDB
//     applied it (the SDK's retry then failed its condition) is recognised
//     by the store as this write (see lease.Store) and counts as made, not as
//     a lost lease; it was applied after the call started, so the fence
//     below still dates it from the call's start. A renewal or checkpoint
//     that got no answer at all before its deadline is remembered by the
//     store: if it was applied, the next write from the same lease is
//     refused, the store recognises the row as that write's and makes the
//     next write again from it, so the lease is kept (the fence still counts
//     only answered writes).
//   - Self-fencing: a worker hands a shard's records to handlers only while
//     its lease is fresh. With lease duration D (Config.LeaseDuration),
//     renewals every D/3 and a margin of D/10, a lease whose last successful
//     write (take, renewal or checkpoint) started more than D − D/10 ago on
//     this process's monotonic clock is dropped locally: the shard stops at
//     once (reason "fenced"): its reader stops, no further record of it
//     starts, its running handlers' contexts are cancelled, and nothing more
//     is written for it — no checkpoint, and no copy, dead letter or delay
//     message (a write round ends when the fence of one of its shards
//     lapses: at its deadline as the renewals made while the round is on
//     the wire move it, so a slow round the renewals outlive is not cut). Another worker counts the lease expired at the earliest D
//     after it read the counter of that write, which it read after the
//     write started, so the first worker stops at least D/10 before the
//     second may take the lease. The check runs before every hand-off of a
//     record to a lane (engine.Shard.Live) and before every write, so a
//     process that was paused (SIGSTOP, a frozen container, a long GC) and
//     resumes starts nothing of a lease that went stale meanwhile. The bound
//     assumes each host's monotonic clock advances while the process is
//     paused (Linux CLOCK_MONOTONIC does for SIGSTOP and cgroup freezes, not
//     for a suspended VM), clock rates that differ by far less than 10 %,
//     and writes that reach AWS within the margin after they left. A handler
//     already running may finish; what it returns changes nothing.
//   - Shards: each held shard is one value with a named life (shard.go):
//     it owns its reader (and fetcher), its checkpointer and its fence
//     timer, starts them when the lease is taken, and stops them through
//     one path for one reason — lost, fenced (both at once, writing
//     nothing), ended, gone, handed over or shut down (graceful: reading
//     stops, what is in flight settles, and the lease's last write takes
//     the last checkpoint along) — which it reports to the Consumer.
//     Balancing plans from one read of the table (planBalance, a pure
//     function) and then carries the plan out.
//   - Workers: each worker heartbeats a row of its own in the lease table
//     (at start and at every renewal round) and removes it when Run ends;
//     the row of a worker whose counter stood still for the lease duration
//     is removed by the others (fenced by that counter).
//   - Balance: one worker leads (see "Who plans" below): it lists the
//     shards (at start, every Config.ListInterval, and when a shard
//     ended), reads the table every LeaseDuration/2 and plans for all
//     (planAssignment: even load by default, even counts with
//     AssignByCount). It gives free and expired leases (those of dead
//     workers) with a take in the receiver's name, and moves live leases
//     by asking their owner to hand them over to the receiver
//     (lease.Store.RequestHandoff). The owner that sees the request stops
//     reading the shard, lets its records in flight settle, and transfers
//     the lease with its last checkpoint in one conditional write
//     (lease.Store.Transfer); the new owner reads on from that checkpoint,
//     so a planned move re-delivers nothing that settled. A move is not
//     urgent: past Config.ShutdownTimeout the owner keeps waiting, up to
//     handOverPatience (5 minutes) more, with the lease renewed and the
//     handlers running, and writes that fail are made again meanwhile, so
//     a slow handler or a throttled copy settles its record before the
//     transfer; only records waiting for an in-process retry are given up
//     (they come again). After the patience, or at once when Run's stop
//     begins, the owner cancels the shard's handlers and waits, up to
//     max(ShutdownTimeout, 30 s), for the shard's writes under way to
//     return before it transfers, so that a copy does not land after the
//     transfer (a write whose answer never came may still land: its
//     record then has a second copy). The new owner starts a lease handed
//     to it only after renewing it on the counter it read (a stale read
//     starts nothing), and the old owner never takes up again a lease it is
//     handing over, though its row names it until the transfer. At start-up
//     lease rows are written
//     (parents before children) and free leases taken concurrently, eight
//     store calls at a time.
//   - Reading: one reader per owned shard, starting after the checkpoint
//     (AFTER_SEQUENCE_NUMBER) or at Config.Start (LATEST by default); at most
//     5 GetRecords calls per second per shard, Limit Config.Limit (≤ 10,000);
//     a one-second wait after an empty read; throttling backs off and keeps
//     the iterator; an expired iterator is replaced by one after the last
//     read record (never a rewind to the checkpoint, never LATEST). Each
//     reader fetches one batch ahead: the next GetRecords call runs while the
//     records of the last one are handed off (at most two batches per shard
//     held on the way to the channel). A reader also pauses while
//     Config.MaxWaiting + 2 × Limit records of its shard are past the
//     checkpoint (a record that does not settle holds every later one).
//     A GetRecords answer is decoded in one pass (internal/getrecords) into
//     exactly what the SDK's deserializer returns; its records' data share
//     one buffer. By default that buffer, the answer's deliveries (the
//     Messages) and their headers' block are new for every answer and
//     left to the handlers, which may keep them; the decoded records'
//     slices are reused once the engine finished with every record of the
//     answer (handled, written where its outcome says, given up on or
//     dropped). With engine.Config.RecycleMessages
//     (lambdaadapter.WithRecycledMessages) the whole storage is reused then,
//     as in Lambda mode. A record in flight holds its answer's storage, so
//     storage more than four times larger than an answer needs is not
//     reused for it (after a burst, small answers take new storage and the
//     large is left to the garbage collector). Error answers, and bodies
//     that decoder does not accept, go to the SDK's deserializer.
//   - Enhanced fan-out (Config.EnhancedFanOut): Run looks the stream
//     consumer up, registers it when missing (a concurrent registration by
//     another worker is looked up again) and waits until it is ACTIVE
//     before any reader starts. Each reader then subscribes to its shard
//     with SubscribeToShard (at most one call per second per shard) and
//     passes one batch per event with records, under the same contract as
//     the GetRecords reader. A subscription that ends (after five minutes)
//     or fails is renewed after the last record passed on, or, before any,
//     after the last event's continuation sequence number; an event read
//     but not passed on is never skipped. ResourceInUseException and
//     throttling back off (1s doubling to 5s); a subscription silent for a
//     minute is renewed; the event that names the child shards ends the
//     shard; ResourceNotFoundException is checked with GetShardIterator: a
//     trimmed shard is gone, else the stream consumer was deregistered and
//     is registered again. Every event stream is closed when its reader
//     stops.
//   - Pace: all readers feed one channel of 64 deliveries, passed in runs
//     of up to 16 of one shard (a batch's records are registered on the
//     watermark in one piece, then passed on); a reader waits while it is
//     full, and while Config.MaxWaiting records wait for a lane. Lanes keep order per partition key, Config.Concurrency keys at
//     a time. A BatchHandler gets up to Config.BatchSize records, closed 50
//     ms after the first; every element settles on its own.
//   - Checkpoints: each shard has a settle.Watermark. Its checkpoint is
//     written only when the watermark moves, only while the lease is held,
//     with at most one write in flight (the newest value wins) and at most one
//     write per Config.CheckpointInterval (the lease's take counting as the
//     first), and always on hand-over, shard end and shutdown. A kill -9
//     re-delivers about one interval of records. A graceful stop (shutdown,
//     hand-over) re-delivers nothing when every record settled in time;
//     otherwise the checkpoint stops before the first record that did not,
//     and it and every record after it come again, settled ones too (other
//     keys, or user records of the same KPL aggregate after it: the lease
//     stores how many of the aggregate's user records settled in a row
//     from its first, lease.Lease.SubSequence).
//   - Retries: a record that stays unsettled (an uncounted Retry, or a copy,
//     dead letter, delay message or reply that could not be written) holds
//     its shard's checkpoint and is delivered again in process after a
//     backoff (Config.RetryBackoff doubling up to Config.MaxRetryBackoff,
//     500ms and 30s by default), with Message.Attempt counted up; later
//     records of its partition key that have not started wait for it, other
//     keys go on. Only the record comes again; the shard is not read again.
//     When the shard is handed over, lost or stopped meanwhile, the record
//     comes again from the checkpoint, on the shard's next owner.
//   - Writes: counted copies, dead letters and delay messages are written
//     by the engine's batching writer (rounds of up to 500 writes with
//     PutRecords and SendMessageBatch, four rounds at once, each at most 30s,
//     retries included) while the lanes go on; the record settles once
//     written, and holds the checkpoint until then. A long RetryAfter
//     becomes a durable delay message on the delay queue, which Run forwards
//     itself with Config.DelayReceiver: due messages are written to their
//     stream and deleted only after the write.
//   - Resharding: a closed shard is checkpointed SHARD_END only once every
//     delivery settled; a child starts only when each parent is SHARD_END or
//     trimmed away. The worker that ends a parent, or finds it trimmed away
//     while reading it, lists the shards and balances at once (at most
//     once a second), so the children start right after their parents,
//     not at the next listing (Config.ListInterval) or balancing (every
//     Config.LeaseDuration/2). A child that starts from its first record
//     because this consumer read its parents records that start as its
//     checkpoint (lease.TrimHorizon, or lease.AtTimestamp when Config.Start
//     is a timestamp), so it starts there again after the parents' rows are
//     gone. Starting at TRIM_HORIZON or a timestamp gives closed shards rows
//     too, so a parent's records after the start are read.
//   - Trimmed shards: a shard no longer listed (retention passed) counts as
//     done for its children and is never taken; a reader whose shard
//     disappears releases its lease; the row is deleted (fenced by owner and
//     counter) once it is free, expired or this worker's, and no child still
//     needs it (it is SHARD_END, or every child has a checkpoint of its own).
//   - Seek: Consumer.Seek moves running readers; seeks of one shard are
//     serialised (one reader at a time, always); the shard's watermark starts
//     afresh, records read before the seek are dropped on their way out of
//     the channel, and their late settlements change nothing.
//   - Shutdown: when Run's context is cancelled or Shutdown is called, Run
//     gives up the leader row and removes its worker row (no leader gives
//     a leaving worker a lease), stops reading, lets deliveries in flight
//     settle (at most Config.ShutdownTimeout, or until Shutdown's context
//     ends; records waiting for an in-process retry are left to the next
//     owner), and releases the leases, each with its last checkpoint in
//     the same conditional write. Every goroutine and timer it started has
//     ended when it returns — no delayed copy is written afterwards —
//     except a handler that ignores its cancelled context (logged).
//
// # Who plans
//
// One leader per stream plans for every worker, as the KCL 3 does; the
// alternative, every worker planning from the same read, makes every
// worker read the whole table every round, which is the cost issue 30
// removes (workers × shards rows per round).
//
//   - Election: the leader row (lease.LeaderKey) is a lease: taken when
//     free or expired, renewed with the shards' leases every
//     LeaseDuration/3, fenced the same way (a leader whose renewal did not
//     succeed within LeaseDuration − LeaseDuration/10 stops planning),
//     released at a graceful stop. Every other worker reads it each round
//     (one strongly consistent GetItem) to learn that it should follow and
//     to take over when it expires.
//   - Failure modes. A dead leader: no plan for at most LeaseDuration plus a
//     round, while every worker goes on reading and renewing what it
//     holds; free and expired leases wait that long (a dead worker's
//     shards: 2 × LeaseDuration at worst instead of LeaseDuration). Two
//     leaders for a moment (a paused one that resumes before it notices):
//     each of their writes is conditional on the row as read (a take on
//     owner and counter, a hand-over request on the owner and no request
//     pending), and the plan is a deterministic function of the read, so
//     the worst is a take or a request that fails. A leader cut off from
//     the table plans nothing, as any worker cut off writes nothing. A
//     follower that misses an index update (the index is eventually
//     consistent) adopts its lease at its next round; it reads each lease
//     the index names with a consistent GetItem and starts it only after a
//     renewal on the counter read, so a stale index starts nothing. A
//     lease given to a worker that dies before adopting it expires and is
//     given again.
//   - Cost (read units per second, S shards, W workers, lease duration D,
//     listing interval L): the leader (2/D + 1/L) Scans of the table, each
//     ceil((317·S + 220·W) / 4096) units; each follower 2/D × (1 unit for
//     the leader row + 0.5 for its owner-index query). At 1,000 shards and
//     50 workers, D 10 s and L 30 s: 19 + 15 = 34 units/s, where every
//     worker Scanning cost W times the leader's part, 945.
//   - Convergence: moves are hand-overs, at most Config.MaxMoves (8) per
//     round of D/2, or one per worker while the busiest is above 1.5 ×
//     the mean (a fleet that took its leases before a leader planned),
//     each chosen from the busiest worker to the least loaded with a
//     margin that makes a move back impossible while the load figures
//     stay within half the tolerance (15 %) of the truth, none while the
//     two differ by less than 5 % of a CPU (unless the receiver holds
//     nothing), and none to or from a worker that has not measured a
//     lease it was just given; takes are not bounded. Costs are fitted
//     each round to the workers' own figures (assign.go: per record, per
//     byte, per GetRecords call and per shard, but not per call while a
//     worker publishes no calls, as an older version does; a round whose
//     figures are too unsettled to fit keeps the last fit), and each
//     lease's reported rates, like each worker's CPU scale, are averaged
//     by the leader over its rounds (rateSmoothing: about twenty rounds;
//     planSmoothing: about ten), so that one interval's noise moves no
//     lease; a worker that joins a led
//     fleet follows from its first round and waits to be given its share
//     (a quarter of the mean or more, lowShare: filling it further
//     often took a second hand-over that lowered nobody's peak). But a
//     worker at 90 % of its CPU or more (saturatedLoad; by its reading and
//     its fitted costs both) gives leases to a worker below that, by the
//     same margin, though it is within the bound: when the whole fleet
//     falls behind (each worker reads about one CPU), the mean says the
//     fleet is even, and a worker added for the lag would otherwise take
//     a quarter of a share and leave the rest behind. While a
//     fleet starts (startTight lease durations after the leader gave out
//     the leases of a fleet starting from nothing) the tolerance is half
//     (startTolerance): the start moves every lease anyway, and a fleet
//     left tighter crosses the tolerance on noise less often later.
//     The drop of the mean that joiners cause does not by itself move
//     leases: until a worker leaves or dies (which raises the mean
//     again), a worker gives by load only above 1.2 × the mean
//     (joinedLimit), the balance the fleet keeps; the leader counts the
//     joiners (leadership.plans). A joiner is filled first from a worker
//     above the tolerance of the mean now, with a lease
//     that brings it within (bestFor): a move made anyway, that spares
//     that worker a move of its own later. A lease that would take the
//     least-loaded worker above the bound goes to the worker that then
//     gives the fewest leases on (receiverFor), and never to one that
//     could not give enough on (a worker holding a hot lease already:
//     two hot leases on one worker stay there together, above the bound
//     for good); the same holds for a dead worker's leases (take,
//     takerFor).
//     A worker that finds the leader row held but not yet saying how the
//     fleet balances (a leader in its first round) follows too, and so
//     does one that found it free but lost the take of it to another
//     worker (the workers of a fleet starting together race for it). A leader
//     whose fleet is starting (most leases free) gives nothing out while
//     the live workers it reads change from one plan to the next, and
//     plans again a second later (formingWait), for at most D/4 after its
//     first plan: the first leader of a starting fleet does not give every
//     lease to the few workers registered yet, to move them again. Load
//     figures trail the moves by about a heartbeat (D/3) and are
//     smoothed, so a change of load settles in a few rounds (the scale
//     simulation measures it: BENCHMARKS.md).
//   - Mixed fleets: a worker row without load is an older version's, which
//     plans for itself; while one lives, or while the table has no owner
//     index, the leader writes "plan:self" in its row and every worker
//     balances as before (planBalance), but waits as the leader does for
//     a starting fleet (leadership.selfForming: with most leases free, no
//     take while the live workers it reads change, for at most D/4), so
//     that workers starting together each take their share rather than
//     the first taking most and the others asking for them back. The
//     leader writes "plan:leader" once the last one is gone. Meanwhile it
//     goes on averaging the leases' throughputs, the workers' smoothing
//     factors and the cost model each round as its plans do (observe), so
//     that its first plan for the fleet prices the leases by figures
//     averaged over many rounds, not one interval's.
//   - Several streams (Group): the consumers of one process, one per
//     stream, form a group under one owner id; only the first (the
//     primary) competes for the leader row, named after its stream. While
//     it leads it reads every stream's rows each round, with one Scan
//     (lease.DynamoDB.SnapshotStreams: the cost of one stream's), and
//     plans them in one assignment, so balancing spans the streams; a worker's CPU is the
//     same in each of its rows, and it receives leases only of the streams
//     where it has a live row. The row says which streams the leader plans
//     ("plan:leader:a,b"); a member of a stream the leader does not plan
//     (the leader runs an older list) balances that stream for itself.
//     While the row does not say yet (a leader in its first round, or no
//     leader yet: the row free or not there, which the primaries take or
//     make in their rounds), the members follow (a round lost when the
//     leader turns out not to plan their stream), rather than take leases
//     by count that its plan would move again.
//     The other members of the leader's process follow like any worker
//     (the owner index, renewals), but list their streams; a lease the
//     leader takes for its own process in another stream is handed to that
//     stream's member at once. Cost with N streams: the leader's part as
//     above (its Scans read every row of the table either way), plus one
//     listing Scan per stream every L; each follower the follower's part
//     once, not once per stream: the primary reads the leader row and
//     queries the owner index (which names the worker's leases of every
//     stream), and the other members use those reads while they are
//     younger than 3D/4 (Group.shared; a member whose primary leads, or
//     whose reads fail, reads for itself), the primary starting a round of
//     a member at once when the index names a lease of its stream that it
//     does not hold yet; the leader's other members query the index each:
//     (2/D + N/L) · ceil((317·S + 220·N·W) / 4096) + ((W − 1) · 1.5 +
//     (N − 1) · 0.5) · 2/D, S the shards of every stream. At 4 streams of
//     250 shards and 50 workers: 30 + 15 = 45 units/s (the scale
//     simulation counts 44.8, -scalesim.streams=4; 88.9 when every member
//     read for itself), where every consumer Scanning cost 4,153.
package consumer
