// Command perfphases attributes the CPU time of the end-to-end benchmark's
// worker processes to what they spent it on, phase by phase, from a Linux
// perf profile of a benchmark run: where the consumer spends the CPU time
// above the floor (the plain loop with the consumer's GetRecords decoder),
// and the plain loop above both.
//
// runtime/pprof cannot do it here: a phase uses about 100 ms of CPU time,
// and Go's profiler samples at most at the kernel's tick rate (250 Hz on
// the machine of BENCHMARKS.md; a higher rate loses samples), so a phase
// gets a few dozen samples. perf samples the CPU clock at any rate.
//
// Usage, from the repository's root (perf needs to be allowed to profile
// the user's processes, kernel.perf_event_paranoid ≤ 2, or root):
//
//	perf record -F 1999 -g -o /tmp/perf.data -- \
//	    scripts/bench-e2e.sh -peers=false -floor -rounds 4 -concurrent-rounds 0 -skip-kill > /tmp/bench.out
//	perf script -i /tmp/perf.data -F pid,ip,sym,dso > /tmp/perf.txt
//	(cd bench/e2e && go run ./cmd/perfphases -bench /tmp/bench.out -perf /tmp/perf.txt -hz 1999)
//
// It reads the benchmark's final JSON line for the process id of each
// sequential phase's worker (concurrent rounds and kill tests are left
// out), and perf's samples of those processes, each with its call stack.
// Every sample goes to one category (see categorize): the Go runtime's own
// goroutines (GC, scheduler, sysmon) by what runs, else the innermost frame
// of the stack that belongs to a known part. It prints, per phase, the mean
// milliseconds of CPU time per run in each category, and last how much of
// the time outside process start went to the kernel's page-fault handler
// (first touches of memory, already counted in the categories).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "perfphases:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("perfphases", flag.ContinueOnError)
	benchFile := fs.String("bench", "", "the benchmark's output (its last JSON line is used)")
	perfFile := fs.String("perf", "", "the output of perf script -F pid,ip,sym,dso (with call graphs)")
	hz := fs.Float64("hz", 1999, "the sampling frequency given to perf record -F")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *benchFile == "" || *perfFile == "" || *hz <= 0 {
		return errors.New("need -bench, -perf and a positive -hz")
	}
	bf, err := os.Open(*benchFile)
	if err != nil {
		return err
	}
	defer bf.Close()
	phases, err := readPhases(bf)
	if err != nil {
		return err
	}
	pf, err := os.Open(*perfFile)
	if err != nil {
		return err
	}
	defer pf.Close()
	t, err := attribute(pf, phases)
	if err != nil {
		return err
	}
	return t.print(out, *hz)
}

// phaseOf maps a worker's process id to its phase; runs counts each phase's
// workers.
type phaseOf struct {
	byPID map[int]string
	runs  map[string]int
	order []string // phases in the order of the benchmark's first round
}

