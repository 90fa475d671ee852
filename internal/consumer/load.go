package consumer

import (
	"sync/atomic"
	"time"

	"github.com/shardsettle/lambdaadapter/lease"
)

// flow counts what a held shard's reader read: records (user records of
// KPL aggregates each count), payload bytes, and the GetRecords calls it
// made (polls; failed ones too, as their cost is the same; an enhanced
// fan-out reader makes none). The load meter turns the counts into rates.
type flow struct {
	records atomic.Int64
	bytes   atomic.Int64
	polls   atomic.Int64
}

// loadMeter measures what each heartbeat publishes (lease.Load): this
// worker's CPU utilization since the previous heartbeat, and the
// throughput of each shard it holds over the same time. It is used by the
// renewer's goroutine only.
type loadMeter struct {
	// cpu returns the CPU time used so far (Config.CPUTime, or the
	// process's); ok false: unknown.
	cpu  func() (time.Duration, bool)
	cpus float64 // the CPUs this worker may use (Config.CPUs, or capacity())

	at      time.Time     // the previous measure (zero: none yet)
	used    time.Duration // cpu() then
	cpuOK   bool
	util    float64 // smoothed utilization; < 0 until measured
	counted map[*shard]counted
}

// counted is a shard's flow at the previous measure, and its smoothed
// rates (rated: measured over at least one interval).
type counted struct {
	records, bytes, polls int64
	rate                  lease.Throughput
	rated                 bool
}

// smoothing weighs the newest interval's utilization, and each shard's
// rates, against the ones before (an exponential moving average): a
// heartbeat interval is a few seconds, and one garbage collection or
// burst must not move leases. The rates are smoothed as the utilization
// is, so that the leader compares figures of the same age (a hot shard's
// rate over one interval of 3 s varies by about 9 %; smoothed, by about
// 5 %, within the planner's margin).
const smoothing = 0.5

func newLoadMeter(cfg Config) *loadMeter {
	m := &loadMeter{cpu: processCPU, cpus: capacity(), util: -1, counted: map[*shard]counted{}}
	if cfg.CPUTime != nil {
		m.cpu = func() (time.Duration, bool) { return cfg.CPUTime(), true }
	}
	if cfg.CPUs > 0 {
		m.cpus = cfg.CPUs
	}
	return m
}

// measure returns the load since the previous measure, for the shards
// held now. The first measure knows no utilization (CPU < 0) and no
// rates: it only starts the interval.
func (m *loadMeter) measure(now time.Time, held []*shard) *lease.Load {
	used, ok := m.cpu()
	load := &lease.Load{CPU: -1, Shards: make(map[string]lease.Throughput, len(held))}
	elapsed := now.Sub(m.at)
	first := m.at.IsZero() || elapsed <= 0
	if !first && ok && m.cpuOK {
		u := float64(used-m.used) / float64(elapsed) / m.cpus
		u = min(max(u, 0), 1)
		if m.util < 0 {
			m.util = u
		} else {
			m.util = smoothing*u + (1-smoothing)*m.util
		}
	}
	if !ok {
		m.util = -1
	}
	load.CPU = m.util
	next := make(map[*shard]counted, len(held))
	for _, s := range held {
		now := counted{records: s.flow.records.Load(), bytes: s.flow.bytes.Load(), polls: s.flow.polls.Load()}
		before, seen := m.counted[s]
		if first || !seen {
			next[s] = now
			continue // taken since: its rate is not known yet
		}
		secs := elapsed.Seconds()
		now.rate = lease.Throughput{
			Records: float64(now.records-before.records) / secs,
			Bytes:   float64(now.bytes-before.bytes) / secs,
			Polls:   float64(now.polls-before.polls) / secs,
		}
		if before.rated {
			now.rate.Records = smoothing*now.rate.Records + (1-smoothing)*before.rate.Records
			now.rate.Bytes = smoothing*now.rate.Bytes + (1-smoothing)*before.rate.Bytes
			now.rate.Polls = smoothing*now.rate.Polls + (1-smoothing)*before.rate.Polls
		}
		now.rated = true
		next[s] = now
		load.Shards[s.id] = now.rate
	}
	m.at, m.used, m.cpuOK, m.counted = now, used, ok, next
	return load
}
