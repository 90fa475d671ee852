package lease_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shardsettle/lambdaadapter/lease"
)

// table is a DynamoDB table of lease rows that applies the requests
// lease.DynamoDB's fenced writes make, as DynamoDB does: a condition that is
// a conjunction of "#a = :v" and "attribute_not_exists(#a)", and an update
// of SET "#a = :v" and "#a = if_not_exists(#a, :z) + :n" clauses and a
// REMOVE list. Any other expression fails the test.
type table struct {
	t    *testing.T
	rows map[string]map[string]types.AttributeValue
}

// attrValues compares attribute values by value.
var attrValues = cmpopts.IgnoreUnexported(types.AttributeValueMemberS{}, types.AttributeValueMemberN{}, types.AttributeValueMemberL{})

// newTable returns a table holding the rows given.
func newTable(t *testing.T, rows ...map[string]types.AttributeValue) *table {
	tb := &table{t: t, rows: map[string]map[string]types.AttributeValue{}}
	for _, r := range rows {
		tb.rows[keyOf(r)] = maps.Clone(r)
	}
	return tb
}

// holds reports whether cond holds on item.
func (tb *table) holds(cond string, names map[string]string, values map[string]types.AttributeValue, item map[string]types.AttributeValue) bool {
	tb.t.Helper()
	for _, term := range strings.Split(cond, " AND ") {
		// A free lease's owner: none, or empty (an older version's).
		if inner, ok := strings.CutPrefix(term, "(attribute_not_exists("); ok {
			name, value, _ := strings.Cut(strings.TrimSuffix(inner, ")"), ") OR ")
			if _, exists := item[names[name]]; exists {
				o, v, _ := strings.Cut(value, " = ")
				if o != name || !cmp.Equal(item[names[name]], values[v], attrValues) {
					return false
				}
			}
			continue
		}
		if inner, ok := strings.CutPrefix(term, "attribute_not_exists("); ok {
			if _, exists := item[names[strings.TrimSuffix(inner, ")")]]; exists {
				return false
			}
			continue
		}
		name, value, ok := strings.Cut(term, " = ")
		if !ok || !strings.HasPrefix(name, "#") || !strings.HasPrefix(value, ":") {
			tb.t.Fatalf("table: condition term %q of %q not supported", term, cond)
		}
		if !cmp.Equal(item[names[name]], values[value], attrValues) {
			return false
		}
	}
	return true
}

// apply applies an UpdateItem request to item and returns the new row.
func (tb *table) apply(in *dynamodb.UpdateItemInput, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	tb.t.Helper()
	next := maps.Clone(item)
	names, values := in.ExpressionAttributeNames, in.ExpressionAttributeValues
	set, remove, _ := strings.Cut(strings.TrimPrefix(aws.ToString(in.UpdateExpression), "SET "), " REMOVE ")
	for i, clause := range strings.Split(set, ", #") {
		if i > 0 {
			clause = "#" + clause
		}
		name, expr, _ := strings.Cut(clause, " = ")
		if v, ok := values[expr]; ok {
			next[names[name]] = v
			continue
		}
		// #a = if_not_exists(#a, :z) + :n
		var base, add string
		if rest, ok := strings.CutPrefix(expr, "if_not_exists("+name+", "); ok {
			base, add, _ = strings.Cut(rest, ") + ")
		}
		if values[base] == nil || values[add] == nil {
			tb.t.Fatalf("table: SET clause %q not supported", clause)
		}
		old, ok := next[names[name]]
		if !ok {
			old = values[base]
		}
		a, _ := strconv.ParseInt(old.(*types.AttributeValueMemberN).Value, 10, 64)
		b, _ := strconv.ParseInt(values[add].(*types.AttributeValueMemberN).Value, 10, 64)
		next[names[name]] = n(strconv.FormatInt(a+b, 10))
	}
	if remove != "" {
		for _, name := range strings.Split(remove, ", ") {
			delete(next, names[name])
		}
	}
	return next
}

