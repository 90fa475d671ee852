// Command e2e is the end-to-end benchmark of the long-running mode. It is
// test tooling, not product: a module of its own (bench/e2e, like tools/),
// so its dependencies stay out of the library's go.mod, and it builds the
// consumer through the library's public API only (lambdaadapter.NewService,
// then Service.Run). It runs against the local
// stand-ins (kinesis-local and dynalite; run scripts/bench-e2e.sh, which
// starts a set of its own and stops it again, or start them with
// scripts/standins.sh start) and prints every figure from one run:
//
//   - records/s of a plain GetRecords loop, of the consumer with an
//     in-memory lease store and of the consumer with a DynamoDB lease store,
//     all reading the same records from TRIM_HORIZON with the same Limit,
//     and the ratios DynamoDB ÷ in-memory and consumer (DynamoDB) ÷ plain
//     loop;
//   - the CPU time per record of each (getrusage user + system of the
//     worker process; it includes the benchmark's own per-record
//     bookkeeping, the same in every phase);
//   - DynamoDB writes (PutItem, UpdateItem, DeleteItem, counted by a
//     wrapper around the client of the lease store) per record;
//   - the records delivered again after a consumer is killed with SIGKILL
//     half-way and a second one finishes the stream;
//   - the peak RSS of each worker process (VmHWM) and its minor page
//     faults during the phase (first touches of memory, part of its
//     system time);
//   - with -peers (the default), the same figures of a peer,
//     github.com/harlow/kinesis-consumer v0.5.0, with its in-memory and
//     with its DynamoDB checkpoint store, side by side with the plain loop
//     and the consumer, and the ratios consumer ÷ harlow of records/s
//     (target ≥ 1) and of CPU time per record (target below 1), each
//     consumer phase against the harlow phase with the same kind of store.
//
// Usage, from the repository's root (scripts/bench-e2e.sh builds it and
// passes the stand-ins' endpoints and pids):
//
//	cd bench/e2e && go run . [-records 60000] [-size 512] [-shards 4] [-limit 500]
//	    [-checkpoint-interval 1s] [-rounds 10] [-concurrent-rounds 10] [-peers=true]
//	    [-cpuprofile-dir DIR]
//
// Each measured phase runs in a fresh child process (the same binary, with
// -worker), so CPU time and peak RSS belong to that phase alone and no phase
// inherits another's heap. The parent writes the records once, with
// PutRecords batches of 500 (fixed pseudo-random partition keys and
// payloads, each payload starting with the record's id), to one stream that
// every phase then reads from TRIM_HORIZON: the data is the same for every
// phase, and kinesis-local writes only a few hundred records per second.
// Each DynamoDB phase gets a fresh lease table, so it finds no checkpoints of
// an earlier phase. -fresh-streams writes a fresh stream for every phase
// instead. The read phases (three, five with -peers) run in -rounds
// rounds, their order rotated by one place from round to round; the report
// gives medians, and each ratio is the median of the per-round ratios.
//
// The stand-in's speed drifts by ±10-20 % from one phase to the next, so a
// sequential ratio carries that noise. -concurrent-rounds rounds run all
// read phases at the same time instead, each worker reading the same
// stream, all clocks started together: the stand-in's changes of speed touch
// all alike, and their rates over the common window compare them
// without that noise. The window runs from the moment the last of them had
// handled 10 % of the records with every shard reading (its last shard's
// first GetRecords call started) to the moment the first had handled them
// all;
// each rate is the least-squares slope through the worker's progress marks
// (every 2.5 % of the records) in it, so the edges of the window, which cut
// the staircase of batch arrivals anywhere, do not bias it. A round whose
// window holds less than 20 % of some worker's records (too few -records
// for the start-ups, which take longer with five workers in the
// stand-in's queue) is left out of the concurrent figures and reported.
// All read at once in the window, past their start-ups. Start-up is left out
// there because in a shared queue a start a few milliseconds later costs a
// whole place in the stand-in's queue; the sequential rounds measure it at
// full weight, and the report gives both. With -peers five workers share
// the stand-in in a concurrent round (three without), so each reads at
// about a fifth of its speed; the ratios do not depend on that.
//
// The plain loop is the baseline a correct production loop must follow: one
// goroutine per shard, GetShardIterator TRIM_HORIZON, then GetRecords with
// the same Limit, call starts at least 200 ms apart per shard (the AWS limit
// of 5 calls per second per shard), a 1 s pause after a read that returned no
// records, a doubling backoff after an error, and the same per-record work as
// the consumer's handler (parse the id in the payload, mark it seen). It has
// no leases, no checkpoints, no channel and no lanes. Its clock runs from
// before ListShards to the moment the last distinct record is marked; the
// consumer's runs from Service.Run (which, with a DynamoDB lease store,
// first checks the table with DescribeTable) to the moment its handler
// marks the last distinct record.
//
// A wrapper around each worker's Kinesis client follows every shard's calls
// and reports, besides counts and latencies, the start-up (until the last
// shard's first GetRecords call) and the reader slack: the time by which
// calls started later than the rules above allowed. When the stand-in is
// the bottleneck, records/s of every phase follow its speed, which varies
// from round to round; start-up and slack do not, and the report turns their
// excess over the plain loop's into noise-free estimates of the ratios.
//
// The kill -9 test runs a worker with the DynamoDB store that prints the id
// of every record before its handler acknowledges it, kills it with SIGKILL
// once it printed -kill-at of the records, then runs a second worker on the
// same lease table until every record was handled: a record both handled was
// re-delivered. Its LeaseDuration is -kill-lease-duration, which shortens
// the wait for the dead worker's leases but does not change what is
// re-delivered. Its DynamoDB traffic passes through a small proxy that
// completes requests a killed worker leaves behind (dynalite exits when a
// client resets a connection in the middle of a request).
//
// # The peer: harlow/kinesis-consumer v0.5.0
//
// The harlow phases (-worker harlow-memory, harlow-dynamodb, harlow-kill)
// build harlow's consumer.New(stream, options...) and call its Scan with
// a callback that does the same per-record work as the consumer's handler
// and returns nil (harlow then sets that record's checkpoint in its
// store). Each setting, and why:
//
//   - WithClient: the same counting Kinesis client as every other phase
//     (it has the three calls harlow needs: ListShards, GetShardIterator,
//     GetRecords), so harlow's calls, latencies, start-up and pacing are
//     measured the same way.
//   - WithShardIteratorType(TRIM_HORIZON): every phase reads the whole
//     stream from its start (harlow's default is LATEST).
//   - WithMaxRecords(-limit): the same GetRecords Limit as every phase
//     (harlow's default is 10,000).
//   - WithScanInterval(200 ms): harlow reads each shard on a time.Ticker
//     of this period, and 200 ms is the plain loop's and the consumer's
//     minimum spacing of call starts (the AWS limit of 5 GetRecords calls
//     per second per shard); harlow's default of 250 ms would hold it to 4
//     calls per second. Two differences cannot be configured, and both
//     only let harlow call sooner, never later: a fixed ticker lets the
//     call after a slow one start at the next tick, less than 200 ms after
//     the previous start (a call never starts before the previous one
//     ended, as in the rules), and harlow has no pause after a read that
//     returned no records (the others wait 1 s). The report counts
//     harlow's calls that started earlier than the plain loop's rules.
//   - In-memory phase: WithStore(store/memory.New()), harlow's in-memory
//     checkpoint store (a sync.Map of each shard's last sequence number,
//     set after every record), not the default no-op store, so that it
//     keeps checkpoints in memory as the consumer's in-memory lease store
//     does.
//   - DynamoDB phase: WithStore(store/ddb.New(app, table,
//     WithDynamoClient(c), WithMaxInterval(-checkpoint-interval))). It
//     buffers each shard's last sequence number and writes it with PutItem
//     every interval (harlow's default is 1 minute; -checkpoint-interval,
//     1 s, is the consumer's CheckpointInterval) and when Scan returns.
//     Its table is fresh per phase, in the schema harlow's README gives
//     (partition key namespace, sort key shard_id, both strings; on
//     demand). store/ddb takes a concrete *dynamodb.Client, so its calls
//     are counted by a middleware at the start of that client's stack, by
//     operation and once per call like the wrapper of the lease store.
//   - The default group (AllGroup): one process reads every shard, as
//     each consumer worker here does. harlow's DynamoDB consumer group
//     (group/consumergroup/ddb, leases and hand-offs, marked experimental
//     in v0.5.0) is not measured.
//   - Scan, not ScanBatch: Scan hands records over one at a time as they
//     arrive; ScanBatch (opt-in) holds them in batches of 100 or for up to
//     1 s.
//   - No logger (harlow's default discards its lines); -worker-log-level
//     info or debug passes them to the worker's stderr.
//
// A timed harlow phase cancels Scan's context once every record was
// handled; Scan then writes the buffered checkpoints and the store is shut
// down. The harlow kill -9 test is the consumer's with harlow's DynamoDB
// store: harlow has no leases, so the second worker starts from the
// checkpoints at once.
//
// The output is a table for people and a final line of JSON for tools. Each
// target is marked PASS or MISS; the exit status is 0 unless the benchmark
// itself failed (a stand-in missing, records lost, a worker crashed).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/lease"
)

