package soak

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fixture builds a Run by hand: processes with their log lines, produced
// records, windows. Times are seconds after t0.
type fixture struct {
	t0    time.Time
	run   *Run
	procs map[string]*Process
}

func newFixture() *fixture {
	return &fixture{
		t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		run: &Run{Seed: 7, Limits: Limits{LeaseDuration: 3 * time.Second, CheckpointInterval: time.Second,
			ShutdownTimeout: 5 * time.Second, MaxAttempts: 3, MaxHandler: 300 * time.Millisecond, FlapsPerMinute: 2}},
		procs: map[string]*Process{},
	}
}

func (f *fixture) at(sec float64) time.Time {
	return f.t0.Add(time.Duration(sec * float64(time.Second)))
}

// proc returns the worker name, creating it (stopped by the final SIGTERM
// at 1000 s, exit 0) on first use.
func (f *fixture) proc(name string) *Process {
	if p := f.procs[name]; p != nil {
		return p
	}
	p := &Process{Name: name, Mode: ModeECS, Exit: &Exit{Stop: StopFinal, Signalled: f.at(1000), Exited: f.at(1001), Bound: 20 * time.Second}}
	if name == "lambda" {
		p.Mode, p.Exit = ModeLambda, nil
	}
	f.procs[name] = p
	f.run.Processes = append(f.run.Processes, p)
	return p
}

func (f *fixture) log(name string, l Line) {
	p := f.proc(name)
	p.Lines = append(p.Lines, l)
}

func (f *fixture) take(name, shard string, sec float64) {
	f.log(name, Line{Time: f.at(sec), Msg: MsgLeaseTaken, ShardID: shard})
}

// handle logs a handler start at sec and its outcome dur seconds later.
func (f *fixture) handle(name, shard, seq, id string, attempt int, sec, dur float64, outcome string) {
	f.log(name, Line{Time: f.at(sec), Msg: MsgRecord, ShardID: shard, Seq: seq, ID: id, Attempt: attempt})
	f.log(name, Line{Time: f.at(sec + dur), Msg: MsgRecordOutcome, ShardID: shard, Seq: seq, ID: id, Attempt: attempt, Outcome: outcome})
}

func (f *fixture) produce(id, key string, kseq int, shard, seq string, sec float64) {
	f.run.Produced = append(f.run.Produced, Produced{Mode: ModeECS, ID: id, Key: key, KeySeq: kseq, Shard: shard, Seq: seq, Time: f.at(sec)})
}

func (f *fixture) window(k Kind, worker string, from, to float64) {
	f.run.Windows = append(f.run.Windows, Window{Kind: k, Worker: worker, Start: f.at(from), End: f.at(to)})
}

// violations returns the report's violations of check, as
// "count:cause" strings.
func violations(r *Report, check Check) []string {
	var out []string
	for _, f := range r.Violations() {
		if f.Check == check {
			out = append(out, fmt.Sprintf("%d:%s", f.Count, f.Cause))
		}
	}
	return out
}

// clean is a run without faults: two workers, two shards, each record
// produced, handled once and acked.
func clean() *fixture {
	f := newFixture()
	f.take("w1", "s0", 0)
	f.take("w2", "s1", 0)
	for i := range 10 {
		shard, w := "s0", "w1"
		if i%2 == 1 {
			shard, w = "s1", "w2"
		}
		id := fmt.Sprintf("k%d-%d", i%3, i)
		seq := fmt.Sprint(100 + i)
		f.produce(id, fmt.Sprintf("k%d", i%3), i, shard, seq, 1+float64(i)/10)
		f.handle(w, shard, seq, id, 1, 2+float64(i)/10, 0.05, "ack")
	}
	return f
}

