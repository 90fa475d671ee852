package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report is the outcome of a benchmark run.
type report struct {
	opts     options
	started  time.Time
	finished time.Time
	writes   []writeStat
	results  []workerResult
	// concurrent holds each concurrent round's results, one per read
	// phase (readPhases), each naming its phase.
	concurrent [][]workerResult
	kill       *killResult
	// harlowKill is the kill -9 test of harlow with its DynamoDB store.
	harlowKill *killResult
}

// summary is the machine-readable outcome, printed as the last line.
type summary struct {
	Bench              string  `json:"bench"`
	GoVersion          string  `json:"go_version"`
	GOOS               string  `json:"goos"`
	GOARCH             string  `json:"goarch"`
	NumCPU             int     `json:"num_cpu"`
	Records            int     `json:"records"`
	Size               int     `json:"size"`
	Shards             int     `json:"shards"`
	Limit              int     `json:"limit"`
	CheckpointInterval string  `json:"checkpoint_interval"`
	HandlerWait        string  `json:"handler_wait,omitempty"`
	Rounds             int     `json:"rounds"`
	WriteRecordsPerSec float64 `json:"write_records_per_s"`

	// Medians over the rounds.
	PlainRecordsPerSec  float64 `json:"plain_records_per_s"`
	MemoryRecordsPerSec float64 `json:"memory_records_per_s"`
	DynamoRecordsPerSec float64 `json:"dynamodb_records_per_s"`
	// Medians of the per-round ratios.
	DynamoVsMemory float64 `json:"dynamodb_vs_memory"`
	DynamoVsPlain  float64 `json:"dynamodb_vs_plain"`
	MemoryVsPlain  float64 `json:"memory_vs_plain"`
	// The same ratios of the rates from the first record to the last,
	// without the start-up.
	SteadyDynamoVsMemory float64 `json:"steady_dynamodb_vs_memory"`
	SteadyDynamoVsPlain  float64 `json:"steady_dynamodb_vs_plain"`
	SteadyMemoryVsPlain  float64 `json:"steady_memory_vs_plain"`
	// Start-up (phase start to the last shard's first GetRecords call)
	// and reader slack (see kinesisStats.Slack), medians in ms.
	PlainStartupMS  float64 `json:"plain_startup_ms"`
	MemoryStartupMS float64 `json:"memory_startup_ms"`
	DynamoStartupMS float64 `json:"dynamodb_startup_ms"`
	PlainTailMS     float64 `json:"plain_tail_ms"`
	MemoryTailMS    float64 `json:"memory_tail_ms"`
	DynamoTailMS    float64 `json:"dynamodb_tail_ms"`
	PlainSlackMS    float64 `json:"plain_slack_ms"`
	MemorySlackMS   float64 `json:"memory_slack_ms"`
	DynamoSlackMS   float64 `json:"dynamodb_slack_ms"`
	// OwnDelay is a consumer's start-up plus reader slack plus tail minus
	// the plain loop's (medians, ms): the time it lost by itself, whatever the
	// stand-in's speed. The Est ratios put it in proportion to the plain
	// loop's median time: the ratios a noise-free stand-in would give.
	MemoryOwnDelayMS  float64 `json:"memory_own_delay_ms"`
	DynamoOwnDelayMS  float64 `json:"dynamodb_own_delay_ms"`
	PlainElapsedMS    float64 `json:"plain_elapsed_ms"`
	EstDynamoVsMemory float64 `json:"est_dynamodb_vs_memory"`
	EstDynamoVsPlain  float64 `json:"est_dynamodb_vs_plain"`
	// The same ratios of the pooled rates: all records of a phase's rounds
	// over all their time.
	PooledDynamoVsMemory float64 `json:"pooled_dynamodb_vs_memory"`
	PooledDynamoVsPlain  float64 `json:"pooled_dynamodb_vs_plain"`
	// Concurrent rounds (the three phases at once, sharing the stand-in):
	// medians over the rounds of each round's common-window ratio, the
	// per-round ratios, and each phase's median records/s over the common
	// window.
	ConcurrentRounds int `json:"concurrent_rounds"`
	// ConcurrentNoWindow is the number of concurrent rounds left out of
	// the concurrent figures because their common window was too short
	// (see minWindowMarks).
	ConcurrentNoWindow      int              `json:"concurrent_rounds_without_window"`
	ConcDynamoVsMemory      float64          `json:"concurrent_dynamodb_vs_memory"`
	ConcDynamoVsPlain       float64          `json:"concurrent_dynamodb_vs_plain"`
	ConcMemoryVsPlain       float64          `json:"concurrent_memory_vs_plain"`
	RoundConcDynamoVsMemory []float64        `json:"round_concurrent_dynamodb_vs_memory"`
	RoundConcDynamoVsPlain  []float64        `json:"round_concurrent_dynamodb_vs_plain"`
	ConcPlainRecordsPerSec  float64          `json:"concurrent_plain_records_per_s"`
	ConcMemoryRecordsPerSec float64          `json:"concurrent_memory_records_per_s"`
	ConcDynamoRecordsPerSec float64          `json:"concurrent_dynamodb_records_per_s"`
	ConcurrentResults       [][]workerResult `json:"concurrent_results,omitempty"`
	// Per-round ratios, in round order, to show the spread.
	RoundDynamoVsMemory []float64 `json:"round_dynamodb_vs_memory"`
	RoundDynamoVsPlain  []float64 `json:"round_dynamodb_vs_plain"`
	PlainCPUPerRec      float64   `json:"plain_cpu_us_per_record"`
	MemoryCPUPerRec     float64   `json:"memory_cpu_us_per_record"`
	DynamoCPUPerRec     float64   `json:"dynamodb_cpu_us_per_record"`
	// PlainFastCPUPerRec is the plain loop's with the consumer's decoder
	// (-floor); 0 without.
	PlainFastCPUPerRec float64 `json:"plain_fast_cpu_us_per_record,omitempty"`
	// MemoryCPUVsPlain and DynamoCPUVsPlain are the medians of the
	// per-round ratios of CPU per record, consumer over plain loop.
	MemoryCPUVsPlain float64 `json:"memory_cpu_vs_plain"`
	DynamoCPUVsPlain float64 `json:"dynamodb_cpu_vs_plain"`
	// The same in the steady state (workerResult.SteadyCPU): the middle
	// 80 % of the records, without start-up and stop.
	PlainSteadyCPUPerRec     float64 `json:"plain_steady_cpu_us_per_record"`
	MemorySteadyCPUPerRec    float64 `json:"memory_steady_cpu_us_per_record"`
	DynamoSteadyCPUPerRec    float64 `json:"dynamodb_steady_cpu_us_per_record"`
	PlainFastSteadyCPUPerRec float64 `json:"plain_fast_steady_cpu_us_per_record,omitempty"`
	MemorySteadyCPUVsPlain   float64 `json:"memory_steady_cpu_vs_plain"`
	DynamoSteadyCPUVsPlain   float64 `json:"dynamodb_steady_cpu_vs_plain"`
	// Start-up and stop CPU ms per phase (medians of
	// workerResult.StartCPU and StopCPU): the fixed costs the whole-phase
	// figures spread over the records.
	PlainStartCPUMS     float64 `json:"plain_start_cpu_ms"`
	MemoryStartCPUMS    float64 `json:"memory_start_cpu_ms"`
	DynamoStartCPUMS    float64 `json:"dynamodb_start_cpu_ms"`
	PlainFastStartCPUMS float64 `json:"plain_fast_start_cpu_ms,omitempty"`
	PlainStopCPUMS      float64 `json:"plain_stop_cpu_ms"`
	MemoryStopCPUMS     float64 `json:"memory_stop_cpu_ms"`
	DynamoStopCPUMS     float64 `json:"dynamodb_stop_cpu_ms"`
	WritesPerRecord     float64 `json:"dynamodb_writes_per_record"`
	// PeakRSSMB is the largest peak RSS of a consumer worker process;
	// PlainPeakRSSMB that of the plain loop's.
	PeakRSSMB      float64 `json:"peak_rss_mb"`
	PlainPeakRSSMB float64 `json:"plain_peak_rss_mb"`
	// Minor page faults per phase (medians): the plain loop, the consumer
	// in memory and with DynamoDB, and the floor (0 without -floor).
	PlainFaults     float64 `json:"plain_minor_faults"`
	MemoryFaults    float64 `json:"memory_minor_faults"`
	DynamoFaults    float64 `json:"dynamodb_minor_faults"`
	PlainFastFaults float64 `json:"plain_fast_minor_faults,omitempty"`
	// Redelivered is -1 when the kill -9 test was skipped.
	Redelivered int            `json:"redelivered_after_kill"`
	KilledAt    int            `json:"killed_after_records"`
	Targets     targets        `json:"targets"`
	Results     []workerResult `json:"results"`
	Kill        *killResult    `json:"kill,omitempty"`
	Seconds     float64        `json:"seconds"`
	// MaxOtherCPU is the largest share of one CPU that other processes
	// used during a phase (see workerResult.OtherCPU).
	MaxOtherCPU float64 `json:"max_other_cpu"`
	// Harlow holds the peer's figures (-peers), nil without it.
	Harlow *peerSummary `json:"harlow,omitempty"`
}

