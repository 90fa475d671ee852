package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// harlowModule is the peer, as this module's go.mod requires it.
const harlowModule = "github.com/harlow/kinesis-consumer v0.5.0"

// Targets against the peer (issue 10): the consumer reads at least as
// fast as harlow/kinesis-consumer with the same kind of store, and spends
// less CPU time per record.
const (
	targetVsHarlow    = 1.0 // consumer ÷ harlow records/s, at least
	targetCPUVsHarlow = 1.0 // consumer ÷ harlow CPU µs/record, below
)

// peerSummary holds the figures of the peer, harlow/kinesis-consumer, and
// the consumer's ratios to it. "Memory" is harlow with its in-memory
// checkpoint store, compared with the consumer with in-memory leases;
// "Dynamo" harlow with its DynamoDB checkpoint store, compared with the
// consumer with DynamoDB leases.
type peerSummary struct {
	Module string `json:"module"`
	// Medians over the sequential rounds.
	MemoryRecordsPerSec float64 `json:"memory_records_per_s"`
	DynamoRecordsPerSec float64 `json:"dynamodb_records_per_s"`
	MemoryCPUPerRec     float64 `json:"memory_cpu_us_per_record"`
	DynamoCPUPerRec     float64 `json:"dynamodb_cpu_us_per_record"`
	WritesPerRecord     float64 `json:"dynamodb_writes_per_record"`
	MemoryStartupMS     float64 `json:"memory_startup_ms"`
	DynamoStartupMS     float64 `json:"dynamodb_startup_ms"`
	// PeakRSSMB is the largest peak RSS of a harlow worker process.
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// Early is the number of harlow's GetRecords calls, over all its
	// sequential phases, that started earlier than the plain loop's rules
	// allow (see kinesisStats.Early): harlow polls on a fixed ticker and
	// has no pause after an empty read.
	Early int `json:"early"`
	// The consumer over harlow, sequential rounds: records/s and CPU µs
	// per record, medians of the per-round ratios.
	VsMemory      float64   `json:"consumer_vs_harlow_memory"`
	VsDynamo      float64   `json:"consumer_vs_harlow_dynamodb"`
	RoundVsMemory []float64 `json:"round_consumer_vs_harlow_memory"`
	RoundVsDynamo []float64 `json:"round_consumer_vs_harlow_dynamodb"`
	CPUVsMemory   float64   `json:"cpu_consumer_vs_harlow_memory"`
	CPUVsDynamo   float64   `json:"cpu_consumer_vs_harlow_dynamodb"`
	// Concurrent rounds: harlow's median common-window rates, the
	// consumer's ratios to them (medians of the per-round ratios), and
	// every phase's median CPU µs per record.
	ConcMemoryRecordsPerSec float64            `json:"concurrent_memory_records_per_s"`
	ConcDynamoRecordsPerSec float64            `json:"concurrent_dynamodb_records_per_s"`
	ConcVsMemory            float64            `json:"concurrent_consumer_vs_harlow_memory"`
	ConcVsDynamo            float64            `json:"concurrent_consumer_vs_harlow_dynamodb"`
	RoundConcVsMemory       []float64          `json:"round_concurrent_consumer_vs_harlow_memory"`
	RoundConcVsDynamo       []float64          `json:"round_concurrent_consumer_vs_harlow_dynamodb"`
	ConcCPUPerRec           map[string]float64 `json:"concurrent_cpu_us_per_record"`
	ConcCPUVsMemory         float64            `json:"concurrent_cpu_consumer_vs_harlow_memory"`
	ConcCPUVsDynamo         float64            `json:"concurrent_cpu_consumer_vs_harlow_dynamodb"`
	// Redelivered is the kill -9 test's count with harlow's DynamoDB
	// store, -1 when it was skipped.
	Redelivered int         `json:"redelivered_after_kill"`
	KilledAt    int         `json:"killed_after_records"`
	Kill        *killResult `json:"kill,omitempty"`
}

// steadyCPURatio is x's steady-state CPU time per record over y's.
func steadyCPURatio(x, y workerResult) float64 {
	return safeDiv(x.SteadyCPUPerRecord(), y.SteadyCPUPerRecord())
}

