package scalesim

import (
	"sync/atomic"
	"time"
)

// The CPU model's defaults (Config.CPUPerRecord, CPUPerByte, CPUPerPoll).
// At the fleet's 2,000 records/s on 1,000 shards and 50 workers (40
// records/s and about 20 polled shards per worker) they put the mean worker
// near half a CPU: 0.4 from records, the rest from polling (a shard is
// polled about once a second when idle, see Steady's GetRecords), so that
// the records, and the hot shards among them, dominate.
const (
	DefaultCPUPerRecord = 10 * time.Millisecond
	DefaultCPUPerByte   = time.Microsecond
	DefaultCPUPerPoll   = 2 * time.Millisecond
)

// cpuClock is one simulated worker's CPU time: the workers share one
// process, so their own CPU cannot be measured; each advances by what the
// model charges for its work. It is the worker's consumer.Config.CPUTime
// (with CPUs 1), so the load the worker publishes is the model's.
type cpuClock struct {
	perRecord, perByte, perPoll time.Duration
	ns                          atomic.Int64
}

// now returns the CPU time used so far.
func (c *cpuClock) now() time.Duration { return time.Duration(c.ns.Load()) }

// record charges a handled record of n payload bytes.
func (c *cpuClock) record(n int) {
	c.ns.Add(int64(c.perRecord + time.Duration(n)*c.perByte))
}

// poll charges a GetRecords call.
func (c *cpuClock) poll() { c.ns.Add(int64(c.perPoll)) }

// cpuSample is every worker's CPU clock at one time.
type cpuSample struct {
	at    time.Time
	clock map[string]time.Duration
}

// cpuWindow keeps the CPU clocks sampled over the last window, to tell
// each worker's utilization over it: a sliding window of about one lease
// duration, as the planner sees the load, not an instant.
type cpuWindow struct {
	window  time.Duration
	samples []cpuSample
}

// add records a sample and drops those older than the window (keeping
// one at or before its start).
func (w *cpuWindow) add(s cpuSample) {
	w.samples = append(w.samples, s)
	cut := 0
	for i, x := range w.samples {
		if s.at.Sub(x.at) >= w.window {
			cut = i
		}
	}
	w.samples = w.samples[cut:]
}

// utilization returns each worker's utilization (CPU seconds per second,
// on one CPU) between the oldest sample kept and the newest, for the
// workers in the newest; a worker absent from the oldest counts from 0
// (it started within the window). ok is false until the window is filled.
func (w *cpuWindow) utilization() (u map[string]float64, ok bool) {
	if len(w.samples) < 2 {
		return nil, false
	}
	first, last := w.samples[0], w.samples[len(w.samples)-1]
	span := last.at.Sub(first.at)
	if span <= 0 {
		return nil, false
	}
	u = make(map[string]float64, len(last.clock))
	for id, c := range last.clock {
		u[id] = float64(c-first.clock[id]) / float64(span)
	}
	return u, span >= w.window
}

// maxMean returns the highest of u's values divided by their mean (0 when
// u is empty or its mean 0), and the mean.
func maxMean(u map[string]float64) (ratio, mean float64) {
	hi, sum := 0.0, 0.0
	for _, x := range u {
		hi, sum = max(hi, x), sum+x
	}
	if len(u) == 0 || sum == 0 {
		return 0, 0
	}
	mean = sum / float64(len(u))
	return hi / mean, mean
}
