//go:build integration

package integration

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/integration/standin"
)

// ecsOverlaps returns each record a worker started on a shard after
// another worker had started one of that shard since this worker's previous
// start, without this worker taking the lease again in between: an
// interleaving a1 < b1 < a2 of handler starts of two workers on one shard
// within one tenure, which self-fencing rules out (a handler already
// running when its worker was paused may finish; nothing may start after
// another worker took the shard over). Each is described for a failure
// message.
func ecsOverlaps(ws ...*ecsWorker) []string {
	type event struct {
		at     time.Time
		worker string
		id     string
		taken  bool // a "lease taken" line, not a record
	}
	byShard := map[string][]event{}
	for _, w := range ws {
		for _, l := range w.log() {
			switch l.Msg {
			case ecsMsgRecord:
				byShard[l.ShardID] = append(byShard[l.ShardID], event{l.Time, w.name, l.ID, false})
			case ecsMsgLeaseTaken:
				byShard[l.ShardID] = append(byShard[l.ShardID], event{l.Time, w.name, "", true})
			}
		}
	}
	var out []string
	for shard, es := range byShard {
		slices.SortStableFunc(es, func(a, b event) int { return a.at.Compare(b.at) })
		// cut[w] is the start by another worker that came after w's last
		// start in its current tenure, if any.
		cut := map[string]*event{}
		for i := range es {
			e := &es[i]
			if e.taken {
				delete(cut, e.worker) // a new tenure
				continue
			}
			if c := cut[e.worker]; c != nil {
				out = append(out, fmt.Sprintf("%s: %s started %s at %s after %s had started %s at %s",
					shard, e.worker, e.id, e.at.Format(time.StampMicro), c.worker, c.id, c.at.Format(time.StampMicro)))
				delete(cut, e.worker)
			}
			for _, w := range ws {
				if w.name != e.worker && cut[w.name] == nil {
					cut[w.name] = e
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestECSPausedWorkerFencesItself (self-fencing): a worker paused with
// SIGSTOP for two lease durations while it reads a shard with steady
// traffic loses the lease to the other worker, and once it resumes
// (SIGCONT) it starts no record of that shard: no two workers hand records
// of one shard to handlers at the same time. Nothing is lost; the records
// the paused worker had handled since its last checkpoint come again
// (counted, allowed).
func TestECSPausedWorkerFencesItself(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 1)
	table, store := ecsNewLeaseTable(t, env, false)
	// One partition key, and a handler slower than the traffic: the
	// worker always has records waiting for its lane, as a busy consumer
	// does, when it is paused.
	feeder := ecsStartFeederOf(t, env, stream, 5, 100*time.Millisecond, 0, func(from, n int) []ecsEntry {
		es := ecsNumbered("p", from, n)
		for i := range es {
			es[i].key, es[i].sleepMS = "one-key", 25
		}
		return es
	})
	a := ecsStartWorker(t, env, "A", stream, table)
	ecsEventually(t, ecsSettleTimeout, "A handles records", func() (bool, string) {
		ecsCheckAlive(t, a)
		return len(a.records()) > 20, fmt.Sprint(len(a.records()))
	})
	b := ecsStartWorker(t, env, "B", stream, table)
	time.Sleep(2 * ecsLeaseDuration) // B is known, and leaves A its lease
	if n := len(b.records()); n != 0 {
		t.Fatalf("B handled %d records while A held the lease", n)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	ecsEventually(t, ecsSettleTimeout, "B takes the lease over", func() (bool, string) {
		ecsCheckAlive(t, b)
		o := ecsOwnership(ecsLeases(t, store, stream))
		return len(o["B"]) == 1 && len(b.records()) > 0, fmt.Sprint(o)
	})
	if rest := 2*ecsLeaseDuration - time.Since(paused); rest > 0 {
		time.Sleep(rest)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	time.Sleep(2 * ecsLeaseDuration) // A runs again, with whatever it had in hand
	ids := feeder.stop(t)
	ecsAwaitHandled(t, ids, ecsHandledTimeout, a, b)
	ecsCheckAlive(t, a, b)
	if over := ecsOverlaps(a, b); len(over) > 0 {
		t.Errorf("%d records started by a worker after another had taken its shard over, e.g.:\n%v", len(over), over[:min(len(over), 10)])
	}
	var afterResume int
	for _, r := range a.records() {
		if r.Time.After(resumed) {
			afterResume++
		}
	}
	if afterResume > 0 {
		t.Errorf("A started %d records after it resumed, want 0 (its lease went stale while it was paused)", afterResume)
	}
	d, dup := ecsDuplicates(ecsHandledCounts(a, b))
	t.Logf("paused %v; %d records, %d handled twice (the paused worker's since its last checkpoint), e.g. %v",
		resumed.Sub(paused).Round(time.Millisecond), len(ids), d, dup)
	a.terminate(t)
	b.terminate(t)
}
