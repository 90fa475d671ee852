package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is a Store held in the memory of one process: the lease table of a
// single instance, the default when no DynamoDB table is configured, and a
// fake for tests. It has the same semantics as DynamoDB, fencing and worker
// rows included, and keeps nothing across restarts.
//
// A Memory is safe for concurrent use. Its methods do not block on I/O; they
// return the context's error when called with a context that is already
// done, and otherwise ignore it. The zero value is not usable: call
// NewMemory.
type Memory struct {
	now func() time.Time // the writers' wall clock

	mu      sync.Mutex
	rows    map[Key]Lease       // ParentShardIDs owned by the map: copied in and out
	workers map[workerID]Worker // the worker rows, apart from the leases
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{now: time.Now, rows: make(map[Key]Lease), workers: make(map[workerID]Worker)}
}

// Ensure implements Store.
func (m *Memory) Ensure(ctx context.Context, k Key, parents []string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, plainError(opEnsure, k.String(), err)
	}
	if err := k.check(); err != nil {
		return Lease{}, plainError(opEnsure, k.String(), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.rows[k]
	if !ok {
		l = Lease{Key: k, ParentShardIDs: clonePresent(parents), RenewedAt: wallClock(m.now)}
		m.rows[k] = l
	}
	return cloneLease(l), nil
}

// Snapshot implements Store: the leases and the workers are read under one
// lock.
func (m *Memory) Snapshot(ctx context.Context, stream string) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, plainError(opSnapshot, stream, err)
	}
	if err := checkStream(stream); err != nil {
		return Snapshot{}, plainError(opSnapshot, stream, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshot(stream), nil
}

// SnapshotStreams returns what Snapshot returns for each of streams, by
// stream name, from one consistent read (as DynamoDB.SnapshotStreams).
func (m *Memory) SnapshotStreams(ctx context.Context, streams ...string) (map[string]Snapshot, error) {
	what := strings.Join(streams, ",")
	if err := ctx.Err(); err != nil {
		return nil, plainError(opSnapshot, what, err)
	}
	if len(streams) == 0 || len(streams) > 100 {
		return nil, plainError(opSnapshot, what, fmt.Errorf("%d streams, want 1 to 100", len(streams)))
	}
	for _, stream := range streams {
		if err := checkStream(stream); err != nil {
			return nil, plainError(opSnapshot, stream, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	snaps := make(map[string]Snapshot, len(streams))
	for _, stream := range streams {
		snaps[stream] = m.snapshot(stream)
	}
	return snaps, nil
}

// snapshot returns the rows of stream. m.mu must be held.
func (m *Memory) snapshot(stream string) Snapshot {
	snap := Snapshot{Leases: m.leases(stream), Workers: []Worker{}}
	for id, w := range m.workers {
		if id.stream == stream {
			w.Load = cloneLoad(w.Load)
			snap.Workers = append(snap.Workers, w)
		}
	}
	if l, ok := m.rows[LeaderKey(stream)]; ok {
		l = cloneLease(l)
		snap.Leader = &l
	}
	sortLeases(snap.Leases)
	sortWorkers(snap.Workers)
	return snap
}

// leases returns copies of the leases of stream, in no order, without its
// leader row. m.mu must be held.
func (m *Memory) leases(stream string) []Lease {
	ls := []Lease{}
	for k, l := range m.rows {
		if k.Stream == stream && !reserved(k.ShardID) {
			ls = append(ls, cloneLease(l))
		}
	}
	return ls
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, k Key) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, plainError(opGet, k.String(), err)
	}
	if err := k.check(); err != nil {
		return Lease{}, plainError(opGet, k.String(), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.rows[k]
	if !ok {
		return Lease{}, noRowError(opGet, k.String())
	}
	return cloneLease(l), nil
}

// Take implements Store.
func (m *Memory) Take(ctx context.Context, held Lease, owner string) (Lease, error) {
	return m.write(ctx, opTake, held, owner, "", 0)
}

// Renew implements Store.
func (m *Memory) Renew(ctx context.Context, held Lease) (Lease, error) {
	return m.write(ctx, opRenew, held, "", "", 0)
}

// Checkpoint implements Store.
func (m *Memory) Checkpoint(ctx context.Context, held Lease, seq string, sub int) (Lease, error) {
	return m.write(ctx, opCheckpoint, held, "", seq, sub)
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, held Lease) (Lease, error) {
	return m.write(ctx, opRelease, held, "", "", 0)
}

// Transfer implements Store.
func (m *Memory) Transfer(ctx context.Context, held Lease, to string) (Lease, error) {
	return m.write(ctx, opTransfer, held, to, "", 0)
}

// RequestHandoff implements Store.
func (m *Memory) RequestHandoff(ctx context.Context, held Lease, requester string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, plainError(opHandoff, held.Key.String(), err)
	}
	if err := checkWrite(opHandoff, held, requester, "", 0); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.rows[held.Key]
	switch {
	case !ok:
		return Lease{}, lostError(opHandoff, held.Key.String(), errNoRow)
	case l.Owner != held.Owner:
		return Lease{}, lostError(opHandoff, held.Key.String(), fmt.Errorf("stored owner %q, held owner %q", l.Owner, held.Owner))
	case l.Handoff != "" && l.Handoff != requester:
		return Lease{}, lostError(opHandoff, held.Key.String(), fmt.Errorf("handoff already requested by %q", l.Handoff))
	}
	l.Handoff = requester
	m.rows[held.Key] = l
	return cloneLease(l), nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, held Lease) error {
	if err := ctx.Err(); err != nil {
		return plainError(opDelete, held.Key.String(), err)
	}
	if err := checkWrite(opDelete, held, "", "", 0); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fence(opDelete, held); err != nil {
		return err
	}
	delete(m.rows, held.Key)
	return nil
}

// Owned implements Store from the rows themselves: its answer is exact.
func (m *Memory) Owned(ctx context.Context, owner string) ([]Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, plainError(opOwned, owner, err)
	}
	if owner == "" {
		return nil, plainError(opOwned, owner, errors.New("empty owner"))
	}
	ks := []Key{}
	m.mu.Lock()
	for k, l := range m.rows {
		if l.Owner == owner && !reserved(k.ShardID) {
			ks = append(ks, k)
		}
	}
	m.mu.Unlock()
	sortKeys(ks)
	return ks, nil
}

// Heartbeat implements Store.
func (m *Memory) Heartbeat(ctx context.Context, stream, owner string, load *Load) (Worker, error) {
	if err := ctx.Err(); err != nil {
		return Worker{}, plainError(opHeartbeat, workerKey(stream, owner), err)
	}
	if err := checkWorker(stream, owner); err != nil {
		return Worker{}, plainError(opHeartbeat, workerKey(stream, owner), err)
	}
	id := workerID{stream: stream, owner: owner}
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.workers[id]
	if !ok {
		w = Worker{Stream: stream, Owner: owner}
	}
	w.Counter++
	w.RenewedAt = wallClock(m.now)
	w.Load = compactLoad(load)
	m.workers[id] = w
	w.Load = cloneLoad(w.Load)
	return w, nil
}

// RemoveWorker implements Store.
func (m *Memory) RemoveWorker(ctx context.Context, w Worker) error {
	what := workerKey(w.Stream, w.Owner)
	if err := ctx.Err(); err != nil {
		return plainError(opRemove, what, err)
	}
	if err := checkWorker(w.Stream, w.Owner); err != nil {
		return plainError(opRemove, what, err)
	}
	id := workerID{stream: w.Stream, owner: w.Owner}
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, ok := m.workers[id]
	switch {
	case !ok:
		return lostError(opRemove, what, errNoWorker)
	case stored.Counter != w.Counter:
		return lostError(opRemove, what, fmt.Errorf("stored counter %d, held counter %d", stored.Counter, w.Counter))
	}
	delete(m.workers, id)
	return nil
}

// write performs the conditional write op of held (with owner for a take or
// a transfer, seq for a checkpoint).
func (m *Memory) write(ctx context.Context, op string, held Lease, owner, seq string, sub int) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, plainError(op, held.Key.String(), err)
	}
	if err := checkWrite(op, held, owner, seq, sub); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fence(op, held); err != nil {
		return Lease{}, err
	}
	l := m.rows[held.Key]
	switch op {
	case opTake, opTransfer:
		if owner != l.Owner {
			l.OwnerSwitches++
		}
		l.Owner = owner
		l.Handoff = ""
	case opCheckpoint:
		l.Checkpoint, l.SubSequence = seq, sub
	case opRelease:
		l.Owner = ""
		l.Handoff = ""
	}
	if (op == opTransfer || op == opRelease) && held.Checkpoint != "" {
		l.Checkpoint, l.SubSequence = held.Checkpoint, held.SubSequence
	}
	l.Counter++
	l.RenewedAt = wallClock(m.now)
	m.rows[held.Key] = l
	return cloneLease(l), nil
}

