//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lease"
)

// BenchmarkFanOutVsPolling compares enhanced fan-out with polling in
// long-running mode, in one run against kinesis-local (not AWS: the
// stand-in pushes a subscription's records once a second, and it is one
// Node.js process that both modes wait for). Run it alone:
//
//	cd integration && go test -tags integration -run '^$' -bench FanOutVsPolling -benchtime 1x -v .
//
// Throughput: 20,000 records of 512 B over four shards, written once, are
// read from TRIM_HORIZON by a polling consumer and by a fan-out consumer,
// one after the other, five rounds in alternating order, each in process
// through lambdaadapter.NewService and Run with in-memory leases (the stream
// consumers are registered before the clock starts), each phase once the
// stand-in is idle again. A phase's clock runs
// from Run to the last distinct record handled; its CPU time is the
// process's (getrusage: the adapter, the SDK and the handler's bookkeeping,
// nothing else runs) and, when its pid file is found, the stand-in's.
//
// Latency: both consumers read a fresh four-shard stream at the same time
// while 200 records per second are written for 15 s (PutRecords of 20 every
// 100 ms); each record carries the time just before its PutRecords call,
// and the handler takes its age when it runs.
func BenchmarkFanOutVsPolling(b *testing.B) {
	env := standin.Require(b)
	const (
		records, size, shards, rounds = 20000, 512, 4, 5
	)
	stream, arn := env.NewStream(b, shards)
	start := time.Now()
	benchWrite(b, env, stream, records, size)
	b.Logf("wrote %d records of %d B in %v", records, size, time.Since(start).Round(time.Millisecond))
	names := make([]string, rounds)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%d", i)
		benchRegister(b, env, arn, names[i])
	}
	standinPID := benchStandinPID()

	type phase struct {
		secs, cpu, standinCPU float64
	}
	var poll, efo []phase
	var pollLat, efoLat []time.Duration
	for b.Loop() {
		poll, efo = nil, nil
		for r := range rounds {
			order := []bool{false, true} // fan-out?
			if r%2 == 1 {
				order = []bool{true, false}
			}
			for _, fanOut := range order {
				var opts []lambdaadapter.ServiceOption
				client := lambdaadapter.WithKinesisClient(env.Kinesis)
				if fanOut {
					client = lambdaadapter.WithKinesisClient(&efoClient{Client: env.Kinesis, noEnds: true})
					opts = append(opts, lambdaadapter.WithEnhancedFanOut(names[r]))
				}
				benchQuiet(b, standinPID)
				sc0 := benchProcessCPU(standinPID)
				secs, cpu := benchRead(b, stream, records, append(opts, client))
				p := phase{secs: secs, cpu: cpu, standinCPU: benchProcessCPU(standinPID) - sc0}
				if fanOut {
					efo = append(efo, p)
				} else {
					poll = append(poll, p)
				}
			}
		}
		pollLat, efoLat = benchLatency(b, env)
	}

	med := func(ps []phase, f func(phase) float64) float64 {
		v := make([]float64, len(ps))
		for i, p := range ps {
			v[i] = f(p)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	rate := func(p phase) float64 { return records / p.secs }
	cpuPer := func(p phase) float64 { return p.cpu / records * 1e6 }
	standinPer := func(p phase) float64 { return p.standinCPU / records * 1e6 }
	pct := func(l []time.Duration, q float64) float64 {
		return float64(l[min(len(l)-1, int(q*float64(len(l))))].Microseconds()) / 1000
	}
	b.ReportMetric(med(poll, rate), "poll-records/s")
	b.ReportMetric(med(efo, rate), "efo-records/s")
	b.ReportMetric(med(poll, cpuPer), "poll-cpu-µs/record")
	b.ReportMetric(med(efo, cpuPer), "efo-cpu-µs/record")
	b.ReportMetric(pct(pollLat, 0.5), "poll-p50-ms")
	b.ReportMetric(pct(efoLat, 0.5), "efo-p50-ms")
	b.ReportMetric(pct(pollLat, 0.99), "poll-p99-ms")
	b.ReportMetric(pct(efoLat, 0.99), "efo-p99-ms")

	var out strings.Builder
	fmt.Fprintf(&out, "fan-out vs polling against kinesis-local (%d records × %d B, %d shards, %d rounds; medians)\n", records, size, shards, rounds)
	row := func(name string, f func(phase) float64, unit string) {
		var ps, es []string
		for i := range poll {
			ps = append(ps, fmt.Sprintf("%.1f", f(poll[i])))
			es = append(es, fmt.Sprintf("%.1f", f(efo[i])))
		}
		fmt.Fprintf(&out, "  %-34s polling %9.1f  fan-out %9.1f %s   (rounds: polling %s; fan-out %s)\n",
			name, med(poll, f), med(efo, f), unit, strings.Join(ps, " "), strings.Join(es, " "))
	}
	row("records/s (TRIM_HORIZON, all)", rate, "")
	row("CPU of the adapter's process", cpuPer, "µs/record")
	if standinPID > 0 {
		row("CPU of kinesis-local", standinPer, "µs/record")
	}
	for _, l := range []struct {
		name string
		lat  []time.Duration
	}{{"polling", pollLat}, {"fan-out", efoLat}} {
		fmt.Fprintf(&out, "  latency put → handle, %-8s p50 %6.0f ms  p90 %6.0f ms  p99 %6.0f ms  max %6.0f ms  (%d records)\n",
			l.name, pct(l.lat, 0.5), pct(l.lat, 0.9), pct(l.lat, 0.99), pct(l.lat, 1), len(l.lat))
	}
	b.Log("\n" + out.String())
	fmt.Print(out.String())
}

// benchWrite writes n records of size bytes ("<i>|<put time>|" padded),
// keys spread over the shards, with PutRecords of 500, four at a time.
func benchWrite(b *testing.B, env *standin.Env, stream string, n, size int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	next := atomic.Int64{}
	for range 4 {
		wg.Go(func() {
			for {
				from := int(next.Add(500)) - 500
				if from >= n {
					return
				}
				if err := benchPut(env, stream, from, min(500, n-from), size); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// benchPut writes records from .. from+k-1 in one PutRecords call, each
// stamped with the time just before the call.
func benchPut(env *standin.Env, stream string, from, k, size int) error {
	now := time.Now().UnixNano()
	reqs := make([]kinesistypes.PutRecordsRequestEntry, k)
	for i := range reqs {
		id := strconv.Itoa(from + i)
		data := []byte(id + "|" + strconv.FormatInt(now, 10) + "|")
		if len(data) < size {
			data = append(data, bytes.Repeat([]byte{'x'}, size-len(data))...)
		}
		reqs[i] = kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String("k" + id), Data: data}
	}
	ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
	defer cancel()
	out, err := env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: reqs})
	if err != nil {
		return fmt.Errorf("PutRecords to %s: %w", stream, err)
	}
	if n := aws.ToInt32(out.FailedRecordCount); n > 0 {
		return fmt.Errorf("PutRecords to %s: %d records failed", stream, n)
	}
	return nil
}

// benchRegister registers a stream consumer and waits until it is ACTIVE.
func benchRegister(b *testing.B, env *standin.Env, streamARN, name string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := env.Kinesis.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(name)}); err != nil {
		b.Fatalf("RegisterStreamConsumer %s: %v", name, err)
	}
	for {
		out, err := env.Kinesis.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(name)})
		if err != nil {
			b.Fatalf("DescribeStreamConsumer %s: %v", name, err)
		}
		if out.ConsumerDescription.ConsumerStatus == kinesistypes.ConsumerStatusActive {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// benchCounter is the handler of the benchmark: it parses each record's id
// and put time, marks the id seen, and keeps the age of every record when
// asked to.
type benchCounter struct {
	seen     []atomic.Bool
	distinct atomic.Int64
	done     chan struct{} // closed when every id was seen
	mu       sync.Mutex
	ages     []time.Duration // with keepAges
	keepAges bool
	from     int64 // put times before this are not kept (probes, start-up)
}

func newBenchCounter(n int) *benchCounter {
	return &benchCounter{seen: make([]atomic.Bool, n), done: make(chan struct{})}
}

func (c *benchCounter) handle(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
	now := time.Now()
	idText, rest, _ := strings.Cut(string(m.Payload), "|")
	putText, _, _ := strings.Cut(rest, "|")
	id, err1 := strconv.Atoi(idText)
	put, err2 := strconv.ParseInt(putText, 10, 64)
	if err1 != nil || err2 != nil || id < 0 || id >= len(c.seen) {
		return lambdaadapter.Drop(fmt.Errorf("bench: payload %.40q", m.Payload))
	}
	if c.keepAges {
		c.mu.Lock()
		if put >= c.from {
			c.ages = append(c.ages, now.Sub(time.Unix(0, put)))
		}
		c.mu.Unlock()
	}
	if !c.seen[id].Swap(true) && c.distinct.Add(1) == int64(len(c.seen)) {
		close(c.done)
	}
	return lambdaadapter.Ack()
}

// benchRead reads the stream's n records from TRIM_HORIZON with a fresh
// adapter and returns the seconds from Run to the last distinct record
// handled and the process's CPU seconds in that time.
func benchRead(b *testing.B, stream string, n int, opts []lambdaadapter.ServiceOption) (secs, cpu float64) {
	b.Helper()
	c := newBenchCounter(n)
	a, err := lambdaadapter.NewService(lambdaadapter.HandlerFunc(c.handle), append([]lambdaadapter.ServiceOption{
		lambdaadapter.WithStream(stream), lambdaadapter.WithLeaseStore(lease.NewMemory()),
		lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()), lambdaadapter.WithGetRecordsLimit(1000),
	}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	cpu0 := benchProcessCPU(0)
	t0 := time.Now()
	go func() { ran <- a.Run(ctx) }()
	select {
	case <-c.done:
	case err := <-ran:
		b.Fatalf("Run returned early: %v", err)
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d records handled after 5 minutes", c.distinct.Load(), n)
	}
	secs, cpu = time.Since(t0).Seconds(), benchProcessCPU(0)-cpu0
	cancel()
	if err := <-ran; err != nil {
		b.Fatalf("Run: %v", err)
	}
	return secs, cpu
}

// benchLatency runs a polling and a fan-out consumer at the same time on a
// fresh stream while records are written at a steady rate, and returns the
// ages at which each handled them, sorted.
func benchLatency(b *testing.B, env *standin.Env) (poll, efo []time.Duration) {
	b.Helper()
	const perBatch, every, batches = 20, 100 * time.Millisecond, 150
	stream, arn := env.NewStream(b, 4)
	benchRegister(b, env, arn, "latency")
	total := perBatch*batches + 4000 // ids of the probes come after the measured records
	counters := []*benchCounter{newBenchCounter(total), newBenchCounter(total)}
	var stops []func()
	for i, c := range counters {
		c.keepAges = true
		opts := []lambdaadapter.ServiceOption{
			lambdaadapter.WithStream(stream), lambdaadapter.WithLeaseStore(lease.NewMemory()),
			lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()), lambdaadapter.WithKinesisClient(env.Kinesis),
		}
		if i == 1 {
			opts = append(opts, lambdaadapter.WithKinesisClient(&efoClient{Client: env.Kinesis, noEnds: true}), lambdaadapter.WithEnhancedFanOut("latency"))
		}
		a, err := lambdaadapter.NewService(lambdaadapter.HandlerFunc(c.handle), opts...)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- a.Run(ctx) }()
		stops = append(stops, func() {
			cancel()
			if err := <-ran; err != nil {
				b.Errorf("Run: %v", err)
			}
		})
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	// Both read every shard once each has handled a probe written after
	// it started.
	probe := perBatch * batches
	deadline := time.Now().Add(time.Minute)
	for {
		if err := benchPut(env, stream, probe, 100, 64); err != nil {
			b.Fatal(err)
		}
		probe += 100
		ready := true
		for _, c := range counters {
			ready = ready && c.distinct.Load() >= 100
		}
		if ready {
			break
		}
		if time.Now().After(deadline) || probe+100 > total {
			b.Fatalf("the consumers did not start reading within a minute")
		}
		time.Sleep(time.Second)
	}
	from := time.Now().UnixNano()
	for _, c := range counters {
		c.mu.Lock()
		c.from, c.ages = from, nil
		c.mu.Unlock()
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := range batches {
		if err := benchPut(env, stream, i*perBatch, perBatch, 512); err != nil {
			b.Fatal(err)
		}
		<-tick.C
	}
	want := perBatch * batches
	deadline = time.Now().Add(time.Minute)
	for {
		ok := true
		for _, c := range counters {
			c.mu.Lock()
			ok = ok && len(c.ages) >= want
			c.mu.Unlock()
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not every measured record was handled by both within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := make([][]time.Duration, 2)
	for i, c := range counters {
		c.mu.Lock()
		out[i] = slices.Clone(c.ages)
		c.mu.Unlock()
		slices.Sort(out[i])
	}
	return out[0], out[1]
}

// benchProcessCPU returns the user and system CPU seconds of process pid
// (0: this process; -1: unknown, 0 seconds).
func benchProcessCPU(pid int) float64 {
	switch {
	case pid == 0:
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	case pid < 0:
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (in parentheses): state is field 3, utime
	// 14 and stime 15, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// benchQuiet waits until kinesis-local (pid) has used less than 10 % of a
// CPU over half a second, at most a minute: the subscriptions of a fan-out
// phase keep it busy for a while after they were closed, which a phase that
// follows would pay for. Without the pid it waits 5 s.
func benchQuiet(b *testing.B, pid int) {
	b.Helper()
	if pid < 0 {
		time.Sleep(5 * time.Second)
		return
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		c0 := benchProcessCPU(pid)
		time.Sleep(500 * time.Millisecond)
		if benchProcessCPU(pid)-c0 < 0.05 {
			return
		}
	}
	b.Logf("kinesis-local still busy after a minute; measuring anyway")
}

// benchStandinPID returns the pid of the running kinesis-local from the
// stand-ins' pid file (LAMBDAADAPTER_STANDINS_DIR, default .standins at
// the repository's root), or -1.
func benchStandinPID() int {
	dir := os.Getenv("LAMBDAADAPTER_STANDINS_DIR")
	if dir == "" {
		dir = filepath.Join("..", ".standins")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "kinesis.pid"))
	if err != nil {
		return -1
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return -1
	}
	return pid
}