// update performs an UpdateItem as DynamoDB does: the new row (ALL_NEW), or
// a ConditionalCheckFailedException that changes nothing.
func (tb *table) update(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	k := keyOf(in.Key)
	item, ok := tb.rows[k]
	if !ok || !tb.holds(aws.ToString(in.ConditionExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues, item) {
		return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	}
	tb.rows[k] = tb.apply(in, item)
	return &dynamodb.UpdateItemOutput{Attributes: maps.Clone(tb.rows[k])}, nil
}

// get performs a GetItem.
func (tb *table) get(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{Item: maps.Clone(tb.rows[keyOf(in.Key)])}, nil
}

// client returns a lease.DynamoDBAPI of the table. With lose set, the
// answer of every UpdateItem that the table applies is lost: the table
// applies it, runs between (what others write before the retry; may be
// nil), then applies the same request again, as the SDK's retryer sends it
// after a timeout, a reset connection or a 500, and answers what that
// second attempt gets.
func (tb *table) client(lose bool, between func(*table)) *fakeDynamoDB {
	return &fakeDynamoDB{
		t:       tb.t,
		getItem: tb.get,
		updateItem: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			out, err := tb.update(in)
			if err != nil || !lose {
				return out, err
			}
			if between != nil {
				between(tb)
			}
			return tb.update(in)
		},
	}
}

// set changes attributes of the row of orders:shardId-0 as another writer
// would; a nil value removes the attribute.
func (tb *table) set(attrs map[string]types.AttributeValue) {
	r := tb.rows["orders:shardId-0"]
	for name, v := range attrs {
		if v == nil {
			delete(r, name)
		} else {
			r[name] = v
		}
	}
}

// counter returns the counter of the row of orders:shardId-0.
func (tb *table) counter() int64 {
	c, _ := strconv.ParseInt(tb.rows["orders:shardId-0"]["leaseCounter"].(*types.AttributeValueMemberN).Value, 10, 64)
	return c
}

// freeRow is row() without owner: a free lease at counter 7.
func freeRow() map[string]types.AttributeValue {
	r := row()
	delete(r, "leaseOwner")
	delete(r, "handoff")
	return r
}

// fencedWrites are the writes that bump the counter, each with the row it
// starts from and the lease held.
var fencedWrites = []struct {
	name  string
	row   func() map[string]types.AttributeValue
	held  lease.Lease
	owned bool // the lease has an owner after the write
	do    func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error)
}{
	{"take free", freeRow, lease.Lease{Key: heldW1.Key, Counter: 7}, true,
		func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Take(ctx, held, "w2")
		}},
	{"steal", row, heldW1, true,
		func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Take(ctx, held, "w2")
		}},
	{"renew", row, heldW1, true,
		func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Renew(ctx, held)
		}},
	{"checkpoint", row, heldW1, true,
		func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Checkpoint(ctx, held, "200", 0)
		}},
	{"checkpoint inside an aggregate", row, heldW1, true,
		func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Checkpoint(ctx, held, "200", 3)
		}},
	{"release", row, heldW1, false,
		func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Release(ctx, held)
		}},
	{"release with the last checkpoint", row, withCheckpoint(heldW1, "200", 0), false,
		func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Release(ctx, held)
		}},
	{"transfer", row, heldW1, true,
		func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Transfer(ctx, held, "w2")
		}},
	{"transfer with the last checkpoint inside an aggregate", row, withCheckpoint(heldW1, "200", 2), true,
		func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Transfer(ctx, held, "w2")
		}},
}