func TestCheckClean(t *testing.T) {
	r := clean().run.Check()
	if r.Failed() {
		t.Fatalf("a clean run fails:\n%s", r)
	}
	if s := r.Stats[ModeECS]; s.Produced != 10 || s.Handled != 10 || s.Done != 10 || s.Starts != 10 {
		t.Errorf("stats %+v, want 10 produced, handled, started and done", s)
	}
	for _, want := range []string{"soak seed 7: PASS", "kill -9", "no fault", "total", "stall (ok)"} {
		if !strings.Contains(r.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
}

func TestCheckLost(t *testing.T) {
	f := clean()
	f.produce("never", "k9", 0, "s0", "500", 3)
	f.produce("failed", "k9", 1, "s0", "501", 3)
	f.handle("w1", "s0", "501", "failed", 1, 4, 0.1, "outage")
	f.produce("dead", "k8", 0, "s1", "502", 3)
	f.handle("w2", "s1", "502", "dead", 3, 4, 0.1, "outage")
	f.run.DeadLetters = append(f.run.DeadLetters, DeadLetter{Mode: ModeECS, ID: "dead", Attempts: 3})
	f.window(KindOutage, "", 3.5, 5)
	r := f.run.Check()
	var lost []string
	for _, v := range r.Violations() {
		if v.Check == CheckLost {
			lost = append(lost, v.ID+":"+string(v.Kinds[0]))
		}
	}
	if want := []string{"never:no fault", "failed:downstream outage"}; !slices.Equal(lost, want) {
		t.Errorf("lost %v, want %v:\n%s", lost, want, r)
	}
}

func TestCheckOverlap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(f *fixture)
		starts int // starts in the overlap episodes (from the first start of the intruder to the last overlapping start)
	}{
		{"paused worker resumes on its stale lease", func(f *fixture) {
			f.window(KindPause, "w1", 10, 19)
			f.take("w2", "s0", 14)
			f.handle("w2", "s0", "200", "b1", 1, 14.5, 0.01, "ack")
			f.handle("w1", "s0", "201", "a2", 1, 19.1, 0.01, "ack")
			f.handle("w1", "s0", "202", "a3", 1, 19.2, 0.01, "ack")
			f.handle("w2", "s0", "201", "a2", 1, 19.3, 0.01, "ack") // b resumes too
		}, 4},
		{"cut-off worker and the new owner alternate", func(f *fixture) {
			f.window(KindCutDynamoDB, "w1", 10, 20)
			f.take("w2", "s0", 14)
			for i := range 5 {
				f.handle("w2", "s0", fmt.Sprint(300+i), fmt.Sprint("b", i), 1, 14.5+float64(i), 0.01, "ack")
				f.handle("w1", "s0", fmt.Sprint(400+i), fmt.Sprint("a", i), 1, 14.6+float64(i), 0.01, "ack")
			}
		}, 10},
		{"hand-over and back", func(f *fixture) {
			f.log("w1", Line{Time: f.at(10), Msg: MsgHandedOver, ShardID: "s0"})
			f.take("w2", "s0", 10.1)
			f.handle("w2", "s0", "200", "b1", 1, 10.2, 0.01, "ack")
			f.log("w2", Line{Time: f.at(20), Msg: MsgHandedOver, ShardID: "s0"})
			f.take("w1", "s0", 20.1)
			f.handle("w1", "s0", "201", "a2", 1, 20.2, 0.01, "ack")
		}, 0},
		{"fenced: the old owner starts nothing after the take", func(f *fixture) {
			f.window(KindPause, "w1", 10, 19)
			f.take("w2", "s0", 14)
			f.handle("w2", "s0", "200", "b1", 1, 14.5, 0.01, "ack")
			f.take("w1", "s0", 30) // taken again later: a new tenure
			f.handle("w1", "s0", "201", "a2", 1, 30.1, 0.01, "ack")
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clean()
			tc.setup(f)
			r := f.run.Check()
			n, bad := r.Count(CheckOverlap)
			if n != tc.starts || bad != tc.starts {
				t.Errorf("overlapping starts %d (%d violations), want %d:\n%s", n, bad, tc.starts, r)
			}
			if tc.starts > 0 && !strings.Contains(r.String(), "FAIL") {
				t.Errorf("report does not fail:\n%s", r)
			}
		})
	}
}

func TestCheckOrder(t *testing.T) {
	f := clean()
	f.produce("o1", "ko", 1, "s0", "600", 3)
	f.produce("o2", "ko", 2, "s0", "601", 3)
	f.produce("o3", "ko", 3, "s0", "602", 3)
	f.handle("w1", "s0", "600", "o1", 1, 4, 1, "outage")   // ends at 5: copied
	f.handle("w1", "s0", "601", "o2", 1, 5, 0.1, "ack")    // after o1 ended: fine
	f.handle("w1", "s0", "602", "o3", 1, 5.05, 0.1, "ack") // before o2 ended: broken
	f.handle("w1", "s0", "700", "o1", 2, 6, 0.1, "ack")    // o1's copy: not in the order
	f.run.Stream = append(f.run.Stream, StreamRecord{Mode: ModeECS, Shard: "s0", Seq: "700", ID: "o1", RetryCount: 1})
	r := f.run.Check()
	if got := violations(r, CheckOrder); !slices.Equal(got, []string{"1:"}) {
		t.Errorf("order violations %v, want one:\n%s", got, r)
	}
	if !strings.Contains(r.String(), "o3 (key sequence 3) started") {
		t.Errorf("the report does not name o3:\n%s", r)
	}
}

