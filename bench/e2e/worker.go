package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/internal/getrecords"
	"github.com/shardsettle/lambdaadapter/lease"
)

// The plain loop's pacing, the same rules the consumer's readers follow
// (the library's consumer/config.go: minCallInterval, idleWait).
const (
	// minCallInterval keeps a shard at 5 GetRecords calls per second, the
	// AWS limit: call starts are at least this far apart.
	minCallInterval = 200 * time.Millisecond
	// idleWait is the pause after a GetRecords call that returned no
	// records.
	idleWait = time.Second
)

// readyLine is what a worker started with -wait-go prints when it is ready
// to start its clock; it then waits for a line on its standard input.
const readyLine = "ready"

// resultPrefix starts the worker's last line; the JSON of its
// workerResult follows.
const resultPrefix = "result "

// workerResult is what a worker measured, printed as its last line.
type workerResult struct {
	Phase string `json:"phase"`
	Round int    `json:"round,omitempty"`
	// PID is the worker process's id (cmd/perfphases maps a perf
	// profile's samples to phases with it).
	PID int `json:"pid,omitempty"`
	// Distinct is the number of distinct records handled; Handled counts
	// every handler call (or every record of the plain loop); Duplicates
	// is Handled minus the first handling of each record; Bad counts
	// payloads without an id in range.
	Distinct   int `json:"distinct"`
	Handled    int `json:"handled"`
	Duplicates int `json:"duplicates"`
	Bad        int `json:"bad"`
	// Elapsed runs from the start (Run, or ListShards for the plain loop)
	// to the handling of the last distinct record; FirstRecord to the
	// first; Total to the return of Run (graceful stop included).
	Elapsed     time.Duration `json:"elapsed_ns"`
	FirstRecord time.Duration `json:"first_record_ns"`
	Total       time.Duration `json:"total_ns"`
	// Marks are the times (from the start) at which MarkStep, 2×MarkStep,
	// ... distinct records had been handled.
	Marks    []time.Duration `json:"marks_ns,omitempty"`
	MarkStep int             `json:"mark_step,omitempty"`
	// StartupTrace is the worker's first calls to the stand-ins.
	StartupTrace []tracedCall `json:"startup_trace,omitempty"`
	// UserCPU and SysCPU are getrusage(RUSAGE_SELF) deltas over Total.
	UserCPU time.Duration `json:"user_cpu_ns"`
	SysCPU  time.Duration `json:"sys_cpu_ns"`
	// SteadyCPU is the user + system CPU time the worker used while it
	// handled the middle of the records (SteadyRecords of them): from the
	// handling of the (n/10)th distinct record to that of the
	// (n-n/10)th, leaving out start-up, the first answers, the last ones
	// and the stop. Zero when the worker did not get that far.
	SteadyCPU     time.Duration `json:"steady_cpu_ns,omitempty"`
	SteadyRecords int           `json:"steady_records,omitempty"`
	// StartCPU is the user + system CPU time from the start of the clock
	// to the handling of the first record (start-up: listing, leases,
	// iterators, the first answer), StopCPU that from the handling of the
	// last distinct record to the end of the phase (the stop: the last
	// checkpoints, releases). Zero when there was no such record.
	StartCPU time.Duration `json:"start_cpu_ns,omitempty"`
	StopCPU  time.Duration `json:"stop_cpu_ns,omitempty"`
	// MaxRSSKB is the peak RSS of the worker process at its end, in KiB:
	// VmHWM of /proc/self/status, else getrusage's ru_maxrss (which on
	// Linux carries the parent's peak over fork and exec, so it would
	// report the parent's when that is larger).
	MaxRSSKB int64 `json:"max_rss_kb"`
	// MinorFaults is the getrusage delta of minor page faults over Total:
	// first touches of memory the process had not used yet (its heap
	// growing, mostly). Each costs the kernel a few µs of the worker's
	// system CPU, more in some virtual machines.
	MinorFaults int64 `json:"minor_faults"`
	// KinesisLocalCPU and DynaliteCPU are the CPU time (user + system)
	// the stand-in processes used while the worker ran, when their pids
	// were given (-kinesis-pid, -dynamodb-pid); the parent measures them.
	KinesisLocalCPU time.Duration `json:"kinesis_local_cpu_ns,omitempty"`
	DynaliteCPU     time.Duration `json:"dynalite_cpu_ns,omitempty"`
	// OtherCPU is the CPU time the rest of the machine used while the
	// worker ran: the busy time of all CPUs (/proc/stat) minus the worker,
	// the stand-ins and the benchmark's parent. Other work on the machine
	// slows the stand-in unevenly from phase to phase and makes the ratios
	// noisy; the report warns when it was high.
	OtherCPU time.Duration `json:"other_cpu_ns"`
	// Retries is the number of failed attempts of Kinesis and DynamoDB
	// calls that the SDK's retryer retried.
	Retries int `json:"sdk_retries"`
	// NumGC is the number of GC cycles during Total.
	NumGC uint32 `json:"num_gc"`
	// Kinesis counts the worker's Kinesis calls; DynamoDB its DynamoDB
	// calls (DynamoDB lease store only).
	Kinesis  kinesisStats   `json:"kinesis"`
	DynamoDB map[string]int `json:"dynamodb,omitempty"`
}

