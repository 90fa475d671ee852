//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/idempotency"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lease"
)

// The tests below put a small HTTP proxy between the adapter's DynamoDB
// client and dynalite that loses the answer of chosen calls AFTER dynalite
// applied them: it forwards the request, reads dynalite's answer, throws it
// away and answers with an error shaped as DynamoDB sends it (status,
// X-Amzn-Errortype and a JSON 1.0 body with __type and message). Two
// shapes:
//
//   - 500 InternalServerError: the SDK's retryer sends the request again,
//     through the proxy, and dynalite answers the retry itself: for a
//     conditional write, a real ConditionalCheckFailedException, since the
//     first attempt already moved the row on. This is the fault as it
//     happens (a timeout or a reset connection after the write ends the
//     same way).
//   - 400 ConditionalCheckFailedException at once: the end of that chain
//     as the caller sees it, without depending on the retryer.
//
// The proxy is local to these tests on purpose (the general fault layer of
// the soak lives elsewhere).

// lostAnswer is the answer the proxy gives instead of dynalite's.
type lostAnswer struct {
	name      string
	status    int
	errorType string
	message   string
}

var (
	lostAs500 = lostAnswer{"500 then the SDK's retry", http.StatusInternalServerError, "InternalServerError", "Internal server error"}
	lostAsCCF = lostAnswer{"400 ConditionalCheckFailedException", http.StatusBadRequest, "ConditionalCheckFailedException", "The conditional request failed"}
)

// lossyDynamoDB is the proxy. lose decides, for each call dynalite answered
// with 200, whether that answer is lost; it is called under mu, one call
// at a time.
type lossyDynamoDB struct {
	target string // dynalite's endpoint
	answer lostAnswer
	srv    *httptest.Server

	mu   sync.Mutex
	lose func(op string, body []byte) bool
	lost []string // the operations whose answer was lost, in order
}

// newLossyDynamoDB starts a proxy to env's dynalite that loses answers as
// a says; it stops when the test ends.
func newLossyDynamoDB(t *testing.T, env *standin.Env, a lostAnswer) *lossyDynamoDB {
	p := &lossyDynamoDB{target: env.DynamoDBEndpoint, answer: a}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	return p
}

// client returns a DynamoDB client that goes through the proxy, with the
// stand-ins' retryer.
func (p *lossyDynamoDB) client(env *standin.Env) *dynamodb.Client {
	return dynamodb.NewFromConfig(env.Config, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(p.srv.URL) })
}

// loseNext makes the proxy lose the answer of the next call of op.
func (p *lossyDynamoDB) loseNext(op string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	armed := true
	p.lose = func(got string, _ []byte) bool {
		if armed && got == op {
			armed = false
			return true
		}
		return false
	}
}

// setLose sets the function that decides which answers are lost.
func (p *lossyDynamoDB) setLose(lose func(op string, body []byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose = lose
}

// lostOps returns the operations whose answer was lost so far.
func (p *lossyDynamoDB) lostOps() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lost...)
}

