package scalesim

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/internal/consumer"
	"github.com/shardsettle/lambdaadapter/lease"
)

// Call is a lease-store call the simulation counts.
type Call int

// The lease-store calls, writes first.
const (
	Ensure Call = iota
	Take
	Renew
	Checkpoint
	Release
	Transfer
	RequestHandoff
	Delete
	Heartbeat
	RemoveWorker
	Snapshot
	List
	Get
	Owned
	numCalls
)

// numWrites is how many of the calls are writes (Ensure to RemoveWorker).
const numWrites = int(Snapshot)

var callNames = [numCalls]string{
	Ensure: "ensure", Take: "take", Renew: "renew", Checkpoint: "checkpoint", Release: "release",
	Transfer: "transfer", RequestHandoff: "request-handoff", Delete: "delete", Heartbeat: "heartbeat",
	RemoveWorker: "remove-worker", Snapshot: "snapshot", List: "list", Get: "get", Owned: "owned",
}

// String names the call as the tables do.
func (c Call) String() string {
	if c < 0 || c >= numCalls {
		return "call?"
	}
	return callNames[c]
}

// Write reports whether the call writes to the store.
func (c Call) Write() bool { return int(c) < numWrites }

// Counts are lease-store calls by kind, as the store saw them (a killed
// worker's calls never reach it).
type Counts struct {
	// Calls counts every call that reached the store; Refused those whose
	// condition failed (lease.ErrLeaseLost).
	Calls, Refused [numCalls]int64
	// RowsRead counts the rows Snapshot and List returned (a DynamoDB Scan
	// reads them all), the leader row included; Owned's index entries are
	// not rows and are not counted.
	RowsRead int64
	// FreeTakes, ExpiredTakes and Transfers count the successful takes of a
	// free lease, takes of a lease another worker owned (expired), and
	// transfers to another worker: the owner changes, by cause.
	FreeTakes, ExpiredTakes, Transfers int64
	// RCU is the DynamoDB read units the reads would cost, in thousandths
	// (see readUnits): Snapshot and List as a strongly consistent Scan of
	// the rows they returned, Owned as an eventually consistent Query of a
	// few index entries (0.5), Get as a strongly consistent GetItem (1).
	RCU int64
}

// The item sizes of lease/doc.go's "Read cost" (TestItemSizes there, with
// a 55-byte owner id), in bytes, and DynamoDB's read unit.
const (
	heldLeaseBytes = 280 // a lease row with an owner
	freeLeaseBytes = 110 // a lease row without one
	workerBytes    = 220 // a worker row without load
	loadShardBytes = 37  // each shard entry of a worker row's load
	leaderBytes    = 175 // the leader row
	readUnitBytes  = 4096
)

// scanMilliUnits is what a strongly consistent Scan of snap costs, in
// thousandths of a read unit: 1 unit per 4 KB read, rounded up per call
// (the table's rows fit one 1 MB page at the sizes simulated).
func scanMilliUnits(snap lease.Snapshot) int64 {
	var bytes int64
	for _, l := range snap.Leases {
		if l.Owner == "" {
			bytes += freeLeaseBytes
		} else {
			bytes += heldLeaseBytes
		}
	}
	for _, w := range snap.Workers {
		bytes += workerBytes
		if w.Load != nil {
			bytes += loadShardBytes * int64(len(w.Load.Shards))
		}
	}
	if snap.Leader != nil {
		bytes += leaderBytes
	}
	return 1000 * ((bytes + readUnitBytes - 1) / readUnitBytes)
}

// Writes returns the successful and refused writes of every kind.
func (c Counts) Writes() int64 {
	var n int64
	for i := range numWrites {
		n += c.Calls[i]
	}
	return n
}

// sub returns c - o.
func (c Counts) sub(o Counts) Counts {
	for i := range c.Calls {
		c.Calls[i] -= o.Calls[i]
		c.Refused[i] -= o.Refused[i]
	}
	c.RowsRead -= o.RowsRead
	c.FreeTakes -= o.FreeTakes
	c.ExpiredTakes -= o.ExpiredTakes
	c.Transfers -= o.Transfers
	c.RCU -= o.RCU
	return c
}