func TestCheckDuplicates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fixture)
		cause string
		bad   bool
	}{
		{"in-process retry", func(f *fixture) {
			f.handle("w1", "s0", "100", "k0-0", 2, 5, 0.1, "ack")
		}, CauseInProcess, false},
		{"kill -9 within a checkpoint interval", func(f *fixture) {
			f.proc("w1").Exit = &Exit{Stop: StopKill, Signalled: f.at(3), Exited: f.at(3.01), Bound: 5 * time.Second, Code: -1, Signal: "killed"}
			f.take("w2", "s0", 6.5)
			f.handle("w2", "s0", "100", "k0-0", 1, 7, 0.1, "ack")
		}, CauseKill, false},
		{"kill -9 long after", func(f *fixture) {
			f.proc("w1").Exit = &Exit{Stop: StopKill, Signalled: f.at(30), Exited: f.at(30.01), Bound: 5 * time.Second, Code: -1, Signal: "killed"}
			f.take("w2", "s0", 33.5)
			f.handle("w2", "s0", "100", "k0-0", 1, 34, 0.1, "ack")
		}, CauseKill, true},
		{"kill -9 long after, behind a record whose copy could not be written", func(f *fixture) {
			f.window(KindErrorsKinesis, "", 10, 20)
			f.proc("w1").Exit = &Exit{Stop: StopKill, Signalled: f.at(30), Exited: f.at(30.01), Bound: 5 * time.Second, Code: -1, Signal: "killed"}
			f.take("w2", "s0", 33.5)
			f.handle("w2", "s0", "100", "k0-0", 1, 34, 0.1, "ack")
		}, CauseKillHeld, false},
		{"SIGTERM", func(f *fixture) {
			f.proc("w1").Exit = &Exit{Stop: StopSIGTERM, Signalled: f.at(3), Exited: f.at(4), Bound: 20 * time.Second}
			f.take("w2", "s0", 4)
			f.handle("w2", "s0", "100", "k0-0", 1, 5, 0.1, "ack")
		}, CauseSIGTERM, true},
		{"planned move", func(f *fixture) {
			f.log("w1", Line{Time: f.at(3), Msg: MsgHandedOver, ShardID: "s0"})
			f.take("w2", "s0", 3.1)
			f.handle("w2", "s0", "100", "k0-0", 1, 3.2, 0.1, "ack")
		}, CausePlanned, true},
		{"pause: in flight", func(f *fixture) {
			f.window(KindPause, "w1", 2.05, 9)
			f.take("w2", "s0", 6)
			f.handle("w2", "s0", "100", "k0-0", 1, 6.1, 0.1, "ack")
		}, CausePause, false},
		{"pause: started after resuming", func(f *fixture) {
			f.window(KindPause, "w1", 5, 12)
			f.take("w2", "s0", 9)
			f.handle("w1", "s0", "900", "late", 1, 12.1, 0.1, "ack")
			f.handle("w2", "s0", "900", "late", 1, 12.5, 0.1, "ack")
		}, CauseAfterFence, true},
		{"cut from DynamoDB: before the fence", func(f *fixture) {
			f.window(KindCutDynamoDB, "w1", 1.5, 10)
			f.take("w2", "s0", 6)
			f.handle("w2", "s0", "100", "k0-0", 1, 6.1, 0.1, "ack")
		}, CauseCutDynamoDB, false},
		{"cut from DynamoDB: after the lease went stale", func(f *fixture) {
			f.window(KindCutDynamoDB, "w1", 3, 12)
			f.take("w2", "s0", 7)
			f.handle("w1", "s0", "900", "late", 1, 8, 0.1, "ack")
			f.handle("w2", "s0", "900", "late", 1, 8.5, 0.1, "ack")
		}, CauseAfterFence, true},
		{"lease lost under DynamoDB errors", func(f *fixture) {
			f.window(KindErrorsDynamoDB, "", 2, 8)
			f.log("w1", Line{Time: f.at(5), Msg: "consumer: shard dropped: lease lost", ShardID: "s0"})
			f.take("w2", "s0", 6)
			f.handle("w2", "s0", "100", "k0-0", 1, 6.1, 0.1, "ack")
		}, CauseLeaseLost, true},
		{"fenced under DynamoDB errors, its lease writes failing", func(f *fixture) {
			f.window(KindErrorsDynamoDB, "", 2, 8)
			f.log("w1", Line{Time: f.at(3.5), Msg: MsgRenewFailed, ShardID: "s0"})
			f.log("w1", Line{Time: f.at(4.5), Msg: MsgCheckpointFailed, ShardID: "s0"})
			f.log("w1", Line{Time: f.at(5), Msg: MsgFenced, ShardID: "s0"})
			f.take("w2", "s0", 6)
			f.handle("w2", "s0", "100", "k0-0", 1, 6.1, 0.1, "ack")
		}, CauseFencedErrors, false},
		{"fenced under DynamoDB errors, no lease write of the shard failed", func(f *fixture) {
			f.window(KindErrorsDynamoDB, "", 2, 8)
			f.log("w1", Line{Time: f.at(4.5), Msg: MsgCheckpointFailed, ShardID: "s1"})
			f.log("w1", Line{Time: f.at(5), Msg: MsgFenced, ShardID: "s0"})
			f.take("w2", "s0", 6)
			f.handle("w2", "s0", "100", "k0-0", 1, 6.1, 0.1, "ack")
		}, CauseLeaseLost, true},
		{"fenced with no DynamoDB errors", func(f *fixture) {
			f.log("w1", Line{Time: f.at(4.5), Msg: MsgRenewFailed, ShardID: "s0"})
			f.log("w1", Line{Time: f.at(5), Msg: MsgFenced, ShardID: "s0"})
			f.take("w2", "s0", 6)
			f.handle("w2", "s0", "100", "k0-0", 1, 6.1, 0.1, "ack")
		}, CauseLeaseLost, true},
		{"fenced under DynamoDB errors, started long before them", func(f *fixture) {
			f.window(KindErrorsDynamoDB, "", 20, 28)
			f.log("w1", Line{Time: f.at(24.5), Msg: MsgRenewFailed, ShardID: "s0"})
			f.log("w1", Line{Time: f.at(25), Msg: MsgFenced, ShardID: "s0"})
			f.take("w2", "s0", 26)
			f.handle("w2", "s0", "100", "k0-0", 1, 26.1, 0.1, "ack")
		}, CauseLeaseLost, true},
		{"unexplained", func(f *fixture) {
			f.take("w2", "s0", 6)
			f.handle("w2", "s0", "100", "k0-0", 1, 6.1, 0.1, "ack")
		}, CauseUnexplained, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clean()
			tc.setup(f)
			r := f.run.Check()
			var got []string
			for _, x := range r.Findings {
				if x.Check == CheckDuplicate {
					got = append(got, fmt.Sprintf("%s/%v", x.Cause, x.Violation))
				}
			}
			if want := []string{fmt.Sprintf("%s/%v", tc.cause, tc.bad)}; !slices.Equal(got, want) {
				t.Errorf("duplicates %v, want %v:\n%s", got, want, r)
			}
		})
	}
}