// RecordsPerSecond is Distinct over Elapsed.
func (r workerResult) RecordsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Distinct) / r.Elapsed.Seconds()
}

// SteadyRecordsPerSecond is the rate from the first handled record to the
// last: Elapsed without the start-up (listing shards, taking leases,
// getting iterators, the first GetRecords call).
func (r workerResult) SteadyRecordsPerSecond() float64 {
	d := r.Elapsed - r.FirstRecord
	if d <= 0 || r.Distinct < 2 {
		return 0
	}
	return float64(r.Distinct-1) / d.Seconds()
}

// CPUPerRecord is the worker's user + system CPU time per distinct record,
// in microseconds.
func (r workerResult) CPUPerRecord() float64 {
	if r.Distinct == 0 {
		return 0
	}
	return float64((r.UserCPU + r.SysCPU).Microseconds()) / float64(r.Distinct)
}

// SteadyCPUPerRecord is SteadyCPU per record of the middle, in
// microseconds (0 without it).
func (r workerResult) SteadyCPUPerRecord() float64 {
	if r.SteadyRecords == 0 {
		return 0
	}
	return float64(r.SteadyCPU.Microseconds()) / float64(r.SteadyRecords)
}

// DynamoDBWrites is the number of PutItem, UpdateItem and DeleteItem calls.
func (r workerResult) DynamoDBWrites() int {
	return r.DynamoDB["PutItem"] + r.DynamoDB["UpdateItem"] + r.DynamoDB["DeleteItem"]
}

