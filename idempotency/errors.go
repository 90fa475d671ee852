package idempotency

import (
	"errors"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
	"github.com/shardsettle/lambdaadapter/internal/message"
)

var (
	// ErrInProgress is matched (with errors.Is) by the error of the Retry a
	// Handler returns for a record whose key is claimed by a run that has
	// not finished and whose in-progress expiry has not passed: another
	// worker, invocation or lane is handling the same record (or one with
	// the same key) right now. The handler was not run; the record stays
	// unsettled and comes again, and then finds the other run's result.
	// It is the one reason the adapter takes as "attempted nothing": a
	// Retry (or RetryAfter) whose error matches it stays unsettled even
	// under WithMaxAttempts or a dead-letter target, without counting an
	// attempt and without a counted copy, delay message or dead letter
	// (see the package documentation, "Counted retries").
	ErrInProgress error = heldError("idempotency: record in progress elsewhere")
	// ErrKey is matched by the error of the Retry a Handler returns when it
	// cannot derive the record's key: the key function (WithKeyFunc)
	// returned an error (the error matches that error too) or an empty
	// key, or the default key lacks the shard id or the sequence number.
	// The handler was not run; the record stays unsettled.
	ErrKey = errors.New("idempotency: no key for the record")
	// ErrStore is matched by the error of a DynamoDB call of this package
	// that failed (the error also matches the SDK's error). When the claim
	// fails, the Handler returns Retry with it and does not run the handler.
	ErrStore = errors.New("idempotency: store failed")
	// ErrTableNotFound is matched by the error of any DynamoDB call on an
	// idempotency table that does not exist (it matches ErrStore too). The
	// message names the table and the command that creates it: "create it
	// with: bootstrap idempotency init -table NAME".
	ErrTableNotFound = errors.New("idempotency: table not found")
	// ErrDuplicate is matched by the error of the Drop a Handler returns for
	// a record whose key was completed earlier by a run that returned
	// Drop: the handler is not run again, and the Drop is repeated so that
	// a dead-letter target for drops (WithDeadLetterDrops) still gets the
	// record. A record completed earlier with Ack is acknowledged with a
	// plain Ack.
	ErrDuplicate = errors.New("idempotency: handled before")
	// ErrPayloadMismatch is matched by the error of the Drop a Handler
	// returns, with WithPayloadValidation, for a record whose key was
	// completed earlier with a different payload (by its SHA-256): the key
	// function maps two different records to one key. The handler is not
	// run.
	ErrPayloadMismatch = errors.New("idempotency: payload differs from the completed record with the same key")
	// ErrTTLUnsupported is matched by the error of CreateTable when the
	// table was created (or exists) but the service does not know
	// UpdateTimeToLive (a local stand-in such as dynalite): expired items
	// are then never deleted, which changes nothing for correctness, since
	// every read compares the expiration itself.
	ErrTTLUnsupported = errors.New("idempotency: the service does not support time to live")
)

// Every error of a DynamoDB call of this package is an *awserr.Error:
// `idempotency: OP "ITEM-OR-TABLE":`, the text of the sentinel it matches
// (ErrStore is not printed), its cause and an instruction for the reader.
// storeErrs are the sentinels of the store's calls by kind (a missing
// table is ErrTableNotFound; all of them match ErrStore too), ttlErrs
// those of the time-to-live calls.
var (
	storeErrs = awserr.Sentinels{awserr.NotFound: ErrTableNotFound}
	ttlErrs   = awserr.Sentinels{awserr.Unsupported: ErrTTLUnsupported}
)

// storeError is the error of op on the item id that matches ErrStore and
// cause: a failed call, or an item that cannot be read.
func storeError(op, id string, cause error) error {
	return &awserr.Error{Pkg: "idempotency", Op: op, Resource: id, Kind: awserr.Classify(cause), Cause: cause, Also: ErrStore}
}

// plainError is the error of op on the table that matches no sentinel of
// this package, only cause.
func plainError(op, table string, cause error) error {
	return &awserr.Error{Pkg: "idempotency", Op: op, Resource: table, Kind: awserr.Classify(cause), Cause: cause}
}

// Operation names in error messages.
const (
	opClaim    = "claim"
	opRead     = "read"
	opComplete = "complete"
	opRelease  = "release"
	opCheck    = "check table"
	opCreate   = "create table"
	opTTL      = "enable time to live on table"
)

// keyError is the error of a record without a key: it matches ErrKey and
// the key function's error.
type keyError struct {
	shardID, seq string
	cause        error
}

func (e *keyError) Error() string {
	return "idempotency: no key for the record at shard " + e.shardID + ", sequence number " + e.seq + ": " + e.cause.Error()
}

func (e *keyError) Unwrap() []error { return []error{ErrKey, e.cause} }

// heldError is ErrInProgress: it also matches the engine's marker of a
// retry that attempted nothing (message.ErrHeldElsewhere), which keeps the
// record unsettled whatever the cap.
type heldError string

func (e heldError) Error() string { return string(e) }
func (e heldError) Unwrap() error { return message.ErrHeldElsewhere }

// unattemptedError is the error of the Retry for a record whose handler did
// not run because the table could not be used (the claim, or the read
// after a refused claim, failed): it matches the store's error (ErrStore,
// the SDK's) and, as ErrInProgress does, the engine's marker of a retry
// that attempted nothing (message.ErrHeldElsewhere). The record therefore
// stays unsettled whatever the cap or dead-letter target, without an
// attempt counted: a DynamoDB outage or throttling never retires or
// dead-letters a record unhandled.
type unattemptedError struct{ err error }

func (e *unattemptedError) Error() string   { return e.err.Error() }
func (e *unattemptedError) Unwrap() []error { return []error{e.err, message.ErrHeldElsewhere} }
