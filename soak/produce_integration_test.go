//go:build integration

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// producer writes records to a stream straight to the stand-in (never
// through the fault layer): a steady rate plus bursts, over many partition
// keys, each record with a unique id and its key's sequence number in its
// JSON payload. One goroutine writes one PutRecords call at a time, so a
// key's records land in the order of their key sequence numbers.
type producer struct {
	s      *soak
	mode   Mode
	stream string
	prefix string
	keys   int
	rate   float64 // steady records per second
	burst  [2]int  // burst size range
	delays float64 // share of records that ask for a durable delay once
	rng    *rand.Rand

	stopc, done chan struct{}

	mu       sync.Mutex
	recs     []Produced
	kseq     []int
	failures []string
	slowMax  time.Duration // handler sleep of the records produced now (slow handlers)

	// Optional, set before the producer starts (the scale soak's skewed
	// load): weights gives each key's share of the records (nil: every key
	// alike), hashKeys each key's explicit hash key (nil: none, the
	// partition key decides the shard), size pads each payload to about
	// that many bytes (0: no padding).
	weights  []float64
	hashKeys []string
	size     int
	// holdRate owes records by the time gone by rather than by tick, so
	// that writes slower than a tick (a loaded stand-in) are caught up in
	// larger calls and the rate holds, up to a second behind.
	holdRate bool
}

// startProducer starts a producer of rate records per second plus bursts,
// over keys partition keys; a share delays of the records ask for a durable
// delay once (a RetryAfter longer than the in-process limit, through the
// delay queue).
func startProducer(s *soak, mode Mode, stream, prefix string, keys int, rate float64, burst [2]int, delays float64, seed uint64) *producer {
	p := newProducer(s, mode, stream, prefix, keys, rate, burst, delays, seed)
	p.start()
	return p
}

// newProducer returns a producer as startProducer does, not started yet:
// set its optional fields, then call start.
func newProducer(s *soak, mode Mode, stream, prefix string, keys int, rate float64, burst [2]int, delays float64, seed uint64) *producer {
	return &producer{s: s, mode: mode, stream: stream, prefix: prefix, keys: keys, rate: rate, burst: burst, delays: delays,
		rng: rand.New(rand.NewPCG(seed, 0x9e37)), stopc: make(chan struct{}), done: make(chan struct{}), kseq: make([]int, keys)}
}

func (p *producer) start() {
	go p.run()
	p.s.t.Cleanup(p.stop)
}

// key picks the next record's key: uniformly, or by p.weights.
func (p *producer) key() int {
	if p.weights == nil {
		return p.rng.IntN(p.keys)
	}
	total := 0.0
	for _, w := range p.weights {
		total += w
	}
	x := p.rng.Float64() * total
	for k, w := range p.weights {
		if x < w {
			return k
		}
		x -= w
	}
	return p.keys - 1
}

func (p *producer) run() {
	defer close(p.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	owed := 0.0
	last := time.Now()
	nextBurst := time.Now().Add(p.between(6*time.Second, 15*time.Second))
	for {
		select {
		case <-p.stopc:
			return
		case <-tick.C:
		}
		if p.holdRate {
			// At most a second behind: a stand-in that cannot keep up
			// lowers the rate instead of making the calls ever larger.
			now := time.Now()
			owed = min(owed+p.rate*now.Sub(last).Seconds(), max(p.rate, 1))
			last = now
		} else {
			owed += p.rate / 10
		}
		n := int(owed)
		owed -= float64(n)
		if time.Now().After(nextBurst) {
			n += p.burst[0] + p.rng.IntN(p.burst[1]-p.burst[0]+1)
			nextBurst = time.Now().Add(p.between(6*time.Second, 15*time.Second))
		}
		for n > 0 {
			select {
			case <-p.stopc:
				return
			default:
			}
			k := min(n, 500)
			p.write(k)
			n -= k
		}
	}
}

func (p *producer) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(p.rng.Int64N(int64(hi-lo)))
}

// write writes n new records in one PutRecords call.
func (p *producer) write(n int) {
	p.mu.Lock()
	slow := p.slowMax
	p.mu.Unlock()
	entries := make([]kinesistypes.PutRecordsRequestEntry, n)
	recs := make([]Produced, n)
	for i := range entries {
		k := p.key()
		p.kseq[k]++
		key := fmt.Sprintf("%s%03d", p.prefix, k)
		r := Produced{Mode: p.mode, Key: key, KeySeq: p.kseq[k], ID: fmt.Sprintf("%s-%06d", key, p.kseq[k])}
		cmd := map[string]any{"id": r.ID, "kseq": r.KeySeq}
		if slow > 0 {
			r.Sleep = time.Duration(1+p.rng.Int64N(int64(slow/time.Millisecond))) * time.Millisecond
			cmd["sleep_ms"] = r.Sleep.Milliseconds()
		}
		if p.rng.Float64() < p.delays {
			r.Delayed = true
			cmd["outcome"], cmd["delay_ms"], cmd["until_attempt"] = "retry_after", delayedDelay.Milliseconds(), 2
		}
		if p.size > 0 {
			cmd["pad"] = strings.Repeat("x", p.size)
		}
		data, _ := json.Marshal(cmd)
		entries[i] = kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String(key), Data: data}
		if p.hashKeys != nil {
			entries[i].ExplicitHashKey = aws.String(p.hashKeys[k])
		}
		recs[i] = r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := p.s.env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(p.stream), Records: entries})
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		// The records may or may not be in the stream: they count as not
		// produced (a copy that shows up anyway is not one of ours).
		p.failures = append(p.failures, fmt.Sprintf("PutRecords of %d records to %s: %v", n, p.stream, err))
		return
	}
	for i, res := range out.Records {
		if res.ErrorCode != nil {
			p.failures = append(p.failures, fmt.Sprintf("PutRecords to %s: %s failed: %s", p.stream, recs[i].ID, aws.ToString(res.ErrorCode)))
			continue
		}
		r := recs[i]
		r.Shard, r.Seq, r.Time = aws.ToString(res.ShardId), aws.ToString(res.SequenceNumber), now
		p.recs = append(p.recs, r)
	}
}

// setSlow makes the records produced from now on sleep up to d in their
// handler (0: not at all).
func (p *producer) setSlow(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slowMax = d
}

func (p *producer) stop() {
	select {
	case <-p.stopc:
	default:
		close(p.stopc)
	}
	<-p.done
}

func (p *producer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.recs)
}

func (p *producer) produced() []Produced {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.recs)
}

// errors returns the producer's failures as harness errors when they are
// more than a few: a run whose producer could hardly write proves little.
func (p *producer) errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.failures) > 0 {
		p.s.t.Logf("producer %s: %d failed writes (not counted as produced), e.g. %s", p.mode, len(p.failures), p.failures[0])
	}
	if len(p.failures) > 5 || len(p.recs) == 0 {
		return []string{fmt.Sprintf("producer %s: %d writes failed and %d records were written, e.g. %v", p.mode, len(p.failures), len(p.recs), p.failures[:min(3, len(p.failures))])}
	}
	return nil
}