func (p *lossyDynamoDB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	p.mu.Lock()
	lose := resp.StatusCode == http.StatusOK && p.lose != nil && p.lose(op, body)
	if lose {
		p.lost = append(p.lost, op)
	}
	p.mu.Unlock()
	if lose {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-Errortype", p.answer.errorType)
		w.WriteHeader(p.answer.status)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"__type":  "com.amazonaws.dynamodb.v20120810#" + p.answer.errorType,
			"message": p.answer.message,
		})
		return
	}
	for name, values := range resp.Header {
		w.Header()[name] = values
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// TestLeaseDynamoDBLostAnswer: every lease write whose answer is lost after
// dynalite applied it returns what the write wrote, as if the answer had
// arrived, instead of lease.ErrLeaseLost: the row read directly is the row
// returned, and its counter moved on by exactly one. Delete and
// RemoveWorker cannot tell their own applied delete from another's and
// report ErrLeaseLost, with the row gone (as documented); a lost
// Heartbeat's retry bumps the worker's counter twice.
func TestLeaseDynamoDBLostAnswer(t *testing.T) {
	env := standin.Require(t)
	for _, a := range []lostAnswer{lostAs500, lostAsCCF} {
		t.Run(a.name, func(t *testing.T) {
			p := newLossyDynamoDB(t, env, a)
			d, table := newLeaseTable(t, p.client(env), env.DynamoDB)
			direct := lease.NewDynamoDB(env.DynamoDB, table)
			ctx := t.Context()
			k := lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}
			var held lease.Lease
			step := func(what, op string, write func() (lease.Lease, error)) {
				t.Helper()
				before := len(p.lostOps())
				p.loseNext(op)
				got, err := write()
				if err != nil {
					t.Fatalf("%s whose answer was lost: %v, want what it wrote", what, err)
				}
				if n := len(p.lostOps()); n != before+1 {
					t.Fatalf("%s: the proxy lost %d answers, want 1", what, n-before)
				}
				stored, err := direct.Get(ctx, k)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if diff := cmp.Diff(stored, got); diff != "" {
					t.Fatalf("%s returned another row than the one stored (-stored +returned):\n%s", what, diff)
				}
				if what != "Ensure" && what != "RequestHandoff" && got.Counter != held.Counter+1 {
					t.Fatalf("%s: counter %d after %d, want one write", what, got.Counter, held.Counter)
				}
				held = got
			}
			step("Ensure", "PutItem", func() (lease.Lease, error) { return d.Ensure(ctx, k, nil) })
			step("Take", "UpdateItem", func() (lease.Lease, error) { return d.Take(ctx, held, "w1") })
			step("Renew", "UpdateItem", func() (lease.Lease, error) { return d.Renew(ctx, held) })
			step("Checkpoint", "UpdateItem", func() (lease.Lease, error) { return d.Checkpoint(ctx, held, "100", 0) })
			step("Checkpoint inside an aggregate", "UpdateItem", func() (lease.Lease, error) { return d.Checkpoint(ctx, held, "200", 3) })
			if a == lostAs500 {
				// The retry of a handoff request finds its own request and
				// succeeds; an immediate ConditionalCheckFailedException is
				// not an answer it can get.
				step("RequestHandoff", "UpdateItem", func() (lease.Lease, error) { return d.RequestHandoff(ctx, held, "w2") })
			}
			step("Transfer", "UpdateItem", func() (lease.Lease, error) {
				last := held
				last.Checkpoint, last.SubSequence = "300", 0
				return d.Transfer(ctx, last, "w2")
			})
			if held.Owner != "w2" || held.Checkpoint != "300" || held.Handoff != "" || held.OwnerSwitches != 2 {
				t.Fatalf("after the transfer: %+v", held)
			}
			step("Renew by the new owner", "UpdateItem", func() (lease.Lease, error) { return d.Renew(ctx, held) })
			step("Release", "UpdateItem", func() (lease.Lease, error) { return d.Release(ctx, held) })
			if held.Owner != "" {
				t.Fatalf("after the release: %+v", held)
			}

			p.loseNext("DeleteItem")
			if err := d.Delete(ctx, held); !errors.Is(err, lease.ErrLeaseLost) {
				t.Errorf("Delete whose answer was lost: %v, want lease.ErrLeaseLost (documented)", err)
			}
			if _, err := direct.Get(ctx, k); !errors.Is(err, lease.ErrNotFound) {
				t.Errorf("Get after the Delete: %v, want lease.ErrNotFound", err)
			}
			if a == lostAs500 {
				// (An unconditional write never gets a
				// ConditionalCheckFailedException.)
				p.loseNext("UpdateItem")
			}
			w, err := d.Heartbeat(ctx, "orders", "w1", nil)
			if want := map[lostAnswer]int64{lostAs500: 2, lostAsCCF: 1}[a]; err != nil || w.Counter != want {
				t.Fatalf("Heartbeat = %+v, %v; want counter %d", w, err, want)
			}
			p.loseNext("DeleteItem")
			if err := d.RemoveWorker(ctx, w); !errors.Is(err, lease.ErrLeaseLost) {
				t.Errorf("RemoveWorker whose answer was lost: %v, want lease.ErrLeaseLost (documented)", err)
			}
			if snap, err := direct.Snapshot(ctx, "orders"); err != nil || len(snap.Workers) != 0 {
				t.Errorf("workers after RemoveWorker = %+v, %v; want none", snap.Workers, err)
			}
		})
	}
}

