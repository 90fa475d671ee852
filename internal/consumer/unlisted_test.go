package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// TestLeaderPlansOtherStreamsWhileItsOwnIsUnlisted (fault: the group's
// leader skipped the balancing round of every stream while its own stream
// was not listed): the primary's stream cannot be listed (ListShards fails
// every time), and the leader row says the leader plans both streams, so
// the other stream's member follows the leader and takes nothing by itself.
// The leader plans the other stream all the same: its leases are held and
// its records read. Alike when the primary's lease rows cannot be read
// (every Scan of its stream fails).
func TestLeaderPlansOtherStreamsWhileItsOwnIsUnlisted(t *testing.T) {
	for _, fault := range []string{"listing", "rows"} {
		t.Run(fault, func(t *testing.T) { leaderPlansOthers(t, fault) })
	}
}

// snapshotFails fails every read of one stream's rows while fail is set.
type snapshotFails struct {
	lease.Store
	stream string
	fail   atomic.Bool
}

func (s *snapshotFails) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	if stream == s.stream && s.fail.Load() {
		return lease.Snapshot{}, errTest
	}
	return s.Store.Snapshot(ctx, stream)
}

func leaderPlansOthers(t *testing.T, fault string) {
	synctest.Test(t, func(t *testing.T) {
		fk := awsfake.NewKinesis()
		k := &listFails{stream: &stream{Kinesis: fk}, name: "a"}
		mem := &snapshotFails{Store: lease.NewMemory(), stream: "a"}
		streams := []string{"a", "b"}
		for _, s := range streams {
			fk.CreateStream(s, 2)
		}
		recs := map[string]*recorder{"a": newRecorder(), "b": newRecorder()}
		// The fleet's last leader planned both streams, and stopped.
		old := startGroup(t, k, mem, "w9", streams, recs, AssignByLoad)
		waitFor(t, "the old worker holds every lease, planning both streams", func() bool {
			l, _ := mem.Get(context.Background(), lease.LeaderKey("a"))
			return old.owned() == 4 && l.Checkpoint == "plan:leader:a,b"
		})
		old.stop()
		if fault == "listing" {
			k.n.Store(1 << 40) // a's listing fails from now on
		} else {
			mem.fail.Store(true)
		}
		w := startGroup(t, k, mem, "w0", streams, recs, AssignByLoad)
		b := w.cs[1]
		waitFor(t, "stream b's leases held", func() bool { return len(b.Owned()) == 2 })
		fk.PutTo("b", shardID(0), "k", []byte("b-after"))
		fk.PutTo("b", shardID(1), "k", []byte("b-after"))
		waitFor(t, "stream b read", func() bool { return recs["b"].times()["b-after"] == 2 })
		if l, _ := mem.Get(context.Background(), lease.LeaderKey("a")); l.Owner != "w0" {
			t.Errorf("leader row owned by %q, want w0 leading", l.Owner)
		}
		w.stop()
	})
}
