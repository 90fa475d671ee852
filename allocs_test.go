package lambdaadapter_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// TestInvokeAllocs pins the allocations of the hot path: raw invocation
// bytes to response bytes. Records without RSK1 headers cost no allocation
// of their own; an enveloped record costs one (its header block as a
// string); the rest is a constant per invocation (decoder arenas, batch
// state, lanes).
func TestInvokeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(noop), lambdaadapter.WithKinesisClient(lambdaadaptertest.NewKinesis()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		n       int
		headers bool
		max     float64
	}{
		{1000, false, 120},
		{1000, true, 500 + 120},
	} {
		payload := lambdaadaptertest.NewBatch("allocs").Generate(tt.n, tt.n/10, 64, tt.headers).JSON()
		got := testing.AllocsPerRun(20, func() {
			if _, err := a.Invoke(context.Background(), payload); err != nil {
				t.Fatal(err)
			}
		})
		if got > tt.max {
			t.Errorf("%d records (headers %v): %.0f allocations per invocation, want ≤ %.0f", tt.n, tt.headers, got, tt.max)
		}
		t.Logf("%d records (headers %v): %.0f allocations per invocation", tt.n, tt.headers, got)
	}
}

// TestInvokeAllocBytes pins the bytes allocated by the hot path for the
// largest invocation Lambda sends (10,000 records, about 6 MB, half of them
// with RSK1 headers): at most 1.5 times the invocation's size. The count
// is the heap's own (runtime.MemStats.TotalAlloc), so it does not depend on
// the machine's speed.
func TestInvokeAllocBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations differ under the race detector; make unit runs this test without it")
	}
	a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(noop), lambdaadapter.WithKinesisClient(lambdaadaptertest.NewKinesis()))
	if err != nil {
		t.Fatal(err)
	}
	payload := lambdaadaptertest.NewBatch("allocbytes").Generate(10000, 1000, 100, true).JSON()
	ctx := context.Background()
	if _, err := a.Invoke(ctx, payload); err != nil { // warm up (pools, first-use state)
		t.Fatal(err)
	}
	const runs = 5
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		if _, err := a.Invoke(ctx, payload); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	per := float64(after.TotalAlloc-before.TotalAlloc) / runs
	ratio := per / float64(len(payload))
	t.Logf("%d-byte invocation: %.0f bytes allocated per invocation (%.2f× its size)", len(payload), per, ratio)
	if ratio > 1.5 {
		t.Errorf("%.0f bytes allocated for a %d-byte invocation (%.2f×), want ≤ 1.5×", per, len(payload), ratio)
	}
}