// TestDynamoDBLostAnswer: a fenced write that DynamoDB applied but whose
// answer was lost, so that the SDK's retry of it failed its condition,
// returns the row it wrote, exactly as the same write answered in time
// does, instead of ErrLeaseLost. (A spurious ErrLeaseLost stops the shard:
// the lease is left to expire and the records settled since the last
// checkpoint are delivered again.)
func TestDynamoDBLostAnswer(t *testing.T) {
	for _, w := range fencedWrites {
		t.Run(w.name, func(t *testing.T) {
			// Virtual time: both runs write the same renewedAt, so the
			// rows compare equal.
			synctest.Test(t, func(t *testing.T) {
				want, err := w.do(t.Context(), lease.NewDynamoDB(newTable(t, w.row()).client(false, nil), "leases"), w.held)
				if err != nil {
					t.Fatalf("write answered in time: %v", err)
				}
				tb := newTable(t, w.row())
				f := tb.client(true, nil)
				d := lease.NewDynamoDB(f, "leases")
				got, err := w.do(t.Context(), d, w.held)
				if err != nil {
					t.Fatalf("write whose answer was lost: %v, want the row it wrote", err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("row returned after the lost answer (-answered in time +lost):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"UpdateItem", "GetItem"}, f.calls); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
				stored, err := d.Get(t.Context(), heldW1.Key)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(stored, got); diff != "" {
					t.Errorf("row returned differs from the row stored (-stored +returned):\n%s", diff)
				}
				// The row returned is the held lease of the next write.
				if got.Owner != "" {
					if _, err := d.Renew(t.Context(), got); err != nil {
						t.Errorf("Renew of the row returned: %v", err)
					}
				}
			})
		})
	}
}

// TestDynamoDBLostAnswerHandoffAfter: a handoff requested between the
// write and its retry (RequestHandoff leaves the counter alone) does not
// hide the write, and the row returned shows the request.
func TestDynamoDBLostAnswerHandoffAfter(t *testing.T) {
	for _, w := range fencedWrites {
		if !w.owned {
			continue // a free lease cannot be requested
		}
		t.Run(w.name, func(t *testing.T) {
			tb := newTable(t, w.row())
			d := lease.NewDynamoDB(tb.client(true, func(tb *table) { tb.set(map[string]types.AttributeValue{"handoff": s("w9")}) }), "leases")
			got, err := w.do(t.Context(), d, w.held)
			if err != nil {
				t.Fatalf("write whose answer was lost, handoff requested after it: %v, want the row it wrote", err)
			}
			if got.Counter != w.held.Counter+1 || got.Handoff != "w9" {
				t.Errorf("row returned %+v, want counter %d and the handoff request of w9", got, w.held.Counter+1)
			}
		})
	}
}

// TestDynamoDBConditionFailedNotOurs: a failed condition whose row this
// write did not produce stays ErrLeaseLost, wrapping the SDK's exception,
// and the row is left as it is: another worker wrote after this write, the
// row is gone, an older version of this package wrote after it, this
// process wrote from the same held lease before (a stale copy: same owner,
// counter held+1), or the row cannot be read back.
func TestDynamoDBConditionFailedNotOurs(t *testing.T) {
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	for _, tc := range []struct {
		name    string
		between func(*table)
		repeat  bool  // no lost answer: the write is made twice from the same held lease
		getErr  error // the read back fails with it
		detail  string
	}{
		{name: "another worker took the lease after the write", between: func(tb *table) {
			tb.set(map[string]types.AttributeValue{"leaseOwner": s("w3"), "leaseCounter": n(strconv.FormatInt(tb.counter()+1, 10)), "writeToken": s("THEIRS")})
		}, detail: `stored owner "w3"`},
		{name: "the row was deleted after the write", between: func(tb *table) { delete(tb.rows, "orders:shardId-0") },
			detail: "the lease does not exist"},
		{name: "an older version wrote after the write", between: func(tb *table) {
			tb.set(map[string]types.AttributeValue{"leaseCounter": n(strconv.FormatInt(tb.counter()+1, 10))})
		}, detail: "stored owner"},
		{name: "the same write again from the same held lease", repeat: true, detail: "stored owner"},
		{name: "the row cannot be read back", getErr: throttled, detail: "reading the row back"},
	} {
		for _, w := range fencedWrites {
			t.Run(tc.name+"/"+w.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					tb := newTable(t, w.row())
					f := tb.client(!tc.repeat, tc.between)
					if tc.getErr != nil {
						f.getItem = func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, tc.getErr }
					}
					d := lease.NewDynamoDB(f, "leases")
					if tc.repeat {
						if _, err := w.do(t.Context(), d, w.held); err != nil {
							t.Fatalf("first write: %v", err)
						}
					}
					before := maps.Clone(tb.rows)
					got, err := w.do(t.Context(), d, w.held)
					if !errors.Is(err, lease.ErrLeaseLost) {
						t.Fatalf("write = %+v, %v; want an error matching lease.ErrLeaseLost", got, err)
					}
					var ccf *types.ConditionalCheckFailedException
					if !errors.As(err, &ccf) || !strings.Contains(err.Error(), tc.detail) {
						t.Errorf("error %q does not wrap the SDK's exception or lacks %q", err, tc.detail)
					}
					if tc.getErr != nil && !errors.Is(err, tc.getErr) {
						t.Errorf("error %q does not wrap the read's error", err)
					}
					if tc.repeat {
						if diff := cmp.Diff(before, tb.rows, attrValues); diff != "" {
							t.Errorf("the refused write changed the table (-before +after):\n%s", diff)
						}
					}
				})
			})
		}
	}
}

// unansweredOnce returns a client of tb whose first UpdateItem is applied
// but answered with err (as a call that timed out after DynamoDB applied
// it, with no retry the caller saw refused); later calls are answered.
func (tb *table) unansweredOnce(err error) *fakeDynamoDB {
	first := true
	return &fakeDynamoDB{
		t:       tb.t,
		getItem: tb.get,
		updateItem: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			out, uerr := tb.update(in)
			if first {
				first = false
				if uerr == nil {
					return nil, err
				}
			}
			return out, uerr
		},
	}
}

