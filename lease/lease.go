package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ShardEnd is the checkpoint of a closed shard whose every record settled.
// A lease checkpointed at ShardEnd is finished: its child shards may start,
// and no worker reads the shard again.
const ShardEnd = "SHARD_END"

// Key identifies one shard of one stream. One lease table serves many
// streams: a row's key is Key.String, "stream:shardId".
//
// Stream is the stream's NAME, never its ARN: names cannot contain ':', ARNs
// do, and ParseKey splits at the first ':'. ShardID is the shard id as
// Kinesis reports it (shardId-000000000000). A Key is a plain value, safe to
// copy and compare with ==.
type Key struct {
	// Stream is the stream's name, not empty and without ':'.
	Stream string
	// ShardID is the shard's id, not empty.
	ShardID string
}

// String returns the key as stored in the lease table: the stream name, ':'
// and the shard id, e.g. "orders:shardId-000000000000".
func (k Key) String() string {
	return k.Stream + ":" + k.ShardID
}

// ParseKey parses the output of Key.String. It splits s at the FIRST ':' (a
// stream name never contains one; a shard id may, in principle), so
// ParseKey(k.String()) == k for every valid key. It returns an error when s
// has no ':', or when the stream name or the shard id is empty.
func ParseKey(s string) (Key, error) {
	k, err := parseKey(s)
	if err != nil {
		return Key{}, fmt.Errorf("lease: %w", err)
	}
	return k, nil
}

// parseKey is ParseKey without the package prefix on its error.
func parseKey(s string) (Key, error) {
	stream, shard, ok := strings.Cut(s, ":")
	if !ok {
		return Key{}, fmt.Errorf("malformed key %q: want stream:shardId", s)
	}
	k := Key{Stream: stream, ShardID: shard}
	if err := k.check(); err != nil {
		return Key{}, fmt.Errorf("malformed key %q: %w", s, err)
	}
	return k, nil
}

// check returns an error unless k is valid: a stream name without ':' and a
// shard id, both not empty.
func (k Key) check() error {
	switch {
	case k.Stream == "":
		return errors.New("empty stream name")
	case strings.Contains(k.Stream, ":"):
		return errors.New("stream name contains ':' (use the stream's name, not its ARN)")
	case k.ShardID == "":
		return errors.New("empty shard id")
	}
	return nil
}

// checkStream returns an error unless stream is a valid Key.Stream.
func checkStream(stream string) error {
	return Key{Stream: stream, ShardID: "-"}.check()
}

// Lease is one row of the lease table: who owns a shard, how far its records
// settled, and the counter that fences every write. A Lease returned by a
// Store is a copy: changing it changes nothing stored, and it may be passed
// back as the held lease of the next write.
type Lease struct {
	// Key identifies the shard.
	Key Key
	// Owner is the owner id (see NewOwnerID) of the worker holding the
	// lease, or "" when the lease is free.
	Owner string
	// Counter is bumped by every write (take, renew, checkpoint, release). It
	// is the fencing token: every write is conditional on the counter the
	// writer read, so a writer that missed a change cannot write. Expiry
	// watches it too (see Tracker).
	Counter int64
	// Checkpoint is the sequence number of the last settled record, ShardEnd,
	// or "" when nothing settled yet.
	Checkpoint string
	// ParentShardIDs are the parents of a child shard (after a split or a
	// merge), as ListShards reported them; nil for a shard without parents.
	ParentShardIDs []string
	// OwnerSwitches counts the takes that changed the owner, a take of a free
	// lease included. It is for operators: a number that keeps growing means
	// leases move between workers.
	OwnerSwitches int64
	// RenewedAt is the writer's wall clock at the last write, in UTC and
	// truncated to the millisecond. It is for display only and never used
	// for expiry: the workers' clocks need not agree.
	RenewedAt time.Time
}

var (
	// ErrLeaseLost is matched (with errors.Is) by the error of a write whose
	// condition failed: the row has another owner or a newer counter than the
	// held lease, or it no longer exists. Nothing was written. The caller
	// must stop using the lease at once (stop reading and checkpointing the
	// shard) and may only Get it again and compete for it anew. A write of a
	// held lease that has no owner (Renew, Checkpoint or Release of a free
	// lease) fails with it too, without any I/O.
	ErrLeaseLost = errors.New("lease: lease lost")
	// ErrNotFound is matched by the error of Get for a key that has no row.
	ErrNotFound = errors.New("lease: no such lease")
	// ErrTableNotFound is matched by the error of any DynamoDB call on a
	// lease table that does not exist. The message names the table and the
	// command that creates it: "create it with: bootstrap leases init -table
	// NAME".
	ErrTableNotFound = errors.New("lease: lease table not found")
)

