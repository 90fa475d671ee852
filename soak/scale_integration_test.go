//go:build integration

package soak

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// The scale soak's settings (make soak-scale).
var (
	flagScale        = flag.Bool("scale", false, "TestScaleSoak: run the scale soak (make soak-scale)")
	flagScaleReport  = flag.String("scale.report", "", "TestScaleSoak: file to write the report to (it is also kept in -soak.out)")
	flagScaleMeasure = flag.Duration("scale.measure", 20*time.Second, "TestScaleSoak: how long each phase is measured once converged")
	flagScaleRounds  = flag.Int("scale.rounds", 2000, "TestScaleSoak: the workers' LAMBDAADAPTER_DEMO_HASH_ROUNDS (SHA-256 passes over each payload)")
	flagScaleRate    = flag.Float64("scale.rate", 10, "TestScaleSoak: records per second to each cold shard")
	flagScaleHot     = flag.Float64("scale.hot", 8, "TestScaleSoak: a hot shard gets this many times a cold shard's records")
)

// The scale soak's shape.
const (
	scaleShards       = 8
	scaleKeysPerShard = 8
	scaleRecordBytes  = 1024
	// scaleStable is how long the lease table's owners must stay the same
	// (every shard held by a running worker) for a phase to count as
	// converged. 8 lease durations: with 4 (12 s), two runs of 2a27f45
	// measured the 3-worker phase before the leader's first move by load,
	// which waits for each worker's figures of the leases it holds and
	// came 12–20 s after the takes.
	scaleStable = 8 * leaseDuration
	// scaleConvergeTimeout bounds waiting for convergence after a change.
	scaleConvergeTimeout = 2 * time.Minute
	// scaleWorkerCPUs is each worker's GOMAXPROCS: the CPUs of its task.
	scaleWorkerCPUs = 1
	// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
	// (100 on every Linux architecture Go supports).
	clockTicks = 100
)

// scaleHot are the indexes (in shard id order) of the hot shards.
var scaleHot = []int{2, 5}