// targets holds PASS or MISS per target of the issue.
type targets struct {
	DynamoVsMemory  string `json:"dynamodb_vs_memory_ge_0.95"`
	ConsumerVsPlain string `json:"consumer_vs_plain_ge_0.95"`
	WritesPerRecord string `json:"writes_per_record_le_0.01"`
	// CPU per record, consumer over plain loop (issue 10).
	CPUVsPlainDynamo string `json:"cpu_consumer_vs_plain_dynamodb_le_0.5"`
	CPUVsPlainMemory string `json:"cpu_consumer_vs_plain_memory_le_0.5"`
	// The ratio targets judged on the concurrent rounds.
	ConcDynamoVsMemory  string `json:"concurrent_dynamodb_vs_memory_ge_0.95,omitempty"`
	ConcConsumerVsPlain string `json:"concurrent_consumer_vs_plain_ge_0.95,omitempty"`
	// The ratio targets judged on the noise-free estimates.
	EstDynamoVsMemory  string `json:"est_dynamodb_vs_memory_ge_0.95"`
	EstConsumerVsPlain string `json:"est_consumer_vs_plain_ge_0.95"`
	// Against the peer (-peers): the consumer's records/s over
	// harlow/kinesis-consumer's with the same kind of store (in-memory,
	// DynamoDB), at least 1, and its CPU time per record over harlow's,
	// below 1; sequential (medians of per-round ratios) and concurrent.
	VsHarlowMemory        string `json:"consumer_vs_harlow_memory_ge_1.0,omitempty"`
	VsHarlowDynamo        string `json:"consumer_vs_harlow_dynamodb_ge_1.0,omitempty"`
	ConcVsHarlowMemory    string `json:"concurrent_consumer_vs_harlow_memory_ge_1.0,omitempty"`
	ConcVsHarlowDynamo    string `json:"concurrent_consumer_vs_harlow_dynamodb_ge_1.0,omitempty"`
	CPUVsHarlowMemory     string `json:"cpu_consumer_vs_harlow_memory_lt_1.0,omitempty"`
	CPUVsHarlowDynamo     string `json:"cpu_consumer_vs_harlow_dynamodb_lt_1.0,omitempty"`
	ConcCPUVsHarlowMemory string `json:"concurrent_cpu_consumer_vs_harlow_memory_lt_1.0,omitempty"`
	ConcCPUVsHarlowDynamo string `json:"concurrent_cpu_consumer_vs_harlow_dynamodb_lt_1.0,omitempty"`
}

