package consumer

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// malformedRows is a lease store with rows it cannot decode, as
// lease.DynamoDB reports them (lease.Snapshot.Malformed): bad, by stream,
// their errors by key. Ensure of such a row's key fails, as DynamoDB's
// does (the row exists; reading it fails).
type malformedRows struct {
	lease.Store
	mu  sync.Mutex
	bad map[string]map[string]error
}

// rows returns a copy of stream's bad rows.
func (m *malformedRows) rows(stream string) map[string]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.bad[stream])
}

// repair makes stream's rows readable.
func (m *malformedRows) repair(stream string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.bad, stream)
}

func (m *malformedRows) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	snap, err := m.Store.Snapshot(ctx, stream)
	if bad := m.rows(stream); err == nil && len(bad) > 0 {
		snap.Malformed = bad
	}
	return snap, err
}

func (m *malformedRows) SnapshotStreams(ctx context.Context, streams ...string) (map[string]lease.Snapshot, error) {
	snaps, err := m.Store.(streamsSnapshotter).SnapshotStreams(ctx, streams...)
	for s, snap := range snaps {
		if bad := m.rows(s); len(bad) > 0 {
			snap.Malformed = bad
			snaps[s] = snap
		}
	}
	return snaps, err
}

func (m *malformedRows) Ensure(ctx context.Context, k lease.Key, parents []string) (lease.Lease, error) {
	if err := m.rows(k.Stream)[k.String()]; err != nil {
		return lease.Lease{}, err
	}
	return m.Store.Ensure(ctx, k, parents)
}

// TestMalformedRowsSkipped: rows of the lease table that cannot be read (a
// lease row with a counter of the wrong type, a row whose key names another
// stream) do not stop the balancing of their stream nor of the others: the
// group's leader plans every other lease, the shard whose row is bad is not
// read (nor given a new row) until the row is repaired, and each bad row is
// logged once, not every round.
func TestMalformedRowsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := awsfake.NewKinesis()
		k := &stream{Kinesis: fk}
		streams := []string{"a", "b"}
		for _, s := range streams {
			fk.CreateStream(s, 2)
		}
		badShard := lease.Key{Stream: "b", ShardID: shardID(1)}.String()
		store := &malformedRows{Store: lease.NewMemory(), bad: map[string]map[string]error{
			"a": {"x:shardId-9": errors.New(`lease: malformed row "x:shardId-9": the key does not name the stream "a" of its attributes`)},
			"b": {badShard: errors.New(`lease: malformed row "` + badShard + `": attribute leaseCounter is *types.AttributeValueMemberS, want N`)},
		}}
		recs := map[string]*recorder{"a": newRecorder(), "b": newRecorder()}
		logs := newAttrLog(slog.LevelWarn)
		w := startGroup(t, k, store, "w0", streams, recs, AssignByLoad, func(c *Config) { c.Logger = slog.New(logs) })
		for _, s := range streams {
			fk.PutTo(s, shardID(0), "k", []byte(s+"-0"))
			fk.PutTo(s, shardID(1), "k", []byte(s+"-1"))
		}
		waitFor(t, "every readable shard read", func() bool {
			return recs["a"].count() == 2 && recs["b"].on(shardID(0)) == 1
		})
		time.Sleep(time.Minute) // many balancing rounds and listings
		if got := w.cs[1].Owned(); len(got) != 1 || got[0] != shardID(0) {
			t.Errorf("stream b: held %v, want only %s (the other's row is malformed)", got, shardID(0))
		}
		if n := recs["b"].on(shardID(1)); n != 0 {
			t.Errorf("%d records of the shard whose row is malformed handled, want 0", n)
		}
		for _, key := range []string{"x:shardId-9", badShard} {
			if n := logs.count("cannot be read", "lease_key="+key, "malformed_rows=1"); n != 1 {
				t.Errorf("row %s logged %d times, want once: %q", key, n, logs.lines())
			}
		}
		// Repaired (here: the row written anew), the shard is read.
		store.repair("b")
		waitFor(t, "the repaired shard read", func() bool { return recs["b"].on(shardID(1)) == 1 })
		w.stop()
	})
}
