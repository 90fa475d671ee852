package consumer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/retry"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// TestStopWhileCopiesTimeOut: during a downstream outage every record is
// retried as a counted copy, and the copies' PutRecords answers come after
// the write round's deadline, so the writes are made again and again. A
// stop must still end within the shutdown timeout plus a write round. (The
// situation of the fault soak's seed 4, in which a worker did not exit
// within 20 s of SIGTERM; this test does not reproduce that hang, whose
// cause is not known yet.)
func TestStopWhileCopiesTimeOut(t *testing.T) {
	for _, distinct := range []bool{false, true} {
		t.Run(fmt.Sprint("distinct keys=", distinct), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newStream(2)
				for i := range 2 {
					f.putNumbered(shardID(i), 300, distinct)
				}
				k := awsfake.NewKinesis()
				k.Delay = 10 * time.Second // beyond every round's deadline
				h := newRecorder()
				h.outcome = func(m *message.Message) message.Outcome { return message.Retry(errors.New("outage")) }
				c := newConsumer(t, Config{StreamARN: f.arn, Kinesis: f, Store: lease.NewMemory(), Start: TrimHorizon(), Owner: "w1",
					LeaseDuration: 3 * time.Second, ShutdownTimeout: 5 * time.Second, RetryBackoff: 100 * time.Millisecond, MaxRetryBackoff: time.Second},
					engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Publisher: newPublisher(t, k)})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				waitFor(t, "records handled", func() bool { return h.count() >= 100 })
				time.Sleep(10 * time.Second) // copies written, timing out and made again
				cancel()
				start := time.Now()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("Run: %v", err)
					}
				case <-time.After(60 * time.Second):
					t.Fatalf("Run did not return within 60 s of the stop (shutdown timeout 5 s)")
				}
				if took := time.Since(start); took > 15*time.Second {
					t.Errorf("the stop took %v, want about the 5 s shutdown timeout", took)
				}
			})
		})
	}
}
