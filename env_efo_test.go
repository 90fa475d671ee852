package lambdaadapter

import (
	"testing"

	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
)

// TestEnvironmentEnhancedFanOut: LAMBDAADAPTER_EFO_CONSUMER sets
// WithEnhancedFanOut in long-running mode and is ignored in Lambda mode,
// where an event source mapping on a consumer ARN needs nothing of the
// adapter.
func TestEnvironmentEnhancedFanOut(t *testing.T) {
	for _, mode := range []string{"ecs", "lambda"} {
		t.Run(mode, func(t *testing.T) {
			opts, err := environment(envOf(map[string]string{
				"LAMBDAADAPTER_MODE": mode, "LAMBDAADAPTER_STREAM": "orders", "LAMBDAADAPTER_EFO_CONSUMER": "orders-app",
			}))
			if err != nil {
				t.Fatal(err)
			}
			var c config
			c.apply(forMode(Mode(mode), opts))
			want := map[string]string{"ecs": "orders-app", "lambda": ""}[mode]
			if c.ecs.fanOut != want {
				t.Errorf("enhanced fan-out consumer %q, want %q", c.ecs.fanOut, want)
			}
			if err := c.validate(); err != nil {
				t.Errorf("validate: %v", err)
			}
			if mode == "lambda" {
				if _, err := newFunction(nopHandler, forMode(ModeLambda, append(opts, WithKinesisClient(awsfake.NewKinesis())))); err != nil {
					t.Errorf("a function from this environment: %v", err)
				}
			}
		})
	}
}