// runWorker runs the phase o.worker in this process and prints its result.
func runWorker(o options, stdout, stderr io.Writer) error {
	if o.stream == "" {
		return errors.New("no -stream")
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
		// Contention too: where goroutines waited on a mutex or a channel.
		runtime.SetMutexProfileFraction(1)
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
		defer func() {
			for _, name := range []string{"mutex", "block"} {
				if f, err := os.Create(strings.TrimSuffix(o.cpuProfile, ".pprof") + "." + name + ".pprof"); err == nil {
					_ = pprof.Lookup(name).WriteTo(f, 0)
					_ = f.Close()
				}
			}
		}()
	}
	var kRetries, dRetries atomic.Int64
	trace := &callTrace{}
	kc := newCountingKinesis(newKinesis(o.kinesisEndpoint, &kRetries))
	kc.trace = trace
	var dc *countingDynamoDB
	var harlowDDB *dynamodb.Client // harlow's DynamoDB store's client, counted by dc
	switch o.worker {
	case phaseDynamo, phaseKill:
		if o.table == "" {
			return errors.New("no -table")
		}
		dc = &countingDynamoDB{DynamoDBAPI: newDynamoDB(o.dynamoDBEndpoint, &dRetries), trace: trace}
	case phaseHarlowDynamo, phaseHarlowKill:
		dc = &countingDynamoDB{trace: trace}
		harlowDDB = newDynamoDB(o.dynamoDBEndpoint, &dRetries, func(opts *dynamodb.Options) {
			opts.APIOptions = append(opts.APIOptions, dc.countCalls)
		})
	}
	tr := newTracker(o.records)
	tr.wait = o.handlerWait
	tr.onBegin = trace.begin
	if o.printIDs {
		tr.out = stdout
	}
	if o.waitGo {
		tr.gate = func() {
			fmt.Fprintln(stdout, readyLine)
			_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		}
	}
	res := workerResult{Phase: o.worker, PID: os.Getpid()}
	var err error
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	ru0 := rusage()
	switch o.worker {
	case phasePlain, phasePlainFast:
		err = runPlain(o, kc, tr)
	case phaseMemory:
		err = runConsumer(o, kc, lease.NewMemory(), tr, false, stderr)
	case phaseDynamo, phaseKill:
		err = runConsumer(o, kc, lease.NewDynamoDB(dc, o.table), tr, o.worker == phaseKill, stderr)
	case phaseHarlowMemory, phaseHarlowDynamo, phaseHarlowKill:
		// The store is made before the clock starts, as the consumer is
		// (lambdaadapter.NewService); neither makes a call there.
		store, stop, serr := harlowStore(o.worker, o.table, harlowDDB, o.checkpointInterval)
		if serr != nil {
			return serr
		}
		err = runHarlow(o, kc, store, stop, tr, o.worker == phaseHarlowKill, stderr)
	default:
		return fmt.Errorf("unknown phase %q", o.worker)
	}
	ru1 := rusage()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	if err != nil {
		return err
	}
	tr.mu.Lock()
	res.Distinct, res.Handled, res.Duplicates, res.Bad = tr.distinct, tr.handled, tr.handled-tr.distinct-tr.bad, tr.bad
	res.Elapsed, res.FirstRecord, res.Total = tr.lastAt.Sub(tr.start), tr.firstAt.Sub(tr.start), tr.end.Sub(tr.start)
	res.Marks, res.MarkStep = tr.marks, tr.markStep()
	if tr.steadyTo > 0 {
		res.SteadyCPU, res.SteadyRecords = tr.steadyTo-tr.steadyFrom, tr.n-2*(tr.n/10)
	}
	res.StartupTrace = trace.list()
	tr.mu.Unlock()
	if tr.lastAt.IsZero() {
		res.Elapsed = 0 // not every record was handled (the kill -9 test)
	}
	if tr.firstAt.IsZero() {
		res.FirstRecord = 0
	}
	if tr.firstCPU > 0 {
		res.StartCPU = tr.firstCPU - (ru0.user + ru0.sys)
	}
	if tr.lastCPU > 0 {
		res.StopCPU = (ru1.user + ru1.sys) - tr.lastCPU
	}
	res.UserCPU = ru1.user - ru0.user
	res.SysCPU = ru1.sys - ru0.sys
	res.MaxRSSKB = peakRSSKB(ru1.maxRSSKB)
	res.MinorFaults = ru1.minflt - ru0.minflt
	res.NumGC = m1.NumGC - m0.NumGC
	res.Kinesis = kc.stats(tr.start, tr.lastAt)
	res.Retries = int(kRetries.Load() + dRetries.Load())
	if dc != nil {
		res.DynamoDB = dc.counts()
	}
	_, err = fmt.Fprintln(stdout, resultPrefix+jsonLine(res))
	return err
}