// TestScaleSoak is issue 30's local soak with real processes: bootstrap
// -mode=ecs workers on an 8-shard stream of which 2 shards are hot, scaled
// 3 → 6 → 2 while a producer writes steadily; per phase, once the lease
// table has converged, each worker's CPU utilization (from
// /proc/<pid>/stat) and leases, and at the end the checker's verdict (no
// record lost, none handled twice: nothing here may re-deliver, as no
// worker is killed). It reads the lease table's rows (leaseKey,
// leaseOwner) and the processes only, never the balancing's internals, so
// it measures count-based and load-aware balancing alike.
func TestScaleSoak(t *testing.T) {
	if !*flagScale {
		t.Skip("run with -scale (make soak-scale)")
	}
	began := time.Now()
	s := &soak{t: t, seed: 1, out: outDir(t, "soak-scale-")}
	s.env = startStandins(t, s.out)
	s.bootstrap = buildBootstrap(t, s.out)
	s.net = directNet{s.env}
	s.ecsStream, _ = s.env.NewStream(t, scaleShards)
	s.ecsTable = s.newLeaseTable()
	// Each worker runs as a task of one vCPU would (GOMAXPROCS=1), and
	// measures its utilization against that CPU: with the machine's two,
	// the load this soak puts on a worker (10-20 % of a core) leaves the
	// gap between the busiest and the least-loaded worker below the
	// planner's minGap (5 % of a worker's CPU), and the leader moves
	// nothing by load (make soak-scale on 439f202: 3 workers at 1.28 ×
	// the mean, one lease moved by load, 48 s after the start).
	s.workerExtra = []string{fmt.Sprintf("LAMBDAADAPTER_DEMO_HASH_ROUNDS=%d", *flagScaleRounds), "GOMAXPROCS=" + strconv.Itoa(scaleWorkerCPUs)}
	shards, hashKeys := s.shardHashKeys()
	hot := map[string]bool{}
	for _, i := range scaleHot {
		hot[shards[i]] = true
	}
	sc := &scaleRun{s: s, shards: shards, hot: hot}

	keys := scaleShards * scaleKeysPerShard
	weights := make([]float64, keys)
	for k := range weights {
		weights[k] = 1
		if hot[shards[k/scaleKeysPerShard]] {
			weights[k] = *flagScaleHot
		}
	}
	rate := *flagScaleRate * (float64(scaleShards-len(scaleHot)) + float64(len(scaleHot))**flagScaleHot)
	p := newProducer(s, ModeECS, s.ecsStream, "k", keys, rate, [2]int{0, 0}, 0, s.seed)
	p.weights, p.size, p.holdRate = weights, scaleRecordBytes, true
	p.hashKeys = make([]string, keys)
	for k := range keys {
		p.hashKeys[k] = hashKeys[k/scaleKeysPerShard][k%scaleKeysPerShard]
	}
	s.prodE = p
	p.start()

	s.start = time.Now()
	s.fleet = newFleet(s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		s.progress(ctx)
	}()

	sc.phase("3 workers", "start 3", KindStartup, func() []*worker {
		for i := range 3 {
			s.fleet.startSlot(i)
		}
		return nil
	})
	sc.phase("6 workers", "start 3 more", KindStartup, func() []*worker {
		for i := 3; i < 6; i++ {
			s.fleet.startSlot(i)
		}
		return nil
	})
	// Scale in as a service does: 4 tasks stopped at once. Two of the
	// first three and two of the three added, so both kinds go.
	sc.phase("2 workers", "SIGTERM 4 at once", KindSIGTERM, func() []*worker {
		var stop []*worker
		for _, i := range []int{0, 1, 3, 4} {
			stop = append(stop, s.fleet.slot(i))
		}
		var wg sync.WaitGroup
		for _, w := range stop {
			wg.Go(func() { w.signal(syscall.SIGTERM, StopSIGTERM, exitBound) })
		}
		wg.Wait()
		return stop
	})

	p.stop()
	s.logf("producing stopped: %d records; waiting until every one is done", p.count())
	s.drain()
	cancel()
	<-progressDone
	finalStop := time.Now()
	s.fleet.stopAll()
	s.window(Window{Kind: KindFinalStop, Start: finalStop, End: time.Now(), Detail: "every worker stopped with SIGTERM"})
	s.logf("every worker stopped; reading the stream back")

	run := &Run{
		Seed: s.seed,
		Limits: Limits{LeaseDuration: leaseDuration, CheckpointInterval: checkpointInterval, ShutdownTimeout: shutdownTimeout,
			MaxAttempts: maxAttempts, FlapsPerMinute: 2, DurableDelay: delayedDelay, DelayVisibility: delayVisibility},
		Processes: s.fleet.processes(),
		Produced:  p.produced(),
		Stream:    s.readStream(ModeECS, s.ecsStream),
	}
	s.mu.Lock()
	run.Windows = s.windows
	run.HarnessErrors = append(slices.Clone(s.harnessE), p.errors()...)
	s.mu.Unlock()
	if b, err := json.Marshal(run); err != nil {
		t.Errorf("save the run: %v", err)
	} else {
		writeFile(t, filepath.Join(s.out, "run.json"), string(b))
	}
	rep := run.Check()
	text := sc.report(run, rep, began)
	writeFile(t, filepath.Join(s.out, "report.txt"), text)
	if *flagScaleReport != "" {
		writeFile(t, *flagScaleReport, text)
	}
	fmt.Println(text)
	t.Logf("run took %v", time.Since(began).Round(time.Second))
	lost, _ := rep.Count(CheckLost)
	dups, _ := rep.Count(CheckDuplicate)
	if rep.Failed() || lost > 0 || dups > 0 {
		t.Errorf("the scale soak failed: %d findings break a promise, %d records lost, %d handled more than once; see the report above and %s",
			len(rep.Violations()), lost, dups, s.out)
	}
}

// scaleRun is the scale soak's state besides the soak's.
type scaleRun struct {
	s      *soak
	shards []string        // the stream's shard ids, in order
	hot    map[string]bool // the hot ones
	phases []*scalePhase
}

// scalePhase is one phase: the change that began it, when the lease table
// converged after it, and what was measured then.
type scalePhase struct {
	name, change string
	changed      time.Time // when the change began
	converged    time.Time // zero: not within scaleConvergeTimeout
	stopped      []*worker // the workers the change stopped
	before       map[string]string
	after        map[string]string // owners by shard once converged
	from, to     time.Time         // the measured window
	end          map[string]string // owners by shard at its end
	workers      []scaleWorker
	// busy is the machine's CPU in use over the window (all CPUs, from
	// /proc/stat: 1 = every CPU busy); standins the stand-ins' CPU
	// utilization by name (only those the soak started itself).
	busy     float64
	standins map[string]float64
	// produced and producedHot are the records per second written over the
	// window, to every shard and to the hot ones.
	produced, producedHot float64
}

