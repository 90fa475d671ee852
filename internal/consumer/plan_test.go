package consumer

import (
	"fmt"
	"testing"

	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/lease"
)

// TestPlanBalance: balancing's plan, as a pure function of one read of the
// table, for the situations the fleet meets: a start, a worker joining,
// dead workers and expired leases, hand-over requests either way, rows
// gone or owned elsewhere, trimmed shards and children waiting for their
// parents.
func TestPlanBalance(t *testing.T) {
	// row is a lease row of shard i: owner "" (free), the handoff asked,
	// and its checkpoint.
	row := func(i int, owner, handoff, checkpoint string, parents ...int) lease.Lease {
		l := lease.Lease{Key: lease.Key{Stream: testStream, ShardID: shardID(i)}, Owner: owner, Handoff: handoff, Checkpoint: checkpoint}
		for _, p := range parents {
			l.ParentShardIDs = append(l.ParentShardIDs, shardID(p))
		}
		return l
	}
	workers := func(owners ...string) []lease.Worker {
		var ws []lease.Worker
		for _, o := range owners {
			ws = append(ws, lease.Worker{Stream: testStream, Owner: o})
		}
		return ws
	}
	ids := func(ls []lease.Lease) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Key.ShardID)
		}
		return out
	}
	type want struct {
		lose, handOver, adopt, take, request, cleanup, dead []string
		want, target                                        int
	}
	tests := []struct {
		name    string
		rows    []lease.Lease
		workers []lease.Worker
		listed  []int // shard numbers listed (default: those with rows)
		held    []int
		expired []int
		dead    []string
		want    want
	}{
		{
			name: "alone at start: takes every free lease",
			rows: []lease.Lease{row(0, "", "", ""), row(1, "", "", ""), row(2, "", "", "")},
			want: want{take: []string{shardID(0), shardID(1), shardID(2)}, want: 3, target: 3},
		},
		{
			name:    "second worker: takes its share of free leases, asks for nothing",
			rows:    []lease.Lease{row(0, "b", "", ""), row(1, "", "", ""), row(2, "", "", ""), row(3, "b", "", "")},
			workers: workers("b"),
			want:    want{take: []string{shardID(1), shardID(2)}, want: 2, target: 2},
		},
		{
			name:    "joining a busy worker: asks it for half",
			rows:    []lease.Lease{row(0, "b", "", ""), row(1, "b", "", ""), row(2, "b", "", ""), row(3, "b", "", "")},
			workers: workers("b"),
			want:    want{request: []string{shardID(0), shardID(1)}, target: 2},
		},
		{
			name:    "requests already made count",
			rows:    []lease.Lease{row(0, "b", "a", ""), row(1, "b", "", ""), row(2, "b", "", ""), row(3, "b", "", "")},
			workers: workers("b"),
			want:    want{request: []string{shardID(1)}, target: 2},
		},
		{
			name:    "no request from a worker at the share when one below (6 shards, 4 workers: 2,2,1,1)",
			rows:    []lease.Lease{row(0, "b", "", ""), row(1, "b", "", ""), row(2, "c", "", ""), row(3, "c", "", ""), row(4, "d", "", ""), row(5, "a", "", "")},
			workers: workers("b", "c", "d"),
			held:    []int{5},
			want:    want{target: 2},
		},
		{
			name:    "dead worker: its expired leases are taken, its row removed",
			rows:    []lease.Lease{row(0, "dead", "", ""), row(1, "dead", "", ""), row(2, "b", "", ""), row(3, "b", "", "")},
			workers: workers("b", "dead"),
			expired: []int{0, 1},
			dead:    []string{"dead"},
			want:    want{take: []string{shardID(0), shardID(1)}, want: 2, dead: []string{"dead"}, target: 2},
		},
		{
			name: "held shards: lost to another owner, row gone, hand-over asked, handed to it",
			rows: []lease.Lease{row(0, "b", "", ""), row(1, "a", "b", ""), row(2, "a", "", "")},
			held: []int{0, 1, 3},
			want: want{lose: []string{shardID(0), shardID(3)}, handOver: []string{shardID(1)}, adopt: []string{shardID(2)}, target: 2},
		},
		{
			name:   "trimmed shards: finished or with started children are cleaned, others wait; a trimmed parent counts as done",
			rows:   []lease.Lease{row(0, "", "", lease.ShardEnd), row(1, "", "", "49"), row(2, "", "", "50"), row(3, "", "", "", 0), row(4, "", "", "", 1), row(5, "", "", "x", 2)},
			listed: []int{3, 4, 5},
			want:   want{cleanup: []string{shardID(0), shardID(2)}, take: []string{shardID(3), shardID(4), shardID(5)}, want: 3, target: 3},
		},
		{
			name:   "a child waits for a listed parent that has not ended",
			rows:   []lease.Lease{row(0, "b", "", "42"), row(1, "", "", "", 0), row(2, "", "", "", 0)},
			listed: []int{0, 1, 2},
			want:   want{target: 1},
		},
		{
			name:    "a shard newer than the listing is left for the next one",
			rows:    []lease.Lease{row(0, "", "", ""), row(1, "", "", "")},
			listed:  []int{0},
			workers: workers(),
			want:    want{take: []string{shardID(0)}, want: 1, target: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := planInput{me: "a", snap: lease.Snapshot{Leases: tt.rows, Workers: tt.workers}, held: map[string]bool{}, expired: map[string]bool{}, dead: map[string]bool{},
				view: view{listed: map[string]kinesistypes.Shard{}, byID: map[string]lease.Lease{}}}
			listed := tt.listed
			if listed == nil {
				for _, l := range tt.rows {
					var i int
					fmt.Sscanf(l.Key.ShardID, "shardId-%d", &i)
					listed = append(listed, i)
				}
			}
			for _, i := range listed {
				in.view.listed[shardID(i)] = kinesistypes.Shard{}
				in.view.maxListed = max(in.view.maxListed, shardID(i))
			}
			for _, l := range tt.rows {
				in.view.byID[l.Key.ShardID] = l
			}
			for _, i := range tt.held {
				in.held[shardID(i)] = true
			}
			for _, i := range tt.expired {
				in.expired[shardID(i)] = true
			}
			for _, o := range tt.dead {
				in.dead[o] = true
			}
			p := planBalance(in)
			got := want{lose: p.lose, adopt: ids(p.adopt), take: ids(p.take), cleanup: ids(p.cleanup), want: p.want, target: p.target}
			for _, a := range p.requests(p.want) {
				got.request = append(got.request, ids(a.leases[:a.n])...)
			}
			for _, h := range p.handOver {
				got.handOver = append(got.handOver, h.row.Key.ShardID)
			}
			for _, w := range p.dead {
				got.dead = append(got.dead, w.Owner)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanRequestsSpread: workers joining a fleet of equally busy workers
// do not all ask the same one first (it would be drained below its share
// and ask in turn: moves beyond the fewest).
func TestPlanRequestsSpread(t *testing.T) {
	var rows []lease.Lease
	live := map[string]int{}
	for o := range 10 {
		owner := fmt.Sprintf("busy-%d", o)
		for i := range 4 {
			rows = append(rows, lease.Lease{Key: lease.Key{Stream: testStream, ShardID: shardID(o*4 + i)}, Owner: owner})
		}
		live[owner] = 4
	}
	first := map[string]int{}
	for j := range 10 {
		me := fmt.Sprintf("joiner-%d", j)
		l := map[string]int{me: 0}
		for o, n := range live {
			l[o] = n
		}
		asks := planRequests(me, rows, l, func(lease.Lease) bool { return false }, 3, 0)
		if len(asks) == 0 {
			t.Fatalf("%s asks nothing", me)
		}
		first[asks[0].owner]++
	}
	if len(first) < 4 {
		t.Errorf("10 joiners ask first only %d distinct workers (%v), want them spread", len(first), first)
	}
}

// TestPlanRequestsAfterFailedTakes: takes that fail (other workers were
// first, as at a fleet's start) leave the worker below its share: it asks
// for hand-overs in the same round, as many as the takes fell short.
func TestPlanRequestsAfterFailedTakes(t *testing.T) {
	var rows []lease.Lease
	for i := range 4 {
		rows = append(rows, lease.Lease{Key: lease.Key{Stream: testStream, ShardID: shardID(i)}, Owner: "b"})
	}
	for i := 4; i < 6; i++ {
		rows = append(rows, lease.Lease{Key: lease.Key{Stream: testStream, ShardID: shardID(i)}})
	}
	in := planInput{me: "a", snap: lease.Snapshot{Leases: rows, Workers: []lease.Worker{{Stream: testStream, Owner: "b"}}},
		view: view{listed: map[string]kinesistypes.Shard{}, byID: map[string]lease.Lease{}}}
	for _, l := range rows {
		in.view.listed[l.Key.ShardID] = kinesistypes.Shard{}
		in.view.byID[l.Key.ShardID] = l
		in.view.maxListed = max(in.view.maxListed, l.Key.ShardID)
	}
	p := planBalance(in)
	if p.target != 3 || p.want != 2 {
		t.Fatalf("target %d, want %d; want 3 and 2", p.target, p.want)
	}
	count := func(asks []ask) (n int) {
		for _, a := range asks {
			n += a.n
		}
		return n
	}
	if n := count(p.requests(2)); n != 1 {
		t.Errorf("both takes made: %d requests, want 1", n)
	}
	if n := count(p.requests(0)); n != 2 {
		// b holds 4 > 3: one request brings it to the share; a, still two
		// below it, asks b at the share for one more.
		t.Errorf("no take made: %d requests, want 2", n)
	}
}