// Targets of the issue, and the figures the Rust original measured.
const (
	targetDynamoVsMemory  = 0.95
	targetConsumerVsPlain = 0.95
	targetWritesPerRecord = 0.01
	// targetCPUVsPlain is issue 10's bound on the consumer's CPU per record
	// over the plain loop's, same run.
	targetCPUVsPlain    = 0.5
	rustDynamoVsMemory  = 0.24
	rustWritesPerRecord = 1.0
)

// idWidth is the number of decimal digits of the record id at the start of
// every payload.
const idWidth = 10

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	records            int
	size               int
	shards             int
	limit              int
	checkpointInterval time.Duration
	leaseDuration      time.Duration
	rounds             int
	concurrentRounds   int
	killAt             float64
	timeout            time.Duration
	kinesisEndpoint    string
	dynamoDBEndpoint   string
	cpuProfileDir      string
	skipKill           bool
	logLevel           string
	level              slog.Level
	kinesisPID         int
	dynamoDBPID        int
	freshStreams       bool
	peers              bool
	floor              bool
	handlerWait        time.Duration
	recycle            bool

	// Worker mode (internal: the parent starts its children with these).
	worker     string
	stream     string
	table      string
	printIDs   bool
	cpuProfile string
	waitGo     bool
}

// run is main without the process: it returns the exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.records, "records", 60000, "records written to and read from each stream")
	fs.IntVar(&o.size, "size", 512, "payload size in bytes (at least 10: the id comes first)")
	fs.IntVar(&o.shards, "shards", 4, "shards per stream")
	fs.IntVar(&o.limit, "limit", 500, "GetRecords Limit, the same for the plain loop and the consumer")
	fs.DurationVar(&o.checkpointInterval, "checkpoint-interval", time.Second, "consumer CheckpointInterval")
	fs.DurationVar(&o.leaseDuration, "kill-lease-duration", 3*time.Second,
		"consumer LeaseDuration in the kill -9 test only: it shortens the wait before the second worker takes the dead one's leases, not what is re-delivered")
	fs.IntVar(&o.rounds, "rounds", 10, "rounds of the read phases (plain, memory, DynamoDB, and with -peers harlow memory and harlow DynamoDB); medians are reported")
	fs.Float64Var(&o.killAt, "kill-at", 0.5, "fraction of the records the first worker handles before it is killed with SIGKILL")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "longest a phase may take")
	fs.StringVar(&o.kinesisEndpoint, "kinesis-endpoint", envOr(getenv, "AWS_ENDPOINT_URL_KINESIS", "http://127.0.0.1:4568"), "Kinesis endpoint (kinesis-local)")
	fs.StringVar(&o.dynamoDBEndpoint, "dynamodb-endpoint", envOr(getenv, "AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4569"), "DynamoDB endpoint (dynalite)")
	fs.StringVar(&o.cpuProfileDir, "cpuprofile-dir", "", "write CPU, mutex and block profiles of every worker phase into this directory (profiling perturbs the timings)")
	fs.IntVar(&o.kinesisPID, "kinesis-pid", 0, "pid of kinesis-local: its CPU time per phase is reported (scripts/bench-e2e.sh sets it)")
	fs.IntVar(&o.dynamoDBPID, "dynamodb-pid", 0, "pid of dynalite: its CPU time per phase is reported (scripts/bench-e2e.sh sets it)")
	fs.StringVar(&o.logLevel, "worker-log-level", "warn", "log level of the consumer in the workers (debug, info, warn, error), on stderr")
	fs.BoolVar(&o.skipKill, "skip-kill", false, "skip the kill -9 test")
	fs.BoolVar(&o.freshStreams, "fresh-streams", false,
		"write a fresh stream for every phase instead of writing one stream once that every phase reads (kinesis-local writes only a few hundred records/s)")
	fs.BoolVar(&o.peers, "peers", true,
		"also run github.com/harlow/kinesis-consumer v0.5.0 as a peer, with its in-memory and its DynamoDB checkpoint store, in every sequential and concurrent round and in a kill -9 test of its own")
	fs.DurationVar(&o.handlerWait, "handler-wait", 0,
		"every phase's handling of a record first waits this long (time.Sleep, a stand-in for a call downstream): the plain loop and harlow handle a shard's records one after another, the consumer runs records of different partition keys in parallel lanes")
	fs.BoolVar(&o.recycle, "recycle", false,
		"the consumer phases run with lambdaadapter.WithRecycledMessages (the messages' memory reused once finished) instead of messages the handler may keep")
	fs.BoolVar(&o.floor, "floor", false,
		"also run the plain loop with the consumer's GetRecords decoder (internal/getrecords.Fast) as a read phase: the floor of the consumer's CPU per record, reading and decoding without anything else")
	fs.StringVar(&o.worker, "worker", "", "internal: run one phase in this process (plain, plain-fast, memory, dynamodb, kill, harlow-memory, harlow-dynamodb, harlow-kill)")
	fs.StringVar(&o.stream, "stream", "", "internal: the worker's stream")
	fs.StringVar(&o.table, "table", "", "internal: the worker's lease table")
	fs.BoolVar(&o.printIDs, "print-ids", false, "internal: the worker prints the id of every handled record")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "internal: the worker's CPU profile file")
	fs.BoolVar(&o.waitGo, "wait-go", false, "internal: the worker prints \"ready\" and waits for a line on stdin before it starts its clock")
	fs.IntVar(&o.concurrentRounds, "concurrent-rounds", 10, "rounds in which all read phases run at the same time, sharing the stand-in's speed; 0 skips them")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if o.worker != "" {
		if err := runWorker(o, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "bench: worker %s: %v\n", o.worker, err)
			return 1
		}
		return 0
	}
	rep, err := runBench(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.print(stdout)
	return 0
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

func (o *options) check() error {
	switch {
	case o.records < 1:
		return errors.New("-records must be at least 1")
	case o.size < idWidth || o.size > 1<<20:
		return fmt.Errorf("-size must be in %d..%d", idWidth, 1<<20)
	case o.shards < 1:
		return errors.New("-shards must be at least 1")
	case o.limit < 1 || o.limit > 10000:
		return errors.New("-limit must be in 1..10000")
	case o.checkpointInterval <= 0 || o.leaseDuration <= 0 || o.timeout <= 0:
		return errors.New("durations must be positive")
	case o.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case o.concurrentRounds < 0:
		return errors.New("-concurrent-rounds must not be negative")
	case o.killAt <= 0 || o.killAt >= 1:
		return errors.New("-kill-at must be between 0 and 1")
	}
	if err := o.level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("-worker-log-level: %w", err)
	}
	return nil
}