// TestIdempotencyLostAnswer: the idempotency handler's claim, completion
// and release whose answer is lost after dynalite applied them are
// recognised as its own: the claimed record runs once (not "in progress
// elsewhere" until its own claim expires), and nothing is logged as failed.
func TestIdempotencyLostAnswer(t *testing.T) {
	env := standin.Require(t)
	for _, a := range []lostAnswer{lostAs500, lostAsCCF} {
		t.Run(a.name, func(t *testing.T) {
			p := newLossyDynamoDB(t, env, a)
			table := "idempotency-" + ecsRandomSuffix(t)
			deleteTableAtCleanup(t, env.DynamoDB, table)
			if err := idempotency.CreateTable(sdkContext(t), env.DynamoDB, table); err != nil && !errors.Is(err, idempotency.ErrTTLUnsupported) {
				t.Fatalf("CreateTable: %v", err)
			}
			var logs bytes.Buffer
			var mu sync.Mutex
			runs := map[string]int{}
			h, err := idempotency.New(lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
				mu.Lock()
				defer mu.Unlock()
				runs[m.SequenceNumber]++
				if string(m.Payload) == "fail once" && runs[m.SequenceNumber] == 1 {
					return lambdaadapter.Retry(errors.New("down"))
				}
				return lambdaadapter.Ack()
			}), p.client(env), table, idempotency.WithKeyPrefix("lost"),
				idempotency.WithLogger(slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))))
			if err != nil {
				t.Fatal(err)
			}
			msg := func(seq, payload string) *lambdaadapter.Message {
				return &lambdaadapter.Message{Payload: []byte(payload), SequenceNumber: seq, ShardID: "shardId-000000000000",
					StreamARN: "arn:aws:kinesis:us-east-1:000000000000:stream/lost", Attempt: 1}
			}
			for _, tc := range []struct {
				name, op, seq, payload string
				want                   []lambdaadapter.OutcomeKind // of the first delivery, then the second
				runs                   int
				status                 string // of the item afterwards; "" for none
			}{
				{"claim", "PutItem", "1", "ok", []lambdaadapter.OutcomeKind{lambdaadapter.KindAck, lambdaadapter.KindAck}, 1, "COMPLETED"},
				{"completion", "UpdateItem", "2", "ok", []lambdaadapter.OutcomeKind{lambdaadapter.KindAck, lambdaadapter.KindAck}, 1, "COMPLETED"},
				{"release", "DeleteItem", "3", "fail once", []lambdaadapter.OutcomeKind{lambdaadapter.KindRetry, lambdaadapter.KindAck}, 2, "COMPLETED"},
			} {
				before := len(p.lostOps())
				p.loseNext(tc.op)
				var got []lambdaadapter.OutcomeKind
				for range 2 {
					got = append(got, h.HandleRecord(t.Context(), msg(tc.seq, tc.payload)).Kind())
				}
				if n := len(p.lostOps()); n != before+1 {
					t.Fatalf("%s: the proxy lost %d answers, want 1", tc.name, n-before)
				}
				mu.Lock()
				n := runs[tc.seq]
				mu.Unlock()
				if diff := cmp.Diff(tc.want, got); diff != "" || n != tc.runs {
					t.Errorf("%s whose answer was lost: outcomes (-want +got):\n%s\nhandler runs %d, want %d", tc.name, diff, n, tc.runs)
				}
				id := "lost#arn:aws:kinesis:us-east-1:000000000000:stream/lost#shardId-000000000000#" + tc.seq + "#0"
				if status := idemItems(t, env, table)[id]; status != tc.status {
					t.Errorf("%s: item status %q, want %q", tc.name, status, tc.status)
				}
			}
			if strings.Contains(logs.String(), "level=ERROR") || strings.Contains(logs.String(), "in progress elsewhere") {
				t.Errorf("logs:\n%s", logs.String())
			}
		})
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// TestECSLostLeaseAnswers runs a long-running worker whose DynamoDB client
// loses the answer of every third lease write (its take, renewals,
// checkpoints and release) after dynalite applied it, with the SDK's retry
// then refused by the condition. The worker must keep its lease the whole
// time: one take, no lease lost, every record handled exactly once, and
// Run returns nil. Before lost answers were recognised, the first one
// stopped the shard as if the lease had been lost; the lease then expired
// and was taken again, and the records settled since the last checkpoint
// were handled a second time.
func TestECSLostLeaseAnswers(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 1)
	p := newLossyDynamoDB(t, env, lostAs500)
	table, _ := ecsNewLeaseTable(t, env, false)
	var leaseWrites int
	p.setLose(func(op string, body []byte) bool {
		// The fenced lease writes: UpdateItem of a lease row (not a
		// worker's heartbeat) with a condition on the counter.
		if op != "UpdateItem" || bytes.Contains(body, []byte(":@worker:")) || !bytes.Contains(body, []byte("ConditionExpression")) ||
			!bytes.Contains(body, []byte(`"leaseCounter"`)) {
			return false
		}
		leaseWrites++
		return leaseWrites%3 == 1
	})

	var h efoHandled
	var log efoLog
	a, err := lambdaadapter.NewService(lambdaadapter.HandlerFunc(h.handle),
		lambdaadapter.WithKinesisClient(env.Kinesis),
		lambdaadapter.WithStream(stream), lambdaadapter.WithLeaseTable(table), lambdaadapter.WithDynamoDBClient(p.client(env)),
		lambdaadapter.WithOwnerID("w1"), lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
		lambdaadapter.WithLeaseDuration(ecsLeaseDuration), lambdaadapter.WithListInterval(ecsListInterval),
		lambdaadapter.WithCheckpointInterval(100*time.Millisecond),
		lambdaadapter.WithShutdownTimeout(ecsShutdownTimeout), lambdaadapter.WithLogger(slog.New(&log)))
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	t.Cleanup(func() {
		if t.Failed() {
			log.mu.Lock()
			t.Logf("adapter log (info and above):\n\t%s", strings.Join(log.lines, "\n\t"))
			log.mu.Unlock()
		}
	})

	// Records in small batches over a few lease durations, so that many
	// renewals and checkpoints happen while records are settling.
	var ids []string
	const batches, perBatch = 30, 10
	for b := range batches {
		entries := make([]kinesistypes.PutRecordsRequestEntry, perBatch)
		for i := range entries {
			id := fmt.Sprintf("r-%03d-%02d", b, i)
			ids = append(ids, id)
			entries[i] = kinesistypes.PutRecordsRequestEntry{Data: []byte(`{"id":"` + id + `"}`), PartitionKey: aws.String(id)}
		}
		out, err := env.Kinesis.PutRecords(sdkContext(t), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("PutRecords: %v (%d failed)", err, aws.ToInt32(out.FailedRecordCount))
		}
		time.Sleep(300 * time.Millisecond) // pacing the producer, not waiting for a result
	}
	efoAwaitHandled(t, &h, ids, ecsHandledTimeout)
	// One more lease duration with the shard idle: renewals go on, and
	// lose answers, with nothing to deliver again.
	time.Sleep(ecsLeaseDuration)
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(ecsExitTimeout):
		t.Fatalf("Run did not return within %v of the stop", ecsExitTimeout)
	}

	for id, n := range h.counts() {
		if n != 1 {
			t.Errorf("record %s handled %d times, want once", id, n)
		}
	}
	lost := len(p.lostOps())
	if lost < 5 {
		t.Errorf("the proxy lost %d answers of lease writes, want several", lost)
	}
	log.mu.Lock()
	taken := log.count["consumer: lease taken"]
	dropped := log.count["consumer: shard dropped: lease taken by another worker"] + log.count["consumer: checkpoint refused: lease lost"]
	log.mu.Unlock()
	if taken != 1 || dropped != 0 {
		t.Errorf("leases taken %d (want 1), shard dropped or checkpoint refused as lost %d times (want 0)", taken, dropped)
	}
	l, err := lease.NewDynamoDB(env.DynamoDB, table).Get(sdkContext(t), lease.Key{Stream: stream, ShardID: "shardId-000000000000"})
	if err != nil || l.Owner != "" || l.OwnerSwitches != 1 {
		t.Errorf("lease after the stop = %+v, %v; want released, one owner switch", l, err)
	}
	p.mu.Lock()
	writes := leaseWrites
	p.mu.Unlock()
	t.Logf("%d lease writes, %d answers lost, %d records handled", writes, lost, len(ids))
}