func passIf(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// pooled returns the records of all rounds of a phase over their time.
func pooled(rs []workerResult) float64 {
	var n int
	var d time.Duration
	for _, w := range rs {
		n += w.Distinct
		d += w.Elapsed
	}
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// floorNote is the "; the floor N" a report line ends with when the floor
// phase ran (v > 0; its figure formatted with verb), else "".
func floorNote(verb string, v float64) string {
	if v <= 0 {
		return ""
	}
	return "; the floor " + fmt.Sprintf(verb, v)
}

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// byPhase returns the results of phase ph, in round order.
func (r *report) byPhase(ph string) []workerResult {
	var out []workerResult
	for _, res := range r.results {
		if res.Phase == ph {
			out = append(out, res)
		}
	}
	slices.SortFunc(out, func(a, b workerResult) int { return a.Round - b.Round })
	return out
}

// perRound returns f applied to each round's results of phases a and b.
func (r *report) perRound(a, b string, f func(x, y workerResult) float64) []float64 {
	xs, ys := r.byPhase(a), r.byPhase(b)
	var out []float64
	for i := range min(len(xs), len(ys)) {
		out = append(out, f(xs[i], ys[i]))
	}
	return out
}

func ratio(x, y workerResult) float64 {
	if y.RecordsPerSecond() == 0 {
		return 0
	}
	return x.RecordsPerSecond() / y.RecordsPerSecond()
}

func steadyRatio(x, y workerResult) float64 {
	if y.SteadyRecordsPerSecond() == 0 {
		return 0
	}
	return x.SteadyRecordsPerSecond() / y.SteadyRecordsPerSecond()
}

func each(rs []workerResult, f func(workerResult) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// summarize computes the summary.
func (r *report) summarize() summary {
	o := r.opts
	plain, mem, dyn, fast := r.byPhase(phasePlain), r.byPhase(phaseMemory), r.byPhase(phaseDynamo), r.byPhase(phasePlainFast)
	rps := func(w workerResult) float64 { return w.RecordsPerSecond() }
	cpu := func(w workerResult) float64 { return w.CPUPerRecord() }
	steadyCPU := func(w workerResult) float64 { return w.SteadyCPUPerRecord() }
	faults := func(w workerResult) float64 { return float64(w.MinorFaults) }
	startCPU := func(w workerResult) float64 { return float64(w.StartCPU) / 1e6 }
	stopCPU := func(w workerResult) float64 { return float64(w.StopCPU) / 1e6 }
	startup := func(w workerResult) float64 { return float64(w.Kinesis.FirstCall) / 1e6 }
	slack := func(w workerResult) float64 { return float64(w.Kinesis.Slack) / 1e6 }
	tail := func(w workerResult) float64 { return float64(w.Kinesis.Tail) / 1e6 }
	s := summary{
		Bench:                    "lambdaadapter long-running mode end to end",
		GoVersion:                runtime.Version(),
		GOOS:                     runtime.GOOS,
		GOARCH:                   runtime.GOARCH,
		NumCPU:                   runtime.NumCPU(),
		Records:                  o.records,
		Size:                     o.size,
		Shards:                   o.shards,
		Limit:                    o.limit,
		CheckpointInterval:       o.checkpointInterval.String(),
		HandlerWait:              waitString(o.handlerWait),
		Rounds:                   o.rounds,
		PlainRecordsPerSec:       median(each(plain, rps)),
		MemoryRecordsPerSec:      median(each(mem, rps)),
		DynamoRecordsPerSec:      median(each(dyn, rps)),
		DynamoVsMemory:           median(r.perRound(phaseDynamo, phaseMemory, ratio)),
		DynamoVsPlain:            median(r.perRound(phaseDynamo, phasePlain, ratio)),
		MemoryVsPlain:            median(r.perRound(phaseMemory, phasePlain, ratio)),
		SteadyDynamoVsMemory:     median(r.perRound(phaseDynamo, phaseMemory, steadyRatio)),
		SteadyDynamoVsPlain:      median(r.perRound(phaseDynamo, phasePlain, steadyRatio)),
		SteadyMemoryVsPlain:      median(r.perRound(phaseMemory, phasePlain, steadyRatio)),
		PlainStartupMS:           median(each(plain, startup)),
		MemoryStartupMS:          median(each(mem, startup)),
		DynamoStartupMS:          median(each(dyn, startup)),
		PlainTailMS:              median(each(plain, tail)),
		MemoryTailMS:             median(each(mem, tail)),
		DynamoTailMS:             median(each(dyn, tail)),
		PlainSlackMS:             median(each(plain, slack)),
		MemorySlackMS:            median(each(mem, slack)),
		DynamoSlackMS:            median(each(dyn, slack)),
		RoundDynamoVsMemory:      r.perRound(phaseDynamo, phaseMemory, ratio),
		RoundDynamoVsPlain:       r.perRound(phaseDynamo, phasePlain, ratio),
		PlainCPUPerRec:           median(each(plain, cpu)),
		MemoryCPUPerRec:          median(each(mem, cpu)),
		DynamoCPUPerRec:          median(each(dyn, cpu)),
		PlainFastCPUPerRec:       median(each(fast, cpu)),
		MemoryCPUVsPlain:         median(r.perRound(phaseMemory, phasePlain, cpuRatio)),
		DynamoCPUVsPlain:         median(r.perRound(phaseDynamo, phasePlain, cpuRatio)),
		PlainSteadyCPUPerRec:     median(each(plain, steadyCPU)),
		MemorySteadyCPUPerRec:    median(each(mem, steadyCPU)),
		DynamoSteadyCPUPerRec:    median(each(dyn, steadyCPU)),
		PlainFastSteadyCPUPerRec: median(each(fast, steadyCPU)),
		MemorySteadyCPUVsPlain:   median(r.perRound(phaseMemory, phasePlain, steadyCPURatio)),
		DynamoSteadyCPUVsPlain:   median(r.perRound(phaseDynamo, phasePlain, steadyCPURatio)),
		PlainStartCPUMS:          median(each(plain, startCPU)),
		MemoryStartCPUMS:         median(each(mem, startCPU)),
		DynamoStartCPUMS:         median(each(dyn, startCPU)),
		PlainFastStartCPUMS:      median(each(fast, startCPU)),
		PlainStopCPUMS:           median(each(plain, stopCPU)),
		MemoryStopCPUMS:          median(each(mem, stopCPU)),
		DynamoStopCPUMS:          median(each(dyn, stopCPU)),
		WritesPerRecord:          median(each(dyn, writesPerRecord)),
		PlainFaults:              median(each(plain, faults)),
		MemoryFaults:             median(each(mem, faults)),
		DynamoFaults:             median(each(dyn, faults)),
		PlainFastFaults:          median(each(fast, faults)),
		Redelivered:              -1,
		Results:                  r.results,
		Kill:                     r.kill,
		Seconds:                  r.finished.Sub(r.started).Seconds(),
	}
	s.MemoryOwnDelayMS = (s.MemoryStartupMS - s.PlainStartupMS) + (s.MemorySlackMS - s.PlainSlackMS) + (s.MemoryTailMS - s.PlainTailMS)
	s.DynamoOwnDelayMS = (s.DynamoStartupMS - s.PlainStartupMS) + (s.DynamoSlackMS - s.PlainSlackMS) + (s.DynamoTailMS - s.PlainTailMS)
	s.PlainElapsedMS = median(each(plain, func(w workerResult) float64 { return float64(w.Elapsed) / 1e6 }))
	if s.PlainElapsedMS > 0 {
		s.EstDynamoVsPlain = s.PlainElapsedMS / (s.PlainElapsedMS + s.DynamoOwnDelayMS)
		s.EstDynamoVsMemory = (s.PlainElapsedMS + s.MemoryOwnDelayMS) / (s.PlainElapsedMS + s.DynamoOwnDelayMS)
	}
	for _, w := range r.results {
		if w.Total > 0 {
			s.MaxOtherCPU = max(s.MaxOtherCPU, w.OtherCPU.Seconds()/w.Total.Seconds())
		}
	}
	s.PooledDynamoVsMemory = pooled(dyn) / pooled(mem)
	s.PooledDynamoVsPlain = pooled(dyn) / pooled(plain)
	var written int
	var writeTime time.Duration
	for _, w := range r.writes {
		written += w.Records
		writeTime += w.Elapsed
	}
	if writeTime > 0 {
		s.WriteRecordsPerSec = float64(written) / writeTime.Seconds()
	}
	for _, w := range append(slices.Clone(mem), dyn...) {
		s.PeakRSSMB = max(s.PeakRSSMB, float64(w.MaxRSSKB)/1024)
	}
	if r.kill != nil {
		s.PeakRSSMB = max(s.PeakRSSMB, float64(r.kill.Second.MaxRSSKB)/1024)
		s.Redelivered = r.kill.Redelivered
		s.KilledAt = r.kill.FirstHandled
	}
	for _, w := range plain {
		s.PlainPeakRSSMB = max(s.PlainPeakRSSMB, float64(w.MaxRSSKB)/1024)
	}
	s.summarizeConcurrent(r.concurrent)
	s.Targets = targets{
		CPUVsPlainDynamo:   passIf(s.DynamoCPUVsPlain <= targetCPUVsPlain),
		CPUVsPlainMemory:   passIf(s.MemoryCPUVsPlain <= targetCPUVsPlain),
		DynamoVsMemory:     passIf(s.DynamoVsMemory >= targetDynamoVsMemory),
		ConsumerVsPlain:    passIf(s.DynamoVsPlain >= targetConsumerVsPlain),
		WritesPerRecord:    passIf(s.WritesPerRecord <= targetWritesPerRecord),
		EstDynamoVsMemory:  passIf(s.EstDynamoVsMemory >= targetDynamoVsMemory),
		EstConsumerVsPlain: passIf(s.EstDynamoVsPlain >= targetConsumerVsPlain),
	}
	if s.ConcurrentRounds > s.ConcurrentNoWindow {
		s.Targets.ConcDynamoVsMemory = passIf(s.ConcDynamoVsMemory >= targetDynamoVsMemory)
		s.Targets.ConcConsumerVsPlain = passIf(s.ConcDynamoVsPlain >= targetConsumerVsPlain)
	}
	if o.peers {
		s.Harlow = r.summarizePeers(&s)
	}
	return s
}

// recordsAt returns how many distinct records w had handled t after its
// start, interpolated between its progress marks.
func recordsAt(w workerResult, t time.Duration) float64 {
	if t >= w.Elapsed {
		return float64(w.Distinct)
	}
	prevT, prevN := time.Duration(0), 0.0
	for i, m := range w.Marks {
		n := float64((i + 1) * w.MarkStep)
		if m >= t {
			if m == prevT {
				return n
			}
			return prevN + (n-prevN)*float64(t-prevT)/float64(m-prevT)
		}
		prevT, prevN = m, n
	}
	// Past the last mark, before the last record.
	if w.Elapsed > prevT {
		return prevN + (float64(w.Distinct)-prevN)*float64(t-prevT)/float64(w.Elapsed-prevT)
	}
	return prevN
}

// timeAt returns when w had handled the k-th multiple of its MarkStep, or
// 0 when it has no such mark.
func timeAt(w workerResult, k int) time.Duration {
	if k < 1 || k > len(w.Marks) {
		return 0
	}
	return w.Marks[k-1]
}

// windowStartMark is the progress mark (10 % of the records) that every
// worker of a concurrent round must have passed before the common window
// opens: the start-ups (taking leases, getting iterators, entering the
// stand-in's queue) are behind them all.
const windowStartMark = marksPerRun / 10

// readingFrom returns when every shard of w was reading: the later of its
// windowStartMark and the start of its last shard's first GetRecords call
// (Kinesis.FirstCall). With few records, or many workers queueing at the
// stand-in at once, a worker can pass 10 % of the records on some shards
// before its last shard made its first call; its rate over a window that
// opened then would count part of its start-up.
func readingFrom(w workerResult) time.Duration {
	return max(timeAt(w, windowStartMark), w.Kinesis.FirstCall)
}

// commonWindow returns the records/s of each result of a concurrent round
// over their common window: from the moment the last of them had handled
// 10 % of the records with every shard reading (readingFrom) to the moment
// the first had handled them all. In it all run at once against the same
// stand-in, past their start-ups (which the sequential rounds measure),
// and before any has the stand-in to fewer. Each rate is the least-squares
// slope of records over time through the worker's progress marks in the
// window: records arrive in batches (a staircase), and a slope through
// every step does not depend on where the window's edges cut the stairs,
// as a difference of two points would. It returns zeros when the window
// holds fewer than three marks of a worker.
func commonWindow(round []workerResult) []float64 {
	from, to := windowBounds(round)
	out := make([]float64, len(round))
	for i, w := range round {
		out[i] = slope(w, from, to)
	}
	return out
}

// windowBounds returns the common window of a concurrent round (see
// commonWindow), in time from the common start of the clocks.
func windowBounds(round []workerResult) (from, to time.Duration) {
	for i, w := range round {
		if t := readingFrom(w); t > from {
			from = t
		}
		if i == 0 || w.Elapsed < to {
			to = w.Elapsed
		}
	}
	return from, to
}

// slope returns the least-squares slope, in records per second, of w's
// progress marks with times in [from, to], or 0 for fewer than three.
func slope(w workerResult, from, to time.Duration) float64 {
	var ts, ns []float64
	for i, m := range w.Marks {
		if m >= from && m <= to {
			ts = append(ts, m.Seconds())
			ns = append(ns, float64((i+1)*w.MarkStep))
		}
	}
	if len(ts) < 3 {
		return 0
	}
	var tm, nm float64
	for i := range ts {
		tm += ts[i]
		nm += ns[i]
	}
	tm /= float64(len(ts))
	nm /= float64(len(ns))
	var num, den float64
	for i := range ts {
		num += (ts[i] - tm) * (ns[i] - nm)
		den += (ts[i] - tm) * (ts[i] - tm)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// minWindowMarks is the fewest progress marks of every worker that a
// concurrent round's common window must hold (20 % of the records) for
// the round to count. A shorter window (few records, long start-ups)
// holds a few steps of the staircase of batch arrivals, and its slopes
// tell more about where those steps fell than about the rates.
const minWindowMarks = marksPerRun / 5

// marksIn returns the number of w's progress marks in [from, to].
func marksIn(w workerResult, from, to time.Duration) int {
	n := 0
	for _, m := range w.Marks {
		if m >= from && m <= to {
			n++
		}
	}
	return n
}

// windowOK reports whether a concurrent round's common window holds at
// least minWindowMarks marks of every worker.
func windowOK(round []workerResult) bool {
	from, to := windowBounds(round)
	for _, w := range round {
		if marksIn(w, from, to) < minWindowMarks {
			return false
		}
	}
	return len(round) > 0
}

// windowRates returns, for each concurrent round whose window is long
// enough (windowOK), the common-window rate of each phase in it (see
// commonWindow), keyed by phase. Rounds with too short a window are left
// out.
func windowRates(rounds [][]workerResult) []map[string]float64 {
	var out []map[string]float64
	for _, round := range rounds {
		if !windowOK(round) {
			continue
		}
		rates := commonWindow(round)
		m := make(map[string]float64, len(round))
		for j, w := range round {
			m[w.Phase] = rates[j]
		}
		out = append(out, m)
	}
	return out
}

// summarizeConcurrent fills the concurrent-round figures of s.
func (s *summary) summarizeConcurrent(rounds [][]workerResult) {
	s.ConcurrentRounds = len(rounds)
	s.ConcurrentResults = rounds
	windows := windowRates(rounds)
	s.ConcurrentNoWindow = len(rounds) - len(windows)
	var plain, mem, dyn, mp []float64
	for _, rates := range windows {
		plain, mem, dyn = append(plain, rates[phasePlain]), append(mem, rates[phaseMemory]), append(dyn, rates[phaseDynamo])
		s.RoundConcDynamoVsMemory = append(s.RoundConcDynamoVsMemory, safeDiv(rates[phaseDynamo], rates[phaseMemory]))
		s.RoundConcDynamoVsPlain = append(s.RoundConcDynamoVsPlain, safeDiv(rates[phaseDynamo], rates[phasePlain]))
		mp = append(mp, safeDiv(rates[phaseMemory], rates[phasePlain]))
	}
	s.ConcDynamoVsMemory = median(s.RoundConcDynamoVsMemory)
	s.ConcDynamoVsPlain = median(s.RoundConcDynamoVsPlain)
	s.ConcMemoryVsPlain = median(mp)
	s.ConcPlainRecordsPerSec, s.ConcMemoryRecordsPerSec, s.ConcDynamoRecordsPerSec = median(plain), median(mem), median(dyn)
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

var phaseTitle = map[string]string{
	phasePlain:        "plain GetRecords loop",
	phasePlainFast:    "plain loop, fast decoder",
	phaseMemory:       "consumer, in-memory leases",
	phaseDynamo:       "consumer, DynamoDB leases",
	phaseHarlowMemory: "harlow, in-memory checkpoints",
	phaseHarlowDynamo: "harlow, DynamoDB checkpoints",
}

// fmtWindows formats the common window of each concurrent round as
// "[from–to …]" in milliseconds.
func fmtWindows(rounds [][]workerResult) string {
	parts := make([]string, len(rounds))
	for i, round := range rounds {
		from, to := windowBounds(round)
		parts[i] = ms(from) + "–" + ms(to)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// fmtList formats ratios as "[0.98 1.01 …]".
func fmtList(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// share formats cpu as a percentage of one CPU over wall, or "-".
func share(cpu, wall time.Duration) string {
	if cpu <= 0 || wall <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*cpu.Seconds()/wall.Seconds())
}

// shareOrZero is share, but "0%" for no CPU time.
func shareOrZero(cpu, wall time.Duration) string {
	if cpu <= 0 && wall > 0 {
		return "0%"
	}
	return share(cpu, wall)
}

// busyWarning is the share of one CPU that other processes may use during
// a phase before the report warns that the machine was not idle.
const busyWarning = 0.15

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }

// print writes the table and the JSON line.
func (r *report) print(w io.Writer) {
	o := r.opts
	s := r.summarize()
	fmt.Fprintf(w, "\nlambdaadapter long-running mode, end to end against kinesis-local and dynalite\n")
	fmt.Fprintf(w, "%d records × %d B over %d shards, Limit %d, CheckpointInterval %v, %d round(s); %s %s/%s, %d CPUs\n",
		o.records, o.size, o.shards, o.limit, o.checkpointInterval, o.rounds, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if o.handlerWait > 0 {
		fmt.Fprintf(w, "every record's handling waits %v first (-handler-wait)\n", o.handlerWait)
	}
	fmt.Fprintf(w, "written with PutRecords (batches of %d, %d writers): %.0f records/s\n\n", putBatch, writers, s.WriteRecordsPerSec)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tphase\trecords/s\tsteady rec/s\tfirst rec ms\tlast rec ms\tGetRecords\tempty\tmean ms\tmax ms\tstart-up ms\tslack ms\tCPU µs/rec\tGCs\tretries\tpeak RSS MB\tDDB writes\tDDB reads\tkinesis-local CPU\tdynalite CPU\tother CPU\t")
	for _, res := range r.results {
		k := res.Kinesis
		reads := res.DynamoDB["GetItem"] + res.DynamoDB["Scan"] + res.DynamoDB["DescribeTable"]
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%s\t%s\t%d\t%d\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t%d\t%d\t%.1f\t%d\t%d\t%s\t%s\t%s\t\n",
			res.Round, phaseTitle[res.Phase], res.RecordsPerSecond(), res.SteadyRecordsPerSecond(), ms(res.FirstRecord), ms(res.Elapsed),
			k.GetRecords, k.EmptyReads, float64(k.MeanGetRecords())/1e6, float64(k.MaxGetRecords)/1e6, ms(k.FirstCall), float64(k.Slack)/1e6,
			res.CPUPerRecord(), res.NumGC, res.Retries, float64(res.MaxRSSKB)/1024, res.DynamoDBWrites(), reads,
			share(res.KinesisLocalCPU, res.Total), share(res.DynaliteCPU, res.Total), shareOrZero(res.OtherCPU, res.Total))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nmedians over %d round(s); ratios are medians of the per-round ratios\n", o.rounds)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "records/s: plain loop / memory / DynamoDB\t%.0f / %.0f / %.0f\t\t\n", s.PlainRecordsPerSec, s.MemoryRecordsPerSec, s.DynamoRecordsPerSec)
	fmt.Fprintf(tw, "DynamoDB ÷ in-memory records/s\t%.3f\ttarget ≥ %.2f\t%s (Rust original %.2f); per round %s\n",
		s.DynamoVsMemory, targetDynamoVsMemory, s.Targets.DynamoVsMemory, rustDynamoVsMemory, fmtList(s.RoundDynamoVsMemory))
	fmt.Fprintf(tw, "consumer (DynamoDB) ÷ plain loop records/s\t%.3f\ttarget ≥ %.2f\t%s; per round %s\n",
		s.DynamoVsPlain, targetConsumerVsPlain, s.Targets.ConsumerVsPlain, fmtList(s.RoundDynamoVsPlain))
	if s.ConcurrentNoWindow > 0 {
		fmt.Fprintf(tw, "concurrent rounds left out\t%d of %d\t\t(their common window held fewer than %d %% of some worker's records: too few -records for the start-ups; windows %s)\n",
			s.ConcurrentNoWindow, s.ConcurrentRounds, 100*minWindowMarks/marksPerRun, fmtWindows(r.concurrent))
	}
	if s.ConcurrentRounds > s.ConcurrentNoWindow {
		fmt.Fprintf(tw, "concurrent rounds (%d): records/s plain loop / memory / DynamoDB\t%.0f / %.0f / %.0f\t\t(all read phases at once on one stand-in; rates over their common window, start-ups excluded)\n",
			s.ConcurrentRounds-s.ConcurrentNoWindow, s.ConcPlainRecordsPerSec, s.ConcMemoryRecordsPerSec, s.ConcDynamoRecordsPerSec)
		fmt.Fprintf(tw, "concurrent: DynamoDB ÷ in-memory\t%.3f\ttarget ≥ %.2f\t%s; per round %s\n",
			s.ConcDynamoVsMemory, targetDynamoVsMemory, s.Targets.ConcDynamoVsMemory, fmtList(s.RoundConcDynamoVsMemory))
		fmt.Fprintf(tw, "concurrent: consumer (DynamoDB) ÷ plain loop\t%.3f\ttarget ≥ %.2f\t%s; per round %s\n",
			s.ConcDynamoVsPlain, targetConsumerVsPlain, s.Targets.ConcConsumerVsPlain, fmtList(s.RoundConcDynamoVsPlain))
		fmt.Fprintf(tw, "concurrent: consumer (in-memory) ÷ plain loop\t%.3f\t\t(for reference)\n", s.ConcMemoryVsPlain)
		fmt.Fprintf(tw, "concurrent: common windows, ms from the common start\t%s\t\t(every worker past 10 %% of the records with every shard reading, to the first one done)\n", fmtWindows(r.concurrent))
	}
	fmt.Fprintf(tw, "pooled over all rounds: DynamoDB÷memory, DynamoDB÷plain\t%.3f, %.3f\t\t(all records of a phase's rounds over all their time)\n", s.PooledDynamoVsMemory, s.PooledDynamoVsPlain)
	fmt.Fprintf(tw, "consumer (in-memory) ÷ plain loop records/s\t%.3f\t\t(for reference)\n", s.MemoryVsPlain)
	fmt.Fprintf(tw, "first-to-last-record rates: DynamoDB÷memory, DynamoDB÷plain, memory÷plain\t%.3f, %.3f, %.3f\t\t(start-up excluded, for reference)\n",
		s.SteadyDynamoVsMemory, s.SteadyDynamoVsPlain, s.SteadyMemoryVsPlain)
	fmt.Fprintf(tw, "start-up ms: plain loop / memory / DynamoDB\t%.0f / %.0f / %.0f\t\t(phase start to the last shard's first GetRecords call)\n",
		s.PlainStartupMS, s.MemoryStartupMS, s.DynamoStartupMS)
	fmt.Fprintf(tw, "reader slack ms: plain loop / memory / DynamoDB\t%.1f / %.1f / %.1f\t\t(time a shard's calls started later than the 200 ms / 1 s rules allowed; worst shard)\n",
		s.PlainSlackMS, s.MemorySlackMS, s.DynamoSlackMS)
	fmt.Fprintf(tw, "last batch hand-over ms: plain loop / memory / DynamoDB\t%.1f / %.1f / %.1f\t\t(end of the last GetRecords with records to the last record handled)\n",
		s.PlainTailMS, s.MemoryTailMS, s.DynamoTailMS)
	fmt.Fprintf(tw, "own delay vs plain loop ms: memory / DynamoDB\t%.0f / %.0f\t\t(start-up + slack + hand-over beyond the plain loop's; stand-in noise excluded)\n",
		s.MemoryOwnDelayMS, s.DynamoOwnDelayMS)
	fmt.Fprintf(tw, "estimated without stand-in noise: DynamoDB÷memory, DynamoDB÷plain\t%.3f, %.3f\ttarget ≥ %.2f\t%s, %s (plain loop median %.0f ms plus each own delay)\n",
		s.EstDynamoVsMemory, s.EstDynamoVsPlain, targetDynamoVsMemory, s.Targets.EstDynamoVsMemory, s.Targets.EstConsumerVsPlain, s.PlainElapsedMS)
	early := 0
	for _, res := range r.results {
		if !isHarlow(res.Phase) {
			early += res.Kinesis.Early
		}
	}
	fmt.Fprintf(tw, "GetRecords calls earlier than the rules allow\t%d\t\t(plain loop and consumer phases; 0 means every loop kept 5 calls/s/shard)\n", early)
	fmt.Fprintf(tw, "DynamoDB writes per record\t%.5f\ttarget ≤ %.2f\t%s (Rust original %.1f)\n", s.WritesPerRecord, targetWritesPerRecord, s.Targets.WritesPerRecord, rustWritesPerRecord)
	fmt.Fprintf(tw, "CPU µs/record: consumer DynamoDB / in-memory / plain loop\t%.1f / %.1f / %.1f\t\t(user+sys of the worker process, bench bookkeeping included)\n", s.DynamoCPUPerRec, s.MemoryCPUPerRec, s.PlainCPUPerRec)
	fmt.Fprintf(tw, "CPU µs/record, consumer ÷ plain loop: DynamoDB, in-memory\t%.3f, %.3f\ttarget ≤ %.2f\t%s, %s (medians of per-round ratios)\n",
		s.DynamoCPUVsPlain, s.MemoryCPUVsPlain, targetCPUVsPlain, s.Targets.CPUVsPlainDynamo, s.Targets.CPUVsPlainMemory)
	if s.PlainFastCPUPerRec > 0 {
		fmt.Fprintf(tw, "CPU µs/record: plain loop with the consumer's decoder (the floor)\t%.1f\t\t(%.3f of the plain loop: reading and decoding only)\n", s.PlainFastCPUPerRec, s.PlainFastCPUPerRec/s.PlainCPUPerRec)
	}
	if s.PlainSteadyCPUPerRec > 0 {
		fmt.Fprintf(tw, "steady-state CPU µs/record: consumer DynamoDB / in-memory / plain loop\t%.1f / %.1f / %.1f\t\t(records 10 %%–90 %%: no start-up, first or last answers, stop%s)\n",
			s.DynamoSteadyCPUPerRec, s.MemorySteadyCPUPerRec, s.PlainSteadyCPUPerRec, floorNote("%.1f", s.PlainFastSteadyCPUPerRec))
		fmt.Fprintf(tw, "steady-state CPU, consumer ÷ plain loop: DynamoDB, in-memory\t%.3f, %.3f\t\t(medians of per-round ratios; for information: the target is on the whole phase)\n",
			s.DynamoSteadyCPUVsPlain, s.MemorySteadyCPUVsPlain)
	}
	fmt.Fprintf(tw, "CPU ms to the first record: consumer DynamoDB / in-memory / plain loop\t%.1f / %.1f / %.1f\t\t(start-up, in the whole-phase figures%s)\n",
		s.DynamoStartCPUMS, s.MemoryStartCPUMS, s.PlainStartCPUMS, floorNote("%.1f", s.PlainFastStartCPUMS))
	fmt.Fprintf(tw, "CPU ms after the last record: consumer DynamoDB / in-memory / plain loop\t%.1f / %.1f / %.1f\t\t(the stop: last checkpoints and releases, in the whole-phase figures)\n",
		s.DynamoStopCPUMS, s.MemoryStopCPUMS, s.PlainStopCPUMS)
	fmt.Fprintf(tw, "other processes' CPU during a phase, at most\t%.0f%%\t\t(of one CPU; above %.0f%% the ratios are unreliable)\n", 100*s.MaxOtherCPU, 100*busyWarning)
	fmt.Fprintf(tw, "peak RSS: consumer / plain loop\t%.1f MB / %.1f MB\t\t(VmHWM of the worker process)\n", s.PeakRSSMB, s.PlainPeakRSSMB)
	fmt.Fprintf(tw, "minor page faults per phase: consumer DynamoDB / in-memory / plain loop\t%.0f / %.0f / %.0f\t\t(first touches of memory, in the CPU figures as system time%s)\n",
		s.DynamoFaults, s.MemoryFaults, s.PlainFaults, floorNote("%.0f", s.PlainFastFaults))
	if r.kill != nil {
		k := r.kill
		worth := 0.0
		if k.FirstHandled > 0 {
			worth = float64(k.Redelivered) / (float64(k.FirstHandled) / k.KilledAfter.Seconds())
		}
		fmt.Fprintf(tw, "re-delivered after kill -9\t%d\t\t(≈ %.2fs of the first worker's mean rate; it was killed after %d records, %v; the second took its first lease in %v; %d handled twice by one worker)\n",
			k.Redelivered, worth, k.FirstHandled, k.KilledAfter.Round(time.Millisecond), k.Takeover.Round(time.Millisecond), k.DuplicatesWithin)
	} else {
		fmt.Fprintf(tw, "re-delivered after kill -9\tskipped\t\t\n")
	}
	tw.Flush()
	r.printPeers(w, s)
	fmt.Fprintf(w, "\ntotal %.1fs\n", s.Seconds)
	if s.MaxOtherCPU > busyWarning {
		fmt.Fprintf(w, "WARNING: other processes used up to %.0f%% of a CPU during a phase (more than %.0f%%): the stand-in's speed varied with them,\n"+
			"so the throughput ratios are unreliable. Run the benchmark again on an otherwise idle machine.\n", 100*s.MaxOtherCPU, 100*busyWarning)
	}
	fmt.Fprintln(w, jsonLine(s))
}

// waitString is -handler-wait in the JSON line: empty (left out) for none.
func waitString(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}