// phase names, as the worker's -worker flag takes them.
const (
	phasePlain = "plain"
	// phasePlainFast is the plain loop with getrecords.Fast (-floor).
	phasePlainFast = "plain-fast"
	phaseMemory    = "memory"
	phaseDynamo    = "dynamodb"
	phaseKill      = "kill"
)

// readPhases returns the read phases of every sequential and concurrent
// round: the plain loop, the consumer with in-memory and with DynamoDB
// leases, and with peers harlow/kinesis-consumer with its in-memory and
// its DynamoDB checkpoint store.
func readPhases(peers bool) []string {
	ph := []string{phasePlain, phaseMemory, phaseDynamo}
	if peers {
		ph = append(ph, phaseHarlowMemory, phaseHarlowDynamo)
	}
	return ph
}

// rotate returns the phases in the order of round r (from 0): rotated
// left by r, so that over len(phases) rounds each phase runs once in each
// place.
func rotate(phases []string, r int) []string {
	n := len(phases)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range phases {
		out[i] = phases[(i+r)%n]
	}
	return out
}

// runBench runs every phase and returns the report.
func runBench(o options, progress io.Writer) (*report, error) {
	ctx := context.Background()
	cl := newClients(o.kinesisEndpoint, o.dynamoDBEndpoint)
	if err := cl.ready(ctx); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding my own binary for the workers: %w", err)
	}
	if o.cpuProfileDir != "" {
		if err := os.MkdirAll(o.cpuProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	recs := makeRecords(o.records, o.size)
	run := newRunID()
	rep := &report{opts: o, started: time.Now()}
	seq := 0
	// newStream creates a stream and writes recs to it.
	newStream := func(tag string) (string, func(), error) {
		seq++
		name := fmt.Sprintf("bench-%s-%s-%d", run, tag, seq)
		if err := cl.createStream(ctx, name, o.shards); err != nil {
			return "", nil, err
		}
		del := func() {
			if err := cl.deleteStream(context.Background(), name); err != nil {
				fmt.Fprintf(progress, "bench: deleting stream %s: %v\n", name, err)
			}
		}
		fmt.Fprintf(progress, "bench: writing %d records of %d B to %s\n", len(recs), o.size, name)
		w, err := cl.write(ctx, name, recs)
		if err != nil {
			del()
			return "", nil, err
		}
		fmt.Fprintf(progress, "bench: written in %v\n", w.Elapsed.Round(time.Millisecond))
		rep.writes = append(rep.writes, w)
		return name, del, nil
	}
	// streamFor returns the stream a phase reads: the shared one, or a
	// fresh one with -fresh-streams.
	shared := ""
	if !o.freshStreams {
		name, del, err := newStream("all")
		if err != nil {
			return nil, err
		}
		defer del()
		shared = name
	}
	streamFor := func(tag string) (string, func(), error) {
		if shared != "" {
			return shared, func() {}, nil
		}
		return newStream(tag)
	}
	// newTable creates a fresh lease table: lease rows are keyed by stream
	// and shard, so a phase reading the shared stream must not find the
	// checkpoints of an earlier phase.
	var dropTable func(name string)
	newTable := func(tag string) (string, func(), error) {
		seq++
		name := fmt.Sprintf("bench-%s-%s-%d", run, tag, seq)
		if err := lease.NewDynamoDB(cl.dynamo, name).CreateTable(ctx); err != nil {
			return "", nil, err
		}
		return name, func() { dropTable(name) }, nil
	}
	dropTable = func(name string) {
		if _, err := cl.dynamo.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			fmt.Fprintf(progress, "bench: deleting table %s: %v\n", name, err)
		}
	}
	// tableFor returns a fresh table for phase ph when it has one: a lease
	// table for the consumer with DynamoDB leases, a checkpoint table in
	// harlow's schema for harlow with its DynamoDB store.
	tableFor := func(ph string) (string, func(), error) {
		switch ph {
		case phaseDynamo, phaseKill:
			return newTable(ph)
		case phaseHarlowDynamo, phaseHarlowKill:
			seq++
			name := fmt.Sprintf("bench-%s-%s-%d", run, ph, seq)
			if err := cl.createHarlowTable(ctx, name); err != nil {
				return "", nil, err
			}
			return name, func() { dropTable(name) }, nil
		}
		return "", func() {}, nil
	}

	phases := readPhases(o.peers)
	if o.floor {
		phases = append(phases, phasePlainFast)
	}
	for r := range o.rounds {
		for _, ph := range rotate(phases, r) {
			stream, delStream, err := streamFor(ph)
			if err != nil {
				return nil, err
			}
			table, delTable, err := tableFor(ph)
			if err != nil {
				delStream()
				return nil, err
			}
			fmt.Fprintf(progress, "bench: round %d/%d: %s phase on %s\n", r+1, o.rounds, ph, stream)
			res, err := runTimedWorker(ctx, self, o, ph, stream, table, r+1, progress)
			delTable()
			delStream()
			if err != nil {
				return nil, fmt.Errorf("round %d, %s phase: %w", r+1, ph, err)
			}
			res.Round = r + 1
			rep.results = append(rep.results, res)
		}
	}
	for r := range o.concurrentRounds {
		stream, delStream, err := streamFor("concurrent")
		if err != nil {
			return nil, err
		}
		tables := map[string]string{}
		var dels []func()
		cleanup := func() {
			for _, del := range dels {
				del()
			}
			delStream()
		}
		for _, ph := range phases {
			table, delTable, err := tableFor(ph)
			if err != nil {
				cleanup()
				return nil, err
			}
			tables[ph] = table
			dels = append(dels, delTable)
		}
		fmt.Fprintf(progress, "bench: concurrent round %d/%d: %s phases at once on %s\n", r+1, o.concurrentRounds, strings.Join(phases, ", "), stream)
		res, err := runConcurrentRound(self, o, phases, stream, tables, progress)
		cleanup()
		if err != nil {
			return nil, fmt.Errorf("concurrent round %d: %w", r+1, err)
		}
		for i := range res {
			res[i].Round = r + 1
		}
		rep.concurrent = append(rep.concurrent, res)
	}
	if !o.skipKill {
		kills := []string{phaseKill}
		if o.peers {
			kills = append(kills, phaseHarlowKill)
		}
		for _, ph := range kills {
			stream, delStream, err := streamFor(ph)
			if err != nil {
				return nil, err
			}
			table, delTable, err := tableFor(ph)
			if err != nil {
				delStream()
				return nil, err
			}
			fmt.Fprintf(progress, "bench: kill -9 test (%s) on %s\n", ph, stream)
			k, err := runKillTest(ctx, self, o, ph, stream, table, progress)
			delTable()
			delStream()
			if err != nil {
				return nil, fmt.Errorf("kill -9 test (%s): %w", ph, err)
			}
			if ph == phaseKill {
				rep.kill = &k
			} else {
				rep.harlowKill = &k
			}
		}
	}
	rep.finished = time.Now()
	return rep, nil
}

