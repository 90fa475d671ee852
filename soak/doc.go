// Package soak is the seeded fault soak of lambdaadapter: both modes run
// for minutes under the faults production brings, and a checker holds the
// logs and the streams to the promises of the README and docs/faults.md.
//
//	make soak SEED=7 DURATION=10m      # the soak (10 minutes by default)
//	make soak-regressions              # every seed that once found a bug
//	make soak-scale                    # the scale soak (issue 30), about 3 minutes
//	make test                          # includes the fixed-seed 45 s run
//
// It is a module of its own (github.com/shardsettle/lambdaadapter/soak), so
// the fault layer's dependencies (toxiproxy) stay out of the main module. The
// run itself is TestSoak (build tag integration); the checker and the
// schedule are plain code with unit tests.
//
// # The run
//
// The harness starts its own stand-ins with scripts/standins.sh (or, with
// LAMBDAADAPTER_SOAK_STANDINS=running, uses those the AWS_ENDPOINT_URL_*
// variables point at), builds the bootstrap binary, and runs:
//
//   - five bootstrap -mode=ecs workers on an 8-shard stream with a 3 s lease,
//     a 1 s checkpoint interval, a cap of 3 attempts, a dead-letter queue and
//     a delay queue; each worker reaches Kinesis, DynamoDB and SQS through its
//     own routes of the fault layer (AWS_ENDPOINT_URL_KINESIS, _DYNAMODB,
//     _SQS), so one worker can be cut off from one service;
//   - Lambda mode: the bootstrap under the Runtime Interface Emulator on a
//     4-shard stream (dead-letter stream, delay queue), driven by
//     lambdaadaptertest.EventSource; the function's writes (copies, dead
//     letters, delay messages) and the event source's reads each go through
//     routes of their own;
//   - two producers, straight to the stand-in: a steady rate plus bursts,
//     over 400 (long-running) and 60 (Lambda) partition keys; each record's
//     JSON payload carries a unique id and its key's sequence number; 2% ask
//     for a durable delay once (RetryAfter 6 s, through the delay queue; in
//     Lambda mode only when the run is shorter than 2 minutes, as a delay
//     message a stopped worker had received waits out a 60 s visibility
//     timeout);
//   - the schedule drawn from the seed (NewPlan, printed first): kill -9 and
//     SIGTERM of a worker (each replaced by a new process), SIGSTOP for 1-3
//     lease durations, a worker cut off from DynamoDB or from Kinesis
//     (connections refused or black-holed), bursts of AWS errors on every
//     route of a service (throttling, 500s, partial failures, cut bodies,
//     lost responses of DynamoDB's conditional writes, as AWS sends them),
//     slow handlers (the demo command's sleep_ms), a split and a merge, and a downstream outage (60 s; a fifth
//     of a run shorter than 5 minutes) during which the demonstration
//     handler retries every record (LAMBDAADAPTER_DEMO_OUTAGE_FILE), so
//     records go through counted copies to the dead-letter target.
//
// Then the producers stop, the harness waits until every record is done,
// stops every worker with SIGTERM, reads the source streams, the dead-letter
// queue and stream back, and checks. The processes' logs, the schedule, the
// applied fault windows, the report and the run (run.json, which TestRecheck
// checks again) are kept in -soak.out (a temporary directory, removed when
// the run passes, unless given).
//
// # The scale soak
//
// TestScaleSoak (make soak-scale; -scale, not part of make test) runs no
// faults. On an 8-shard stream whose shards 2 and 5 are hot (explicit hash
// keys aim the producer's keys at shards; a hot shard gets -scale.hot = 8
// times a cold one's -scale.rate = 10 records/s, of 1 KiB each), the
// workers (the soak's settings, straight to the stand-ins, no dead-letter
// or delay queue; GOMAXPROCS=1, a task of one vCPU) pay a CPU cost per
// byte: LAMBDAADAPTER_DEMO_HASH_ROUNDS (-scale.rounds) SHA-256 passes over
// each payload. It starts 3 workers,
// then 3 more, then stops 4 of the 6 with SIGTERM at once. After each
// change it waits until the lease table has converged (every shard's
// leaseOwner a running worker, unchanged for 8 lease durations; it reads
// the rows' leaseKey and leaseOwner only, so it measures any balancing),
// then measures for -scale.measure: each worker's CPU utilization
// ((utime+stime) of /proc/<pid>/stat over wall time), leases, hot leases
// and records/s, the spread (highest CPU over the mean and over the
// lowest), the lease moves of the change, and how busy the machine and the
// stand-ins were. Then it drains, stops the rest and runs the checker: the
// run fails on any broken promise, any record lost and any record handled
// twice (nothing in it may re-deliver: moves and scale-in are graceful, no
// worker is killed). The report (-scale.report; make soak-scale writes
// the first of benchmarks/scale-soak-DATE.txt, -DATEb.txt, ... -DATEz.txt not
// there yet, then -DATE-HHMMSS.txt) begins with the command, the commit and the date.
//
// # The checker
//
// Run.Check reads the handler's "record" (handler start) and "record
// outcome" lines and the consumer's lease lines of every process, what was
// produced, what the streams and dead-letter targets hold, and when each
// fault was active, and reports per fault kind (a finding counts in the row
// of every fault window it falls in, each window extended by a few lease
// durations for what the fault sets off):
//
//   - lost: every produced id was acked (or dropped) by some handling, or
//     dead-lettered;
//   - overlap: per shard, no worker starts a record after another worker
//     started one of the shard within the same tenure of its lease (between
//     two of its "lease taken" lines): starts a1 < b1 < a2 of workers A and B
//     are an overlap. Overlapping starts less than two lease durations apart
//     form an episode, reported with every start of the shard in it (by any
//     worker). A handler already running when its process was paused may
//     finish;
//   - stale lease (self-fencing): a worker starts no record, on a lease it
//     took before, after resuming from a pause (each lasts at least a lease
//     duration) or more than a lease duration after it was cut off from
//     DynamoDB;
//   - per-key order: no original record starts before every earlier record
//     of its key (in production order) ended a handling; counted copies give
//     up their place, as docs/long-running.md says;
//   - duplicates: each record of a stream (original or copy) is started once,
//     except in-process retries (same worker and lease, a higher attempt).
//     Every other start again is counted by its cause: kill -9 or a pause
//     within about a checkpoint interval (handler time + 2 × checkpoint
//     interval + one lease-store call) before it, a cut from DynamoDB (its
//     checkpoints could not be written), a shard its worker dropped by
//     self-fencing under a DynamoDB error burst after logging a failed
//     lease write of it (docs/faults.md's "DynamoDB failing longer than 0.9 ×
//     D": random errors on every call leave a lease unrenewed that long now
//     and then, above all with the soak's 3 s lease), Lambda redelivering a
//     batch from a reported record; each of these also when an unsettled record (a write
//     that could fail under an outage or errors) held the checkpoint. After
//     SIGTERM or a planned move, the records behind one still in flight at
//     the shutdown timeout (the worker logs it) are documented too.
//     Otherwise SIGTERM, planned moves, lost leases and anything unexplained are
//     broken promises, as is a start after the lease went stale (after
//     resuming from a pause, or more than a lease duration into a cut from
//     DynamoDB, on a lease taken before);
//   - extra copies: no more counted copies with retry count n than handlings
//     that failed at attempt n (a durable delay forwarded twice is
//     documented), no more dead letters than handlings that failed at the cap;
//   - stall: after the last fault, every record is done within two lease
//     durations plus twice the backlog at the best rate of the run plus 10 s
//     (a durable delay whose message a stopped worker had received gets the
//     delay queue's 60 s visibility timeout more);
//   - lease flapping: at most 2 lease changes per shard in any minute
//     outside fault windows (and the start-up);
//   - exits: SIGTERM ends a worker with status 0 (Run returned nil) within
//     docs/long-running.md's bound (the shutdown timeout, then the longer of it and a
//     30 s write round, then two lease writes) plus 10 s, kill -9 with the
//     signal; no worker exits on its own or hangs (a worker past the bound
//     gets SIGQUIT, so its stacks are in its .stderr file, then SIGKILL).
//
// The run fails when any finding breaks a promise, or when the harness
// itself failed (a fault it could not apply, a producer that could not
// write).
//
// What is approximate: the bounds are times measured on one machine's wall
// clock (every process shares it); the kill and pause bound does not read
// the checkpoint the worker left; "held behind an unsettled record" is
// inferred from fault windows, not observed.
package soak