// readPhases finds the benchmark's JSON line (the last line that starts
// with {"bench":) and the pid of every sequential phase's worker in it.
func readPhases(r io.Reader) (phaseOf, error) {
	var last string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"bench":`) {
			last = sc.Text()
		}
	}
	if err := sc.Err(); err != nil {
		return phaseOf{}, err
	}
	if last == "" {
		return phaseOf{}, errors.New(`no {"bench": ...} line in the benchmark's output`)
	}
	var v struct {
		Results []struct {
			Phase string `json:"phase"`
			PID   int    `json:"pid"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(last), &v); err != nil {
		return phaseOf{}, fmt.Errorf("the benchmark's JSON line: %w", err)
	}
	p := phaseOf{byPID: map[int]string{}, runs: map[string]int{}}
	for _, r := range v.Results {
		if r.PID == 0 {
			return phaseOf{}, fmt.Errorf("phase %s has no pid (a benchmark from before the pid was recorded)", r.Phase)
		}
		p.byPID[r.PID] = r.Phase
		if p.runs[r.Phase] == 0 {
			p.order = append(p.order, r.Phase)
		}
		p.runs[r.Phase]++
	}
	if len(p.byPID) == 0 {
		return phaseOf{}, errors.New("the benchmark's JSON line lists no sequential phase")
	}
	return p, nil
}

// table is the samples of each phase by category.
type table struct {
	phases  phaseOf
	samples map[string]map[string]int // phase → category → samples
	// faults counts, per phase, the samples outside process start that
	// are in the kernel's page-fault handler: first touches of memory,
	// counted in their categories above as well.
	faults map[string]int
}

// attribute reads perf script's output: a sample is a header line that
// starts with the pid, then one indented line per frame, innermost first
// ("<ip> <symbol> (<dso>)"), then an empty line.
func attribute(r io.Reader, phases phaseOf) (table, error) {
	t := table{phases: phases, samples: map[string]map[string]int{}, faults: map[string]int{}}
	var (
		phase  string
		in     bool
		frames []string
	)
	flush := func() {
		if in && phase != "" {
			m := t.samples[phase]
			if m == nil {
				m = map[string]int{}
				t.samples[phase] = m
			}
			c := categorize(frames)
			m[c]++
			if c != catStart && slices.Contains(frames, "exc_page_fault") {
				t.faults[phase]++
			}
		}
		in, phase, frames = false, "", frames[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] != ' ' && line[0] != '\t':
			flush()
			f := strings.Fields(line)
			pid, err := strconv.Atoi(f[0])
			if err != nil {
				return table{}, fmt.Errorf("perf script line %q: not -F pid,ip,sym,dso", line)
			}
			in, phase = true, phases.byPID[pid]
		default:
			frames = append(frames, frameSymbol(line))
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return table{}, err
	}
	if len(t.samples) == 0 {
		return table{}, errors.New("no sample of a phase's worker in the perf output (is it the profile of that benchmark run?)")
	}
	return t, nil
}

// frameSymbol returns the symbol of a frame line, "<ip> <symbol> (<dso>)".
func frameSymbol(line string) string {
	s := strings.TrimSpace(line)
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.LastIndex(s, " ("); i >= 0 {
		s = s[:i]
	}
	return s
}

// Categories. The runtime's own work comes first, by the goroutine that
// does it; every other sample goes to the innermost frame of a known part.
const (
	catGCMark    = "GC: background mark"
	catGCAssist  = "GC: assists (allocating goroutines)"
	catGCSweep   = "GC: sweep and scavenge"
	catScheduler = "scheduler: finding work, waking, idling"
	catSysmon    = "runtime sysmon"
	catStart     = "process start"
	catStack     = "goroutine stack growth"
	catOther     = "other"

	catSDK             = "SDK: middleware, signing, retries"
	catSDKDeserializer = "SDK: reading and deserializing answers"
)

// isSDKDeserializer reports whether a frame is the Kinesis client's own
// deserializer of an answer (which the consumer's decoder replaces). The
// SDK's generic helpers it calls (smithy-go's JSON shape deserializer,
// schemas, time parsing) count as it; the same helpers elsewhere (the
// request's serializer) do not.
func isSDKDeserializer(f string) bool {
	return strings.Contains(f, "service/kinesis.(*deserializeResponseMiddleware)") || strings.Contains(f, "service/kinesis.deserialize") ||
		strings.Contains(f, "awsjson.(*Protocol).DeserializeResponse")
}

// owners are the known parts, matched against each frame from the
// innermost outwards (after isSDKDeserializer); the first match wins, so a
// part's allocations, page faults and system calls are its own.
var owners = []struct{ substr, cat string }{
	{"lambdaadapter/internal/getrecords.", "GetRecords decoding (internal/getrecords, base64)"},
	{"lambdaadapter/internal/base64.", "GetRecords decoding (internal/getrecords, base64)"},
	{"consumer.(*shard).register", "consumer: registering records (messages, deliveries)"},
	{"consumer.(*shard).message", "consumer: registering records (messages, deliveries)"},
	{"lambdaadapter/internal/engine.", "engine: lanes, key queues, outcomes"},
	{"lambdaadapter/settle.", "watermark (settle)"},
	{"consumer.(*Consumer).dispatch", "consumer: dispatch to the engine"},
	{"lambdaadapter/lease.", "lease store"},
	{"lambdaadapter/consumer.", "consumer: readers, checkpoints, balance"},
	{"lambdaadapter/", "lambdaadapter: other"},
	{"harlow/kinesis-consumer", "harlow/kinesis-consumer"},
	{"main.(*tracker)", "benchmark: per-record bookkeeping"},
	{"aws-sdk-go-v2/", catSDK},
	{"smithy-go", catSDK},
	{"net/http.", "net/http"},
	{"net.(*", "sockets (net, internal/poll)"},
	{"internal/poll.", "sockets (net, internal/poll)"},
	{"main.", "benchmark: worker"},
}

// categorize returns the category of a sample's stack (innermost first).
func categorize(frames []string) string {
	for _, f := range frames {
		switch {
		case strings.HasPrefix(f, "runtime.gcBgMarkWorker"):
			return catGCMark
		case strings.HasPrefix(f, "runtime.gcAssistAlloc"):
			return catGCAssist
		case strings.HasPrefix(f, "runtime.bgsweep"), strings.HasPrefix(f, "runtime.bgscavenge"):
			return catGCSweep
		case f == "runtime.schedule", f == "runtime.findRunnable", strings.HasPrefix(f, "runtime.mcall"):
			return catScheduler
		case f == "runtime.sysmon":
			return catSysmon
		case strings.HasPrefix(f, "runtime.doInit"):
			return catStart // package initialisation (the SDK's tables, ...)
		}
	}
	for i, f := range frames {
		if isSDKDeserializer(f) {
			return catSDKDeserializer
		}
		for _, o := range owners {
			if !strings.Contains(f, o.substr) {
				continue
			}
			if o.cat == catSDK && slices.ContainsFunc(frames[i+1:], isSDKDeserializer) {
				// A helper of the SDK's deserializer (smithy-go's
				// schemas, time parsing, ...).
				return catSDKDeserializer
			}
			return o.cat
		}
	}
	if n := len(frames); n > 0 {
		switch root := frames[n-1]; {
		case strings.HasPrefix(root, "runtime.rt0_go"), strings.HasPrefix(root, "_dl_start"), strings.HasPrefix(root, "_start"), root == "runtime.schedinit":
			return catStart
		case strings.HasPrefix(root, "runtime.morestack"):
			return catStack // perf does not unwind past the stack switch
		}
	}
	return catOther
}

// print writes the table: mean ms of CPU time per run of each phase.
func (t table) print(w io.Writer, hz float64) error {
	var cols []string
	for _, ph := range t.phases.order {
		if t.samples[ph] != nil {
			cols = append(cols, ph)
		}
	}
	per := func(ph string, n int) float64 { return float64(n) / hz * 1000 / float64(t.phases.runs[ph]) }
	totals := map[string]float64{}
	cats := map[string]float64{} // for the order: the largest first, over all phases
	for ph, m := range t.samples {
		for c, n := range m {
			totals[ph] += per(ph, n)
			cats[c] += per(ph, n)
		}
	}
	order := make([]string, 0, len(cats))
	for c := range cats {
		order = append(order, c)
	}
	slices.SortFunc(order, func(a, b string) int {
		if cats[a] != cats[b] {
			if cats[a] > cats[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	// The benchmark's CPU figures start after the process started (its
	// getrusage baseline is taken in the worker's main).
	clock := map[string]float64{}
	for _, ph := range cols {
		clock[ph] = totals[ph] - per(ph, t.samples[ph][catStart])
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label, format string, value func(ph string) any) {
		fmt.Fprintf(tw, "%s\t", label)
		for _, ph := range cols {
			fmt.Fprintf(tw, format+"\t", value(ph))
		}
		fmt.Fprintln(tw)
	}
	row("ms of CPU per run", "%s", func(ph string) any { return fmt.Sprintf("%s (%d)", ph, t.phases.runs[ph]) })
	for _, c := range order {
		row(c, "%.1f", func(ph string) any { return per(ph, t.samples[ph][c]) })
	}
	row("total", "%.1f", func(ph string) any { return totals[ph] })
	row("total without process start", "%.1f", func(ph string) any { return clock[ph] })
	if len(cols) > 1 {
		row("÷ "+cols[0]+", without process start", "%.3f", func(ph string) any { return clock[ph] / clock[cols[0]] })
	}
	row("of which page faults (kernel, first touches of memory)", "%.1f", func(ph string) any { return per(ph, t.faults[ph]) })
	return tw.Flush()
}