// newRunID returns a short random name part.
func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// workerArgs returns the command line of a worker of phase ph.
func workerArgs(o options, ph, stream, table string) []string {
	return []string{
		"-worker", ph,
		"-stream", stream,
		"-table", table,
		"-records", strconv.Itoa(o.records),
		"-size", strconv.Itoa(o.size),
		"-shards", strconv.Itoa(o.shards),
		"-limit", strconv.Itoa(o.limit),
		"-checkpoint-interval", o.checkpointInterval.String(),
		"-kill-lease-duration", o.leaseDuration.String(),
		"-timeout", o.timeout.String(),
		"-kinesis-endpoint", o.kinesisEndpoint,
		"-dynamodb-endpoint", o.dynamoDBEndpoint,
		"-worker-log-level", o.logLevel,
		"-handler-wait", o.handlerWait.String(),
		"-recycle=" + strconv.FormatBool(o.recycle),
	}
}

// workerProc is a running worker process.
type workerProc struct {
	cmd      *exec.Cmd
	onID     func(id int)
	progress io.Writer
	result   chan workerResult
	done     chan error    // the process's exit, after stdout was read to EOF
	ready    chan struct{} // the worker printed readyLine (-wait-go)
	stdin    io.WriteCloser
}

// newWorker prepares a worker; start runs it. Its stderr goes to progress.
// Each "id N" line it prints is passed to onID, on one goroutine, in order.
func newWorker(self string, args []string, progress io.Writer, onID func(id int)) *workerProc {
	cmd := exec.Command(self, args...)
	cmd.Stderr = progress
	return &workerProc{cmd: cmd, onID: onID, progress: progress, result: make(chan workerResult, 1), done: make(chan error, 1), ready: make(chan struct{}, 1)}
}

