//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/lease"
)

// The test below proves end to end that the long-running mode checkpoints
// inside a KPL aggregated record: the bootstrap binary (bootstrap -mode=ecs)
// reads KPL aggregates from kinesis-local, one user record of an aggregate
// stays in flight, the lease row on dynalite holds the aggregate's sequence
// number with the sub-sequence of that user record (checkpointSubSequence),
// and a worker taking the lease after a kill -9 resumes at that user record,
// delivering none of the user records that settled before it.

// Shape and bounds of the KPL test.
const (
	// kplAggregates and kplUsers: the stream holds kplAggregates aggregates
	// of kplUsers user records each.
	kplAggregates = 3
	kplUsers      = 20
	// kplStuckAggregate and kplStuckUser name the user record that does
	// not settle before the kill: aggregate 2 (of 1..3), sub-sequence
	// number 8 (of 0..19).
	kplStuckAggregate = 2
	kplStuckUser      = 8
	// kplSleep is how long the demo handler sleeps on the stuck user
	// record (sleep_ms). The first worker must write its checkpoint and be
	// killed within it. The demo handler sleeps on every delivery, so the
	// second worker sleeps as long before it can checkpoint past it.
	kplSleep = 20 * time.Second
	// kplMargin is the part of kplSleep kept free between the last look at
	// the lease row and the kill.
	kplMargin = 3 * time.Second
)

// kplID returns the id of user record user (its sub-sequence number) of
// aggregate agg (1-based), also its partition key.
func kplID(agg, user int) string { return fmt.Sprintf("kpl-a%d-u%02d", agg, user) }

// kplPosition parses an id of kplID; ok is false for any other string.
func kplPosition(id string) (agg, user int, ok bool) {
	if _, err := fmt.Sscanf(id, "kpl-a%d-u%d", &agg, &user); err != nil || kplID(agg, user) != id {
		return 0, 0, false
	}
	return agg, user, true
}

// kplBefore reports whether user record (a1, u1) comes before (a2, u2) in the
// shard.
func kplBefore(a1, u1, a2, u2 int) bool { return a1 < a2 || a1 == a2 && u1 < u2 }

// kplWriteAggregates writes the aggregates to the one-shard stream, one
// PutRecord each in order, and returns their sequence numbers (index 0 is
// aggregate 1). Every user record has its own partition key (as KPL users'
// records do), so the workers run them in separate lanes; the stuck one
// asks the demo handler to sleep kplSleep.
func kplWriteAggregates(t *testing.T, env *standin.Env, stream string) []string {
	t.Helper()
	seqs := make([]string, kplAggregates)
	for a := 1; a <= kplAggregates; a++ {
		users := make([]lambdaadaptertest.UserRecord, kplUsers)
		for u := range users {
			cmd := map[string]any{"id": kplID(a, u)}
			if a == kplStuckAggregate && u == kplStuckUser {
				cmd["sleep_ms"] = kplSleep.Milliseconds()
			}
			payload, err := json.Marshal(cmd)
			if err != nil {
				t.Fatal(err)
			}
			users[u] = lambdaadaptertest.UserRecord{PartitionKey: kplID(a, u), Payload: payload}
		}
		out, err := env.Kinesis.PutRecord(sdkContext(t), &kinesis.PutRecordInput{
			StreamName: aws.String(stream), PartitionKey: aws.String(users[0].PartitionKey),
			Data: lambdaadaptertest.Aggregate(users...),
		})
		if err != nil {
			t.Fatalf("PutRecord of aggregate %d to %s: %v", a, stream, err)
		}
		seqs[a-1] = aws.ToString(out.SequenceNumber)
	}
	return seqs
}

// kplRow reads the raw lease row of the shard with the DynamoDB client
// (consistent read): its checkpoint, its checkpointSubSequence attribute ("" when
// absent) and its owner.
func kplRow(t *testing.T, env *standin.Env, table string, key lease.Key) (checkpoint, sub, owner string) {
	t.Helper()
	out, err := env.DynamoDB.GetItem(sdkContext(t), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]dynamodbtypes.AttributeValue{"leaseKey": &dynamodbtypes.AttributeValueMemberS{Value: key.String()}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem %s from %s: %v", key, table, err)
	}
	str := func(name string) string {
		switch v := out.Item[name].(type) {
		case *dynamodbtypes.AttributeValueMemberS:
			return v.Value
		case *dynamodbtypes.AttributeValueMemberN:
			return v.Value
		}
		return ""
	}
	return str("checkpoint"), str("checkpointSubSequence"), str("leaseOwner")
}

// kplLogged returns the worker's record lines of the id, in the order
// printed.
func kplLogged(w *ecsWorker, id string) []ecsLogLine {
	var out []ecsLogLine
	for _, l := range w.records() {
		if l.ID == id {
			out = append(out, l)
		}
	}
	return out
}