// tracker is the per-record work of every phase: it marks each record's id
// seen and notes when the last distinct record arrived. It is safe for
// concurrent use.
type tracker struct {
	n    int
	done chan struct{} // closed when all n distinct records were handled
	out  io.Writer     // when set, "id N" is printed for every record
	// wait, when positive, is slept at the start of every mark, outside
	// the lock (-handler-wait: a handler that calls something downstream).
	wait time.Duration

	// gate, when set, is called by begin before the clock starts: a
	// concurrent round holds every worker there until all are ready.
	gate func()
	// onBegin, when set, is called with the start of the clock.
	onBegin func(time.Time)

	mu       sync.Mutex
	seen     []bool
	distinct int
	handled  int
	bad      int
	start    time.Time
	firstAt  time.Time
	lastAt   time.Time
	end      time.Time
	marks    []time.Duration // when distinct reached each markStep
	// steadyFrom and steadyTo are the process's CPU time (user + system)
	// when distinct reached n/10 and n-n/10 (see workerResult.SteadyCPU).
	steadyFrom, steadyTo time.Duration
	// firstCPU and lastCPU are the process's CPU time when the first and
	// the last (nth) distinct record were handled.
	firstCPU, lastCPU time.Duration
}

// marksPerRun is the number of progress marks of a run: the time at which
// each 1/marksPerRun of the records had been handled.
const marksPerRun = 40

func newTracker(n int) *tracker {
	return &tracker{n: n, done: make(chan struct{}), seen: make([]bool, n)}
}

// markStep is the number of distinct records between two progress marks.
func (t *tracker) markStep() int { return max(1, t.n/marksPerRun) }

// begin starts the clock (after the gate, if any).
func (t *tracker) begin() {
	if t.gate != nil {
		t.gate()
	}
	t.mu.Lock()
	t.start = time.Now()
	t.mu.Unlock()
	if t.onBegin != nil {
		t.onBegin(t.start)
	}
}

// finish stops the clock of Total.
func (t *tracker) finish() {
	t.mu.Lock()
	t.end = time.Now()
	t.mu.Unlock()
}

// mark handles one payload. With out set it first prints the id, so a
// record that is acknowledged (and may be checkpointed) was printed.
func (t *tracker) mark(payload []byte) error {
	if t.wait > 0 {
		time.Sleep(t.wait)
	}
	id := parseID(payload)
	if t.out != nil && id >= 0 {
		var b [24]byte
		line := strconv.AppendInt(append(b[:0], "id "...), int64(id), 10)
		if _, err := t.out.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handled++
	if t.firstAt.IsZero() {
		t.firstAt = now
	}
	if id < 0 || id >= t.n {
		t.bad++
		return nil
	}
	if t.seen[id] {
		return nil
	}
	t.seen[id] = true
	t.distinct++
	switch t.distinct {
	case 1:
		u := rusage()
		t.firstCPU = u.user + u.sys
	case t.n:
		u := rusage()
		t.lastCPU = u.user + u.sys
	}
	if t.distinct%t.markStep() == 0 {
		t.marks = append(t.marks, now.Sub(t.start))
	}
	if lo := t.n / 10; lo > 0 {
		switch t.distinct {
		case lo:
			u := rusage()
			t.steadyFrom = u.user + u.sys
		case t.n - lo:
			u := rusage()
			t.steadyTo = u.user + u.sys
		}
	}
	if t.distinct == t.n {
		t.lastAt = now
		close(t.done)
	}
	return nil
}

// runConsumer consumes o.stream with store from TRIM_HORIZON, through the
// library's public API (lambdaadapter.NewService, then Run). In timed
// phases it stops (gracefully) once every record was handled; with
// untilSignal it runs until SIGTERM or SIGINT (the kill -9 test). The
// consumer logs to logs.
func runConsumer(o options, kc *countingKinesis, store lease.Store, tr *tracker, untilSignal bool, logs io.Writer) error {
	h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		if err := tr.mark(m.Payload); err != nil {
			return lambdaadapter.Retry(err)
		}
		return lambdaadapter.Ack()
	})
	opts := []lambdaadapter.ServiceOption{
		lambdaadapter.WithStream(o.stream),
		lambdaadapter.WithKinesisClient(kc),
		lambdaadapter.WithLeaseStore(store),
		lambdaadapter.WithOwnerID(fmt.Sprintf("bench-%s-%d", o.worker, os.Getpid())),
		lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
		lambdaadapter.WithGetRecordsLimit(o.limit),
		lambdaadapter.WithCheckpointInterval(o.checkpointInterval),
		lambdaadapter.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: o.level}))),
	}
	if untilSignal {
		opts = append(opts, lambdaadapter.WithLeaseDuration(o.leaseDuration))
	}
	if o.recycle {
		opts = append(opts, lambdaadapter.WithRecycledMessages())
	}
	c, err := lambdaadapter.NewService(h, opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	tr.begin()
	go func() { errc <- c.Run(ctx) }()
	if untilSignal {
		sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		select {
		case <-sig.Done():
		case <-time.After(o.timeout):
			cancel()
			<-errc
			return fmt.Errorf("no SIGTERM within %v", o.timeout)
		case err := <-errc:
			return fmt.Errorf("Run returned before SIGTERM: %v", err)
		}
	} else {
		select {
		case <-tr.done:
		case <-time.After(o.timeout):
			cancel()
			<-errc
			return fmt.Errorf("only %d of %d records within %v", tr.count(), o.records, o.timeout)
		case err := <-errc:
			return fmt.Errorf("Run returned before the last record: %v", err)
		}
	}
	cancel()
	err = <-errc
	tr.finish()
	return err
}

