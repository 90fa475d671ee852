//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lease"
)

// The tests below run bootstrap -mode=ecs workers that read several streams
// in one process (LAMBDAADAPTER_STREAM with comma-separated names, issue 30
// point 4): one lease table serves every stream, and the group's leader
// plans the leases of all of them over every worker at once. They use the
// helpers of ecs_test.go; a worker's LAMBDAADAPTER_STREAM is the list as
// given to ecsStartWorker. The demonstration handler's "record" lines do not
// name the stream, so the records' ids carry it (one id prefix per stream).

// streamsSettleTimeout bounds waiting for the leases of several streams to
// reach a wanted distribution: longer than ecsSettleTimeout, as leases move
// one hand-over at a time and a loaded machine slows every round.
const streamsSettleTimeout = 60 * time.Second

// streamsLeases reads the leases of every stream of streams, keyed by
// "stream:shardId" (lease.Key.String), so that the ecs helpers that take
// leases by id (ecsOwnership, ecsDescribeLeases) see them all at once.
func streamsLeases(t *testing.T, store *lease.DynamoDB, streams ...string) map[string]lease.Lease {
	t.Helper()
	all := map[string]lease.Lease{}
	for _, s := range streams {
		for _, l := range ecsLeases(t, store, s) {
			all[l.Key.String()] = l
		}
	}
	return all
}

// streamsSnapshot reads the rows of one stream: leases, workers and the
// leader row.
func streamsSnapshot(t *testing.T, store *lease.DynamoDB, stream string) lease.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), sdkTimeout)
	defer cancel()
	snap, err := store.Snapshot(ctx, stream)
	if err != nil {
		t.Fatalf("snapshot of %s: %v", stream, err)
	}
	return snap
}