func TestCheckLambdaDuplicates(t *testing.T) {
	f := newFixture()
	for i, id := range []string{"a", "b", "c"} {
		f.run.Produced = append(f.run.Produced, Produced{Mode: ModeLambda, ID: id, Key: id, Shard: "s0", Seq: fmt.Sprint(10 + i), Time: f.at(0)})
	}
	f.run.Invocations = []Invocation{
		{Start: f.at(1), End: f.at(2), Shard: "s0", FirstSeq: "10", LastSeq: "12", Reported: "11"},
		{Start: f.at(3), End: f.at(4), Shard: "s0", FirstSeq: "11", LastSeq: "12"},
		{Start: f.at(5), End: f.at(6), Shard: "s0", FirstSeq: "10", LastSeq: "10"},
	}
	f.handle("lambda", "s0", "10", "a", 1, 1.1, 0.1, "ack")
	f.handle("lambda", "s0", "11", "b", 1, 1.2, 0.1, "retry") // its copy failed
	f.handle("lambda", "s0", "12", "c", 1, 1.3, 0.1, "ack")
	f.handle("lambda", "s0", "11", "b", 1, 3.1, 0.1, "ack") // again: documented
	f.handle("lambda", "s0", "12", "c", 1, 3.2, 0.1, "ack") // again: documented
	f.handle("lambda", "s0", "10", "a", 1, 5.1, 0.1, "ack") // again: a was checkpointed
	r := f.run.Check()
	var got []string
	for _, x := range r.Findings {
		if x.Check == CheckDuplicate {
			got = append(got, fmt.Sprintf("%s:%s/%v", x.ID, x.Cause, x.Violation))
		}
	}
	want := []string{"a:" + CauseUnexplained + "/true", "b:" + CauseLambda + "/false", "c:" + CauseLambda + "/false"}
	if !slices.Equal(got, want) {
		t.Errorf("duplicates %v, want %v:\n%s", got, want, r)
	}
}