// count returns the number of distinct records handled.
func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.distinct
}

// runPlain is the baseline: a plain GetRecords loop per shard with the
// consumer's pacing (see the package documentation).
func runPlain(o options, kc *countingKinesis, tr *tracker) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	tr.begin()
	var shards []string
	in := &kinesis.ListShardsInput{StreamName: aws.String(o.stream)}
	for {
		out, err := kc.ListShards(ctx, in)
		if err != nil {
			return err
		}
		for _, s := range out.Shards {
			shards = append(shards, aws.ToString(s.ShardId))
		}
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
	readCtx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, id := range shards {
		wg.Go(func() { errs[i] = readShard(readCtx, kc, o, id, tr) })
	}
	select {
	case <-tr.done:
	case <-ctx.Done():
	}
	stop()
	wg.Wait()
	tr.finish()
	if n := tr.count(); n != o.records {
		return fmt.Errorf("only %d of %d records within %v: %w", n, o.records, o.timeout, errors.Join(errs...))
	}
	return nil
}

// readShard reads one shard from TRIM_HORIZON until ctx ends or the shard
// is closed and read to its end. Call starts are at least minCallInterval
// apart; a read that returned nothing is followed by idleWait; an error by
// a doubling backoff from minCallInterval up to 5 s (the consumer's rules).
func readShard(ctx context.Context, k *countingKinesis, o options, shardID string, tr *tracker) error {
	it, err := k.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName:        aws.String(o.stream),
		ShardId:           aws.String(shardID),
		ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		return err
	}
	iter := it.ShardIterator
	var lastCall time.Time
	backoff := minCallInterval
	for {
		if wait := minCallInterval - time.Since(lastCall); wait > 0 && !sleep(ctx, wait) {
			return nil
		}
		lastCall = time.Now()
		var opts []func(*kinesis.Options)
		if o.worker == phasePlainFast {
			opts = append(opts, getrecords.Fast)
		}
		out, err := k.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(int32(o.limit))}, opts...)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(backoff*2, 5*time.Second)
			if !sleep(ctx, backoff) {
				return err
			}
			continue
		}
		backoff = minCallInterval
		for i := range out.Records {
			if err := tr.mark(out.Records[i].Data); err != nil {
				return err
			}
		}
		// The floor gives its answer's data buffer back, as the consumer
		// does once it finished with every record (nil, a no-op, for the
		// plain loop's SDK answers).
		getrecords.DataOf(out).Release()
		if out.NextShardIterator == nil {
			return nil
		}
		iter = out.NextShardIterator
		if len(out.Records) == 0 && !sleep(ctx, idleWait) {
			return nil
		}
	}
}

