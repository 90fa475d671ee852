package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
)

// ShardEnd is the checkpoint of a closed shard whose every record settled.
// A lease checkpointed at ShardEnd is finished: its child shards may start,
// and no worker reads the shard again.
const ShardEnd = "SHARD_END"

// TrimHorizon is the checkpoint of a child shard (of a split or merge) that
// started from its first record because this consumer read its parents,
// written before any of its records settled. It keeps the child starting
// there after a restart once the parents' rows are gone (trimmed away and
// deleted), instead of at the consumer's configured start.
const TrimHorizon = "TRIM_HORIZON"

// AtTimestamp is TrimHorizon's twin for a consumer configured to start at a
// timestamp: the child starts at that timestamp (every record of a child
// came after its parents' last one, so the two differ only before the
// timestamp).
const AtTimestamp = "AT_TIMESTAMP"

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
	// ShardID is the shard's id, not empty and not starting with '@': the
	// lease table keeps its own rows (the workers') under keys of that form,
	// and Kinesis shard ids never have it. The one exception is the
	// reserved id of LeaderKey.
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
// has no ':', when the stream name or the shard id is empty, and when the
// shard id starts with '@' (the key of a worker row, see Heartbeat), but
// for LeaderKey's.
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
// shard id that does not start with '@' (but for LeaderKey's), both not
// empty.
func (k Key) check() error {
	switch {
	case k.Stream == "":
		return errors.New("empty stream name")
	case strings.Contains(k.Stream, ":"):
		return errors.New("stream name contains ':' (use the stream's name, not its ARN)")
	case k.ShardID == "":
		return errors.New("empty shard id")
	case k.ShardID[0] == reservedPrefix && k.ShardID != leaderShardID:
		return fmt.Errorf("shard id starts with %q (reserved for the lease table's own rows)", string(reservedPrefix))
	}
	return nil
}

// reservedPrefix starts the part after "stream:" of the keys of rows that are
// not leases (workerInfix). No shard id may start with it.
const reservedPrefix = '@'

// workerInfix joins the stream and the owner id in the key of a worker row:
// "orders:@worker:ecs-task/abc-0123456789ab". Kinesis shard ids match
// [a-zA-Z0-9_.-]+, and Key.check refuses shard ids starting with '@', so
// such a key is never a lease's.
const workerInfix = ":@worker:"

// leaderShardID is the shard id of LeaderKey: the only reserved id that is
// a lease's.
const leaderShardID = "@leader"

// LeaderKey returns the key of the leader lock row of the group name (a
// stream name, or an application's name; same rules as Key.Stream): a
// lease like any other for Ensure, Get, Take, Renew, Checkpoint, Release,
// Transfer, RequestHandoff and Delete, but never returned by
// Snapshot.Leases or Owned; Snapshot returns it as Snapshot.Leader. Its
// ShardID is the reserved "@leader", which no shard id can be, and
// ParseKey(LeaderKey(name).String()) == LeaderKey(name). The worker that
// holds it (the leader) plans the group's leases for every worker (see the
// package documentation).
func LeaderKey(name string) Key {
	return Key{Stream: name, ShardID: leaderShardID}
}

// reserved reports whether shard, the part of a row's key after
// "stream:", is that of a row that is not a shard's lease: a worker row or
// the leader row.
func reserved(shard string) bool {
	return shard != "" && shard[0] == reservedPrefix
}

// workerKey returns the key of the row of owner's worker in stream, as
// stored in the lease table and named in errors.
func workerKey(stream, owner string) string {
	return stream + workerInfix + owner
}

// workerID identifies the worker owner of stream: the key of Memory's
// worker rows and of Tracker's observations of workers.
type workerID struct{ stream, owner string }

