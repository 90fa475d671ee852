//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lease"
)

// TestECSRetriesAndDeadLetters runs the long-running mode with a cap of 3
// attempts, a dead-letter stream and a delay queue: acknowledged records are
// handled once; records whose handler keeps answering Retry or RetryAfter
// come back as counted copies (attempts 1, 2, 3, read again from the
// stream) and then land in the dead-letter stream with their payload and
// headers. A RetryAfter longer than the in-process limit goes through the
// delay queue, which the worker forwards itself. After SIGTERM every
// shard's checkpoint is its last record, copies included, and the delay
// queue is empty.
func TestECSRetriesAndDeadLetters(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 2)
	dlStream, _ := env.NewStream(t, 1)
	table, store := ecsNewLeaseTable(t, env, false)

	es := ecsNumbered("ack", 0, 100)
	for i := range 12 {
		id := fmt.Sprintf("retry-%06d", i)
		es = append(es, ecsEntry{id: id, key: id, outcome: "retry"})
	}
	for i := range 6 {
		id := fmt.Sprintf("later-%06d", i)
		es = append(es, ecsEntry{id: id, key: id, outcome: "retry_after", delayMS: 300})
	}
	for i := range 4 {
		id := fmt.Sprintf("durable-%06d", i)
		es = append(es, ecsEntry{id: id, key: id, outcome: "retry_after", delayMS: 1500})
	}
	ecsWrite(t, env, stream, es)
	delayQueue := env.NewQueue(t, nil)

	w := ecsStartWorker(t, env, "w1", stream, table,
		"LAMBDAADAPTER_MAX_ATTEMPTS=3", "LAMBDAADAPTER_DEAD_LETTER_STREAM="+dlStream,
		"LAMBDAADAPTER_DELAY_QUEUE="+delayQueue, "LAMBDAADAPTER_MAX_INPROCESS_DELAY=1s")
	dls := env.ReadAll(t.Context(), t, dlStream, 22, ecsHandledTimeout)
	if len(dls) != 22 {
		t.Fatalf("dead-letter stream holds %d records, want 22", len(dls))
	}
	// The source stream: 122 originals plus two copies of each of the 22.
	recs := ecsReadStream(t, env, stream, 122+2*22)
	ecsAwaitCheckpointsAtEnd(t, store, stream, recs)
	w.terminate(t)

	attempts := map[string][]int{}
	for _, r := range w.records() {
		attempts[r.ID] = append(attempts[r.ID], r.Attempt)
	}
	for _, e := range es {
		want := []int{1}
		if e.outcome != "" {
			want = []int{1, 2, 3}
		}
		got := slices.Clone(attempts[e.id])
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("record %s handled at attempts %v, want %v", e.id, got, want)
		}
	}

	var dlIDs []string
	for _, r := range dls {
		h, payload := envelope.Decode(r.Data)
		var cmd struct {
			ID      string `json:"id"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal(payload, &cmd); err != nil {
			t.Fatalf("dead letter payload %q: %v", payload, err)
		}
		dlIDs = append(dlIDs, cmd.ID)
		if h.Get(publish.DeadLetterAttemptsHeader) != "3" || h.Get(publish.DeadLetterReasonHeader) == "" ||
			h.Get(envelope.RetryCountHeader) != "2" || aws.ToString(r.PartitionKey) != cmd.ID {
			t.Errorf("dead letter of %s: key %q headers %v; want attempts 3, a reason, %s 2, the original key",
				cmd.ID, aws.ToString(r.PartitionKey), h, envelope.RetryCountHeader)
		}
	}
	var want []string
	for _, e := range es {
		if e.outcome != "" {
			want = append(want, e.id)
		}
	}
	slices.Sort(dlIDs)
	slices.Sort(want)
	if diff := cmp.Diff(want, dlIDs); diff != "" {
		t.Errorf("dead-lettered ids (-want +got):\n%s", diff)
	}
	for id, l := range ecsLeases(t, store, stream) {
		if l.Owner != "" {
			t.Errorf("shard %s still owned by %q after SIGTERM", id, l.Owner)
		}
	}
	if left := env.ReceiveAll(sdkContext(t), t, delayQueue, 1, time.Second); len(left) != 0 {
		t.Errorf("the delay queue still holds %d messages, e.g. %s", len(left), aws.ToString(left[0].Body))
	}
	// The durable delays (1.5 s, over the 1 s in-process limit) went round
	// the delay queue and came back through the worker's own forwarder:
	// without it they would never reach the dead-letter stream. Their copies
	// carry the first arrival like every copy.
	for _, r := range recs {
		h, payload := envelope.Decode(r.Data)
		if strings.Contains(string(payload), "durable-") && h.Get(envelope.RetryCountHeader) != "" && h.Get(publish.FirstArrivalHeader) == "" {
			t.Errorf("copy %s of a durable delay without %s", payload, publish.FirstArrivalHeader)
		}
	}
}

// TestECSReplies: the same handler replies in long-running mode: every
// reply lands on the reply stream (headers included) and the checkpoint
// reaches the last record.
func TestECSReplies(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 1)
	replyStream, _ := env.NewStream(t, 1)
	table, store := ecsNewLeaseTable(t, env, false)
	var es []ecsEntry
	for i := range 20 {
		id := fmt.Sprintf("ask-%06d", i)
		es = append(es, ecsEntry{id: id, key: id, reply: "answer " + id})
	}
	ecsWrite(t, env, stream, es)
	recs := ecsReadStream(t, env, stream, 20)
	w := ecsStartWorker(t, env, "w1", stream, table, "LAMBDAADAPTER_REPLY_STREAM="+replyStream)
	replies := env.ReadAll(t.Context(), t, replyStream, 20, ecsHandledTimeout)
	ecsAwaitCheckpointsAtEnd(t, store, stream, recs)
	w.terminate(t)
	if len(replies) != 20 {
		t.Fatalf("reply stream holds %d records, want 20", len(replies))
	}
	asked := map[string]bool{}
	for _, r := range recs {
		asked[aws.ToString(r.SequenceNumber)] = true
	}
	for _, r := range replies {
		h, payload := envelope.Decode(r.Data)
		if !strings.HasPrefix(string(payload), "answer ask-") || !asked[h.Get("x-in-reply-to")] {
			t.Errorf("reply %q with headers %v: want an answer naming a record of the stream in x-in-reply-to", payload, h)
		}
	}
}

// TestECSMissingStream: started on a stream that does not exist, the
// service exits at once with status 1 and an error naming the stream,
// instead of retrying forever while looking healthy.
func TestECSMissingStream(t *testing.T) {
	env := standin.Require(t)
	table, _ := ecsNewLeaseTable(t, env, false)
	missing := "no-such-stream-" + ecsRandomSuffix(t)
	ctx, cancel := context.WithTimeout(t.Context(), ecsExitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bootstrapPath, "-mode=ecs")
	cmd.Env = append(functionEnviron(), env.Environ()...)
	cmd.Env = append(cmd.Env, "LAMBDAADAPTER_STREAM="+missing, "LAMBDAADAPTER_LEASE_TABLE="+table)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("bootstrap -mode=ecs on a missing stream: %v, want exit status 1; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "stream not found: "+missing) {
		t.Errorf("output lacks %q:\n%s", "stream not found: "+missing, out)
	}
	t.Logf("exited after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
}

// ecsAwaitCheckpointsAtEnd waits until every shard's checkpoint in the
// lease table is the shard's last record among recs.
func ecsAwaitCheckpointsAtEnd(t *testing.T, store *lease.DynamoDB, stream string, recs []standin.Record) {
	t.Helper()
	ecsEventually(t, ecsSettleTimeout, "checkpoints at every shard's last record", func() (bool, string) {
		ls := ecsLeases(t, store, stream)
		for id, seq := range ecsLastSequences(recs) {
			if ls[id].Checkpoint != seq {
				return false, ecsDescribeLeases(ls)
			}
		}
		return true, ""
	})
}