// sleep waits d or until ctx is done; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// usage is a getrusage(RUSAGE_SELF) sample.
type usage struct {
	user, sys time.Duration
	maxRSSKB  int64
	minflt    int64
}

func rusage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{
		user:     time.Duration(ru.Utime.Nano()),
		sys:      time.Duration(ru.Stime.Nano()),
		maxRSSKB: int64(ru.Maxrss),
		minflt:   int64(ru.Minflt),
	}
}

// peakRSSKB returns VmHWM from /proc/self/status, or fallback when it
// cannot be read.
func peakRSSKB(fallback int64) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fallback
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return fallback
}

// machineBusy returns the busy time of all CPUs since boot from /proc/stat
// (user, nice, system, irq and softirq; not idle, iowait or steal), or 0
// when it cannot be read. It assumes USER_HZ = 100, like procCPU.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// selfCPU returns this process's user + system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the user + system CPU time of process pid from
// /proc/PID/stat, or 0 when pid is 0 or the file cannot be read. It
// assumes the USER_HZ of 100 ticks per second that Linux exposes there.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: fields are counted after
	// its closing parenthesis; utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// kinesisStats counts a worker's Kinesis calls.
type kinesisStats struct {
	ListShards       int `json:"list_shards"`
	GetShardIterator int `json:"get_shard_iterator"`
	GetRecords       int `json:"get_records"`
	// EmptyReads is the number of GetRecords calls that returned no
	// records; Errors the number that failed; Cancelled the number cut
	// short by the stop at the end of the phase.
	EmptyReads int `json:"empty_reads"`
	Errors     int `json:"errors"`
	Cancelled  int `json:"cancelled"`
	Records    int `json:"records"`
	// GetRecordsTime is the summed latency of the GetRecords calls;
	// MaxGetRecords the longest.
	GetRecordsTime time.Duration `json:"get_records_time_ns"`
	MaxGetRecords  time.Duration `json:"max_get_records_ns"`
	// Slack is the largest, over the shards, of the summed time by which
	// a GetRecords call started later than the pacing rules allowed: the
	// later of 200 ms after the previous call's start and the previous
	// call's end, or 1 s after the end of a call that returned nothing.
	// It is the time the reader itself lost (handing records over,
	// waiting for room in a channel, scheduling); calls after a failed
	// one are left out.
	Slack time.Duration `json:"slack_ns"`
	// Early is the number of GetRecords calls that started more than
	// earlyTolerance before the pacing rules allowed: a loop that keeps
	// the rules has none.
	Early int `json:"early"`
	// FirstCall is the latest, over the shards, of the start of the
	// shard's first GetRecords call, from the start of the phase: the
	// start-up (listing shards, leases, iterators).
	FirstCall time.Duration `json:"first_call_ns"`
	// Tail is the time from the end of the last GetRecords call that
	// returned records to the handling of the last distinct record: the
	// hand-over of the last batch (0 unless every record was handled).
	Tail time.Duration `json:"tail_ns"`
}

// MeanGetRecords is the mean GetRecords latency.
func (s kinesisStats) MeanGetRecords() time.Duration {
	if s.GetRecords == 0 {
		return 0
	}
	return s.GetRecordsTime / time.Duration(s.GetRecords)
}

// earlyTolerance absorbs the difference between a reader's own clock
// reading before a call and the wrapper's: a goroutine can be descheduled
// between the two for a few milliseconds on a loaded 2-core machine (a GC
// cycle, the stand-ins). A loop that does not keep the rules is early by
// far more (up to 200 ms, or a second after an empty read).
const earlyTolerance = 5 * time.Millisecond

