package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
)

var errHandler = errors.New("conformance: handler failure")

// ack, retryTimes and the other scripts answer handlings.
func ack(Handling, *lambdaadapter.Message) lambdaadapter.Outcome { return lambdaadapter.Ack() }

// failFirst returns a script that answers fail for the first n handlings of
// each payload in which (all when which is nil), then Ack.
func failFirst(n int, fail lambdaadapter.Outcome, which ...string) func(Handling, *lambdaadapter.Message) lambdaadapter.Outcome {
	return func(h Handling, _ *lambdaadapter.Message) lambdaadapter.Outcome {
		if (len(which) == 0 || slices.Contains(which, h.Payload)) && h.Call < n {
			return fail
		}
		return lambdaadapter.Ack()
	}
}

// oneKey returns records with payloads prefix-0… on shard 0 under one key.
func oneKey(prefix string, n int, headers ...string) []Record {
	var out []Record
	for _, p := range payloads(prefix, n) {
		out = append(out, Record{Key: "key-" + prefix, Payload: p, Headers: headers})
	}
	return out
}

// Cases returns the semantics table as cases, one or more per row.
func Cases() []Case {
	return slices.Concat(tableCases(), aggregateCases(), ageCases(), heldCases(), oversizeCases())
}

func tableCases() []Case {
	return []Case{
		{
			Name: "Ack", Row: "Ack()", Shards: 2,
			Records: func() []Record {
				var out []Record
				for i := range 24 {
					out = append(out, Record{Shard: i % 2, Key: "k" + strconv.Itoa(i%3), Payload: fmt.Sprintf("a-%02d", i)})
				}
				return out
			}(),
			Script: ack,
			Check: func(t *testing.T, r *Result) {
				handledOnce(t, r, 24)
				keyOrder(t, r)
				noCopies(t, r)
			},
		},
		{
			Name: "Drop", Row: "Drop(err)",
			Records: oneKey("d", 3),
			Script: func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome {
				if h.Payload == "d-0" {
					return lambdaadapter.Drop(errHandler)
				}
				return lambdaadapter.Ack()
			},
			Check: func(t *testing.T, r *Result) {
				handledOnce(t, r, 3)
				noCopies(t, r)
				if n := len(r.StreamRecords(DeadLetterStream)); n != 0 {
					t.Errorf("%d dead letters for a Drop without WithDeadLetterDrops, want 0", n)
				}
			},
		},
		{
			Name: "DropDeadLettered", Row: "Drop(err) with WithDeadLetterDrops",
			Records: oneKey("dd", 2, "trace", "t-1"),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithDeadLetterStream(DeadLetterStream), lambdaadapter.WithDeadLetterDrops()},
			Script: func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome {
				if h.Payload == "dd-0" {
					return lambdaadapter.Drop(errHandler)
				}
				return lambdaadapter.Ack()
			},
			Check: func(t *testing.T, r *Result) {
				handledOnce(t, r, 2)
				noCopies(t, r)
				dls := r.StreamRecords(DeadLetterStream)
				if len(dls) != 1 || dls[0].Payload != "dd-0" || dls[0].Headers.Get("trace") != "t-1" {
					t.Fatalf("dead-letter stream holds %+v, want dd-0 with its header trace=t-1", dls)
				}
			},
		},
		{
			Name: "RetryNotCounted", Row: "Retry(err), not counted",
			Records: oneKey("r", 3),
			Script:  failFirst(2, lambdaadapter.Retry(errHandler), "r-0"),
			Check: func(t *testing.T, r *Result) {
				handlings(t, r, "r-0", 3)
				// Later records of the key wait for it: handled once, after it.
				last := r.Log.Of("r-0")[2].At
				for _, p := range []string{"r-1", "r-2"} {
					hs := handlings(t, r, p, 1)
					if hs[0].At.Before(last) {
						t.Errorf("%s handled before r-0 was acked (per-key order)", p)
					}
				}
				noCopies(t, r)
				// Lambda cannot count its own redeliveries (Attempt stays 1); the
				// consumer delivers the record again itself and counts them.
				want := []int{1, 2, 3}
				if r.Mode == lambdaadapter.ModeLambda {
					want = []int{1, 1, 1}
				}
				if got := r.Log.Attempts("r-0"); !slices.Equal(got, want) {
					t.Errorf("attempts of r-0 = %v, want %v", got, want)
				}
			},
		},
		{
			Name: "RetryCountedRetired", Row: "Retry(err), counted: retired at the cap without a target",
			Records: oneKey("c", 2),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(3)},
			Script: func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome {
				if h.Payload == "c-0" {
					return lambdaadapter.Retry(errHandler)
				}
				return lambdaadapter.Ack()
			},
			Check: func(t *testing.T, r *Result) {
				hs := handlings(t, r, "c-0", 3)
				attemptsAndCounts(t, hs, []int{1, 2, 3}, []string{"", "1", "2"})
				copies(t, r, "c-0", "1", "2")
				handlings(t, r, "c-1", 1)
			},
		},
		{
			Name: "RetryCountedDeadLetterStream", Row: "Retry(err), counted: dead-lettered at the cap (stream)",
			Records: oneKey("x", 1, "trace", "t-2"),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(2), lambdaadapter.WithDeadLetterStream(DeadLetterStream)},
			Script:  func(Handling, *lambdaadapter.Message) lambdaadapter.Outcome { return lambdaadapter.Retry(errHandler) },
			Check: func(t *testing.T, r *Result) {
				attemptsAndCounts(t, handlings(t, r, "x-0", 2), []int{1, 2}, []string{"", "1"})
				copies(t, r, "x-0", "1")
				dls := r.StreamRecords(DeadLetterStream)
				if len(dls) != 1 || dls[0].Payload != "x-0" || dls[0].Headers.Get("trace") != "t-2" {
					t.Fatalf("dead-letter stream holds %+v, want x-0 with trace=t-2", dls)
				}
			},
		},
		{
			Name: "RetryCountedDeadLetterQueue", Row: "Retry(err), counted: dead-lettered at the cap (queue; a target alone caps at 3)",
			Records: oneKey("q", 1),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithDeadLetterQueue(DeadLetterQueue)},
			Script:  func(Handling, *lambdaadapter.Message) lambdaadapter.Outcome { return lambdaadapter.Retry(errHandler) },
			Check: func(t *testing.T, r *Result) {
				attemptsAndCounts(t, handlings(t, r, "q-0", 3), []int{1, 2, 3}, []string{"", "1", "2"})
				var bodies []string
				for _, s := range r.World.SQS.Sent() {
					if s.QueueURL == DeadLetterQueue {
						bodies = append(bodies, s.Body)
					}
				}
				if len(bodies) != 1 || !strings.Contains(bodies[0], "cS0w") { // base64("q-0")
					t.Fatalf("dead-letter queue got %q, want one message with q-0's payload", bodies)
				}
			},
		},
		{
			Name: "RetryAfterShort", Row: "RetryAfter(d, err), d short: copy written after d",
			Records: oneKey("ra", 2),
			Script:  failFirst(1, lambdaadapter.RetryAfter(2*time.Second, errHandler), "ra-0"),
			Check: func(t *testing.T, r *Result) {
				hs := handlings(t, r, "ra-0", 2)
				attemptsAndCounts(t, hs, []int{1, 2}, []string{"", "1"})
				cs := copies(t, r, "ra-0", "1")
				if waited := cs[0].Arrived.Sub(hs[0].At); waited < 2*time.Second {
					t.Errorf("copy written %v after the handling, want at least 2s", waited)
				}
			},
		},
		{
			Name: "RetryAfterDelayQueue", Row: "RetryAfter(d, err), d long: delay queue",
			Records: oneKey("rq", 1),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithDelayQueue(DelayQueue)},
			Script:  failFirst(1, lambdaadapter.RetryAfter(20*time.Minute, errHandler)),
			Check: func(t *testing.T, r *Result) {
				hs := handlings(t, r, "rq-0", 2)
				attemptsAndCounts(t, hs, []int{1, 2}, []string{"", "1"})
				copies(t, r, "rq-0", "1")
				if waited := hs[1].At.Sub(hs[0].At); waited < 20*time.Minute {
					t.Errorf("delivered again %v after RetryAfter(20m)", waited)
				}
				n := 0
				for _, s := range r.World.SQS.Sent() {
					if s.QueueURL == DelayQueue {
						n++
						if s.DelaySeconds > 900 {
							t.Errorf("delay message with DelaySeconds %d, over SQS's 900", s.DelaySeconds)
						}
					}
				}
				if n != 2 { // 15 minutes, then the 5 left
					t.Errorf("%d delay messages for 20 minutes, want 2 (chained)", n)
				}
			},
		},
		{
			Name: "RetryAfterLongNoQueue", Row: "RetryAfter(d, err), d long, no delay queue: as Retry",
			Records: oneKey("rl", 1),
			Script:  failFirst(1, lambdaadapter.RetryAfter(time.Hour, errHandler)),
			Check: func(t *testing.T, r *Result) {
				handlings(t, r, "rl-0", 2)
				noCopies(t, r)
				if n := len(r.World.SQS.Sent()); n != 0 {
					t.Errorf("%d SQS messages without a delay queue", n)
				}
			},
		},
		{
			Name: "Panic", Row: "panic: as Retry",
			Records: oneKey("p", 2),
			Script: func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome {
				if h.Payload == "p-0" && h.Call == 0 {
					panic("conformance: boom")
				}
				return lambdaadapter.Ack()
			},
			Check: func(t *testing.T, r *Result) {
				handlings(t, r, "p-0", 2)
				handlings(t, r, "p-1", 1)
				noCopies(t, r)
			},
		},
		{
			Name: "PanicCounted", Row: "panic: as Retry (counted)",
			Records: oneKey("pc", 1),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(3)},
			Script: func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome {
				if h.Call == 0 {
					panic("conformance: boom")
				}
				return lambdaadapter.Ack()
			},
			Check: func(t *testing.T, r *Result) {
				attemptsAndCounts(t, handlings(t, r, "pc-0", 2), []int{1, 2}, []string{"", "1"})
				copies(t, r, "pc-0", "1")
			},
		},
		{
			Name: "ZeroOutcome", Row: "zero Outcome{}: as Retry",
			Records: oneKey("z", 1),
			Script:  failFirst(1, lambdaadapter.Outcome{}),
			Check: func(t *testing.T, r *Result) {
				handlings(t, r, "z-0", 2)
				noCopies(t, r)
			},
		},
		{
			Name: "CopyWriteFails", Row: "a copy that cannot be written: the record stays unsettled; Lambda delivers it again, long-running mode makes the write again",
			Records: oneKey("cw", 2),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(20)},
			Setup: func(w *World) {
				// Writes to the source stream fail for three minutes: longer
				// than the publisher's retries within one invocation (Lambda)
				// or one write timeout (long-running).
				until := time.Now().Add(3 * time.Minute)
				w.Kinesis.Fail = func(stream, _ string, _ []byte) string {
					if strings.HasSuffix(stream, Stream) && time.Now().Before(until) {
						return "ProvisionedThroughputExceededException"
					}
					return ""
				}
			},
			Script: func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome {
				if h.Payload == "cw-0" && h.RetryCount == "" {
					return lambdaadapter.Retry(errHandler)
				}
				return lambdaadapter.Ack()
			},
			Check: func(t *testing.T, r *Result) {
				var originals []Handling
				for _, h := range r.Log.Of("cw-0") {
					if h.RetryCount == "" {
						originals = append(originals, h)
					}
				}
				if r.Mode == lambdaadapter.ModeECS {
					// The handler did its part; the write is made again until
					// it works, counting no attempt.
					if len(originals) != 1 {
						t.Fatalf("original handled %d times, want once: a failed write is made again, not the handling:%s", len(originals), describe(r.Log.Of("cw-0")))
					}
					copies(t, r, "cw-0", "1")
					if cs := r.Copies(); len(cs) == 1 && cs[0].Arrived.Sub(originals[0].At) < 2*time.Minute {
						t.Errorf("copy written %v after the handling, while writes failed for 3 minutes", cs[0].Arrived.Sub(originals[0].At))
					}
				} else {
					if len(originals) < 2 {
						t.Fatalf("original handled %d times, want it to come again while its copy could not be written:%s", len(originals), describe(r.Log.Of("cw-0")))
					}
					last := originals[len(originals)-1]
					if last.At.Sub(originals[0].At) < 2*time.Minute {
						t.Errorf("original settled %v after its first handling, while copies failed for 3 minutes", last.At.Sub(originals[0].At))
					}
					// The copy counts the attempt that wrote it.
					copies(t, r, "cw-0", strconv.Itoa(last.Attempt))
				}
				// A counted retry gives up the record's place in its key's
				// order (its copy goes to the end of the stream), so cw-1 goes
				// on meanwhile: handled once in long-running mode; Lambda
				// delivers it again with cw-0 while cw-0 is unsettled.
				if r.Mode == lambdaadapter.ModeECS {
					handlings(t, r, "cw-1", 1)
				} else if n := len(r.Log.Of("cw-1")); n < 1 {
					t.Errorf("cw-1 never handled")
				}
			},
		},
		{
			Name: "Reply", Row: "Message.Reply: the record settles once its replies are written",
			Records: oneKey("rp", 3),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithReplyStream(ReplyStream)},
			Setup: func(w *World) {
				// rp-1's reply cannot be written for a minute.
				until := time.Now().Add(time.Minute)
				w.Kinesis.Fail = func(stream, _ string, data []byte) string {
					if strings.HasSuffix(stream, ReplyStream) && strings.Contains(string(data), "re:rp-1") && time.Now().Before(until) {
						return "InternalFailure"
					}
					return ""
				}
			},
			Script: func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := m.Reply(ctx, lambdaadapter.Reply{Payload: []byte("re:" + h.Payload), Headers: replyHeaders(h)}); err != nil {
					return lambdaadapter.Retry(err)
				}
				return lambdaadapter.Ack()
			},
			Check: func(t *testing.T, r *Result) {
				handlings(t, r, "rp-0", 1)
				rp1 := r.Log.Of("rp-1")
				if len(rp1) < 2 {
					t.Errorf("rp-1 handled %d times, want it to come again after its reply failed", len(rp1))
				}
				if hs := handlings(t, r, "rp-2", 1); len(rp1) > 0 && hs[0].At.Before(rp1[len(rp1)-1].At) {
					t.Errorf("rp-2 handled before rp-1 settled (per-key order)")
				}
				var got []string
				for _, c := range r.StreamRecords(ReplyStream) {
					got = append(got, c.Payload)
				}
				if want := []string{"re:rp-0", "re:rp-1", "re:rp-2"}; !slices.Equal(got, want) {
					t.Errorf("reply stream holds %q, want %q", got, want)
				}
			},
		},
		{
			Name: "KeyOrderAroundRetry", Row: "lanes: order kept per partition key around a retry",
			Records: func() []Record {
				var out []Record
				for i := range 4 {
					out = append(out, Record{Key: "A", Payload: fmt.Sprintf("A-%d", i)}, Record{Key: "B", Payload: fmt.Sprintf("B-%d", i)})
				}
				return out
			}(),
			Script: failFirst(2, lambdaadapter.Retry(errHandler), "A-1"),
			Check: func(t *testing.T, r *Result) {
				keyOrder(t, r)
				handlings(t, r, "A-1", 3)
				if r.Mode == lambdaadapter.ModeECS {
					// The consumer delivers only the record again; Lambda
					// redelivers the batch from it (at least once).
					for _, p := range []string{"A-0", "A-2", "A-3", "B-0", "B-1", "B-2", "B-3"} {
						handlings(t, r, p, 1)
					}
				}
			},
		},
	}
}