func TestCheckCopies(t *testing.T) {
	f := clean()
	f.produce("x", "kx", 0, "s0", "800", 3)
	f.handle("w1", "s0", "800", "x", 1, 4, 0.1, "outage")
	f.handle("w1", "s0", "801", "x", 2, 5, 0.1, "ack")
	f.produce("d", "kd", 0, "s0", "810", 3)
	f.run.Produced[len(f.run.Produced)-1].Delayed = true
	f.handle("w1", "s0", "810", "d", 1, 4, 0.1, "retry_after")
	f.handle("w1", "s0", "811", "d", 2, 11, 0.1, "ack")
	f.run.Stream = append(f.run.Stream,
		StreamRecord{Mode: ModeECS, Shard: "s0", Seq: "801", ID: "x", RetryCount: 1},
		StreamRecord{Mode: ModeECS, Shard: "s0", Seq: "802", ID: "x", RetryCount: 1}, // a second copy chain
		StreamRecord{Mode: ModeECS, Shard: "s0", Seq: "811", ID: "d", RetryCount: 1},
		StreamRecord{Mode: ModeECS, Shard: "s0", Seq: "812", ID: "d", RetryCount: 1}, // forwarded twice
	)
	r := f.run.Check()
	var got []string
	for _, x := range r.Findings {
		if x.Check == CheckCopy {
			got = append(got, fmt.Sprintf("%s:%s/%v", x.ID, x.Cause, x.Violation))
		}
	}
	if want := []string{"d:" + CauseDelayTwice + "/false", "x:" + CauseUnexplained + "/true"}; !slices.Equal(got, want) {
		t.Errorf("copy findings %v, want %v:\n%s", got, want, r)
	}
}

// TestCheckCopiesAfterAnUnansweredWrite: a copy written twice after its
// first write ran out of its deadline (the service may have applied it) is
// documented, and so is one whose write got no answer at first and then
// succeeded in the same round (the line's unanswered attribute); after a
// write refused with an AWS error answer it is not.
func TestCheckCopiesAfterAnUnansweredWrite(t *testing.T) {
	const (
		failed    = "lambdaadapter: writing the copy failed; the write is made again"
		succeeded = "lambdaadapter: writing the copy failed at first without an answer, then succeeded; it may have been written twice"
	)
	for _, tc := range []struct {
		msg        string
		err        string
		unanswered bool
		want       string
	}{
		{failed, `publish: put to stream "s": gave up: context deadline exceeded: operation error Kinesis: PutRecords, https response error StatusCode: 0, RequestID: , canceled, context deadline exceeded`, false, "x:" + CauseWriteAgain + "/false"},
		{failed, `publish: put to stream "s": operation error Kinesis: PutRecords, https response error StatusCode: 400, RequestID: 1, ProvisionedThroughputExceededException: Rate exceeded`, false, "x:" + CauseUnexplained + "/true"},
		{failed, `publish: put to stream "s": gave up while throttled: ProvisionedThroughputExceededException: Rate exceeded`, true, "x:" + CauseWriteAgain + "/false"},
		{succeeded, "", true, "x:" + CauseWriteAgain + "/false"},
	} {
		f := clean()
		f.produce("x", "kx", 0, "s0", "800", 3)
		f.handle("w1", "s0", "800", "x", 1, 4, 0.1, "outage")
		// The line as the engine writes it, through ParseLine.
		raw, err := json.Marshal(map[string]any{"time": f.at(4.2), "msg": tc.msg, "shard_id": "s0", "sequence_number": "800",
			"partition_key": "kx", "attempt": 1, "error": tc.err, "unanswered": tc.unanswered})
		if err != nil {
			t.Fatal(err)
		}
		l, ok := ParseLine(raw)
		if !ok || !Relevant(l.Msg) {
			t.Fatalf("line %s: parsed %v, relevant %v", raw, ok, Relevant(l.Msg))
		}
		f.log("w1", l)
		f.handle("w1", "s0", "801", "x", 2, 5, 0.1, "ack")
		f.run.Stream = append(f.run.Stream,
			StreamRecord{Mode: ModeECS, Shard: "s0", Seq: "801", ID: "x", RetryCount: 1},
			StreamRecord{Mode: ModeECS, Shard: "s0", Seq: "802", ID: "x", RetryCount: 1},
		)
		r := f.run.Check()
		var got []string
		for _, x := range r.Findings {
			if x.Check == CheckCopy {
				got = append(got, fmt.Sprintf("%s:%s/%v", x.ID, x.Cause, x.Violation))
			}
		}
		if !slices.Equal(got, []string{tc.want}) {
			t.Errorf("error %q: copy findings %v, want [%s]", tc.err, got, tc.want)
		}
	}
}