// pace follows the GetRecords calls of one shard.
type pace struct {
	first      time.Time // start of the first call
	start, end time.Time // of the previous call
	empty      bool      // the previous call returned no records
	failed     bool      // the previous call failed
	slack      time.Duration
}

// kinesisAPI is the part of *kinesis.Client a worker uses: the reads the
// long-running mode makes (ListShards, GetShardIterator, GetRecords; the
// library's consumer.KinesisAPI) and the writes every Service's publisher
// needs (PutRecord, PutRecords; lambdaadapter.KinesisClient, what
// lambdaadapter.WithKinesisClient takes). It is declared here so the
// benchmark depends on the library's public API only.
type kinesisAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	PutRecord(ctx context.Context, in *kinesis.PutRecordInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error)
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

// countingKinesis wraps a Kinesis client, counts its calls and follows
// each shard's pacing (it maps every iterator to its shard). It is safe
// for concurrent use.
//
// It counts the reads only. PutRecord and PutRecords pass through
// uncounted: the Service needs them for copies, dead letters and replies,
// none of which the benchmark's handler (it acknowledges every record)
// causes. It has no DescribeStreamSummary on purpose: the consumer uses it,
// when the client has it, to learn the stream's ARN at start-up, a call
// the figures of BENCHMARKS.md were measured without.
type countingKinesis struct {
	api   kinesisAPI
	trace *callTrace

	mu     sync.Mutex
	s      kinesisStats
	shard  map[string]string // shard iterator → shard id
	shards map[string]*pace
	data   time.Time // end of the last GetRecords call that returned records
}

var _ kinesisAPI = (*countingKinesis)(nil)

func newCountingKinesis(api kinesisAPI) *countingKinesis {
	return &countingKinesis{api: api, shard: map[string]string{}, shards: map[string]*pace{}}
}

// PutRecord passes through to the client, uncounted.
func (k *countingKinesis) PutRecord(ctx context.Context, in *kinesis.PutRecordInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	return k.api.PutRecord(ctx, in, optFns...)
}

// PutRecords passes through to the client, uncounted.
func (k *countingKinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	return k.api.PutRecords(ctx, in, optFns...)
}

func (k *countingKinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	k.mu.Lock()
	k.s.ListShards++
	k.mu.Unlock()
	defer k.trace.add("ListShards", time.Now())
	return k.api.ListShards(ctx, in, optFns...)
}

func (k *countingKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	defer k.trace.add("GetShardIterator", time.Now())
	out, err := k.api.GetShardIterator(ctx, in, optFns...)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.s.GetShardIterator++
	if err == nil && out.ShardIterator != nil {
		k.shard[*out.ShardIterator] = aws.ToString(in.ShardId)
	}
	return out, err
}

func (k *countingKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	start := time.Now()
	defer k.trace.add("GetRecords", start)
	out, err := k.api.GetRecords(ctx, in, optFns...)
	end := time.Now()
	d := end.Sub(start)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.s.GetRecords++
	k.s.GetRecordsTime += d
	k.s.MaxGetRecords = max(k.s.MaxGetRecords, d)

	id := k.shard[aws.ToString(in.ShardIterator)]
	p := k.shards[id]
	if p == nil {
		p = &pace{first: start}
		k.shards[id] = p
	} else if !p.failed {
		allowed := p.start.Add(minCallInterval)
		if p.end.After(allowed) {
			allowed = p.end
		}
		if p.empty {
			allowed = p.end.Add(idleWait)
		}
		if late := start.Sub(allowed); late > 0 {
			p.slack += late
		} else if late < -earlyTolerance {
			k.s.Early++
		}
	}
	p.start, p.end, p.failed, p.empty = start, end, err != nil, false

	switch {
	case err != nil && ctx.Err() != nil:
		k.s.Cancelled++ // cut short by the stop at the end of the phase
	case err != nil:
		k.s.Errors++
		if k.s.Errors <= 5 {
			fmt.Fprintf(os.Stderr, "bench: GetRecords failed after %v: %v\n", d.Round(time.Millisecond), err)
		}
	default:
		if len(out.Records) == 0 {
			k.s.EmptyReads++
			p.empty = true
		} else if end.After(k.data) {
			k.data = end
		}
		k.s.Records += len(out.Records)
		if out.NextShardIterator != nil {
			k.shard[*out.NextShardIterator] = id
		}
	}
	return out, err
}

