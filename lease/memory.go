package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Memory is a Store held in the memory of one process: the lease table of a
// single instance, the default when no DynamoDB table is configured, and a
// fake for tests. It has the same semantics as DynamoDB, fencing included,
// and keeps nothing across restarts.
//
// A Memory is safe for concurrent use. Its methods do not block on I/O; they
// return the context's error when called with a context that is already
// done, and otherwise ignore it. The zero value is not usable: call
// NewMemory.
type Memory struct {
	now func() time.Time // the writers' wall clock

	mu   sync.Mutex
	rows map[Key]Lease // ParentShardIDs owned by the map: copied in and out
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{now: time.Now, rows: make(map[Key]Lease)}
}

// Ensure implements Store.
func (m *Memory) Ensure(ctx context.Context, k Key, parents []string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, &opError{op: opEnsure, what: k.String(), cause: err}
	}
	if err := k.check(); err != nil {
		return Lease{}, &opError{op: opEnsure, what: k.String(), cause: err}
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

// List implements Store.
func (m *Memory) List(ctx context.Context, stream string) ([]Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, &opError{op: opList, what: stream, cause: err}
	}
	if err := checkStream(stream); err != nil {
		return nil, &opError{op: opList, what: stream, cause: err}
	}
	m.mu.Lock()
	ls := []Lease{}
	for k, l := range m.rows {
		if k.Stream == stream {
			ls = append(ls, cloneLease(l))
		}
	}
	m.mu.Unlock()
	slices.SortFunc(ls, func(a, b Lease) int { return cmp.Compare(a.Key.ShardID, b.Key.ShardID) })
	return ls, nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, k Key) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, &opError{op: opGet, what: k.String(), cause: err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.rows[k]
	if !ok {
		return Lease{}, &opError{op: opGet, what: k.String(), kind: ErrNotFound}
	}
	return cloneLease(l), nil
}

// Take implements Store.
func (m *Memory) Take(ctx context.Context, held Lease, owner string) (Lease, error) {
	return m.write(ctx, opTake, held, owner, "")
}

// Renew implements Store.
func (m *Memory) Renew(ctx context.Context, held Lease) (Lease, error) {
	return m.write(ctx, opRenew, held, "", "")
}

// Checkpoint implements Store.
func (m *Memory) Checkpoint(ctx context.Context, held Lease, seq string) (Lease, error) {
	return m.write(ctx, opCheckpoint, held, "", seq)
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, held Lease) (Lease, error) {
	return m.write(ctx, opRelease, held, "", "")
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, k Key) error {
	if err := ctx.Err(); err != nil {
		return &opError{op: opDelete, what: k.String(), cause: err}
	}
	m.mu.Lock()
	delete(m.rows, k)
	m.mu.Unlock()
	return nil
}

// write performs the conditional write op of held (with owner for a take,
// seq for a checkpoint).
func (m *Memory) write(ctx context.Context, op string, held Lease, owner, seq string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, &opError{op: op, what: held.Key.String(), cause: err}
	}
	if err := checkWrite(op, held, owner, seq); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.rows[held.Key]
	switch {
	case !ok:
		return Lease{}, &opError{op: op, what: held.Key.String(), kind: ErrLeaseLost, cause: errNoRow}
	case l.Owner != held.Owner || l.Counter != held.Counter:
		return Lease{}, &opError{op: op, what: held.Key.String(), kind: ErrLeaseLost,
			cause: fmt.Errorf("stored owner %q counter %d, held owner %q counter %d", l.Owner, l.Counter, held.Owner, held.Counter)}
	}
	switch op {
	case opTake:
		if owner != l.Owner {
			l.OwnerSwitches++
		}
		l.Owner = owner
	case opCheckpoint:
		l.Checkpoint = seq
	case opRelease:
		l.Owner = ""
	}
	l.Counter++
	l.RenewedAt = wallClock(m.now)
	m.rows[held.Key] = l
	return cloneLease(l), nil
}

// errNoRow is the cause of ErrLeaseLost for a write of a lease that does not
// exist (any more).
var errNoRow = errors.New("the lease does not exist")

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