// cpuRatio is x's CPU time per record over y's.
func cpuRatio(x, y workerResult) float64 {
	return safeDiv(x.CPUPerRecord(), y.CPUPerRecord())
}

// writesPerRecord is w's DynamoDB writes per distinct record.
func writesPerRecord(w workerResult) float64 {
	return float64(w.DynamoDBWrites()) / float64(max(1, w.Distinct))
}

// phaseOf returns the result of phase ph in a concurrent round.
func phaseOf(round []workerResult, ph string) (workerResult, bool) {
	for _, w := range round {
		if w.Phase == ph {
			return w, true
		}
	}
	return workerResult{}, false
}

// concCPU returns, per concurrent round that has both phases, a's CPU
// time per record over b's.
func concCPU(rounds [][]workerResult, a, b string) []float64 {
	var out []float64
	for _, round := range rounds {
		x, ok1 := phaseOf(round, a)
		y, ok2 := phaseOf(round, b)
		if ok1 && ok2 {
			out = append(out, cpuRatio(x, y))
		}
	}
	return out
}

// summarizePeers returns the peer's figures and sets the targets against
// it in s.Targets.
func (r *report) summarizePeers(s *summary) *peerSummary {
	hm, hd := r.byPhase(phaseHarlowMemory), r.byPhase(phaseHarlowDynamo)
	rps := func(w workerResult) float64 { return w.RecordsPerSecond() }
	cpu := func(w workerResult) float64 { return w.CPUPerRecord() }
	startup := func(w workerResult) float64 { return float64(w.Kinesis.FirstCall) / 1e6 }
	p := &peerSummary{
		Module:              harlowModule,
		MemoryRecordsPerSec: median(each(hm, rps)),
		DynamoRecordsPerSec: median(each(hd, rps)),
		MemoryCPUPerRec:     median(each(hm, cpu)),
		DynamoCPUPerRec:     median(each(hd, cpu)),
		WritesPerRecord:     median(each(hd, writesPerRecord)),
		MemoryStartupMS:     median(each(hm, startup)),
		DynamoStartupMS:     median(each(hd, startup)),
		RoundVsMemory:       r.perRound(phaseMemory, phaseHarlowMemory, ratio),
		RoundVsDynamo:       r.perRound(phaseDynamo, phaseHarlowDynamo, ratio),
		CPUVsMemory:         median(r.perRound(phaseMemory, phaseHarlowMemory, cpuRatio)),
		CPUVsDynamo:         median(r.perRound(phaseDynamo, phaseHarlowDynamo, cpuRatio)),
		ConcCPUPerRec:       map[string]float64{},
		Redelivered:         -1,
		Kill:                r.harlowKill,
	}
	p.VsMemory, p.VsDynamo = median(p.RoundVsMemory), median(p.RoundVsDynamo)
	for _, w := range append(hm, hd...) {
		p.PeakRSSMB = max(p.PeakRSSMB, float64(w.MaxRSSKB)/1024)
		p.Early += w.Kinesis.Early
	}
	if k := r.harlowKill; k != nil {
		p.PeakRSSMB = max(p.PeakRSSMB, float64(k.Second.MaxRSSKB)/1024)
		p.Redelivered, p.KilledAt = k.Redelivered, k.FirstHandled
	}

	var mem, dyn []float64
	for _, rates := range windowRates(r.concurrent) {
		mem, dyn = append(mem, rates[phaseHarlowMemory]), append(dyn, rates[phaseHarlowDynamo])
		p.RoundConcVsMemory = append(p.RoundConcVsMemory, safeDiv(rates[phaseMemory], rates[phaseHarlowMemory]))
		p.RoundConcVsDynamo = append(p.RoundConcVsDynamo, safeDiv(rates[phaseDynamo], rates[phaseHarlowDynamo]))
	}
	p.ConcMemoryRecordsPerSec, p.ConcDynamoRecordsPerSec = median(mem), median(dyn)
	p.ConcVsMemory, p.ConcVsDynamo = median(p.RoundConcVsMemory), median(p.RoundConcVsDynamo)
	for _, ph := range readPhases(true) {
		var xs []float64
		for _, round := range r.concurrent {
			if w, ok := phaseOf(round, ph); ok {
				xs = append(xs, w.CPUPerRecord())
			}
		}
		if len(xs) > 0 {
			p.ConcCPUPerRec[ph] = median(xs)
		}
	}
	p.ConcCPUVsMemory = median(concCPU(r.concurrent, phaseMemory, phaseHarlowMemory))
	p.ConcCPUVsDynamo = median(concCPU(r.concurrent, phaseDynamo, phaseHarlowDynamo))

	t := &s.Targets
	t.VsHarlowMemory = passIf(p.VsMemory >= targetVsHarlow)
	t.VsHarlowDynamo = passIf(p.VsDynamo >= targetVsHarlow)
	t.CPUVsHarlowMemory = passIf(p.CPUVsMemory > 0 && p.CPUVsMemory < targetCPUVsHarlow)
	t.CPUVsHarlowDynamo = passIf(p.CPUVsDynamo > 0 && p.CPUVsDynamo < targetCPUVsHarlow)
	if len(p.RoundConcVsMemory) > 0 {
		t.ConcVsHarlowMemory = passIf(p.ConcVsMemory >= targetVsHarlow)
		t.ConcVsHarlowDynamo = passIf(p.ConcVsDynamo >= targetVsHarlow)
	}
	if len(r.concurrent) > 0 {
		t.ConcCPUVsHarlowMemory = passIf(p.ConcCPUVsMemory > 0 && p.ConcCPUVsMemory < targetCPUVsHarlow)
		t.ConcCPUVsHarlowDynamo = passIf(p.ConcCPUVsDynamo > 0 && p.ConcCPUVsDynamo < targetCPUVsHarlow)
	}
	return p
}