func TestCheckFlapping(t *testing.T) {
	f := clean()
	for i, w := range []string{"w1", "w2", "w1", "w2"} {
		f.take(w, "s5", 100+float64(i)*10)
	}
	f.window(KindKill, "w9", 200, 200)
	for i, w := range []string{"w1", "w2", "w1", "w2"} {
		f.take(w, "s6", 201+float64(i))
	}
	r := f.run.Check()
	var got []string
	for _, x := range r.Violations() {
		if x.Check == CheckFlap {
			got = append(got, fmt.Sprintf("%s:%d", x.Shard, x.Count))
		}
	}
	if want := []string{"s5:3"}; !slices.Equal(got, want) {
		t.Errorf("flapping %v, want %v (s6's changes are within a kill's window):\n%s", got, want, r)
	}
}

func TestCheckExits(t *testing.T) {
	f := clean()
	bound := 20 * time.Second
	f.proc("ok-term").Exit = &Exit{Stop: StopSIGTERM, Signalled: f.at(5), Exited: f.at(6), Bound: bound}
	f.proc("ok-kill").Exit = &Exit{Stop: StopKill, Signalled: f.at(5), Exited: f.at(5), Bound: bound, Code: -1, Signal: "killed"}
	f.proc("bad-code").Exit = &Exit{Stop: StopSIGTERM, Signalled: f.at(5), Exited: f.at(6), Bound: bound, Code: 1, Stderr: "bootstrap: boom"}
	f.proc("slow").Exit = &Exit{Stop: StopFinal, Signalled: f.at(5), Exited: f.at(30), Bound: bound}
	f.proc("hung").Exit = &Exit{Stop: StopFinal, Signalled: f.at(5), Bound: bound, Code: -1, Signal: "killed"}
	f.proc("own").Exit = &Exit{Stop: StopNone, Exited: f.at(7), Code: 2}
	f.proc("noexit").Exit = nil
	r := f.run.Check()
	var got []string
	for _, x := range r.Violations() {
		if x.Check == CheckExit {
			got = append(got, x.Workers[0])
		}
	}
	if want := []string{"bad-code", "slow", "hung", "own", "noexit"}; !slices.Equal(got, want) {
		t.Errorf("bad exits %v, want %v:\n%s", got, want, r)
	}
}

func TestCheckStall(t *testing.T) {
	f := clean()
	f.window(KindKill, "w1", 10, 10)
	f.produce("late", "kl", 0, "s0", "900", 9)
	f.handle("w2", "s0", "900", "late", 1, 60, 0.1, "ack")
	r := f.run.Check()
	if n, bad := r.Count(CheckStall); bad == 0 {
		t.Errorf("a record done 50 s after the last fault passes the stall check (%d):\n%s", n, r)
	}
	f = clean()
	f.window(KindKill, "w1", 10, 10)
	f.produce("late", "kl", 0, "s0", "900", 9)
	f.handle("w2", "s0", "900", "late", 1, 14, 0.1, "ack")
	if r := f.run.Check(); r.Failed() {
		t.Errorf("a record done 4 s after the last fault fails the stall check:\n%s", r)
	}
}