// streamsOf returns the streams (the part of each key before ':') of keys,
// sorted and each once.
func streamsOf(keys []string) []string {
	var out []string
	for _, k := range keys {
		s, _, _ := strings.Cut(k, ":")
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// streamsBalanced reports whether ls has want leases, every one held by one
// of names and none free, with the counts of names within one of each
// other (byCount) or each at least one, and describes what it saw.
func streamsBalanced(ls map[string]lease.Lease, want int, byCount bool, names ...string) (bool, string) {
	c, free := ecsOwnerCounts(ls, names...)
	held := 0
	for _, n := range c {
		held += n
	}
	state := fmt.Sprintf("counts %v of %v, %d free, %d rows (want %d)", c, names, free, len(ls), want)
	ok := len(ls) == want && free == 0 && held == want
	if byCount {
		ok = ok && slices.Max(c)-slices.Min(c) <= 1
	} else {
		ok = ok && slices.Min(c) >= 1
	}
	return ok, state
}

// streamsBalance returns the LAMBDAADAPTER_BALANCE setting of workers that
// balance by count or by load, and how the test names that state.
func streamsBalance(byCount bool) (setting, state string) {
	if byCount {
		return "LAMBDAADAPTER_BALANCE=count", "balanced by count"
	}
	return "LAMBDAADAPTER_BALANCE=load", "each holding leases"
}

// streamsLeaderMode returns the owner and the mode (its checkpoint: e.g.
// "plan:leader:a,b,c") of the group's leader row, the row of the first
// stream, or "", "" when there is none.
func streamsLeaderMode(t *testing.T, store *lease.DynamoDB, first string) (owner, mode string) {
	t.Helper()
	snap := streamsSnapshot(t, store, first)
	if snap.Leader == nil {
		return "", ""
	}
	return snap.Leader.Owner, snap.Leader.Checkpoint
}

// streamsFeeders starts one feeder per stream, writing records whose ids
// start with the stream's prefix (p0, p1, ...), batch records every
// interval, until stopped.
func streamsFeeders(t *testing.T, env *standin.Env, streams []string, batch int, every time.Duration) []*ecsFeeder {
	t.Helper()
	fs := make([]*ecsFeeder, len(streams))
	for i, s := range streams {
		fs[i] = ecsStartFeeder(t, env, s, fmt.Sprintf("p%d", i), batch, every, 0)
	}
	return fs
}

// streamsStopFeeders stops the feeders and returns the ids each wrote, and
// all of them.
func streamsStopFeeders(t *testing.T, fs []*ecsFeeder) (per [][]string, all []string) {
	t.Helper()
	for _, f := range fs {
		ids := f.stop(t)
		if len(ids) == 0 {
			t.Fatal("a feeder wrote no record: the test proves nothing for its stream")
		}
		per = append(per, ids)
		all = append(all, ids...)
	}
	return per, all
}

// streamsLeaseLine is one lease line of a worker's log: the lease's key
// ("stream:shardId", with the stream the line names) and its fields.
type streamsLeaseLine struct {
	key, shardID, from, to, stop string
}

// streamsLeaseLog returns the lines the worker logged with the message
// msg ("consumer: lease taken", "consumer: lease released", ...), in order.
func streamsLeaseLog(w *ecsWorker, msg string) []streamsLeaseLine {
	w.mu.Lock()
	raw := slices.Clone(w.raw)
	w.mu.Unlock()
	var out []streamsLeaseLine
	for _, line := range raw {
		var l struct {
			Msg     string `json:"msg"`
			Stream  string `json:"stream"`
			ShardID string `json:"shard_id"`
			From    string `json:"from"`
			To      string `json:"to"`
			Stop    string `json:"stop"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			key := lease.Key{Stream: l.Stream, ShardID: l.ShardID}.String()
			out = append(out, streamsLeaseLine{key: key, shardID: l.ShardID, from: l.From, to: l.To, stop: l.Stop})
		}
	}
	return out
}

// streamsTaken returns the leases the worker logged taking ("consumer:
// lease taken"), by "stream:shardId", with where each came from ("free",
// "handed over", ...): the last take of each.
func streamsTaken(w *ecsWorker) map[string]string {
	taken := map[string]string{}
	for _, l := range streamsLeaseLog(w, ecsMsgLeaseTaken) {
		taken[l.key] = l.from
	}
	return taken
}

// streamsGivenBack fails the test for a lease k that the stopped worker
// released in its graceful stop yet owns after it exited: a leader gave it
// back to it (a take in its name) from a read that still had its worker
// rows, and nobody reads it until it expires. A worker's stop resigns and
// removes its worker rows before it releases its leases so that this
// cannot happen (consumer.stopShards; before 2026-12-06 it removed them
// last, and this test met it once in 8 SIGTERMs).
func streamsGivenBack(t *testing.T, stopped *ecsWorker, k string, others []*ecsWorker) {
	t.Helper()
	_, shard, _ := strings.Cut(k, ":")
	var givers []string
	for _, w := range others {
		for _, l := range streamsLeaseLog(w, "consumer: lease given") {
			// A lease of another stream than the leader's first is named
			// stream:shardId.
			if l.to == stopped.name && (l.shardID == shard || l.shardID == k) {
				givers = append(givers, w.name)
			}
		}
	}
	t.Errorf("%s released %s in its graceful stop, yet owns it after it exited: a leader gave it back to it "+
		"from a read that still had its worker rows (%v logged giving a %s to %s); the lease waits for its expiry (%v) before another worker takes it",
		stopped.name, k, givers, shard, stopped.name, ecsLeaseDuration)
}

// streamsWritten returns the ids of the records the feeder wrote so far,
// while it goes on writing.
func streamsWritten(f *ecsFeeder) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ids)
}

// streamsAwaitFed waits until each feeder wrote at least n more records
// than it had when called, so that every stream carries records through
// what the test does next.
func streamsAwaitFed(t *testing.T, fs []*ecsFeeder, n int, ws ...*ecsWorker) {
	t.Helper()
	from := make([]int, len(fs))
	for i, f := range fs {
		from[i] = f.count()
	}
	ecsEventually(t, ecsSettleTimeout, fmt.Sprintf("%d more records written to each stream", n), func() (bool, string) {
		ecsCheckAlive(t, ws...)
		var got []int
		ok := true
		for i, f := range fs {
			got = append(got, f.count()-from[i])
			ok = ok && f.count()-from[i] >= n
		}
		return ok, fmt.Sprint(got)
	})
}

// TestECSStreams runs workers over three streams of 3, 2 and 1 shards, each
// with LAMBDAADAPTER_STREAM="s1,s2,s3", while a feeder writes to each
// stream (100 records/s each, so the one shard of s3 carries three times
// what a shard of s1 does). Two workers hold the six leases, whatever their
// streams; the group's leader row names the three streams it plans. A third
// worker joins and gets leases, moved by hand-over with no record handled
// twice. Then the worker holding leases of the most streams is stopped with
// SIGTERM: it exits 0 with every lease of every stream released and its
// worker rows gone, and the two others take its leases. Every record of
// every stream is handled, none twice. Once every worker stopped,
// bootstrap leases -stream s1,s2,s3 shows each stream's leases under its
// heading, free and caught up.
//
// By count (LAMBDAADAPTER_BALANCE=count) the leases are balanced over the
// workers across the streams: 3/3, then 2/2/2, then 3/3 again. By load (the
// default) the demonstration handler's load is far below the 5 % of a CPU
// for which leases move by load (consumer minGap), so only a worker that
// holds none is sure to get some: the subtest asks each worker to hold at
// least one lease, and every lease to be held.
func TestECSStreams(t *testing.T) {
	t.Run("by_count", func(t *testing.T) { ecsStreams(t, true) })
	t.Run("by_load", func(t *testing.T) { ecsStreams(t, false) })
}

func ecsStreams(t *testing.T, byCount bool) {
	began := time.Now()
	env := standin.Require(t)
	s1, _ := env.NewStream(t, 3)
	s2, _ := env.NewStream(t, 2)
	s3, _ := env.NewStream(t, 1)
	streams := []string{s1, s2, s3}
	const total = 6
	list := strings.Join(streams, ",")
	balance, balanced := streamsBalance(byCount)
	table, store := ecsNewLeaseTable(t, env, false)
	feeders := streamsFeeders(t, env, streams, 10, 100*time.Millisecond)

	names := []string{"w1", "w2"}
	var ws []*ecsWorker
	for _, n := range names {
		ws = append(ws, ecsStartWorker(t, env, n, list, table, balance))
	}
	took := ecsEventually(t, streamsSettleTimeout, "two workers "+balanced+" over the three streams", func() (bool, string) {
		ecsCheckAlive(t, ws...)
		ls := streamsLeases(t, store, streams...)
		ok, state := streamsBalanced(ls, total, byCount, names...)
		return ok, state + ecsDescribeLeases(ls)
	})
	t.Logf("two workers %s after %v: %v", balanced, took, ecsOwnership(streamsLeases(t, store, streams...)))
	// Every stream has its rows, one per shard, and both workers are
	// registered in each.
	for i, want := range []int{3, 2, 1} {
		snap := streamsSnapshot(t, store, streams[i])
		if len(snap.Leases) != want {
			t.Errorf("stream %s has %d lease rows, want %d", streams[i], len(snap.Leases), want)
		}
		var owners []string
		for _, w := range snap.Workers {
			owners = append(owners, w.Owner)
		}
		if !slices.Equal(owners, names) {
			t.Errorf("stream %s has worker rows %v, want %v", streams[i], owners, names)
		}
	}
	// One leader plans the three streams: it says so in the leader row of
	// the first.
	wantMode := "plan:leader:" + list
	ecsEventually(t, streamsSettleTimeout, "the leader row naming the three streams", func() (bool, string) {
		owner, mode := streamsLeaderMode(t, store, s1)
		return mode == wantMode && slices.Contains(names, owner), fmt.Sprintf("owner %q, mode %q, want %q", owner, mode, wantMode)
	})
	for _, s := range streams[1:] {
		if snap := streamsSnapshot(t, store, s); snap.Leader != nil {
			t.Errorf("stream %s has a leader row of its own (owner %q, mode %q); want only the group's, in %s", s, snap.Leader.Owner, snap.Leader.Checkpoint, s1)
		}
	}
	streamsAwaitFed(t, feeders, 50, ws...)

	// A third worker joins: the leases of all streams are planned over the
	// three workers, and the moves are hand-overs.
	marks := make([]int, len(ws))
	for i, w := range ws {
		marks[i] = len(w.log())
	}
	names = append(names, "w3")
	ws = append(ws, ecsStartWorker(t, env, "w3", list, table, balance))
	var history []string
	took = ecsEventually(t, streamsSettleTimeout, "three workers "+balanced+" over the three streams", func() (bool, string) {
		ecsCheckAlive(t, ws...)
		ls := streamsLeases(t, store, streams...)
		ok, state := streamsBalanced(ls, total, byCount, names...)
		c, _ := ecsOwnerCounts(ls, names...)
		if s := fmt.Sprint(c); len(history) == 0 || history[len(history)-1] != s {
			history = append(history, s)
		}
		return ok, state + ecsDescribeLeases(ls)
	})
	joined := ecsOwnership(streamsLeases(t, store, streams...))
	t.Logf("three workers %s after %v (counts seen %v): %v", balanced, took, history, joined)
	// All six leases were held when w3 joined: each of its leases came to it
	// by a hand-over (a transfer with the checkpoint), of whichever stream.
	ecsEventually(t, streamsSettleTimeout, "w3 reading each lease it holds", func() (bool, string) {
		ecsCheckAlive(t, ws...)
		taken := streamsTaken(ws[2])
		for _, k := range joined["w3"] {
			if _, ok := taken[k]; !ok {
				return false, fmt.Sprintf("w3 holds %v, logged taking %v", joined["w3"], taken)
			}
		}
		return true, ""
	})
	for k, from := range streamsTaken(ws[2]) {
		if from != "handed over" {
			t.Errorf("w3 took %s from %q, want every lease handed over to it (all were held when it joined)", k, from)
		}
	}
	t.Logf("w3 took %v, each handed over, from streams %v", joined["w3"], streamsOf(joined["w3"]))
	streamsAwaitFed(t, feeders, 100, ws...)
	if d, dup := ecsDuplicates(ecsHandledCounts(ws...)); d != 0 {
		// A planned move hands the lease over with its last checkpoint
		// after the records in flight settled: nothing comes twice.
		t.Errorf("%d records handled twice while leases of three streams moved to a joining worker, e.g. %v; want none", d, dup)
	}

	// SIGTERM to the worker whose leases span the most streams (one always
	// spans two: the first stream's three leases cannot fit in one worker's
	// two).
	vi := 0
	for i, n := range names {
		if len(streamsOf(joined[n])) > len(streamsOf(joined[names[vi]])) {
			vi = i
		}
	}
	victim := ws[vi]
	held := joined[victim.name]
	if byCount && len(streamsOf(held)) < 2 {
		t.Fatalf("test precondition: no worker holds leases of two streams: %v", joined)
	}
	survivors := slices.Delete(slices.Clone(ws), vi, vi+1)
	survivorNames := slices.Delete(slices.Clone(names), vi, vi+1)
	victim.terminate(t)
	// Its graceful stop released every lease it held, of every stream (or
	// handed it over, had one been asked for)...
	released := map[string]bool{}
	for _, msg := range []string{"consumer: lease released", "consumer: lease handed over"} {
		for _, l := range streamsLeaseLog(victim, msg) {
			released[l.key] = true
		}
	}
	for _, k := range held {
		if !released[k] {
			t.Errorf("%s held %s when it got SIGTERM, but its graceful stop did not release it (nor hand it over)", victim.name, k)
		}
	}
	// ... so none is its own in the table now (a leader that gave one back
	// to it fails the test: streamsGivenBack).
	ls := streamsLeases(t, store, streams...)
	for _, k := range held {
		if l := ls[k]; l.Owner == victim.name {
			if !released[k] {
				t.Errorf("after its SIGTERM %s still owns %s, which it did not release:%s", victim.name, k, ecsDescribeLeases(ls))
				continue
			}
			streamsGivenBack(t, victim, k, survivors)
		}
	}
	for _, s := range streams {
		for _, w := range streamsSnapshot(t, store, s).Workers {
			if w.Owner == victim.name {
				t.Errorf("after its SIGTERM %s still has a worker row in %s", victim.name, s)
			}
		}
	}
	took = ecsEventually(t, streamsSettleTimeout, "the two others "+balanced+" after the SIGTERM", func() (bool, string) {
		ecsCheckAlive(t, survivors...)
		ls := streamsLeases(t, store, streams...)
		ok, state := streamsBalanced(ls, total, byCount, survivorNames...)
		return ok, state + ecsDescribeLeases(ls)
	})
	t.Logf("%s stopped with SIGTERM holding %v (streams %d); %v taken by %v %v later: %v",
		victim.name, held, len(streamsOf(held)), held, survivorNames, took.Round(time.Millisecond), ecsOwnership(streamsLeases(t, store, streams...)))
	streamsAwaitFed(t, feeders, 100, survivors...)

	per, ids := streamsStopFeeders(t, feeders)
	took = ecsAwaitHandled(t, ids, ecsHandledTimeout, ws...)
	counts := ecsHandledCounts(ws...)
	for i, s := range streams {
		if n, first := ecsMissingIDs(per[i], counts); n != 0 {
			t.Errorf("stream %s: %d records not handled, first %v", s, n, first)
		}
	}
	d, dup := ecsDuplicates(counts)
	t.Logf("%d records over three streams (%d, %d, %d), all handled (%v after the writing stopped), %d duplicates (e.g. %v)",
		len(ids), len(per[0]), len(per[1]), len(per[2]), took, d, dup)
	if d != 0 {
		t.Errorf("%d records handled twice through planned moves and a SIGTERM, e.g. %v; want none", d, dup)
	}
	for _, w := range survivors {
		w.terminate(t)
	}
	// Every lease of every stream is free now, at a checkpoint the graceful
	// stops wrote after the last record: bootstrap leases with the three
	// streams shows each under its heading, caught up.
	streamsCheckLeasesCommand(t, env, table, streams, []int{3, 2, 1}, ws...)
	t.Logf("%s took %v", t.Name(), time.Since(began).Round(time.Second))
}

// streamsCheckLeasesCommand runs bootstrap leases -stream with the streams
// comma-separated and checks that it prints each stream's leases under a
// heading naming it, in order, the group's leader row on the first: shards[i]
// lines for stream i, each free (once the workers ws stopped) and caught up.
func streamsCheckLeasesCommand(t *testing.T, env *standin.Env, table string, streams []string, shards []int, ws ...*ecsWorker) {
	t.Helper()
	list := strings.Join(streams, ",")
	out, err := ecsBootstrapCommand(t, env, "leases", "-table", table, "-stream", list)
	if err != nil {
		t.Fatalf("bootstrap leases -table %s -stream %s: %v\n%s", table, list, err, out)
	}
	t.Logf("bootstrap leases -table %s -stream %s:\n%s", table, list, out)
	section := -1
	lines := make([][]string, len(streams)) // the shard lines of each stream
	for _, line := range strings.Split(out, "\n") {
		if h, ok := strings.CutPrefix(line, "stream "); ok {
			section++
			if section >= len(streams) {
				t.Fatalf("bootstrap leases printed a heading too many, %q:\n%s", line, out)
			}
			name, _, _ := strings.Cut(h, ":")
			if name != streams[section] {
				t.Errorf("heading %d is %q, want one naming %s:\n%s", section+1, line, streams[section], out)
			}
			if section == 0 && !strings.Contains(line, "plan:leader:"+list) {
				t.Errorf("the first stream's heading %q does not show the group's leader row (plan:leader:%s)", line, list)
			}
			continue
		}
		if strings.HasPrefix(line, "shardId-") {
			if section < 0 {
				t.Fatalf("bootstrap leases printed a shard before any heading:\n%s", out)
			}
			lines[section] = append(lines[section], line)
		}
	}
	if section != len(streams)-1 {
		t.Fatalf("bootstrap leases printed %d headings, want %d:\n%s", section+1, len(streams), out)
	}
	for i, ls := range lines {
		if len(ls) != shards[i] {
			t.Errorf("bootstrap leases shows %d shards under stream %s, want %d:\n%s", len(ls), streams[i], shards[i], out)
		}
		for _, l := range ls {
			f := strings.Fields(l)
			if len(f) < 2 || !strings.Contains(l, "caught up") {
				t.Errorf("bootstrap leases shows %q under stream %s, want the shard caught up", l, streams[i])
				continue
			}
			if f[1] == "(free)" {
				continue
			}
			// Owned by a stopped worker: given back to it after it released
			// it (streamsGivenBack), or never released.
			k := lease.Key{Stream: streams[i], ShardID: f[0]}.String()
			j := slices.IndexFunc(ws, func(w *ecsWorker) bool { return w.name == f[1] })
			if j < 0 || !slices.ContainsFunc(streamsLeaseLog(ws[j], "consumer: lease released"), func(r streamsLeaseLine) bool { return r.key == k }) {
				t.Errorf("bootstrap leases shows %q under stream %s, want the shard free: every worker stopped gracefully", l, streams[i])
				continue
			}
			streamsGivenBack(t, ws[j], k, slices.Delete(slices.Clone(ws), j, j+1))
		}
	}
}

// TestECSStreamAdded is a stream added in a rolling deployment: one worker
// still runs with LAMBDAADAPTER_STREAM="s1" alone, another already with
// "s1,s2". Both streams are read in full while they run together, the
// second stream only by the worker that lists it; then the first worker is
// replaced (SIGTERM) by one with "s1,s2" too, whereupon the group's leader
// plans both streams over both workers (2/2; the workers balance by count,
// as the demonstration's light load would not move leases by load). No
// record is lost or handled twice.
func TestECSStreamAdded(t *testing.T) {
	began := time.Now()
	env := standin.Require(t)
	s1, _ := env.NewStream(t, 2)
	s2, _ := env.NewStream(t, 2)
	streams := []string{s1, s2}
	table, store := ecsNewLeaseTable(t, env, false)
	feeders := streamsFeeders(t, env, streams, 10, 100*time.Millisecond)

	balance, _ := streamsBalance(true)
	old := ecsStartWorker(t, env, "old", s1, table, balance)
	both := ecsStartWorker(t, env, "new", s1+","+s2, table, balance)
	ws := []*ecsWorker{old, both}
	took := ecsEventually(t, streamsSettleTimeout, "every lease of both streams held, the second stream's by the worker that lists it", func() (bool, string) {
		ecsCheckAlive(t, ws...)
		ls := streamsLeases(t, store, streams...)
		o := ecsOwnership(ls)
		var bad []string
		for _, k := range o["old"] {
			if !strings.HasPrefix(k, s1+":") {
				bad = append(bad, k)
			}
		}
		if len(bad) > 0 {
			t.Fatalf("the worker that reads only %s holds %v of another stream:%s", s1, bad, ecsDescribeLeases(ls))
		}
		return len(ls) == 4 && len(o[""]) == 0 && len(o["old"])+len(o["new"]) == 4, fmt.Sprint(o) + ecsDescribeLeases(ls)
	})
	t.Logf("both streams held after %v: %v", took, ecsOwnership(streamsLeases(t, store, streams...)))
	// One of them leads. The old worker's leader row plans its one stream
	// ("plan:leader"): the new worker then balances the second stream for
	// itself and gets its share of the first from the leader (1/1 of s1).
	// The new worker's row plans both streams, giving the old worker
	// leases of the first stream only: 2/2, the old one holding s1's.
	var owner string
	ecsEventually(t, streamsSettleTimeout, "a leader of the group while both lists run", func() (bool, string) {
		ecsCheckAlive(t, ws...)
		o, mode := streamsLeaderMode(t, store, s1)
		owner = o
		return (o == "old" && mode == "plan:leader") || (o == "new" && mode == "plan:leader:"+s1+","+s2), fmt.Sprintf("owner %q, mode %q", o, mode)
	})
	took = ecsEventually(t, streamsSettleTimeout, "the leases as "+owner+"'s leader row plans them", func() (bool, string) {
		ecsCheckAlive(t, ws...)
		ls := streamsLeases(t, store, streams...)
		in1 := ecsOwnership(streamsLeases(t, store, s1))
		in2 := ecsOwnership(streamsLeases(t, store, s2))
		state := fmt.Sprintf("%s: %v, %s: %v", s1, in1, s2, in2) + ecsDescribeLeases(ls)
		if len(in2["old"]) > 0 {
			t.Fatalf("the worker that reads only %s holds leases of %s: %s", s1, s2, state)
		}
		if len(in2["new"]) != 2 {
			return false, state
		}
		if owner == "old" {
			return len(in1["old"]) == 1 && len(in1["new"]) == 1, state
		}
		return len(in1["old"]) == 2, state
	})
	t.Logf("while both lists run, %s leads; the leases settled %v later: %v", owner, took, ecsOwnership(streamsLeases(t, store, streams...)))
	streamsAwaitFed(t, feeders, 100, ws...)
	for i, s := range streams {
		ids := streamsWritten(feeders[i])
		took := ecsAwaitHandled(t, ids, ecsHandledTimeout, ws...)
		t.Logf("stream %s: the %d records written so far handled (%v)", s, len(ids), took)
	}

	// The rolling deployment goes on: the old worker is replaced by one
	// reading both streams.
	old.terminate(t)
	renewed := ecsStartWorker(t, env, "renewed", s1+","+s2, table, balance)
	ws = append(ws, renewed)
	live := []*ecsWorker{both, renewed}
	wantMode := "plan:leader:" + s1 + "," + s2
	took = ecsEventually(t, streamsSettleTimeout, "both workers at 2/2 over both streams, planned by one leader", func() (bool, string) {
		ecsCheckAlive(t, live...)
		ls := streamsLeases(t, store, streams...)
		ok, state := streamsBalanced(ls, 4, true, "new", "renewed")
		owner, mode := streamsLeaderMode(t, store, s1)
		return ok && mode == wantMode, fmt.Sprintf("%s; leader row owner %q mode %q (want %q)", state, owner, mode, wantMode) + ecsDescribeLeases(ls)
	})
	t.Logf("after the replacement, 2/2 under one leader after %v: %v", took, ecsOwnership(streamsLeases(t, store, streams...)))
	streamsAwaitFed(t, feeders, 30, live...)

	per, ids := streamsStopFeeders(t, feeders)
	took = ecsAwaitHandled(t, ids, ecsHandledTimeout, ws...)
	counts := ecsHandledCounts(ws...)
	for i, s := range streams {
		if n, first := ecsMissingIDs(per[i], counts); n != 0 {
			t.Errorf("stream %s: %d records not handled, first %v", s, n, first)
		}
	}
	// The second stream's records were handled only by the workers that
	// list it.
	for _, r := range old.records() {
		if strings.HasPrefix(r.ID, "p1-") {
			t.Errorf("the worker reading only %s handled record %s of %s", s1, r.ID, s2)
			break
		}
	}
	d, dup := ecsDuplicates(counts)
	t.Logf("%d records over two streams (%d, %d), all handled (%v after the writing stopped), %d duplicates (e.g. %v)",
		len(ids), len(per[0]), len(per[1]), took, d, dup)
	if d != 0 {
		t.Errorf("%d records handled twice in a rolling deployment that added a stream, e.g. %v; want none", d, dup)
	}
	for _, w := range live {
		w.terminate(t)
	}
	streamsCheckLeasesCommand(t, env, table, streams, []int{2, 2}, ws...)
	t.Logf("%s took %v", t.Name(), time.Since(began).Round(time.Second))
}