// countingStore counts the calls that reach the shared store.
type countingStore struct {
	s lease.Store
	// streams are every stream whose rows the table holds: a Scan reads,
	// and bills, all of them, whatever stream its filter matches
	// (lease/doc.go, "Read cost"). Nil: the one stream read.
	streams []string

	calls, refused             [numCalls]atomic.Int64
	rows                       atomic.Int64
	freeTakes, expired, transf atomic.Int64
	milliRCU                   atomic.Int64
}

var _ lease.Store = (*countingStore)(nil)

func (c *countingStore) counts() Counts {
	var out Counts
	for i := range numCalls {
		out.Calls[i] = c.calls[i].Load()
		out.Refused[i] = c.refused[i].Load()
	}
	out.RowsRead = c.rows.Load()
	out.FreeTakes = c.freeTakes.Load()
	out.ExpiredTakes = c.expired.Load()
	out.Transfers = c.transf.Load()
	out.RCU = c.milliRCU.Load()
	return out
}

func (c *countingStore) count(k Call, err error) {
	c.calls[k].Add(1)
	if errors.Is(err, lease.ErrLeaseLost) {
		c.refused[k].Add(1)
	}
}

func (c *countingStore) Ensure(ctx context.Context, k lease.Key, parents []string) (lease.Lease, error) {
	l, err := c.s.Ensure(ctx, k, parents)
	c.count(Ensure, err)
	return l, err
}

func (c *countingStore) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	snap, err := c.s.Snapshot(ctx, stream)
	c.count(List, err)
	c.rows.Add(int64(len(snap.Leases)))
	c.milliRCU.Add(scanMilliUnits(lease.Snapshot{Leases: snap.Leases}))
	return snap.Leases, err
}

func (c *countingStore) Get(ctx context.Context, k lease.Key) (lease.Lease, error) {
	l, err := c.s.Get(ctx, k)
	c.count(Get, err)
	c.milliRCU.Add(1000)
	return l, err
}

func (c *countingStore) Take(ctx context.Context, held lease.Lease, owner string) (lease.Lease, error) {
	l, err := c.s.Take(ctx, held, owner)
	c.count(Take, err)
	if err == nil {
		switch held.Owner {
		case "":
			c.freeTakes.Add(1)
		case owner:
		default:
			c.expired.Add(1)
		}
	}
	return l, err
}

func (c *countingStore) Renew(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	l, err := c.s.Renew(ctx, held)
	c.count(Renew, err)
	return l, err
}

func (c *countingStore) Checkpoint(ctx context.Context, held lease.Lease, seq string, sub int) (lease.Lease, error) {
	l, err := c.s.Checkpoint(ctx, held, seq, sub)
	c.count(Checkpoint, err)
	return l, err
}

func (c *countingStore) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	l, err := c.s.Release(ctx, held)
	c.count(Release, err)
	return l, err
}

func (c *countingStore) RequestHandoff(ctx context.Context, held lease.Lease, requester string) (lease.Lease, error) {
	l, err := c.s.RequestHandoff(ctx, held, requester)
	c.count(RequestHandoff, err)
	return l, err
}

func (c *countingStore) Transfer(ctx context.Context, held lease.Lease, to string) (lease.Lease, error) {
	l, err := c.s.Transfer(ctx, held, to)
	c.count(Transfer, err)
	if err == nil && to != held.Owner {
		c.transf.Add(1)
	}
	return l, err
}

func (c *countingStore) Delete(ctx context.Context, held lease.Lease) error {
	err := c.s.Delete(ctx, held)
	c.count(Delete, err)
	return err
}

func (c *countingStore) Heartbeat(ctx context.Context, stream, owner string, load *lease.Load) (lease.Worker, error) {
	w, err := c.s.Heartbeat(ctx, stream, owner, load)
	c.count(Heartbeat, err)
	return w, err
}

func (c *countingStore) RemoveWorker(ctx context.Context, w lease.Worker) error {
	err := c.s.RemoveWorker(ctx, w)
	c.count(RemoveWorker, err)
	return err
}

func (c *countingStore) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	snap, err := c.s.Snapshot(ctx, stream)
	c.count(Snapshot, err)
	if len(c.streams) > 1 {
		c.scanned(ctx, nil)
	} else {
		c.scanned(ctx, map[string]lease.Snapshot{stream: snap})
	}
	return snap, err
}

