//go:build unix

package event

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time (user and system) this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodeKinesisParallel decodes the events of benchSizes with the
// sequential decoder (sequential) and with the two-goroutine path of
// parallel.go forced on (parallel: a helper parsing from splitPoint, the
// result built in halves), whatever the payload's size and GOMAXPROCS.
// cpu-ns/op is the process's CPU time per decoding, garbage collection
// included.
//
// Run it with -cpu 1,2. A Lambda function below 1,769 MB has less than one
// vCPU's worth of time but sees two vCPUs (up to 3,008 MB), so its
// GOMAXPROCS is 2 and DecodeKinesis takes the parallel path for a payload
// of 256 KiB or more: there its time is bounded by the CPU time the two
// goroutines use together, which GOMAXPROCS=1 shows as wall time and
// cpu-ns/op shows at any GOMAXPROCS.
func BenchmarkDecodeKinesisParallel(b *testing.B) {
	for _, size := range benchSizes {
		payload := genEvent(size.records, size.dataBytes, 1)
		name := fmt.Sprintf("%drecords_%dB", size.records, size.dataBytes)
		for _, m := range []struct {
			name   string
			split  int
			halves bool
		}{
			{"sequential", -1, false},
			{"parallel", splitPoint(payload), true},
		} {
			b.Run(name+"/"+m.name, func(b *testing.B) {
				b.SetBytes(int64(len(payload)))
				b.ReportAllocs()
				n, cpu := 0, cpuTime()
				for b.Loop() {
					if _, err := decode(payload, m.split, m.halves, nil); err != nil {
						b.Fatal(err)
					}
					n++
				}
				b.ReportMetric(float64(cpuTime()-cpu)/float64(n), "cpu-ns/op")
			})
		}
	}
}