func replyHeaders(h Handling) envelope.Headers {
	var hs envelope.Headers
	hs.Set("in-reply-to", h.Payload)
	return hs
}

// handlings fails unless payload was handled n times, and returns them.
func handlings(t *testing.T, r *Result, payload string, n int) []Handling {
	t.Helper()
	hs := r.Log.Of(payload)
	if len(hs) != n {
		t.Fatalf("%s handled %d times, want %d:%s", payload, len(hs), n, describe(hs))
	}
	return hs
}

// handledOnce fails unless n distinct payloads were each handled once,
// with Attempt 1.
func handledOnce(t *testing.T, r *Result, n int) {
	t.Helper()
	all := r.Log.All()
	seen := map[string]bool{}
	for _, h := range all {
		if seen[h.Payload] {
			t.Errorf("%s handled twice", h.Payload)
		}
		seen[h.Payload] = true
		if h.Attempt != 1 {
			t.Errorf("%s: attempt %d, want 1", h.Payload, h.Attempt)
		}
	}
	if len(seen) != n {
		t.Errorf("%d records handled, want %d", len(seen), n)
	}
}

// keyOrder fails unless, per shard and partition key, the first handlings
// follow the order the records were put in, and no record is handled (for
// the last time) after a later record of its key was first handled.
func keyOrder(t *testing.T, r *Result) {
	t.Helper()
	pos := map[string]int{} // payload → index in its shard
	for i, rec := range r.World.Kinesis.Records(Stream) {
		pos[string(rec.Payload)] = i
	}
	lastOf := map[string]Handling{}
	for _, h := range r.Log.All() {
		lastOf[h.Payload] = h
	}
	firstSeen := map[string]bool{}
	byKey := map[string][]string{}
	for _, h := range r.Log.All() {
		if firstSeen[h.Payload] {
			continue
		}
		firstSeen[h.Payload] = true
		k := h.Shard + "/" + h.Key
		if prev := byKey[k]; len(prev) > 0 {
			p := prev[len(prev)-1]
			if pos[p] > pos[h.Payload] {
				t.Errorf("key %s: %s first handled after %s, which comes later in the stream", h.Key, h.Payload, p)
			}
			if lastOf[p].At.After(h.At) {
				t.Errorf("key %s: %s handled again after %s, which comes later in the stream, had started", h.Key, p, h.Payload)
			}
		}
		byKey[k] = append(byKey[k], h.Payload)
	}
}