// scanned counts the rows and read units of one Scan of the table, whose
// rows are those of snaps, or, when nil, of every stream (read now).
func (c *countingStore) scanned(ctx context.Context, snaps map[string]lease.Snapshot) {
	if snaps == nil {
		snaps, _ = c.s.(streamsSnapshotter).SnapshotStreams(ctx, c.streams...)
	}
	var all lease.Snapshot
	for _, snap := range snaps {
		all.Leases = append(all.Leases, snap.Leases...)
		all.Workers = append(all.Workers, snap.Workers...)
		if snap.Leader != nil {
			all.Leader = snap.Leader
		}
	}
	c.rows.Add(int64(len(all.Leases) + len(all.Workers)))
	if all.Leader != nil {
		c.rows.Add(1)
	}
	c.milliRCU.Add(scanMilliUnits(all))
}

// streamsSnapshotter is a store that reads the rows of several streams at
// once (lease.Memory, as lease.DynamoDB with one Scan): the consumer's
// group leader reads so when its store can.
type streamsSnapshotter interface {
	SnapshotStreams(ctx context.Context, streams ...string) (map[string]lease.Snapshot, error)
}

// SnapshotStreams counts one Snapshot: one Scan of the whole table, which
// reads every stream's rows (the leader row once).
func (c *countingStore) SnapshotStreams(ctx context.Context, streams ...string) (map[string]lease.Snapshot, error) {
	m, ok := c.s.(streamsSnapshotter)
	if !ok {
		return nil, errors.New("scalesim: the store reads one stream at a time")
	}
	snaps, err := m.SnapshotStreams(ctx, streams...)
	c.count(Snapshot, err)
	if len(streams) < len(c.streams) {
		c.scanned(ctx, nil)
	} else {
		c.scanned(ctx, snaps)
	}
	return snaps, err
}

func (c *countingStore) Owned(ctx context.Context, owner string) ([]lease.Key, error) {
	ks, err := c.s.Owned(ctx, owner)
	c.count(Owned, err)
	c.milliRCU.Add(500 * ((100*int64(len(ks)+1) + readUnitBytes - 1) / readUnitBytes))
	return ks, err
}

// switchboard is a worker's connection to the world: once killed (dead
// closed), every call of its store and Kinesis client blocks until the
// call's context ends, as calls of a host that died never answer.
type switchboard struct {
	dead chan struct{}
}

// cut reports, once the worker is killed, its call's fate: it waits for
// ctx and returns its error. Before the kill it returns nil at once.
func (sw *switchboard) cut(ctx context.Context) error {
	select {
	case <-sw.dead:
	default:
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// killableStore is one worker's view of the shared store.
type killableStore struct {
	sw *switchboard
	s  *countingStore
}

var _ lease.Store = killableStore{}

func (k killableStore) Ensure(ctx context.Context, key lease.Key, parents []string) (lease.Lease, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Lease{}, err
	}
	return k.s.Ensure(ctx, key, parents)
}

func (k killableStore) Get(ctx context.Context, key lease.Key) (lease.Lease, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Lease{}, err
	}
	return k.s.Get(ctx, key)
}

func (k killableStore) Take(ctx context.Context, held lease.Lease, owner string) (lease.Lease, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Lease{}, err
	}
	return k.s.Take(ctx, held, owner)
}

func (k killableStore) Renew(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Lease{}, err
	}
	return k.s.Renew(ctx, held)
}

func (k killableStore) Checkpoint(ctx context.Context, held lease.Lease, seq string, sub int) (lease.Lease, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Lease{}, err
	}
	return k.s.Checkpoint(ctx, held, seq, sub)
}

func (k killableStore) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Lease{}, err
	}
	return k.s.Release(ctx, held)
}

func (k killableStore) RequestHandoff(ctx context.Context, held lease.Lease, requester string) (lease.Lease, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Lease{}, err
	}
	return k.s.RequestHandoff(ctx, held, requester)
}

func (k killableStore) Transfer(ctx context.Context, held lease.Lease, to string) (lease.Lease, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Lease{}, err
	}
	return k.s.Transfer(ctx, held, to)
}

func (k killableStore) Delete(ctx context.Context, held lease.Lease) error {
	if err := k.sw.cut(ctx); err != nil {
		return err
	}
	return k.s.Delete(ctx, held)
}

func (k killableStore) Heartbeat(ctx context.Context, stream, owner string, load *lease.Load) (lease.Worker, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Worker{}, err
	}
	return k.s.Heartbeat(ctx, stream, owner, load)
}