// scaleWorker is one worker's figures over a phase's measured window.
type scaleWorker struct {
	name              string
	leases, hotLeases int
	records, hotRecs  int
	cpu               float64 // CPU seconds per second (1 = one core)
	err               string
}

// phase applies change, waits for the lease table to converge on the
// running workers, then measures each of them for -scale.measure. The
// change's fault window (kind) lasts until convergence, so the checker
// excuses the lease changes it sets off.
func (sc *scaleRun) phase(name, change string, kind Kind, apply func() []*worker) {
	s := sc.s
	ph := &scalePhase{name: name, change: change, changed: time.Now()}
	if n := len(sc.phases); n > 0 {
		ph.before = sc.phases[n-1].end
	}
	sc.phases = append(sc.phases, ph)
	s.logf("phase %s: %s", name, change)
	ph.stopped = apply()
	for _, w := range ph.stopped {
		s.logf("%s stopped: %v", w.name, w.cmd.ProcessState)
	}
	live := sc.running()
	var ok bool
	ph.converged, ph.after, ok = sc.converge(live)
	end := ph.converged
	if !ok {
		s.harnessError("%s: the lease table did not converge on %v within %v of %q", name, names(live), scaleConvergeTimeout, change)
		end = time.Now()
	} else {
		s.logf("phase %s: converged %v after the change: %s", name, ph.converged.Sub(ph.changed).Round(100*time.Millisecond), ownersText(ph.after, sc.shards))
	}
	if kind == KindSIGTERM {
		for _, w := range ph.stopped {
			s.window(Window{Kind: kind, Worker: w.name, Start: ph.changed, End: end, Detail: fmt.Sprintf("scale-in: %s", w.cmd.ProcessState)})
		}
	} else {
		s.window(Window{Kind: kind, Start: ph.changed, End: end, Detail: name + ": " + change})
	}

	ph.from = time.Now()
	cpu0 := map[string]float64{}
	for _, w := range live {
		cpu0[w.name], _ = cpuSeconds(w.cmd.Process.Pid)
	}
	busy0, total0 := machineCPU()
	standins := sc.standinPIDs()
	sb0 := map[string]float64{}
	for name, pid := range standins {
		sb0[name], _ = cpuSeconds(pid)
	}
	time.Sleep(*flagScaleMeasure)
	ph.to = time.Now()
	busy1, total1 := machineCPU()
	if total1 > total0 {
		ph.busy = float64(busy1-busy0) / float64(total1-total0)
	}
	ph.end = sc.owners()
	wall := ph.to.Sub(ph.from).Seconds()
	for _, r := range s.prodE.produced() {
		if !r.Time.Before(ph.from) && r.Time.Before(ph.to) {
			ph.produced++
			if sc.hot[r.Shard] {
				ph.producedHot++
			}
		}
	}
	ph.produced, ph.producedHot = ph.produced/wall, ph.producedHot/wall
	ph.standins = map[string]float64{}
	for name, pid := range standins {
		if c, err := cpuSeconds(pid); err == nil {
			ph.standins[name] = (c - sb0[name]) / wall
		}
	}
	for _, w := range live {
		sw := scaleWorker{name: w.name}
		c1, err := cpuSeconds(w.cmd.Process.Pid)
		if err != nil {
			sw.err = err.Error()
			s.harnessError("CPU time of %s: %v", w.name, err)
		}
		sw.cpu = (c1 - cpu0[w.name]) / wall
		for shard, owner := range ph.end {
			if owner == w.name {
				sw.leases++
				if sc.hot[shard] {
					sw.hotLeases++
				}
			}
		}
		w.mu.Lock()
		for _, l := range w.lines {
			if l.Msg == MsgRecord && !l.Time.Before(ph.from) && l.Time.Before(ph.to) {
				sw.records++
				if sc.hot[l.ShardID] {
					sw.hotRecs++
				}
			}
		}
		w.mu.Unlock()
		ph.workers = append(ph.workers, sw)
	}
	s.logf("phase %s measured: %s", name, ph.cpuText())
}

// running returns the workers that run and were not told to stop.
func (sc *scaleRun) running() []*worker {
	var out []*worker
	for _, w := range sc.s.fleet.workers() {
		w.mu.Lock()
		told := w.stop != StopNone
		w.mu.Unlock()
		select {
		case <-w.exited:
		default:
			if !told {
				out = append(out, w)
			}
		}
	}
	return out
}