// TestKPLResumeInsideAggregateAfterKill writes three KPL aggregates of 20
// user records to a one-shard stream and runs a bootstrap -mode=ecs worker
// over it. User record 8 of aggregate 2 sleeps (in flight) while every other
// user record settles; the lease row on dynalite then holds aggregate 2's
// sequence number with checkpointSubSequence 8, and `bootstrap leases` shows
// it. The worker is killed with SIGKILL during the sleep. A second worker
// takes the lease once it expired and finishes the stream: it starts at
// aggregate 2's user record 8, delivers none of aggregate 1 nor of aggregate
// 2's user records 0 to 7 (each was handled exactly once, by the first
// worker), delivers every later user record (the settled ones after the
// stuck one come again: the checkpoint is a watermark), and checkpoints at
// the last aggregate whole. No user record is lost.
func TestKPLResumeInsideAggregateAfterKill(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 1)
	table, store := ecsNewLeaseTable(t, env, false)
	seqs := kplWriteAggregates(t, env, stream)
	recs := ecsReadStream(t, env, stream, kplAggregates)
	for i, r := range recs {
		if got := aws.ToString(r.SequenceNumber); got != seqs[i] {
			t.Fatalf("the stream's record %d has sequence number %s, want %s (aggregate %d)", i, got, seqs[i], i+1)
		}
	}
	shard := recs[0].ShardID
	key := lease.Key{Stream: stream, ShardID: shard}
	stuckSeq, lastSeq := seqs[kplStuckAggregate-1], seqs[kplAggregates-1]
	stuckID := kplID(kplStuckAggregate, kplStuckUser)
	var ids []string
	for a := 1; a <= kplAggregates; a++ {
		for u := range kplUsers {
			ids = append(ids, kplID(a, u))
		}
	}

	w1 := ecsStartWorker(t, env, "w1", stream, table)
	ecsEventually(t, ecsSettleTimeout, "w1 delivering the stuck user record "+stuckID, func() (bool, string) {
		ecsCheckAlive(t, w1)
		return len(kplLogged(w1, stuckID)) > 0, fmt.Sprintf("%d user records handled by w1", len(w1.records()))
	})
	stuckAt := kplLogged(w1, stuckID)[0].Time
	// The checkpoint must show up while the user record sleeps; the
	// deadline runs from its delivery, not from the worker's start.
	within := kplSleep - kplMargin - time.Since(stuckAt)
	wantSub := fmt.Sprint(kplStuckUser)
	ecsEventually(t, within, "w1's checkpoint inside aggregate 2 (sub-sequence 8)", func() (bool, string) {
		ecsCheckAlive(t, w1)
		cp, sub, owner := kplRow(t, env, table, key)
		return owner == "w1" && cp == stuckSeq && sub == wantSub,
			fmt.Sprintf("owner %q checkpoint %q checkpointSubSequence %q; want w1 at %s, %s", owner, cp, sub, stuckSeq, wantSub)
	})
	w1.kill(t)
	killed := time.Now()
	if inFlight := killed.Sub(stuckAt); inFlight >= kplSleep {
		t.Fatalf("w1 was killed %v after delivering %s, not within its %v sleep: it may have settled", inFlight, stuckID, kplSleep)
	}
	t.Logf("killed w1 %v after it delivered %s (sleeping %v), having handled %d user records",
		killed.Sub(stuckAt).Round(time.Millisecond), stuckID, kplSleep, len(w1.records()))
	// The row the next owner reads: still inside aggregate 2, also through
	// the lease package.
	if cp, sub, _ := kplRow(t, env, table, key); cp != stuckSeq || sub != wantSub {
		t.Fatalf("after the kill the row has checkpoint %q checkpointSubSequence %q, want %s and %s", cp, sub, stuckSeq, wantSub)
	}
	if l := ecsLeases(t, store, stream)[shard]; l.Checkpoint != stuckSeq || l.SubSequence != kplStuckUser {
		t.Fatalf("after the kill lease.DynamoDB reads checkpoint %q sub-sequence %d, want %s and %d", l.Checkpoint, l.SubSequence, stuckSeq, kplStuckUser)
	}

	out, err := ecsBootstrapCommand(t, env, "leases", "-table", table, "-stream", stream)
	if err != nil {
		t.Fatalf("bootstrap leases -table %s -stream %s: %v\n%s", table, stream, err, out)
	}
	var line string
	for l := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == shard {
			line = l
		}
	}
	if want := fmt.Sprintf("%s (sub-sequence %d)", stuckSeq, kplStuckUser); !strings.Contains(line, want) {
		t.Errorf("bootstrap leases shows %q for %s, want it to contain %q:\n%s", line, shard, want, out)
	} else {
		t.Logf("bootstrap leases after the kill:\n%s", out)
	}

	w2 := ecsStartWorker(t, env, "w2", stream, table)
	took := ecsEventually(t, ecsSettleTimeout+kplSleep+ecsHandledTimeout, "w2's checkpoint at the last aggregate, whole", func() (bool, string) {
		ecsCheckAlive(t, w2)
		cp, sub, owner := kplRow(t, env, table, key)
		return owner == "w2" && cp == lastSeq && sub == "",
			fmt.Sprintf("owner %q checkpoint %q checkpointSubSequence %q; want w2 at %s without a sub-sequence", owner, cp, sub, lastSeq)
	})
	t.Logf("w2 checkpointed the whole stream %v after it started (lease duration %v, %v sleep)", took.Round(time.Millisecond), ecsLeaseDuration, kplSleep)
	w2.terminate(t)
	if l := ecsLeases(t, store, stream)[shard]; l.Owner != "" || l.Checkpoint != lastSeq || l.SubSequence != 0 {
		t.Errorf("after w2's SIGTERM the lease has owner %q checkpoint %q sub-sequence %d, want free at %s, sub-sequence 0", l.Owner, l.Checkpoint, l.SubSequence, lastSeq)
	}

	// w2 took the lease at the checkpoint w1 left (the log line names the
	// sequence number only).
	taken := ""
	for _, l := range w2.log() {
		if l.Msg == ecsMsgLeaseTaken && l.ShardID == shard {
			taken = l.Checkpoint
			break
		}
	}
	if taken != stuckSeq {
		t.Errorf("w2 took the lease at checkpoint %q, want %s (aggregate %d)", taken, stuckSeq, kplStuckAggregate)
	}
	// Every record line: a known user record, under its aggregate's
	// sequence number.
	for _, w := range []*ecsWorker{w1, w2} {
		for _, l := range w.records() {
			a, _, ok := kplPosition(l.ID)
			if !ok {
				t.Errorf("%s handled an unknown record %q", w.name, l.ID)
			} else if l.Seq != seqs[a-1] {
				t.Errorf("%s handled %s under sequence number %s, want aggregate %d's %s", w.name, l.ID, l.Seq, a, seqs[a-1])
			}
		}
	}
	// w2 started at the stuck user record and delivered every user record
	// from it on, each once, and none before it.
	w2Counts := ecsHandledCounts(w2)
	firstA, firstU := 0, 0
	for id := range w2Counts {
		if a, u, ok := kplPosition(id); ok && (firstA == 0 || kplBefore(a, u, firstA, firstU)) {
			firstA, firstU = a, u
		}
	}
	if firstA != kplStuckAggregate || firstU != kplStuckUser {
		t.Errorf("w2 started at %s, want %s (aggregate %d's sub-sequence %d)", kplID(firstA, firstU), stuckID, kplStuckAggregate, kplStuckUser)
	}
	var again, w2Missing []string
	for _, id := range ids {
		a, u, _ := kplPosition(id)
		n := w2Counts[id]
		switch {
		case kplBefore(a, u, kplStuckAggregate, kplStuckUser) && n > 0:
			again = append(again, id)
		case !kplBefore(a, u, kplStuckAggregate, kplStuckUser) && n != 1:
			w2Missing = append(w2Missing, fmt.Sprintf("%s x%d", id, n))
		}
	}
	if len(again) > 0 {
		t.Errorf("w2 delivered %d user records that settled before w1's checkpoint: %v; want none", len(again), again)
	}
	if len(w2Missing) > 0 {
		t.Errorf("w2 delivered these user records at or after the checkpoint other than once: %v", w2Missing)
	}
	// Over both workers: none lost; aggregate 1 and aggregate 2's user
	// records before the stuck one exactly once.
	counts := ecsHandledCounts(w1, w2)
	lost, first := ecsMissingIDs(ids, counts)
	if lost > 0 {
		t.Errorf("%d user records never handled, first %v", lost, first)
	}
	var notOnce []string
	for _, id := range ids {
		if a, u, _ := kplPosition(id); kplBefore(a, u, kplStuckAggregate, kplStuckUser) && counts[id] != 1 {
			notOnce = append(notOnce, fmt.Sprintf("%s x%d", id, counts[id]))
		}
	}
	if len(notOnce) > 0 {
		t.Errorf("user records before the checkpoint handled other than exactly once: %v", notOnce)
	}
	d, _ := ecsDuplicates(counts)
	t.Logf("%d user records, %d lost, %d duplicates; w1 handled %d before the kill, w2 %d from %s on",
		len(ids), lost, d, len(w1.records()), len(w2.records()), kplID(firstA, firstU))
}