// start starts the worker process and the reader of its output.
func (p *workerProc) start() error {
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var parseErr error
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id "):
				id, err := strconv.Atoi(line[3:])
				if err != nil {
					parseErr = fmt.Errorf("bad worker line %q", line)
					continue
				}
				if p.onID != nil {
					p.onID(id)
				}
			case line == readyLine:
				select {
				case p.ready <- struct{}{}:
				default:
				}
			case strings.HasPrefix(line, resultPrefix):
				var r workerResult
				if err := json.Unmarshal([]byte(line[len(resultPrefix):]), &r); err != nil {
					parseErr = fmt.Errorf("bad worker result %q: %w", line, err)
					continue
				}
				p.result <- r
			default:
				fmt.Fprintln(p.progress, "bench: worker says:", line)
			}
		}
		err := p.cmd.Wait()
		if err == nil {
			err = parseErr
		}
		p.done <- err
	}()
	return nil
}

// wait waits for the worker to exit and returns its result.
func (p *workerProc) wait() (workerResult, error) {
	err := <-p.done
	select {
	case r := <-p.result:
		return r, err
	default:
		if err == nil {
			err = errors.New("worker printed no result")
		}
		return workerResult{}, err
	}
}

// runTimedWorker runs one timed phase in a child process.
func runTimedWorker(ctx context.Context, self string, o options, ph, stream, table string, round int, progress io.Writer) (workerResult, error) {
	args := workerArgs(o, ph, stream, table)
	if o.cpuProfileDir != "" {
		args = append(args, "-cpuprofile", filepath.Join(o.cpuProfileDir, fmt.Sprintf("%s-round%d.pprof", ph, round)))
	}
	p := newWorker(self, args, progress, nil)
	k0, d0 := procCPU(o.kinesisPID), procCPU(o.dynamoDBPID)
	m0, s0 := machineBusy(), selfCPU()
	if err := p.start(); err != nil {
		return workerResult{}, err
	}
	r, err := p.wait()
	if err != nil {
		return workerResult{}, err
	}
	if k0 > 0 {
		r.KinesisLocalCPU = procCPU(o.kinesisPID) - k0
	}
	if d0 > 0 {
		r.DynaliteCPU = procCPU(o.dynamoDBPID) - d0
	}
	if m0 > 0 {
		r.OtherCPU = max(0, machineBusy()-m0-(selfCPU()-s0)-r.UserCPU-r.SysCPU-r.KinesisLocalCPU-r.DynaliteCPU)
	}
	if r.Distinct != o.records {
		return r, fmt.Errorf("worker saw %d distinct records, want %d", r.Distinct, o.records)
	}
	return r, nil
}