// converge waits until every shard's lease is held by one of the live
// workers and no owner changed for scaleStable; it returns when the owners
// last changed, and them.
func (sc *scaleRun) converge(live []*worker) (time.Time, map[string]string, bool) {
	alive := map[string]bool{}
	for _, w := range live {
		alive[w.name] = true
	}
	deadline := time.Now().Add(scaleConvergeTimeout)
	var last map[string]string
	var since time.Time
	for time.Now().Before(deadline) {
		owners := sc.owners()
		good := len(owners) == len(sc.shards)
		for _, o := range owners {
			good = good && alive[o]
		}
		now := time.Now()
		if !good || !equalOwners(owners, last) {
			last, since = owners, now
		}
		if good && now.Sub(since) >= scaleStable {
			return since, last, true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Time{}, last, false
}

// owners reads the lease table (a consistent Scan) and returns the owner of
// each of the stream's shards that has one. It reads only leaseKey
// ("stream:shardId") and leaseOwner.
func (sc *scaleRun) owners() map[string]string {
	s := sc.s
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	listed := map[string]bool{}
	for _, id := range sc.shards {
		listed[id] = true
	}
	out := map[string]string{}
	p := dynamodb.NewScanPaginator(s.env.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(s.ecsTable), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			s.harnessError("scan the lease table %s: %v", s.ecsTable, err)
			return out
		}
		for _, item := range page.Items {
			key, _ := item["leaseKey"].(*dynamodbtypes.AttributeValueMemberS)
			owner, _ := item["leaseOwner"].(*dynamodbtypes.AttributeValueMemberS)
			if key == nil || owner == nil || owner.Value == "" {
				continue
			}
			stream, shard, _ := strings.Cut(key.Value, ":")
			if stream == s.ecsStream && listed[shard] {
				out[shard] = owner.Value
			}
		}
	}
	return out
}

// shardHashKeys lists the stream's shards in id order and, for each,
// scaleKeysPerShard explicit hash keys spread inside its hash key range.
func (s *soak) shardHashKeys() ([]string, [][]string) {
	out, err := s.env.Kinesis.ListShards(s.t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(s.ecsStream)})
	if err != nil {
		s.t.Fatalf("soak: list the shards of %s: %v", s.ecsStream, err)
	}
	if out.NextToken != nil || len(out.Shards) != scaleShards {
		s.t.Fatalf("soak: %s lists %d shards (more: %v), want %d", s.ecsStream, len(out.Shards), out.NextToken != nil, scaleShards)
	}
	shards := slices.Clone(out.Shards)
	slices.SortFunc(shards, func(a, b kinesistypes.Shard) int {
		return strings.Compare(aws.ToString(a.ShardId), aws.ToString(b.ShardId))
	})
	ids := make([]string, len(shards))
	keys := make([][]string, len(shards))
	for i, sh := range shards {
		ids[i] = aws.ToString(sh.ShardId)
		lo, ok1 := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.StartingHashKey), 10)
		hi, ok2 := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.EndingHashKey), 10)
		if !ok1 || !ok2 {
			s.t.Fatalf("soak: shard %s has a malformed hash key range %+v", ids[i], sh.HashKeyRange)
		}
		width := new(big.Int).Sub(hi, lo)
		for j := range scaleKeysPerShard {
			k := new(big.Int).Mul(width, big.NewInt(int64(j+1)))
			k.Div(k, big.NewInt(scaleKeysPerShard+1))
			keys[i] = append(keys[i], k.Add(k, lo).String())
		}
	}
	return ids, keys
}

// cpuSeconds returns the CPU time (user and system) process pid has used,
// from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after its closing one start with field 3 (state).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[14-3], 10, 64)
	stime, err2 := strconv.ParseInt(f[15-3], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return float64(utime+stime) / clockTicks, nil
}

// machineCPU returns the ticks all CPUs spent busy and in all, from the
// first line of /proc/stat (0, 0 when it cannot be read).
func machineCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0
	}
	// user nice system idle iowait irq softirq steal (guest time is in
	// user time already).
	for i, v := range f[1:min(len(f), 9)] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total
}

// standinPIDs returns the pids of the stand-ins the soak started itself
// (scripts/standins.sh's pid files in its directory), by name.
func (sc *scaleRun) standinPIDs() map[string]int {
	out := map[string]int{}
	for _, name := range []string{"kinesis", "dynamodb"} {
		b, err := os.ReadFile(filepath.Join(sc.s.out, "standins", name+".pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			out[name] = pid
		}
	}
	return out
}

func equalOwners(a, b map[string]string) bool {
	if len(a) != len(b) || a == nil != (b == nil) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func names(ws []*worker) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.name
	}
	return out
}

