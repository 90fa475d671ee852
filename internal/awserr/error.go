package awserr

import (
	"strconv"
	"strings"
)

// Sentinels are a package's exported sentinel errors by kind: the one an
// Error of each kind matches with errors.Is, nil for a kind that matches
// none. A package declares its tables once, as variables:
//
//	var leaseErrs = awserr.Sentinels{
//		awserr.ConditionFailed: ErrLeaseLost,
//		awserr.NotFound:        ErrTableNotFound,
//	}
type Sentinels [kinds]error

// Error is the failure of one operation of a package on one resource: a
// call to AWS, or a check the package made before or after one. Its message
// is
//
//	PKG: OP "RESOURCE"[: WHAT][: CAUSE][; HINT]
//
// for example `lease: check table "leases": lease table not found:
// operation error DynamoDB: DescribeTable, ResourceNotFoundException: ...;
// create it with: bootstrap leases init -table leases`. It matches, with
// errors.Is, the sentinel its Sentinels give its Kind, its Also and its
// Cause (and what they match). An Error is not modified once returned.
type Error struct {
	// Pkg is the calling package's name, the message's prefix: "publish",
	// "lease", "idempotency".
	Pkg string
	// Op is the operation, e.g. "put to stream", "check table", "claim".
	Op string
	// Resource is what the operation acted on, quoted in the message: a
	// stream, a queue URL, a table, a lease key, an item id.
	Resource string
	// Kind is what went wrong: Classify's answer for an AWS error, or the
	// package's own verdict.
	Kind Kind
	// What is printed after the resource. When it is empty, the text of
	// the sentinel the kind matches is printed instead (without its
	// package prefix), if it matches one.
	What string
	// Cause is the error that made the operation fail, printed after
	// What; may be nil.
	Cause error
	// Hint is an instruction for the reader, printed last after "; "; may
	// be empty.
	Hint string
	// Sentinels are the calling package's sentinels by kind; nil matches
	// none.
	Sentinels *Sentinels
	// Also is one more error the error matches, not printed; may be nil.
	Also error
}

// sentinel returns the sentinel e's kind matches, or nil.
func (e *Error) sentinel() error {
	if e.Sentinels == nil || e.Kind >= kinds {
		return nil
	}
	return e.Sentinels[e.Kind]
}

// Error returns the message, e.g. `publish: put to stream "orders": stream
// not found: ResourceNotFoundException: Stream orders not found`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pkg)
	b.WriteString(": ")
	b.WriteString(e.Op)
	b.WriteByte(' ')
	b.WriteString(strconv.Quote(e.Resource))
	what := e.What
	if what == "" {
		if s := e.sentinel(); s != nil {
			what = strings.TrimPrefix(s.Error(), e.Pkg+": ")
		}
	}
	if what != "" {
		b.WriteString(": ")
		b.WriteString(what)
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Is reports whether target is the sentinel e's kind matches.
func (e *Error) Is(target error) bool {
	s := e.sentinel()
	return s != nil && s == target
}

// Unwrap returns Also and Cause, those that are not nil.
func (e *Error) Unwrap() []error {
	switch {
	case e.Also == nil && e.Cause == nil:
		return nil
	case e.Also == nil:
		return []error{e.Cause}
	case e.Cause == nil:
		return []error{e.Also}
	}
	return []error{e.Also, e.Cause}
}