// Store keeps the leases of many streams. Implementations: Memory (one
// process) and DynamoDB (many processes).
//
// Every write that matters (Take, Renew, Checkpoint, Release) is conditional
// on BOTH the owner and the counter of the held lease the caller passes: it
// succeeds only when the stored row still has held.Owner and held.Counter,
// and then bumps the counter. A worker whose lease was taken by another (or
// that missed any other write) can therefore never checkpoint, renew or
// release it; its write fails with ErrLeaseLost and changes nothing. Each
// successful write returns the new row, which is the held lease for the next
// write.
//
// A Store is safe for concurrent use; concurrent conditional writes to one
// lease have exactly one winner. A canceled context makes a call return the
// context's error; a write cut short that way may or may not have been
// applied, so the caller should Get the lease before trusting it again.
type Store interface {
	// Ensure creates the lease of k, free (no owner), at counter 0, with
	// no checkpoint and the given parent shard ids, unless a row for k
	// exists. It returns the current row either way; an existing row is
	// not changed (its parents neither).
	Ensure(ctx context.Context, k Key, parents []string) (Lease, error)
	// List returns all leases of the stream, ordered by ShardID, from a
	// consistent read. It returns an empty slice when there are none.
	List(ctx context.Context, stream string) ([]Lease, error)
	// Get returns the lease of k from a consistent read, or an error
	// matching ErrNotFound when there is none.
	Get(ctx context.Context, k Key) (Lease, error)
	// Take makes owner the owner of the lease held, on condition that the
	// row still has held.Owner and held.Counter. It bumps Counter, and
	// OwnerSwitches when owner differs from held.Owner. It serves for
	// free leases (held.Owner == ""), expired ones and steals alike. owner
	// must not be empty.
	Take(ctx context.Context, held Lease, owner string) (Lease, error)
	// Renew bumps the counter of the lease held, on condition of owner and
	// counter. Other workers see the change and keep the lease unexpired.
	Renew(ctx context.Context, held Lease) (Lease, error)
	// Checkpoint stores seq (a sequence number or ShardEnd, not empty) as the
	// checkpoint of the lease held and bumps the counter, on condition of
	// owner and counter.
	Checkpoint(ctx context.Context, held Lease, seq string) (Lease, error)
	// Release frees the lease held (Owner becomes "") and bumps the counter,
	// on condition of owner and counter, so that any worker may take it at
	// once. The checkpoint is kept.
	Release(ctx context.Context, held Lease) (Lease, error)
	// Delete removes the lease of k unconditionally, for a shard that was
	// trimmed away. Deleting a lease that does not exist is not an error.
	// Later writes with a held copy of the deleted lease fail with
	// ErrLeaseLost and do not create it again.
	Delete(ctx context.Context, k Key) error
}

// opError is the one wrapping every error of a Store carries: the
// operation and the key or table, the sentinel it matches (may be nil) and
// the cause (may be nil), plus an instruction for the reader.
type opError struct {
	op    string // e.g. "take", "check table"
	what  string // the key or the table
	kind  error  // ErrLeaseLost, ErrNotFound, ErrTableNotFound or nil
	cause error  // the SDK's error or a detail; may be nil
	hint  string // appended after "; ", may be empty
}

func (e *opError) Error() string {
	var b strings.Builder
	b.WriteString("lease: ")
	b.WriteString(e.op)
	b.WriteByte(' ')
	b.WriteString(strconv.Quote(e.what))
	if e.kind != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.kind.Error(), "lease: "))
	}
	if e.cause != nil {
		b.WriteString(": ")
		b.WriteString(e.cause.Error())
	}
	if e.hint != "" {
		b.WriteString("; ")
		b.WriteString(e.hint)
	}
	return b.String()
}

func (e *opError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

// Operation names in error messages.
const (
	opEnsure     = "ensure"
	opList       = "list stream"
	opGet        = "get"
	opTake       = "take"
	opRenew      = "renew"
	opCheckpoint = "checkpoint"
	opRelease    = "release"
	opDelete     = "delete"
	opCheck      = "check table"
	opCreate     = "create table"
)

// errNoOwner is the cause of ErrLeaseLost for a Renew, Checkpoint or Release
// of a held lease without owner.
var errNoOwner = errors.New("the held lease has no owner")

// checkWrite validates the arguments of a conditional write and returns
// the error to report, or nil. It does no I/O.
func checkWrite(op string, held Lease, owner, seq string) error {
	if err := held.Key.check(); err != nil {
		return &opError{op: op, what: held.Key.String(), cause: err}
	}
	switch op {
	case opTake:
		if owner == "" {
			return &opError{op: op, what: held.Key.String(), cause: errors.New("empty owner")}
		}
	case opCheckpoint:
		if seq == "" {
			return &opError{op: op, what: held.Key.String(), cause: errors.New("empty checkpoint")}
		}
		fallthrough
	default:
		if held.Owner == "" {
			return &opError{op: op, what: held.Key.String(), kind: ErrLeaseLost, cause: errNoOwner}
		}
	}
	return nil
}

// wallClock returns now in UTC, truncated to the millisecond and without a
// monotonic reading: the RenewedAt of a write, equal in every Store.
func wallClock(now func() time.Time) time.Time {
	return now().UTC().Truncate(time.Millisecond)
}