// ownersText is "shardIndex:owner" for each shard, in shard order.
func ownersText(owners map[string]string, shards []string) string {
	parts := make([]string, len(shards))
	for i, id := range shards {
		o := owners[id]
		if o == "" {
			o = "-"
		}
		parts[i] = fmt.Sprintf("%d:%s", i, o)
	}
	return strings.Join(parts, " ")
}

// spread returns the highest CPU utilization over the mean, and over the
// lowest, of the phase's workers.
func (ph *scalePhase) spread() (maxMean, maxMin, total float64) {
	if len(ph.workers) == 0 {
		return 0, 0, 0
	}
	hi, lo := 0.0, ph.workers[0].cpu
	for _, w := range ph.workers {
		total += w.cpu
		hi, lo = max(hi, w.cpu), min(lo, w.cpu)
	}
	mean := total / float64(len(ph.workers))
	if mean > 0 {
		maxMean = hi / mean
	}
	if lo > 0 {
		maxMin = hi / lo
	}
	return maxMean, maxMin, total
}

func (ph *scalePhase) cpuText() string {
	var parts []string
	for _, w := range ph.workers {
		parts = append(parts, fmt.Sprintf("%s %.0f%% (%d leases, %d hot)", w.name, 100*w.cpu, w.leases, w.hotLeases))
	}
	mm, _, _ := ph.spread()
	return fmt.Sprintf("%s; max/mean %.2f", strings.Join(parts, ", "), mm)
}

// moves counts the shards whose owner differs from before the change:
// all of them, and those whose previous owner was still running (planned
// moves, not take-overs from a stopped worker).
func (ph *scalePhase) moves() (all, planned int) {
	if ph.before == nil || ph.after == nil {
		return 0, 0
	}
	gone := map[string]bool{}
	for _, w := range ph.stopped {
		gone[w.name] = true
	}
	for shard, o := range ph.after {
		if prev := ph.before[shard]; prev != o {
			all++
			if prev != "" && !gone[prev] {
				planned++
			}
		}
	}
	return all, planned
}