func TestCheckHarnessErrorsFail(t *testing.T) {
	f := clean()
	f.run.HarnessErrors = []string{"producer: PutRecords failed"}
	if r := f.run.Check(); !r.Failed() || !strings.Contains(r.String(), "producer: PutRecords failed") {
		t.Errorf("a harness error does not fail the run:\n%s", r)
	}
}

func TestParseLine(t *testing.T) {
	l, ok := ParseLine([]byte(`{"time":"2026-01-02T03:04:05.123456789Z","level":"DEBUG","msg":"record","shard_id":"s1","sequence_number":"42","partition_key":"k","attempt":2,"id":"x"}`))
	if !ok || l.Msg != MsgRecord || l.ShardID != "s1" || l.Seq != "42" || l.Key != "k" || l.Attempt != 2 || l.ID != "x" || l.Time.Nanosecond() != 123456789 {
		t.Errorf("ECS line: %+v, %v", l, ok)
	}
	l, ok = ParseLine([]byte(`{"timestamp":"2026-01-02T03:04:05Z","level":"DEBUG","message":"record outcome","requestId":"r","outcome":"ack","id":"y"}`))
	if !ok || l.Msg != MsgRecordOutcome || l.Outcome != "ack" || l.ID != "y" || l.Time.IsZero() {
		t.Errorf("Lambda line: %+v, %v", l, ok)
	}
	for _, bad := range []string{``, `START RequestId: x`, `{"msg":"no time"}`, `{"time":"2026-01-02T03:04:05Z"}`} {
		if _, ok := ParseLine([]byte(bad)); ok {
			t.Errorf("ParseLine(%q) ok", bad)
		}
	}
}

// TestCheckStallDurableDelay: a durable delay whose message a stopped
// worker held comes again after the delay queue's visibility timeout; that
// is no stall, but the same lateness without a stop is.
func TestCheckStallDurableDelay(t *testing.T) {
	for _, stopped := range []bool{true, false} {
		f := clean()
		f.run.Limits.DurableDelay, f.run.Limits.DelayVisibility = 6*time.Second, 60*time.Second
		f.produce("d", "kd", 0, "s0", "900", 9)
		f.run.Produced[len(f.run.Produced)-1].Delayed = true
		f.handle("w1", "s0", "900", "d", 1, 10, 0.01, "retry_after")
		if stopped {
			f.window(KindSIGTERM, "w1", 12, 13)
		} else {
			f.window(KindSlow, "", 12, 13)
		}
		f.handle("w2", "s0", "901", "d", 2, 76, 0.01, "ack")
		f.run.Stream = append(f.run.Stream, StreamRecord{Mode: ModeECS, Shard: "s0", Seq: "901", ID: "d", RetryCount: 1})
		r := f.run.Check()
		if _, bad := r.Count(CheckStall); (bad > 0) == stopped {
			t.Errorf("stopped %v: stall violations %d:\n%s", stopped, bad, r)
		}
	}
}

var (
	flagRecheck = flag.String("soak.recheck", "", "TestRecheck: check the run saved in this run.json (a soak run's -soak.out directory holds one)")
	flagShow    = flag.String("soak.show", "", "TestRecheck: also print every finding whose check or cause contains this")
)