// runConcurrentRound runs the read phases at the same time, each in its
// own worker process reading the same stream: every worker prepares
// (clients, consumer) and waits; all start their clocks together; each
// reads every record. They share the stand-in, so its changes of speed
// touch all alike, and their rates over the common window compare them
// free of that noise (see commonWindow). tables holds the table of each
// phase that has one. The results are in the order of phases.
func runConcurrentRound(self string, o options, phases []string, stream string, tables map[string]string, progress io.Writer) ([]workerResult, error) {
	ps := make([]*workerProc, len(phases))
	for i, ph := range phases {
		ps[i] = newWorker(self, append(workerArgs(o, ph, stream, tables[ph]), "-wait-go"), progress, nil)
	}
	kill := func() {
		for _, p := range ps {
			if p.cmd.Process != nil {
				_ = p.cmd.Process.Kill()
			}
		}
	}
	for _, p := range ps {
		if err := p.start(); err != nil {
			kill()
			return nil, err
		}
	}
	timeout := time.After(o.timeout)
	for i, p := range ps {
		select {
		case <-p.ready:
		case err := <-p.done:
			kill()
			return nil, fmt.Errorf("%s worker exited before it was ready: %v", phases[i], err)
		case <-timeout:
			kill()
			return nil, fmt.Errorf("%s worker not ready within %v", phases[i], o.timeout)
		}
	}
	for _, p := range ps {
		_, _ = io.WriteString(p.stdin, "go\n")
	}
	out := make([]workerResult, len(ps))
	for i, p := range ps {
		r, err := p.wait()
		if err != nil {
			kill()
			return nil, fmt.Errorf("%s worker: %w", phases[i], err)
		}
		if r.Distinct != o.records {
			kill()
			return nil, fmt.Errorf("%s worker saw %d distinct records, want %d", phases[i], r.Distinct, o.records)
		}
		out[i] = r
	}
	return out, nil
}

