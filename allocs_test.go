package lambdaadapter_test

import (
	"context"
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
	a, err := lambdaadapter.New(lambdaadapter.HandlerFunc(noop), lambdaadapter.WithKinesisClient(lambdaadaptertest.NewKinesis()))
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