// report is the scale soak's report: how it was run, a table per phase
// (convergence, lease moves, CPU spread), the workers' figures per phase,
// the exits of the workers stopped, the records' verdict, and the
// checker's full report.
func (sc *scaleRun) report(run *Run, rep *Report, began time.Time) string {
	var b strings.Builder
	lost, _ := rep.Count(CheckLost)
	dups, dupsBad := rep.Count(CheckDuplicate)
	verdict := "PASS"
	if rep.Failed() || lost > 0 || dups > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "scale soak (issue 30): %s\n\n", verdict)
	fmt.Fprintf(&b, "command: %s\n", scaleCommand())
	fmt.Fprintf(&b, "commit:  %s\n", gitCommit(sc.s.t))
	fmt.Fprintf(&b, "date:    %s (run took %v)\n", began.UTC().Format(time.RFC3339), time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "machine: %d CPUs, %s/%s, %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	var hotIDs []string
	for _, i := range scaleHot {
		hotIDs = append(hotIDs, fmt.Sprintf("%d", i))
	}
	fmt.Fprintf(&b, "load:    %d shards, hot: %s (by explicit hash keys); %.0f records/s to each cold shard, %.0f to each hot one (%.0fx), %d-byte payloads;\n",
		scaleShards, strings.Join(hotIDs, ", "), *flagScaleRate, *flagScaleRate**flagScaleHot, *flagScaleHot, scaleRecordBytes)
	fmt.Fprintf(&b, "         handler: %d SHA-256 passes over each payload (LAMBDAADAPTER_DEMO_HASH_ROUNDS)\n", *flagScaleRounds)
	fmt.Fprintf(&b, "workers: bootstrap -mode=ecs, GOMAXPROCS=%d (a task of %d vCPU; its utilization is measured against it), lease %v, checkpoint %v, shutdown timeout %v, list interval %v\n", scaleWorkerCPUs, scaleWorkerCPUs, leaseDuration, checkpointInterval, shutdownTimeout, listInterval)
	fmt.Fprintf(&b, "method:  converged = every shard held by a running worker and no owner change for %v (lease table Scan: leaseKey, leaseOwner);\n", scaleStable)
	fmt.Fprintf(&b, "         then %v measured: CPU = (utime+stime from /proc/<pid>/stat) / wall time, 100%% = one core\n\n", *flagScaleMeasure)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tchange\tconverged after\tmoves (planned)\tworkers\tproduced/s (hot)\tCPU total\tCPU max/mean\tCPU max/min\towner changes while measured\tmachine busy\tkinesis-local\tdynalite\t")
	for _, ph := range sc.phases {
		conv := "NOT CONVERGED"
		if !ph.converged.IsZero() {
			conv = ph.converged.Sub(ph.changed).Round(100 * time.Millisecond).String()
		}
		all, planned := ph.moves()
		mm, mn, total := ph.spread()
		changed := 0
		for shard, o := range ph.end {
			if ph.after[shard] != o {
				changed++
			}
		}
		standin := func(name string) string {
			c, ok := ph.standins[name]
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", 100*c)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d (%d)\t%d\t%.0f (%.0f)\t%.0f%%\t%.2f\t%.2f\t%d\t%.0f%%\t%s\t%s\t\n", ph.name, ph.change, conv, all, planned, len(ph.workers),
			ph.produced, ph.producedHot, 100*total, mm, mn, changed, 100*ph.busy, standin("kinesis"), standin("dynamodb"))
	}
	tw.Flush()
	b.WriteString("(moves: shards whose owner differs from the last phase's; planned: from a worker still running;\n" +
		" CPU total and the stand-ins' in % of one core; machine busy: all CPUs, 100% = every CPU busy)\n\n")

	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tworker\tleases\thot leases\trecords/s\thot records/s\tCPU\t")
	for _, ph := range sc.phases {
		wall := ph.to.Sub(ph.from).Seconds()
		for _, w := range ph.workers {
			cpu := fmt.Sprintf("%.1f%%", 100*w.cpu)
			if w.err != "" {
				cpu = "?"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.1f\t%s\t\n", ph.name, w.name, w.leases, w.hotLeases, float64(w.records)/wall, float64(w.hotRecs)/wall, cpu)
		}
	}
	tw.Flush()
	b.WriteString("\nowners once converged (shard index:worker):\n")
	for _, ph := range sc.phases {
		fmt.Fprintf(&b, "  %-10s %s\n", ph.name, ownersText(ph.after, sc.shards))
	}

	b.WriteString("\nworkers stopped (SIGTERM):\n")
	for _, p := range run.Processes {
		if p.Exit == nil || p.Exit.Signalled.IsZero() {
			continue
		}
		took := "did not exit in time"
		if !p.Exit.Exited.IsZero() {
			took = p.Exit.Exited.Sub(p.Exit.Signalled).Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "  %-4s %-14s exit code %d after %s\n", p.Name, p.Exit.Stop, p.Exit.Code, took)
	}

	st := rep.Stats[ModeECS]
	fmt.Fprintf(&b, "\nrecords: %d produced, %d handled, %d handler starts, %d done; lost %d; handled more than once %d (%d of them break a promise)\n",
		st.Produced, st.Handled, st.Starts, st.Done, lost, dups, dupsBad)
	causes := map[string]int{}
	for _, f := range rep.Findings {
		if f.Check == CheckDuplicate {
			causes[f.Cause] += f.Count
		}
	}
	if len(causes) == 0 {
		b.WriteString("duplicates by cause: none (planned moves 0, scale-in 0, kill -9 0)\n")
	} else {
		b.WriteString("duplicates by cause:\n")
		for _, c := range sortedKeysFunc(causes, strings.Compare) {
			fmt.Fprintf(&b, "  %s: %d\n", c, causes[c])
		}
	}
	b.WriteString("\nthe checker's report:\n\n")
	b.WriteString(windowsText(run.Windows))
	b.WriteString("\n")
	b.WriteString(rep.String())
	return b.String()
}

// scaleCommand is the command that ran the test, as typed in soak/.
func scaleCommand() string {
	args := []string{"go test -tags integration -count=1 -run '^TestScaleSoak$' -v -timeout 30m ."}
	flag.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "scale") || strings.HasPrefix(f.Name, "soak.") {
			args = append(args, fmt.Sprintf("-%s=%s", f.Name, f.Value))
		}
	})
	return "cd soak && " + strings.Join(args, " ")
}

// gitCommit is the checkout's commit, marked when tracked files differ
// from it.
func gitCommit(t *testing.T) string {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += " with uncommitted changes"
	}
	return c
}