// killResult is the outcome of the kill -9 test.
type killResult struct {
	// FirstHandled is the number of distinct records the first worker
	// handled (printed) before SIGKILL ended it.
	FirstHandled int `json:"first_handled"`
	// Redelivered is the number of records the second worker handled that
	// the first had already handled.
	Redelivered int `json:"redelivered"`
	// DuplicatesWithin is the number of records one worker handled twice
	// (expected 0).
	DuplicatesWithin int `json:"duplicates_within_a_worker"`
	// Takeover is the time from the second worker's start to its first
	// handled record: the wait for the dead worker's leases to expire.
	Takeover time.Duration `json:"takeover_ns"`
	// KilledAfter is the time from the first worker's start to SIGKILL.
	KilledAfter time.Duration `json:"killed_after_ns"`
	// Second is the second worker's result.
	Second workerResult `json:"second"`
}

// runKillTest runs the kill -9 test of phase ph (phaseKill: the consumer
// with DynamoDB leases; phaseHarlowKill: harlow with its DynamoDB
// checkpoint store): a worker is killed with SIGKILL after it handled
// killAt of the records; a second worker with the same table then
// finishes the stream. A record the second worker handles that the first
// had handled was re-delivered.
func runKillTest(ctx context.Context, self string, o options, ph, stream, table string, progress io.Writer) (killResult, error) {
	var k killResult
	n := o.records
	proxy, err := startDetachedProxy(o.dynamoDBEndpoint)
	if err != nil {
		return k, err
	}
	defer proxy.Close()
	o.dynamoDBEndpoint = proxy.URL()
	args := append(workerArgs(o, ph, stream, table), "-print-ids")
	killAt := max(1, int(float64(n)*o.killAt))

	first := make([]bool, n)
	var mu sync.Mutex
	var killOnce sync.Once
	var p1 *workerProc
	var started time.Time
	p1 = newWorker(self, args, progress, func(id int) {
		mu.Lock()
		defer mu.Unlock()
		if id < 0 || id >= n {
			return
		}
		if first[id] {
			k.DuplicatesWithin++
			return
		}
		first[id] = true
		k.FirstHandled++
		if k.FirstHandled >= killAt {
			killOnce.Do(func() {
				k.KilledAfter = time.Since(started)
				_ = p1.cmd.Process.Signal(syscall.SIGKILL)
			})
		}
	})
	started = time.Now()
	if err := p1.start(); err != nil {
		return k, err
	}
	timer := time.AfterFunc(o.timeout, func() { _ = p1.cmd.Process.Signal(syscall.SIGKILL) })
	err = <-p1.done
	timer.Stop()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return k, fmt.Errorf("first worker did not end by SIGKILL: %v", err)
	}
	if k.KilledAfter == 0 {
		return k, errors.New("first worker timed out before it was killed")
	}

	second := make([]bool, n)
	union := k.FirstHandled
	var termOnce sync.Once
	var firstAt time.Time
	var p2 *workerProc
	p2 = newWorker(self, args, progress, func(id int) {
		mu.Lock()
		defer mu.Unlock()
		if id < 0 || id >= n {
			return
		}
		if firstAt.IsZero() {
			firstAt = time.Now()
		}
		if second[id] {
			k.DuplicatesWithin++
			return
		}
		second[id] = true
		if first[id] {
			k.Redelivered++
		} else {
			union++
		}
		// Checked on every record, re-delivered ones too: when the first
		// worker handled every record before SIGKILL took effect (a
		// small -records), the second has no new record to reach n with.
		if union == n {
			termOnce.Do(func() { _ = p2.cmd.Process.Signal(syscall.SIGTERM) })
		}
	})
	started2 := time.Now()
	if err := p2.start(); err != nil {
		return k, err
	}
	timer = time.AfterFunc(o.timeout, func() { _ = p2.cmd.Process.Signal(syscall.SIGTERM) })
	r, err := p2.wait()
	timer.Stop()
	if err != nil {
		return k, fmt.Errorf("second worker: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if union != n {
		return k, fmt.Errorf("the two workers handled %d distinct records, want %d", union, n)
	}
	k.Takeover = firstAt.Sub(started2)
	k.Second = r
	return k, nil
}