// checkWorker returns an error unless stream is a valid stream name and
// owner is not empty.
func checkWorker(stream, owner string) error {
	if err := checkStream(stream); err != nil {
		return err
	}
	if owner == "" {
		return errors.New("empty owner")
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
	// Counter is bumped by every write (take, renew, checkpoint, transfer,
	// release), not by RequestHandoff. It is the fencing token: every such
	// write is conditional on the counter the writer read, so a writer that
	// missed a change cannot write. Expiry watches it too (see Tracker).
	Counter int64
	// Checkpoint is the sequence number of the last settled record, ShardEnd,
	// TrimHorizon or AtTimestamp (a child that started where its parents
	// left off, before any record of its own settled), "LATEST@" and a time
	// in Unix milliseconds (a shard the long-running mode started reading
	// at the tip, from that time, before any record settled), or "" when
	// nothing settled yet. The store keeps any non-empty string.
	Checkpoint string
	// SubSequence, when not 0, says the record at Checkpoint is a KPL
	// aggregate that settled only in part: its user records with
	// sub-sequence numbers 0 to SubSequence-1 settled (and every record
	// before it), the rest did not. A reader resumes at Checkpoint, skipping
	// those user records. 0 means the record at Checkpoint settled whole:
	// a reader resumes after it.
	SubSequence int
	// ParentShardIDs are the parents of a child shard (after a split or a
	// merge), as ListShards reported them; nil for a shard without parents.
	ParentShardIDs []string
	// OwnerSwitches counts the takes and transfers that changed the owner, a
	// take of a free lease included. It is for operators: a number that keeps
	// growing means leases move between workers.
	OwnerSwitches int64
	// Handoff is the owner id of a worker that asked the owner to hand the
	// lease over (RequestHandoff), or "" when none did. Take, Transfer and
	// Release clear it; Renew and Checkpoint keep it. The owner that sees it
	// (in the lease its Renew returns, say) is expected to stop reading the
	// shard, checkpoint what settled, and Transfer the lease to Handoff.
	Handoff string
	// RenewedAt is the writer's wall clock at the last write, in UTC and
	// truncated to the millisecond. It is for display only and never used
	// for expiry: the workers' clocks need not agree.
	RenewedAt time.Time
}

// Worker is one consumer process registered in the lease table of a stream
// (Heartbeat). Workers count one another through these rows to share the
// shards evenly, and the row of a worker whose Counter stands still for the
// lease duration (see Tracker.WorkerExpired) is that of a dead worker. A
// Worker returned by a Store is a copy; it may be passed back to
// RemoveWorker.
type Worker struct {
	Stream    string    // the stream's name
	Owner     string    // the worker's owner id (see NewOwnerID)
	Counter   int64     // bumped by every Heartbeat; expiry watches it as for leases (Tracker)
	RenewedAt time.Time // the writer's wall clock at the last heartbeat, for display only
	// Load is the load the worker published with its last Heartbeat, as
	// stored (see Load: rounded and bounded), or nil when the row carries
	// none: a worker of an older version, which plans for itself, or one
	// that has measured nothing yet.
	Load *Load
}

// Snapshot is every row of one stream: its leases (ordered by ShardID),
// its registered workers (ordered by Owner) and its leader row, from one
// consistent read.
type Snapshot struct {
	Leases  []Lease
	Workers []Worker
	// Leader is the stream's leader row (the lease of LeaderKey(stream)),
	// nil when there is none. It is never in Leases.
	Leader *Lease
	// Malformed are the stream's rows that could not be read (written by
	// another tool or by hand: an attribute missing or of the wrong type, a
	// key that does not name the row's stream), by their leaseKey as
	// stored, each with the error naming what is wrong. They are in none
	// of Leases, Workers and Leader: one bad row does not fail the read.
	// nil when there are none.
	Malformed map[string]error
}

var (
	// ErrLeaseLost is matched (with errors.Is) by the error of a write whose
	// condition failed: the row has another owner or a newer counter than the
	// held lease, or it no longer exists. Nothing was written. The caller
	// must stop using the lease at once (stop reading and checkpointing the
	// shard) and may only Get it again and compete for it anew. A write of a
	// held lease that has no owner (Renew, Checkpoint, Transfer or Release of
	// a free lease, RequestHandoff of one) fails with it too, without any
	// I/O.
	//
	// The other conditional calls report their failed condition with it as
	// well: Delete (the row changed since it was read, or is gone),
	// RequestHandoff (the lease has another owner, or another worker asked
	// first) and RemoveWorker (the worker heartbeat since, or its row is
	// gone).
	//
	// A write that was applied but whose answer was lost (see Store) is not
	// reported with it, with one exception that errs on the safe side: when
	// the store cannot tell (DynamoDB could not read the row back), it
	// reports ErrLeaseLost, and a caller that stops using the lease then
	// leaves a lease that may be its own unrenewed until it expires.
	ErrLeaseLost = errors.New("lease: lease lost")
	// ErrNotFound is matched by the error of Get for a key that has no row.
	ErrNotFound = errors.New("lease: no such lease")
	// ErrTableNotFound is matched by the error of any DynamoDB call on a
	// lease table that does not exist. The message names the table and the
	// command that creates it: "create it with: bootstrap leases init -table
	// NAME".
	ErrTableNotFound = errors.New("lease: lease table not found")
	// ErrNotLeaseTable is matched by the error of DynamoDB's Check and
	// Heartbeat (a worker's first call) on a table that exists but does
	// not have the lease table's key schema: only a hash key leaseKey of
	// type S.
	ErrNotLeaseTable = errors.New("lease: not a lease table")
	// ErrNoOwnerIndex is matched by the error of DynamoDB's Owned on a
	// lease table without the owner index (a table created by an older
	// version), or whose index is not ACTIVE yet (being created or
	// backfilled). The message names the command that adds it:
	// "add it with: bootstrap leases init -table NAME". Every other call
	// works on such a table.
	ErrNoOwnerIndex = errors.New("lease: lease table has no owner index")
)

// Store keeps the leases of many streams. Implementations: Memory (one
// process) and DynamoDB (many processes).
//
// Every write that matters (Take, Renew, Checkpoint, Transfer, Release) is
// conditional on BOTH the owner and the counter of the held lease the caller
// passes: it succeeds only when the stored row still has held.Owner and
// held.Counter, and then bumps the counter. A worker whose lease was taken by
// another (or that missed any other write) can therefore never checkpoint,
// renew, transfer or release it; its write fails with ErrLeaseLost and
// changes nothing. Each successful write returns the new row, which is the
// held lease for the next write. Delete is fenced the same way; only
// RequestHandoff, which leaves the counter alone, is conditional on the owner
// alone.
//
// Besides the leases, a Store keeps one row per registered worker of a
// stream (Heartbeat, RemoveWorker), read together with the leases by
// Snapshot. Worker rows are never leases: Get and Snapshot.Leases
// never return them, and no lease write can change them.
//
// A Store is safe for concurrent use; concurrent conditional writes to one
// lease have exactly one winner. A canceled context makes a call return the
// context's error; a write cut short that way may or may not have been
// applied, so the caller should Get the lease before trusting it again.
//
// A fenced write (Take, Renew, Checkpoint, Release, Transfer) whose answer
// was lost after it was applied, so that the client's retry of it found
// the counter already moved on, succeeds and returns the row it wrote, as
// if the first answer had arrived: DynamoDB reads the row back and
// recognises its own write by a token unique to the call. A write repeated
// from the held lease it already consumed, even by the same process, still
// fails with ErrLeaseLost. RequestHandoff needs nothing of the kind (its
// retry finds its own request and succeeds). Delete and RemoveWorker
// cannot tell their own applied delete from another's: a lost answer to
// either reports ErrLeaseLost, and the row is gone either way.
type Store interface {
	// Ensure creates the lease of k, free (no owner), at counter 0, with
	// no checkpoint and the given parent shard ids, unless a row for k
	// exists. It returns the current row either way; an existing row is
	// not changed (its parents neither).
	Ensure(ctx context.Context, k Key, parents []string) (Lease, error)
	// Get returns the lease of k from a consistent read, or an error
	// matching ErrNotFound when there is none. An invalid key (see Key) is
	// an error that does not match ErrNotFound, without I/O.
	Get(ctx context.Context, k Key) (Lease, error)
	// Take makes owner the owner of the lease held, on condition that the
	// row still has held.Owner and held.Counter. It bumps Counter, and
	// OwnerSwitches when owner differs from held.Owner, and clears Handoff.
	// It serves for free leases (held.Owner == ""), expired ones and steals
	// alike; a planned move of a live worker's lease goes through
	// RequestHandoff and Transfer instead. owner must not be empty.
	Take(ctx context.Context, held Lease, owner string) (Lease, error)
	// Renew bumps the counter of the lease held, on condition of owner and
	// counter. Other workers see the change and keep the lease unexpired.
	Renew(ctx context.Context, held Lease) (Lease, error)
	// Checkpoint stores seq (a sequence number or ShardEnd, not empty) and
	// sub (see Lease.SubSequence: 0, or the number of user records of the
	// KPL aggregate at seq that settled when only some did) as the
	// checkpoint of the lease held and bumps the counter, on condition of
	// owner and counter.
	Checkpoint(ctx context.Context, held Lease, seq string, sub int) (Lease, error)
	// Release frees the lease held (Owner becomes "") and bumps the counter,
	// on condition of owner and counter, so that any worker may take it at
	// once. It clears Handoff. A non-empty held.Checkpoint is stored with
	// held.SubSequence as the checkpoint, as Checkpoint stores them: for a
	// lease as the store returned it that is the checkpoint the row has (the
	// condition ensures the row did not change since), and a caller that
	// sets them writes its last checkpoint and frees the lease in one
	// conditional write. An empty held.Checkpoint keeps the row's.
	Release(ctx context.Context, held Lease) (Lease, error)
	// RequestHandoff asks the owner of the lease held to hand it over to
	// requester: it sets Handoff to requester, on condition that the row
	// still has held.Owner (the counter may have moved on) and that Handoff
	// is empty or already requester. It does not bump the counter nor
	// change RenewedAt, so the owner's fenced writes from the lease it holds
	// keep working, and expiry is unaffected. It returns the new row, or an
	// error matching ErrLeaseLost when the lease has another owner, another
	// worker asked first, or the row is gone. held.Owner must not be empty
	// (a free lease is taken, not requested: ErrLeaseLost without I/O);
	// requester must not be empty and must differ from held.Owner.
	RequestHandoff(ctx context.Context, held Lease, requester string) (Lease, error)
	// Transfer hands the lease held over to to directly, on condition of
	// owner and counter: Owner becomes to, Counter is bumped, OwnerSwitches
	// too when to differs from held.Owner, and Handoff is cleared. The
	// checkpoint is written from held as Release writes it: a caller may set
	// held.Checkpoint and held.SubSequence to its last checkpoint. The
	// previous owner's held lease is stale from then on. held.Owner must not
	// be empty (ErrLeaseLost without I/O) and to must not be empty.
	Transfer(ctx context.Context, held Lease, to string) (Lease, error)
	// Delete removes the lease row of held.Key, on condition that the row
	// still has held.Owner (no owner when held.Owner is "") and held.Counter;
	// otherwise, the row being gone included, its error matches ErrLeaseLost
	// and nothing is deleted. It is for rows of shards the stream no longer
	// lists (trimmed away): a worker deletes such a row only while it is
	// free, expired or its own, as last read. Later writes with a held copy
	// of the deleted lease fail with ErrLeaseLost and do not create it
	// again; Ensure creates it anew.
	Delete(ctx context.Context, held Lease) error
	// Heartbeat registers owner as a worker of stream: it creates the
	// worker's row at counter 1, or bumps its counter, unconditionally, and
	// sets RenewedAt and Load. A nil load stores none (removes the one the
	// row had); a non-nil one is stored as Load describes (rounded, its
	// shards bounded), and the returned row has it as stored. It returns
	// the new row. A live worker heartbeats several times per lease
	// duration, as it renews its leases. stream must be a valid stream name
	// and owner must not be empty.
	Heartbeat(ctx context.Context, stream, owner string, load *Load) (Worker, error)
	// RemoveWorker deletes the row of worker w.Owner of w.Stream on
	// condition that its counter is still w.Counter: the row of a dead
	// worker, observed unchanged for the lease duration, or a worker's own
	// row at shutdown. When the worker heartbeat since, or its row is gone,
	// the error matches ErrLeaseLost and nothing is deleted.
	RemoveWorker(ctx context.Context, w Worker) error
	// Snapshot returns every row of the stream from one consistent read:
	// its leases, ordered by ShardID, its registered workers, ordered by
	// Owner, and its leader row (LeaderKey), nil when there is none. Both
	// slices are empty, not nil, when there are none. A row that cannot be
	// decoded is reported in Snapshot.Malformed, not as an error.
	Snapshot(ctx context.Context, stream string) (Snapshot, error)
	// Owned returns the keys of the leases whose owner is owner, in every
	// stream of the table, from the owner index: eventually consistent (a
	// lease just handed to owner may be missing for a moment, one just lost
	// may still be listed), never worker rows or the leader rows. The keys
	// are ordered by Key.String and empty, not nil, when there are none.
	// It is the cheap read of a worker that does not plan: it reads only
	// the index entries of owner's rows, whatever the number of workers and
	// shards. Memory answers exactly, which the contract allows. DynamoDB
	// reads the table's owner index (see the package documentation); on a
	// table without it, or while it is being built, the error matches
	// ErrNoOwnerIndex. owner must not be empty.
	Owned(ctx context.Context, owner string) ([]Key, error)
}

// Every error of a Store is an *awserr.Error: `lease: OP "KEY-OR-TABLE":`,
// the text of the sentinel it matches, its cause and an instruction for the
// reader. leaseErrs are the sentinels by kind: a failed condition is a lost
// lease, a missing table (DynamoDB's ResourceNotFoundException)
// ErrTableNotFound.
var leaseErrs = awserr.Sentinels{awserr.ConditionFailed: ErrLeaseLost, awserr.NotFound: ErrTableNotFound}

// lostError is the error of op on what whose condition failed: it matches
// ErrLeaseLost and cause.
func lostError(op, what string, cause error) error {
	return &awserr.Error{Pkg: "lease", Op: op, Resource: what, Kind: awserr.ConditionFailed, Cause: cause, Sentinels: &leaseErrs}
}

// plainError is the error of op on what that matches no sentinel of this
// package, only cause: invalid arguments, malformed rows, and failed calls
// no caller branches on.
func plainError(op, what string, cause error) error {
	return &awserr.Error{Pkg: "lease", Op: op, Resource: what, Kind: awserr.Classify(cause), Cause: cause}
}

// noRowError is the error of op on the key what that has no row: it
// matches ErrNotFound.
func noRowError(op, what string) error {
	return &awserr.Error{Pkg: "lease", Op: op, Resource: what, Kind: awserr.NotFound, What: "no such lease", Also: ErrNotFound}
}

// Operation names in error messages.
const (
	opEnsure     = "ensure"
	opGet        = "get"
	opTake       = "take"
	opRenew      = "renew"
	opCheckpoint = "checkpoint"
	opRelease    = "release"
	opTransfer   = "transfer"
	opHandoff    = "request handoff"
	opDelete     = "delete"
	opHeartbeat  = "heartbeat"
	opRemove     = "remove worker"
	opSnapshot   = "snapshot stream"
	opCheck      = "check table"
	opCreate     = "create table"
	opOwned      = "owned leases"
	opIndex      = "add owner index"
)

// errNoOwner is the cause of ErrLeaseLost for a Renew, Checkpoint,
// Transfer, Release or RequestHandoff of a held lease without owner.
var errNoOwner = errors.New("the held lease has no owner")

// checkWrite validates the arguments of a conditional write of a lease and
// returns the error to report, or nil. owner is the new owner of a take or
// a transfer, or the requester of a handoff; seq the sequence number of a
// checkpoint. It does no I/O.
func checkWrite(op string, held Lease, owner, seq string, sub int) error {
	if err := held.Key.check(); err != nil {
		return plainError(op, held.Key.String(), err)
	}
	switch op {
	case opTake:
		if owner == "" {
			return plainError(op, held.Key.String(), errors.New("empty owner"))
		}
	case opDelete:
	case opTransfer, opRelease:
		// Both write the held lease's checkpoint (see Store).
		if op == opTransfer && owner == "" {
			return plainError(op, held.Key.String(), errors.New("empty new owner"))
		}
		if err := checkCheckpoint(op, held, held.Checkpoint, held.SubSequence); err != nil {
			return err
		}
		return checkOwned(op, held)
	case opHandoff:
		switch {
		case owner == "":
			return plainError(op, held.Key.String(), errors.New("empty requester"))
		case held.Owner == "":
			return lostError(op, held.Key.String(), errNoOwner)
		case owner == held.Owner:
			return plainError(op, held.Key.String(), fmt.Errorf("requester %q is the owner", owner))
		}
	case opCheckpoint:
		if seq == "" {
			return plainError(op, held.Key.String(), errors.New("empty checkpoint"))
		}
		if err := checkCheckpoint(op, held, seq, sub); err != nil {
			return err
		}
		return checkOwned(op, held)
	default:
		return checkOwned(op, held)
	}
	return nil
}

// checkOwned refuses, with ErrLeaseLost, a write of a lease without owner.
func checkOwned(op string, held Lease) error {
	if held.Owner == "" {
		return lostError(op, held.Key.String(), errNoOwner)
	}
	return nil
}

// checkCheckpoint checks a checkpoint seq with sub-sequence sub that op
// writes (Checkpoint; Release and Transfer write the held lease's).
func checkCheckpoint(op string, held Lease, seq string, sub int) error {
	switch {
	case sub < 0:
		return plainError(op, held.Key.String(), fmt.Errorf("negative sub-sequence %d", sub))
	case sub > 0 && (seq == "" || seq == ShardEnd || seq == TrimHorizon || seq == AtTimestamp):
		return plainError(op, held.Key.String(), fmt.Errorf("sub-sequence %d with checkpoint %s", sub, seq))
	}
	return nil
}

// wallClock returns now in UTC, truncated to the millisecond and without a
// monotonic reading: the RenewedAt of a write, equal in every Store.
func wallClock(now func() time.Time) time.Time {
	return now().UTC().Truncate(time.Millisecond)
}