// fence returns the error of op, matching ErrLeaseLost, unless the row of
// held exists with held's owner and counter. m.mu must be held.
func (m *Memory) fence(op string, held Lease) error {
	l, ok := m.rows[held.Key]
	switch {
	case !ok:
		return lostError(op, held.Key.String(), errNoRow)
	case l.Owner != held.Owner || l.Counter != held.Counter:
		return lostError(op, held.Key.String(),
			fmt.Errorf("stored owner %q counter %d, held owner %q counter %d", l.Owner, l.Counter, held.Owner, held.Counter))
	}
	return nil
}

var (
	// errNoRow is the cause of ErrLeaseLost for a write of a lease that
	// does not exist (any more).
	errNoRow = errors.New("the lease does not exist")
	// errNoWorker is the cause of ErrLeaseLost for a RemoveWorker of a
	// worker that has no row (any more).
	errNoWorker = errors.New("the worker is not registered")
)

// sortLeases orders ls by shard id, as Snapshot returns them.
func sortLeases(ls []Lease) {
	slices.SortFunc(ls, func(a, b Lease) int { return cmp.Compare(a.Key.ShardID, b.Key.ShardID) })
}

// sortKeys orders ks by Key.String, as Owned returns them.
func sortKeys(ks []Key) {
	slices.SortFunc(ks, func(a, b Key) int { return cmp.Compare(a.String(), b.String()) })
}

// sortWorkers orders ws by owner id, as Snapshot returns them.
func sortWorkers(ws []Worker) {
	slices.SortFunc(ws, func(a, b Worker) int { return cmp.Compare(a.Owner, b.Owner) })
}

// cloneLease returns l with its own copy of ParentShardIDs.
func cloneLease(l Lease) Lease {
	l.ParentShardIDs = clonePresent(l.ParentShardIDs)
	return l
}

// clonePresent returns a copy of s, or nil when s is empty.
func clonePresent(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}