// clients are the AWS clients of the parent.
type clients struct {
	kinesis *kinesis.Client
	dynamo  *dynamodb.Client
	kEnd    string
	dEnd    string
}

func newClients(kinesisEndpoint, dynamoDBEndpoint string) *clients {
	return &clients{
		kinesis: newKinesis(kinesisEndpoint, nil),
		dynamo:  newDynamoDB(dynamoDBEndpoint, nil),
		kEnd:    kinesisEndpoint,
		dEnd:    dynamoDBEndpoint,
	}
}

// ready checks that both stand-ins answer a real API call.
func (c *clients) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var problems []string
	if _, err := c.kinesis.ListStreams(ctx, &kinesis.ListStreamsInput{Limit: aws.Int32(1)}); err != nil {
		problems = append(problems, fmt.Sprintf("kinesis-local at %s did not answer ListStreams: %v", c.kEnd, err))
	}
	if _, err := c.dynamo.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)}); err != nil {
		problems = append(problems, fmt.Sprintf("dynalite at %s did not answer ListTables: %v", c.dEnd, err))
	}
	if len(problems) > 0 {
		return fmt.Errorf("the local stand-ins are not running:\n\t%s\nrun scripts/bench-e2e.sh (it starts and stops them), or start them with scripts/standins.sh start and eval \"$(scripts/standins.sh env)\"",
			strings.Join(problems, "\n\t"))
	}
	return nil
}

// jsonLine marshals v on one line.
func jsonLine(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}