// attemptsAndCounts checks the Attempt and retry-count header of each
// handling.
func attemptsAndCounts(t *testing.T, hs []Handling, attempts []int, counts []string) {
	t.Helper()
	for i, h := range hs {
		if h.Attempt != attempts[i] || h.RetryCount != counts[i] {
			t.Errorf("handling %d of %s: attempt %d, retry count %q; want %d, %q", i, h.Payload, h.Attempt, h.RetryCount, attempts[i], counts[i])
		}
	}
}

// copies fails unless the source stream holds exactly the copies of payload
// with the retry counts given (and no other copies), and returns them.
func copies(t *testing.T, r *Result, payload string, counts ...string) []Copy {
	t.Helper()
	cs := r.Copies()
	var got []string
	for _, c := range cs {
		if c.Payload != payload {
			t.Errorf("unexpected copy of %s (retry count %s)", c.Payload, c.RetryCount)
			continue
		}
		got = append(got, c.RetryCount)
	}
	if !slices.Equal(got, counts) {
		t.Fatalf("copies of %s with retry counts %q, want %q", payload, got, counts)
	}
	return cs
}

func noCopies(t *testing.T, r *Result) {
	t.Helper()
	if cs := r.Copies(); len(cs) != 0 {
		t.Errorf("%d copies written, want none: %+v", len(cs), cs)
	}
}