func (k killableStore) Owned(ctx context.Context, owner string) ([]lease.Key, error) {
	if err := k.sw.cut(ctx); err != nil {
		return nil, err
	}
	return k.s.Owned(ctx, owner)
}

func (k killableStore) RemoveWorker(ctx context.Context, w lease.Worker) error {
	if err := k.sw.cut(ctx); err != nil {
		return err
	}
	return k.s.RemoveWorker(ctx, w)
}

func (k killableStore) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	if err := k.sw.cut(ctx); err != nil {
		return lease.Snapshot{}, err
	}
	return k.s.Snapshot(ctx, stream)
}

// SnapshotStreams is countingStore's, cut like every call.
func (k killableStore) SnapshotStreams(ctx context.Context, streams ...string) (map[string]lease.Snapshot, error) {
	if err := k.sw.cut(ctx); err != nil {
		return nil, err
	}
	return k.s.SnapshotStreams(ctx, streams...)
}

// olderStore is the view of a worker of an older version (Config.Older),
// as the consumer's own tests model one: its heartbeats carry no load, and
// it knows no leader row.
type olderStore struct{ killableStore }

var errOlder = errors.New("scalesim: an older version knows no leader row")

func (o olderStore) Heartbeat(ctx context.Context, stream, owner string, _ *lease.Load) (lease.Worker, error) {
	return o.killableStore.Heartbeat(ctx, stream, owner, nil)
}

func (o olderStore) Get(ctx context.Context, key lease.Key) (lease.Lease, error) {
	if key == lease.LeaderKey(key.Stream) {
		return lease.Lease{}, errOlder
	}
	return o.killableStore.Get(ctx, key)
}

// killableKinesis is one worker's Kinesis client. Each GetRecords call
// that reaches the stream advances the worker's CPU clock by
// Config.CPUPerPoll.
type killableKinesis struct {
	sw    *switchboard
	k     consumer.KinesisAPI
	cpu   *cpuClock
	polls *shardPolls // nil: not counted by shard
	// key names the shard a GetShardIterator call reads, for polls (nil:
	// its shard id).
	key func(*kinesis.GetShardIteratorInput) string
}

// shardPolls counts the GetRecords calls of each shard, following the
// iterators: GetShardIterator names the shard, each GetRecords answer the
// shard's next iterator.
type shardPolls struct {
	iters sync.Map // iterator -> shard id
	mu    sync.Mutex
	n     map[string]int64
}

func newShardPolls() *shardPolls { return &shardPolls{n: map[string]int64{}} }

// track says that iter reads shard.
func (p *shardPolls) track(iter *string, shard string) {
	if p != nil && iter != nil && *iter != "" {
		p.iters.Store(*iter, shard)
	}
}

// call counts a GetRecords call with iter and returns the shard it reads
// ("" when unknown).
func (p *shardPolls) call(iter *string) string {
	if p == nil || iter == nil {
		return ""
	}
	v, ok := p.iters.Load(*iter)
	if !ok {
		return ""
	}
	shard := v.(string)
	p.mu.Lock()
	p.n[shard]++
	p.mu.Unlock()
	return shard
}

// answered follows a GetRecords answer: iter is used up, next reads the
// same shard.
func (p *shardPolls) answered(iter, next *string, shard string) {
	if p == nil || shard == "" {
		return
	}
	p.iters.Delete(*iter)
	p.track(next, shard)
}

// counts returns the calls counted so far, by shard.
func (p *shardPolls) counts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.n)
}

var _ consumer.KinesisAPI = killableKinesis{}

func (k killableKinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if err := k.sw.cut(ctx); err != nil {
		return nil, err
	}
	return k.k.ListShards(ctx, in, opts...)
}

func (k killableKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if err := k.sw.cut(ctx); err != nil {
		return nil, err
	}
	out, err := k.k.GetShardIterator(ctx, in, opts...)
	if err == nil && in.ShardId != nil {
		key := *in.ShardId
		if k.key != nil {
			key = k.key(in)
		}
		k.polls.track(out.ShardIterator, key)
	}
	return out, err
}

func (k killableKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if err := k.sw.cut(ctx); err != nil {
		return nil, err
	}
	k.cpu.poll()
	shard := k.polls.call(in.ShardIterator)
	out, err := k.k.GetRecords(ctx, in, opts...)
	if err == nil {
		k.polls.answered(in.ShardIterator, out.NextShardIterator, shard)
	}
	return out, err
}