// stats returns the counts; phase start t0 anchors FirstCall, and last
// (the handling of the last distinct record, zero if none) ends Tail.
func (k *countingKinesis) stats(t0, last time.Time) kinesisStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.s
	if !last.IsZero() && !k.data.IsZero() && last.After(k.data) {
		s.Tail = last.Sub(k.data)
	}
	for _, p := range k.shards {
		s.Slack = max(s.Slack, p.slack)
		s.FirstCall = max(s.FirstCall, p.first.Sub(t0))
	}
	return s
}

// countingDynamoDB wraps the DynamoDB client of the lease store and counts
// its calls by operation. It is safe for concurrent use. For harlow's
// DynamoDB checkpoint store, which takes a concrete *dynamodb.Client, its
// countCalls counts the calls inside that client instead (DynamoDBAPI is
// then nil).
type countingDynamoDB struct {
	lease.DynamoDBAPI
	put, update, del, get, scan, describe atomic.Int64
	trace                                 *callTrace
}

// callTrace records the first calls a worker makes to the stand-ins (its
// start-up): which, when (from the start of the clock) and for how long.
type callTrace struct {
	mu    sync.Mutex
	start time.Time
	calls []tracedCall
}

// tracedCall is one call of a callTrace.
type tracedCall struct {
	Op      string  `json:"op"`
	StartMS float64 `json:"start_ms"`
	TookMS  float64 `json:"took_ms"`
}

// traceLimit is the number of calls a callTrace keeps.
const traceLimit = 24

// begin notes the start of the clock.
func (c *callTrace) begin(t time.Time) {
	c.mu.Lock()
	c.start = t
	c.mu.Unlock()
}

// add records a call of op that started at start, unless the trace is full
// or the clock has not started.
func (c *callTrace) add(op string, start time.Time) {
	if c == nil {
		return
	}
	took := time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.start.IsZero() || len(c.calls) >= traceLimit {
		return
	}
	c.calls = append(c.calls, tracedCall{Op: op, StartMS: ms2(start.Sub(c.start)), TookMS: ms2(took)})
}

func ms2(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (c *callTrace) list() []tracedCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

func (d *countingDynamoDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	defer d.trace.add(d.count(in), time.Now())
	return d.DynamoDBAPI.PutItem(ctx, in, optFns...)
}

func (d *countingDynamoDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	defer d.trace.add(d.count(in), time.Now())
	return d.DynamoDBAPI.UpdateItem(ctx, in, optFns...)
}

func (d *countingDynamoDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	defer d.trace.add(d.count(in), time.Now())
	return d.DynamoDBAPI.DeleteItem(ctx, in, optFns...)
}

func (d *countingDynamoDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	defer d.trace.add(d.count(in), time.Now())
	return d.DynamoDBAPI.GetItem(ctx, in, optFns...)
}

func (d *countingDynamoDB) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	defer d.trace.add(d.count(in), time.Now())
	return d.DynamoDBAPI.Scan(ctx, in, optFns...)
}

func (d *countingDynamoDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	defer d.trace.add(d.count(in), time.Now())
	return d.DynamoDBAPI.DescribeTable(ctx, in, optFns...)
}

func (d *countingDynamoDB) counts() map[string]int {
	return map[string]int{
		"PutItem":       int(d.put.Load()),
		"UpdateItem":    int(d.update.Load()),
		"DeleteItem":    int(d.del.Load()),
		"GetItem":       int(d.get.Load()),
		"Scan":          int(d.scan.Load()),
		"DescribeTable": int(d.describe.Load()),
	}
}
