package retry_test

import (
	"errors"
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
			if d.Action != tt.want || d.Wait != tt.wait {
				t.Errorf("Decide = %v wait %v, want %v wait %v", d.Action, d.Wait, tt.want, tt.wait)
			}
			if !strings.Contains(d.Note, tt.note) || (tt.note == "" && d.Note != "") {
				t.Errorf("note %q, want it to contain %q", d.Note, tt.note)
			}
		})
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
