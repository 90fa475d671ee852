package retry_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/retry"
)

func TestDecide(t *testing.T) {
	errX := errors.New("x")
	none := retry.Policy{}
	capped := retry.Policy{MaxAttempts: 3}
	dl := retry.Policy{MaxAttempts: 3, DeadLetter: true}
	dlOnly := retry.Policy{DeadLetter: true}
	dlDrops := retry.Policy{DeadLetter: true, DeadLetterDrops: true}
	delayQ := retry.Policy{DelayQueue: true}
	delayQCapped := retry.Policy{DelayQueue: true, MaxAttempts: 2, DeadLetter: true}
	short := message.RetryAfter(2*time.Second, errX)
	long := message.RetryAfter(10*time.Minute, errX)
	tests := []struct {
		name      string
		p         retry.Policy
		out       message.Outcome
		attempt   int
		remaining time.Duration
		want      retry.Action
		wait      time.Duration
		note      string
	}{
		{"ack", dl, message.Ack(), 1, -1, retry.Settle, 0, ""},
		{"drop", dl, message.Drop(errX), 1, -1, retry.Settle, 0, ""},
		{"drop to dead letter", dlDrops, message.Drop(errX), 1, -1, retry.DeadLetter, 0, "dropped"},
		{"drop to dead letter needs a target", retry.Policy{DeadLetterDrops: true}, message.Drop(errX), 1, -1, retry.Settle, 0, ""},
		{"retry uncounted", none, message.Retry(errX), 1, -1, retry.Leave, 0, ""},
		{"retry uncounted, high attempt", none, message.Retry(errX), 99, -1, retry.Leave, 0, ""},
		{"zero outcome is a retry", none, message.Outcome{}, 1, -1, retry.Leave, 0, ""},
		{"retry counted, attempt 1", capped, message.Retry(errX), 1, -1, retry.Copy, 0, ""},
		{"retry counted, attempt n-1", capped, message.Retry(errX), 2, -1, retry.Copy, 0, ""},
		{"retry at the cap without target retires", capped, message.Retry(errX), 3, -1, retry.Retire, 0, "cap reached after 3 attempts"},
		{"retry at the cap with target", dl, message.Retry(errX), 3, -1, retry.DeadLetter, 0, "cap reached after 3 attempts"},
		{"retry past the cap (copy written by an older config)", dl, message.Retry(errX), 7, -1, retry.DeadLetter, 0, "cap reached after 7 attempts"},
		{"dead letter alone caps at the default", dlOnly, message.Retry(errX), retry.DefaultMaxAttempts - 1, -1, retry.Copy, 0, ""},
		{"dead letter alone: default cap", dlOnly, message.Retry(errX), retry.DefaultMaxAttempts, -1, retry.DeadLetter, 0, "cap reached after 3 attempts"},
		{"retry_after short, no config: copy after d", none, short, 1, -1, retry.Copy, 2 * time.Second, ""},
		{"retry_after short but past the deadline, no queue: as Retry", none, short, 1, time.Second, retry.Leave, 0, "no delay queue"},
		{"retry_after short but past the deadline, queue", delayQ, short, 1, time.Second, retry.DelayQueue, 2 * time.Second, ""},
		{"retry_after at exactly the threshold", none, message.RetryAfter(retry.DefaultMaxInProcessDelay, errX), 1, -1, retry.Copy, retry.DefaultMaxInProcessDelay, ""},
		{"retry_after long with queue", delayQ, long, 1, -1, retry.DelayQueue, 10 * time.Minute, ""},
		{"retry_after long without queue, uncounted", none, long, 1, -1, retry.Leave, 0, "WithDelayQueue"},
		{"retry_after long without queue, counted", capped, long, 1, -1, retry.Copy, 0, "WithDelayQueue"},
		{"retry_after at the cap", delayQCapped, long, 2, -1, retry.DeadLetter, 0, "cap reached after 2 attempts"},
		{"retry_after custom threshold", retry.Policy{MaxInProcessDelay: time.Second, DelayQueue: true}, short, 1, -1, retry.DelayQueue, 2 * time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.p.Decide(tt.out, tt.attempt, tt.remaining)
			if d.Action != tt.want || d.Wait != tt.wait || d.Uncounted {
				t.Errorf("Decide = %v wait %v uncounted %v, want %v wait %v", d.Action, d.Wait, d.Uncounted, tt.want, tt.wait)
			}
			if !strings.Contains(d.Note, tt.note) || (tt.note == "" && d.Note != "") {
				t.Errorf("note %q, want it to contain %q", d.Note, tt.note)
			}
		})
	}
}

// TestDecideHeldElsewhere: a retry whose reason matches
// message.ErrHeldElsewhere (the handler did not run: a run in progress
// elsewhere holds the record) stays unsettled without counting an attempt,
// whatever the cap, target or delay: it is never copied, retired or
// dead-lettered.
func TestDecideHeldElsewhere(t *testing.T) {
	held := fmt.Errorf("idempotency: %w: orders#k (until ...)", message.ErrHeldElsewhere)
	rewrapped := fmt.Errorf("middleware: %w", held)
	policies := map[string]retry.Policy{
		"not counted":            {},
		"cap 1":                  {MaxAttempts: 1},
		"cap 3":                  {MaxAttempts: 3},
		"dead-letter target":     {DeadLetter: true},
		"cap 1 and target":       {MaxAttempts: 1, DeadLetter: true},
		"cap 3, target, delayed": {MaxAttempts: 3, DeadLetter: true, DelayQueue: true},
	}
	outs := map[string]message.Outcome{
		"retry":                  message.Retry(held),
		"retry, rewrapped":       message.Retry(rewrapped),
		"retry_after short":      message.RetryAfter(time.Second, held),
		"retry_after long":       message.RetryAfter(time.Hour, held),
		"retry_after, rewrapped": message.RetryAfter(0, rewrapped),
	}
	for pn, p := range policies {
		for on, out := range outs {
			for _, attempt := range []int{1, 3, 99} {
				d := p.Decide(out, attempt, -1)
				if d != (retry.Decision{Action: retry.Leave, Uncounted: true}) {
					t.Errorf("%s, %s, attempt %d: Decide = %+v, want Leave, uncounted", pn, on, attempt, d)
				}
			}
		}
	}
	// Only the marker counts: a drop with it settles, an ordinary retry
	// is counted.
	if d := (retry.Policy{MaxAttempts: 1}).Decide(message.Drop(held), 1, -1); d.Action != retry.Settle {
		t.Errorf("Drop(held) = %+v, want Settle", d)
	}
	if d := (retry.Policy{MaxAttempts: 1}).Decide(message.Retry(errors.New("in progress")), 1, -1); d.Action != retry.Retire || d.Uncounted {
		t.Errorf("Retry(other) at cap 1 = %+v, want Retire", d)
	}
}

func TestActionWrites(t *testing.T) {
	for a, want := range map[retry.Action]bool{
		retry.Settle: false, retry.Leave: false, retry.Retire: false,
		retry.Copy: true, retry.DelayQueue: true, retry.DeadLetter: true,
	} {
		if a.Writes() != want {
			t.Errorf("%v.Writes() = %v", a, !want)
		}
	}
}