// TestDynamoDBUnansweredWriteApplied: a renewal or checkpoint whose call
// ended with no answer (here a deadline) although DynamoDB applied it does
// not cost the lease. The next write of the same held lease is refused (the
// counter moved on); the row read back is the unanswered write's (its
// token, counter held+1, same owner), so the lease is still held and the
// write is made again from there. Before, the refusal was taken for a lost
// lease: the shard stopped and what settled since its checkpoint came again
// (seen in the fault soak: renewals timing out under DynamoDB throttling).
// When another worker wrote the row in between, it stays ErrLeaseLost.
func TestDynamoDBUnansweredWriteApplied(t *testing.T) {
	timeout := fmt.Errorf("https response error StatusCode: 0, RequestID: , canceled, %w", context.DeadlineExceeded)
	firsts := []struct {
		name string
		do   func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error)
	}{
		{"renew", func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Renew(ctx, held)
		}},
		{"checkpoint", func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Checkpoint(ctx, held, "150", 0)
		}},
	}
	for _, first := range firsts {
		for _, w := range fencedWrites {
			if w.held.Owner != "w1" || strings.HasPrefix(w.name, "steal") {
				continue // writes of the holder, w1
			}
			t.Run(first.name+" then "+w.name, func(t *testing.T) {
				tb := newTable(t, w.row())
				f := tb.unansweredOnce(timeout)
				d := lease.NewDynamoDB(f, "leases")
				if _, err := first.do(t.Context(), d, w.held); err == nil || errors.Is(err, lease.ErrLeaseLost) {
					t.Fatalf("unanswered %s = %v, want the call's error", first.name, err)
				}
				if tb.counter() != w.held.Counter+1 {
					t.Fatalf("counter %d after the unanswered write, want it applied (%d)", tb.counter(), w.held.Counter+1)
				}
				got, err := w.do(t.Context(), d, w.held)
				if err != nil {
					t.Fatalf("%s after an unanswered %s that was applied: %v, want it made again from the row", w.name, first.name, err)
				}
				if got.Counter != w.held.Counter+2 {
					t.Errorf("counter %d, want %d", got.Counter, w.held.Counter+2)
				}
				if diff := cmp.Diff([]string{"UpdateItem", "UpdateItem", "GetItem", "UpdateItem"}, f.calls); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
				stored, err := d.Get(t.Context(), w.held.Key)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(stored, got); diff != "" {
					t.Errorf("row returned differs from the row stored (-stored +returned):\n%s", diff)
				}
			})
			t.Run(first.name+" then another worker then "+w.name, func(t *testing.T) {
				tb := newTable(t, w.row())
				d := lease.NewDynamoDB(tb.unansweredOnce(timeout), "leases")
				if _, err := first.do(t.Context(), d, w.held); err == nil {
					t.Fatal("unanswered write answered")
				}
				tb.set(map[string]types.AttributeValue{"leaseOwner": s("w3"), "leaseCounter": n(strconv.FormatInt(tb.counter()+1, 10)), "writeToken": s("THEIRS")})
				if got, err := w.do(t.Context(), d, w.held); !errors.Is(err, lease.ErrLeaseLost) {
					t.Fatalf("%s = %+v, %v; want ErrLeaseLost (w3 took the lease)", w.name, got, err)
				}
				if tb.counter() != w.held.Counter+2 {
					t.Errorf("row written: counter %d, want %d", tb.counter(), w.held.Counter+2)
				}
			})
		}
	}
	// An answered write forgets what came before: the same held lease
	// written again after it is refused, as before.
	t.Run("answered in between", func(t *testing.T) {
		tb := newTable(t, row())
		d := lease.NewDynamoDB(tb.unansweredOnce(timeout), "leases")
		if _, err := d.Renew(t.Context(), heldW1); err == nil {
			t.Fatal("unanswered write answered")
		}
		next, err := d.Get(t.Context(), heldW1.Key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Renew(t.Context(), next); err != nil {
			t.Fatalf("renew of the row read: %v", err)
		}
		if _, err := d.Renew(t.Context(), heldW1); !errors.Is(err, lease.ErrLeaseLost) {
			t.Fatalf("renew from the stale held lease = %v, want ErrLeaseLost", err)
		}
	})
}