// printPeers writes the side-by-side table of every read phase and the
// consumer's ratios to harlow, with PASS or MISS per target.
func (r *report) printPeers(w io.Writer, s summary) {
	p := s.Harlow
	if p == nil {
		return
	}
	phases := readPhases(true)
	fmt.Fprintf(w, "\nside by side with %s (medians; \"-\" where a phase has no such figure)\n", harlowModule)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tplain loop\tconsumer in-memory\tconsumer DynamoDB\tharlow in-memory\tharlow DynamoDB\t")
	row := func(title string, f func(ph string) string) {
		fmt.Fprint(tw, title, "\t")
		for _, ph := range phases {
			fmt.Fprint(tw, f(ph), "\t")
		}
		fmt.Fprintln(tw)
	}
	seq := func(f func(workerResult) float64, format string) func(string) string {
		return func(ph string) string {
			rs := r.byPhase(ph)
			if len(rs) == 0 {
				return "-"
			}
			return fmt.Sprintf(format, median(each(rs, f)))
		}
	}
	windows := windowRates(r.concurrent)
	row("records/s, sequential", seq(func(w workerResult) float64 { return w.RecordsPerSecond() }, "%.0f"))
	if len(windows) > 0 {
		row("records/s, concurrent window", func(ph string) string {
			var xs []float64
			for _, rates := range windows {
				if v, ok := rates[ph]; ok {
					xs = append(xs, v)
				}
			}
			if len(xs) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f", median(xs))
		})
	}
	row("CPU µs/record, sequential", seq(func(w workerResult) float64 { return w.CPUPerRecord() }, "%.1f"))
	row("CPU µs/record, sequential, steady state", seq(func(w workerResult) float64 { return w.SteadyCPUPerRecord() }, "%.1f"))
	if len(r.concurrent) > 0 {
		row("CPU µs/record, concurrent", func(ph string) string {
			if v, ok := p.ConcCPUPerRec[ph]; ok {
				return fmt.Sprintf("%.1f", v)
			}
			return "-"
		})
	}
	row("start-up ms, sequential", seq(func(w workerResult) float64 { return float64(w.Kinesis.FirstCall) / 1e6 }, "%.0f"))
	row("DynamoDB writes/record", func(ph string) string {
		if ph != phaseDynamo && ph != phaseHarlowDynamo {
			return "-"
		}
		return seq(writesPerRecord, "%.5f")(ph)
	})
	row("re-delivered after kill -9", func(ph string) string {
		k := map[string]*killResult{phaseDynamo: r.kill, phaseHarlowDynamo: r.harlowKill}[ph]
		if k == nil {
			return "-"
		}
		return fmt.Sprint(k.Redelivered)
	})
	row("peak RSS MB", seq(func(w workerResult) float64 { return float64(w.MaxRSSKB) / 1024 }, "%.1f"))
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "consumer ÷ harlow records/s, in-memory\t%.3f\ttarget ≥ %.2f\t%s; per round %s\n",
		p.VsMemory, targetVsHarlow, s.Targets.VsHarlowMemory, fmtList(p.RoundVsMemory))
	fmt.Fprintf(tw, "consumer ÷ harlow records/s, DynamoDB\t%.3f\ttarget ≥ %.2f\t%s; per round %s\n",
		p.VsDynamo, targetVsHarlow, s.Targets.VsHarlowDynamo, fmtList(p.RoundVsDynamo))
	if len(p.RoundConcVsMemory) > 0 {
		fmt.Fprintf(tw, "concurrent: consumer ÷ harlow records/s, in-memory\t%.3f\ttarget ≥ %.2f\t%s; per round %s\n",
			p.ConcVsMemory, targetVsHarlow, s.Targets.ConcVsHarlowMemory, fmtList(p.RoundConcVsMemory))
		fmt.Fprintf(tw, "concurrent: consumer ÷ harlow records/s, DynamoDB\t%.3f\ttarget ≥ %.2f\t%s; per round %s\n",
			p.ConcVsDynamo, targetVsHarlow, s.Targets.ConcVsHarlowDynamo, fmtList(p.RoundConcVsDynamo))
	}
	fmt.Fprintf(tw, "consumer ÷ harlow CPU µs/record, in-memory\t%.3f\ttarget < %.2f\t%s (median of per-round ratios)\n",
		p.CPUVsMemory, targetCPUVsHarlow, s.Targets.CPUVsHarlowMemory)
	fmt.Fprintf(tw, "consumer ÷ harlow CPU µs/record, DynamoDB\t%.3f\ttarget < %.2f\t%s (median of per-round ratios)\n",
		p.CPUVsDynamo, targetCPUVsHarlow, s.Targets.CPUVsHarlowDynamo)
	if len(r.concurrent) > 0 {
		fmt.Fprintf(tw, "concurrent: consumer ÷ harlow CPU µs/record, in-memory\t%.3f\ttarget < %.2f\t%s\n",
			p.ConcCPUVsMemory, targetCPUVsHarlow, s.Targets.ConcCPUVsHarlowMemory)
		fmt.Fprintf(tw, "concurrent: consumer ÷ harlow CPU µs/record, DynamoDB\t%.3f\ttarget < %.2f\t%s\n",
			p.ConcCPUVsDynamo, targetCPUVsHarlow, s.Targets.ConcCPUVsHarlowDynamo)
	}
	fmt.Fprintf(tw, "harlow GetRecords calls earlier than the plain loop's rules\t%d\t\t(its fixed 200 ms scan ticker, no pause after an empty read; sequential phases)\n", p.Early)
	if k := r.harlowKill; k != nil {
		fmt.Fprintf(tw, "harlow (DynamoDB store) re-delivered after kill -9\t%d\t\t%s\n", k.Redelivered, killDetail(k))
	} else {
		fmt.Fprintf(tw, "harlow (DynamoDB store) re-delivered after kill -9\tskipped\t\t\n")
	}
	tw.Flush()
}

// killDetail describes a kill -9 test's circumstances.
func killDetail(k *killResult) string {
	worth := 0.0
	if k.FirstHandled > 0 && k.KilledAfter > 0 {
		worth = float64(k.Redelivered) / (float64(k.FirstHandled) / k.KilledAfter.Seconds())
	}
	return fmt.Sprintf("(≈ %.2fs of the first worker's mean rate; it was killed after %d records, %v; the second handled its first record after %v; %d handled twice by one worker)",
		worth, k.FirstHandled, k.KilledAfter.Round(time.Millisecond), k.Takeover.Round(time.Millisecond), k.DuplicatesWithin)
}