// TestRecheck checks a saved run again (to work on the checker without
// running the soak again): go test -run TestRecheck -soak.recheck=DIR/run.json.
func TestRecheck(t *testing.T) {
	if *flagRecheck == "" {
		t.Skip("give -soak.recheck=path/to/run.json")
	}
	b, err := os.ReadFile(*flagRecheck)
	if err != nil {
		t.Fatal(err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	// The processes' logs next to run.json (-soak.out keeps them) are read
	// again, so that a checker that reads more lines applies to old runs.
	for i := range r.Processes {
		p := r.Processes[i]
		logs, err := os.ReadFile(filepath.Join(filepath.Dir(*flagRecheck), p.Name+".log"))
		if err != nil {
			continue
		}
		var lines []Line
		for line := range bytes.Lines(logs) {
			if l, ok := ParseLine(bytes.TrimSpace(line)); ok && Relevant(l.Msg) {
				lines = append(lines, l)
			}
		}
		if len(lines) >= len(p.Lines) { // not a log of another shape
			p.Lines = lines
		}
	}
	rep := r.Check()
	fmt.Println(rep)
	if *flagShow != "" {
		for _, f := range rep.Findings {
			if strings.Contains(string(f.Check), *flagShow) || strings.Contains(f.Cause, *flagShow) {
				fmt.Printf("%s %s %v %v x%d: %s\n", f.Check, f.Cause, f.Violation, f.Kinds, f.Count, f.Detail)
			}
		}
	}
	if rep.Failed() {
		t.Errorf("%d findings break a promise", len(rep.Violations()))
	}
}

func TestCheckFence(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fixture)
		stale int
	}{
		{"start after resuming from a pause", func(f *fixture) {
			f.window(KindPause, "w1", 10, 14)
			f.handle("w1", "s0", "900", "x", 1, 14.1, 0.01, "ack")
			f.handle("w1", "s0", "901", "y", 1, 14.2, 0.01, "ack")
		}, 2},
		{"start after a pause on a lease taken again", func(f *fixture) {
			f.window(KindPause, "w1", 10, 14)
			f.take("w1", "s0", 15)
			f.handle("w1", "s0", "900", "x", 1, 15.1, 0.01, "ack")
		}, 0},
		{"start early in a cut from DynamoDB", func(f *fixture) {
			f.window(KindCutDynamoDB, "w1", 10, 20)
			f.handle("w1", "s0", "900", "x", 1, 12, 0.01, "ack")
		}, 0},
		{"start a lease duration into a cut from DynamoDB, and after it", func(f *fixture) {
			f.window(KindCutDynamoDB, "w1", 10, 20)
			f.handle("w1", "s0", "900", "x", 1, 13.5, 0.01, "ack")
			f.handle("w1", "s0", "901", "y", 1, 25, 0.01, "ack")
		}, 2},
		{"a cut from Kinesis fences nothing", func(f *fixture) {
			f.window(KindCutKinesis, "w1", 10, 20)
			f.handle("w1", "s0", "900", "x", 1, 15, 0.01, "ack")
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clean()
			for _, id := range []string{"x", "y"} {
				f.run.Produced = append(f.run.Produced, Produced{Mode: ModeECS, ID: id, Key: id, Shard: "s0", Seq: map[string]string{"x": "900", "y": "901"}[id], Time: f.at(9)})
			}
			tc.setup(f)
			r := f.run.Check()
			if n, bad := r.Count(CheckFence); n != tc.stale || bad != tc.stale {
				t.Errorf("stale starts %d (%d violations), want %d:\n%s", n, bad, tc.stale, r)
			}
		})
	}
}

// TestCheckPlannedMoveWithRecordsInFlight: a planned move whose shard had
// records still in flight after the shutdown timeout (logged) leaves the
// checkpoint before them, so the records after them come again: documented
// ("behind an unsettled record"), also outside any fault window. Seed 7
// counted 876 such duplicates as a broken promise.
func TestCheckPlannedMoveWithRecordsInFlight(t *testing.T) {
	for _, inFlight := range []bool{true, false} {
		f := clean()
		f.take("w1", "s0", 1)
		f.produce("x", "kx", 0, "s0", "900", 9)
		f.handle("w1", "s0", "900", "x", 1, 10, 0.1, "ack")
		f.log("w1", Line{Time: f.at(20), Msg: MsgHandingOver, ShardID: "s0", To: "w2"})
		if inFlight {
			f.log("w1", Line{Time: f.at(25), Msg: MsgStillInFlight, ShardID: "s0"})
		}
		f.log("w1", Line{Time: f.at(40), Msg: MsgHandedOver, ShardID: "s0", To: "w2"})
		f.take("w2", "s0", 41)
		f.handle("w2", "s0", "900", "x", 1, 42, 0.1, "ack")
		r := f.run.Check()
		var got []string
		for _, x := range r.Findings {
			if x.Check == CheckDuplicate {
				got = append(got, fmt.Sprintf("%s/%v", x.Cause, x.Violation))
			}
		}
		want := CausePlannedHeld + "/false"
		if !inFlight {
			want = CausePlanned + "/true"
		}
		if !slices.Equal(got, []string{want}) {
			t.Errorf("records in flight logged %v: duplicate findings %v, want [%s]", inFlight, got, want)
		}
	}
}
