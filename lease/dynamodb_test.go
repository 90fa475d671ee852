package lease_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shardsettle/lambdaadapter/lease"
)

// fakeDynamoDB is a scripted lease.DynamoDBAPI: each call records its input
// and returns what the matching function returns, or errUnexpected when
// that function is nil. It checks the expressions of every request the way
// DynamoDB does: every placeholder used is defined and every one defined is
// used.
type fakeDynamoDB struct {
	t *testing.T

	getItem       func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
	putItem       func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	updateItem    func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	deleteItem    func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error)
	scan          func(*dynamodb.ScanInput) (*dynamodb.ScanOutput, error)
	describeTable func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error)
	createTable   func(*dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error)

	calls []string
}

var errUnexpected = errors.New("fake: unexpected call")

// wrap returns err as the SDK returns it: inside a smithy.OperationError.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
}

func call[In, Out any](f *fakeDynamoDB, op string, fn func(In) (*Out, error), in In) (*Out, error) {
	f.calls = append(f.calls, op)
	if fn == nil {
		return nil, errUnexpected
	}
	out, err := fn(in)
	return out, wrap(op, err)
}

// placeholder matches the names (#x) and values (:x) of an expression.
var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// checkExpressions fails the test unless the placeholders of exprs and the
// maps match exactly, and every attribute name is behind a placeholder.
func (f *fakeDynamoDB) checkExpressions(names map[string]string, values map[string]types.AttributeValue, exprs ...*string) {
	f.t.Helper()
	used := map[string]bool{}
	var all []string
	for _, e := range exprs {
		all = append(all, aws.ToString(e))
		for _, p := range placeholder.FindAllString(aws.ToString(e), -1) {
			used[p] = true
		}
	}
	defined := map[string]bool{}
	for n := range names {
		defined[n] = true
	}
	for v := range values {
		defined[v] = true
	}
	if diff := cmp.Diff(defined, used, cmpopts.EquateEmpty()); diff != "" {
		f.t.Errorf("placeholders defined (-) and used (+) in %q differ:\n%s", all, diff)
	}
}

func (f *fakeDynamoDB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if !aws.ToBool(in.ConsistentRead) {
		f.t.Error("GetItem without ConsistentRead")
	}
	return call(f, "GetItem", f.getItem, in)
}

func (f *fakeDynamoDB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.checkExpressions(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression)
	return call(f, "PutItem", f.putItem, in)
}

func (f *fakeDynamoDB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.checkExpressions(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.UpdateExpression, in.ConditionExpression)
	if in.ReturnValues != types.ReturnValueAllNew {
		f.t.Errorf("UpdateItem with ReturnValues %q, want ALL_NEW", in.ReturnValues)
	}
	if in.ConditionExpression == nil {
		f.t.Error("UpdateItem without a condition")
	}
	return call(f, "UpdateItem", f.updateItem, in)
}

func (f *fakeDynamoDB) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return call(f, "DeleteItem", f.deleteItem, in)
}

func (f *fakeDynamoDB) Scan(_ context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	f.checkExpressions(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.FilterExpression)
	if !aws.ToBool(in.ConsistentRead) {
		f.t.Error("Scan without ConsistentRead")
	}
	return call(f, "Scan", f.scan, in)
}

func (f *fakeDynamoDB) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return call(f, "DescribeTable", f.describeTable, in)
}

func (f *fakeDynamoDB) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return call(f, "CreateTable", f.createTable, in)
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// row is a well-formed row: orders:shardId-0, owner w1, counter 7.
func row() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"leaseKey":       s("orders:shardId-0"),
		"stream":         s("orders"),
		"leaseOwner":     s("w1"),
		"leaseCounter":   n("7"),
		"checkpoint":     s("100"),
		"ownerSwitches":  n("2"),
		"renewedAt":      s("2026-12-02T10:11:12.345Z"),
		"parentShardIds": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("shardId-a"), s("shardId-b")}},
	}
}

var heldW1 = lease.Lease{Key: lease.Key{Stream: "orders", ShardID: "shardId-0"}, Owner: "w1", Counter: 7}

// goodTable is the description of an ACTIVE lease table.
func goodTable(status types.TableStatus) *dynamodb.DescribeTableOutput {
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName:            aws.String("leases"),
		TableStatus:          status,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
	}}
}

// storeCalls runs every Store method once.
var storeCalls = []struct {
	name string
	do   func(ctx context.Context, st lease.Store) error
}{
	{"Ensure", func(ctx context.Context, st lease.Store) error { _, err := st.Ensure(ctx, heldW1.Key, nil); return err }},
	{"List", func(ctx context.Context, st lease.Store) error { _, err := st.List(ctx, "orders"); return err }},
	{"Get", func(ctx context.Context, st lease.Store) error { _, err := st.Get(ctx, heldW1.Key); return err }},
	{"Take", func(ctx context.Context, st lease.Store) error { _, err := st.Take(ctx, heldW1, "w2"); return err }},
	{"Renew", func(ctx context.Context, st lease.Store) error { _, err := st.Renew(ctx, heldW1); return err }},
	{"Checkpoint", func(ctx context.Context, st lease.Store) error { _, err := st.Checkpoint(ctx, heldW1, "1"); return err }},
	{"Release", func(ctx context.Context, st lease.Store) error { _, err := st.Release(ctx, heldW1); return err }},
	{"Delete", func(ctx context.Context, st lease.Store) error { return st.Delete(ctx, heldW1.Key) }},
}

// failingFake returns a fake whose every call fails with err.
func failingFake(t *testing.T, err error) *fakeDynamoDB {
	return &fakeDynamoDB{
		t:             t,
		getItem:       func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, err },
		putItem:       func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, err },
		updateItem:    func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, err },
		deleteItem:    func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) { return nil, err },
		scan:          func(*dynamodb.ScanInput) (*dynamodb.ScanOutput, error) { return nil, err },
		describeTable: func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) { return nil, err },
		createTable:   func(*dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) { return nil, err },
	}
}

func TestDynamoDBTableNotFound(t *testing.T) {
	missing := &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	const hint = "create it with: bootstrap leases init -table leases"
	check := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, lease.ErrTableNotFound) {
			t.Fatalf("error = %v, want one matching lease.ErrTableNotFound", err)
		}
		var rnf *types.ResourceNotFoundException
		if !errors.As(err, &rnf) {
			t.Errorf("error %v does not wrap the SDK's exception", err)
		}
		if !strings.Contains(err.Error(), hint) || !strings.HasPrefix(err.Error(), "lease: ") {
			t.Errorf("error %q does not start with \"lease: \" or lacks %q", err, hint)
		}
	}
	for _, c := range storeCalls {
		t.Run(c.name, func(t *testing.T) {
			check(t, c.do(t.Context(), lease.NewDynamoDB(failingFake(t, missing), "leases")))
		})
	}
	t.Run("Check", func(t *testing.T) {
		err := lease.NewDynamoDB(failingFake(t, missing), "leases").Check(t.Context())
		check(t, err)
		want := `lease: check table "leases": lease table not found: operation error DynamoDB: DescribeTable, ResourceNotFoundException: Requested resource not found; create it with: bootstrap leases init -table leases`
		if err.Error() != want {
			t.Errorf("message:\n got %s\nwant %s", err, want)
		}
	})
}

func TestDynamoDBConditionFailedIsLeaseLost(t *testing.T) {
	ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	for _, c := range storeCalls[3:7] {
		t.Run(c.name, func(t *testing.T) {
			err := c.do(t.Context(), lease.NewDynamoDB(failingFake(t, ccf), "leases"))
			if !errors.Is(err, lease.ErrLeaseLost) {
				t.Fatalf("error = %v, want one matching lease.ErrLeaseLost", err)
			}
			var got *types.ConditionalCheckFailedException
			if !errors.As(err, &got) {
				t.Errorf("error %v does not wrap the SDK's exception", err)
			}
		})
	}
}

func TestDynamoDBOtherErrors(t *testing.T) {
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	for _, c := range storeCalls {
		t.Run(c.name, func(t *testing.T) {
			err := c.do(t.Context(), lease.NewDynamoDB(failingFake(t, throttled), "leases"))
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != "ThrottlingException" {
				t.Fatalf("error = %v, want one wrapping the API error", err)
			}
			for _, sentinel := range []error{lease.ErrLeaseLost, lease.ErrNotFound, lease.ErrTableNotFound} {
				if errors.Is(err, sentinel) {
					t.Errorf("error %v matches %v", err, sentinel)
				}
			}
		})
	}
}

func TestDynamoDBCheck(t *testing.T) {
	wrongKey := goodTable(types.TableStatusActive)
	wrongKey.Table.KeySchema = []types.KeySchemaElement{
		{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash},
		{AttributeName: aws.String("stream"), KeyType: types.KeyTypeRange},
	}
	numberKey := goodTable(types.TableStatusActive)
	numberKey.Table.AttributeDefinitions[0].AttributeType = types.ScalarAttributeTypeN
	for _, tc := range []struct {
		name    string
		out     *dynamodb.DescribeTableOutput
		wantErr string
	}{
		{"active", goodTable(types.TableStatusActive), ""},
		{"updating", goodTable(types.TableStatusUpdating), ""},
		{"creating", goodTable(types.TableStatusCreating), "table status is CREATING"},
		{"deleting", goodTable(types.TableStatusDeleting), "table status is DELETING"},
		{"range key", wrongKey, "not a lease table: want only a hash key leaseKey of type S, got key schema [leaseKey HASH (S) stream RANGE ()]"},
		{"number key", numberKey, "got key schema [leaseKey HASH (N)]"},
		{"no table", &dynamodb.DescribeTableOutput{}, "DescribeTable returned no table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDynamoDB{t: t, describeTable: func(in *dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
				if got := aws.ToString(in.TableName); got != "leases" {
					t.Errorf("DescribeTable of %q", got)
				}
				return tc.out, nil
			}}
			err := lease.NewDynamoDB(f, "leases").Check(t.Context())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.Is(err, lease.ErrTableNotFound) {
				t.Fatalf("Check = %v, want an error containing %q that is not ErrTableNotFound", err, tc.wantErr)
			}
		})
	}
}

func TestDynamoDBCreateTable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		createErr error
		wantErr   bool
	}{
		{"new", nil, false},
		{"exists", &types.ResourceInUseException{Message: aws.String("Table already exists: leases")}, false},
		{"refused", &smithy.GenericAPIError{Code: "LimitExceededException", Message: "too many tables"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var created *dynamodb.CreateTableInput
			f := &fakeDynamoDB{
				t: t,
				createTable: func(in *dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) {
					created = in
					return &dynamodb.CreateTableOutput{}, tc.createErr
				},
				describeTable: func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
					return goodTable(types.TableStatusActive), nil
				},
			}
			err := lease.NewDynamoDB(f, "leases").CreateTable(t.Context())
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), `lease: create table "leases": `) {
					t.Fatalf("CreateTable = %v, want an error naming the table", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateTable: %v", err)
			}
			want := &dynamodb.CreateTableInput{
				TableName:            aws.String("leases"),
				BillingMode:          types.BillingModePayPerRequest,
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
			}
			if diff := cmp.Diff(want, created, cmpopts.IgnoreUnexported(dynamodb.CreateTableInput{}, types.AttributeDefinition{}, types.KeySchemaElement{})); diff != "" {
				t.Errorf("CreateTable input (-want +got):\n%s", diff)
			}
			// Waited for ACTIVE, then checked the schema.
			if diff := cmp.Diff([]string{"CreateTable", "DescribeTable", "DescribeTable"}, f.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDynamoDBListPaginates(t *testing.T) {
	item := func(key string) map[string]types.AttributeValue {
		r := row()
		r["leaseKey"] = s(key)
		return r
	}
	var starts []string
	f := &fakeDynamoDB{t: t, scan: func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		start := ""
		if k, ok := in.ExclusiveStartKey["leaseKey"].(*types.AttributeValueMemberS); ok {
			start = k.Value
		}
		starts = append(starts, start)
		if got := in.ExpressionAttributeValues[":s"].(*types.AttributeValueMemberS).Value; got != "orders" {
			t.Errorf("Scan filtered by stream %q", got)
		}
		switch start {
		case "":
			return &dynamodb.ScanOutput{
				Items:            []map[string]types.AttributeValue{item("orders:shardId-2"), item("orders:shardId-0")},
				LastEvaluatedKey: map[string]types.AttributeValue{"leaseKey": s("orders:shardId-0")},
			}, nil
		case "orders:shardId-0":
			// An empty page in the middle, as a filtered scan may return.
			return &dynamodb.ScanOutput{LastEvaluatedKey: map[string]types.AttributeValue{"leaseKey": s("x:y")}}, nil
		case "x:y":
			return &dynamodb.ScanOutput{Items: []map[string]types.AttributeValue{item("orders:shardId-1")}}, nil
		}
		t.Fatalf("Scan from unexpected key %q", start)
		return nil, nil
	}}
	ls, err := lease.NewDynamoDB(f, "leases").List(t.Context(), "orders")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.Key.ShardID)
	}
	if diff := cmp.Diff([]string{"shardId-0", "shardId-1", "shardId-2"}, got); diff != "" {
		t.Errorf("shards listed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "orders:shardId-0", "x:y"}, starts); diff != "" {
		t.Errorf("ExclusiveStartKey of the scans (-want +got):\n%s", diff)
	}
}

func TestDynamoDBDecode(t *testing.T) {
	get := func(t *testing.T, item map[string]types.AttributeValue) (lease.Lease, error) {
		f := &fakeDynamoDB{t: t, getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{Item: item}, nil
		}}
		return lease.NewDynamoDB(f, "leases").Get(t.Context(), heldW1.Key)
	}
	t.Run("full row", func(t *testing.T) {
		l, err := get(t, row())
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		want := lease.Lease{Key: heldW1.Key, Owner: "w1", Counter: 7, Checkpoint: "100",
			ParentShardIDs: []string{"shardId-a", "shardId-b"}, OwnerSwitches: 2}
		if diff := cmp.Diff(want, l, cmpopts.IgnoreFields(lease.Lease{}, "RenewedAt")); diff != "" {
			t.Errorf("lease (-want +got):\n%s", diff)
		}
		if got, want := l.RenewedAt.Format("2006-01-02T15:04:05.000Z07:00"), "2026-12-02T10:11:12.345Z"; got != want {
			t.Errorf("RenewedAt = %s, want %s", got, want)
		}
	})
	t.Run("minimal row", func(t *testing.T) {
		l, err := get(t, map[string]types.AttributeValue{"leaseKey": s("orders:shardId-0"), "leaseCounter": n("0")})
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if diff := cmp.Diff(lease.Lease{Key: heldW1.Key}, l); diff != "" {
			t.Errorf("lease (-want +got):\n%s", diff)
		}
	})
	t.Run("no row", func(t *testing.T) {
		if l, err := get(t, nil); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("Get = %+v, %v; want lease.ErrNotFound", l, err)
		}
	})
	for _, tc := range []struct {
		name    string
		change  func(map[string]types.AttributeValue)
		wantErr string
	}{
		{"no key", func(r map[string]types.AttributeValue) { delete(r, "leaseKey") }, "no attribute leaseKey"},
		{"number key", func(r map[string]types.AttributeValue) { r["leaseKey"] = n("1") }, "attribute leaseKey is *types.AttributeValueMemberN, want S"},
		{"bad key", func(r map[string]types.AttributeValue) { r["leaseKey"] = s("orders") }, `malformed key "orders"`},
		{"no counter", func(r map[string]types.AttributeValue) { delete(r, "leaseCounter") }, "no attribute leaseCounter"},
		{"string counter", func(r map[string]types.AttributeValue) { r["leaseCounter"] = s("7") }, "attribute leaseCounter is *types.AttributeValueMemberS, want N"},
		{"fraction counter", func(r map[string]types.AttributeValue) { r["leaseCounter"] = n("7.5") }, "attribute leaseCounter: strconv.ParseInt"},
		{"huge switches", func(r map[string]types.AttributeValue) { r["ownerSwitches"] = n("1e40") }, "attribute ownerSwitches"},
		{"number owner", func(r map[string]types.AttributeValue) { r["leaseOwner"] = n("1") }, "attribute leaseOwner is"},
		{"null checkpoint", func(r map[string]types.AttributeValue) {
			r["checkpoint"] = &types.AttributeValueMemberNULL{Value: true}
		}, "attribute checkpoint is"},
		{"bad time", func(r map[string]types.AttributeValue) { r["renewedAt"] = s("yesterday") }, "attribute renewedAt"},
		{"string set parents", func(r map[string]types.AttributeValue) {
			r["parentShardIds"] = &types.AttributeValueMemberSS{Value: []string{"a"}}
		}, "attribute parentShardIds is *types.AttributeValueMemberSS, want L"},
		{"number parent", func(r map[string]types.AttributeValue) {
			r["parentShardIds"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{s("a"), n("1")}}
		}, "attribute parentShardIds: element 1 is *types.AttributeValueMemberN, want S"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := row()
			tc.change(r)
			l, err := get(t, r)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "malformed row") {
				t.Fatalf("Get = %+v, %v; want a malformed row error containing %q", l, err, tc.wantErr)
			}
		})
	}
}

func TestDynamoDBWriteRequests(t *testing.T) {
	for _, tc := range []struct {
		name       string
		held       lease.Lease
		do         func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error)
		wantUpdate string
		wantCond   string
		wantValues map[string]string // placeholder: S or N value
	}{
		{"take free", lease.Lease{Key: heldW1.Key, Counter: 3}, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Take(ctx, held, "w2")
		}, "SET #c = :next, #r = :now, #o = :owner, #sw = if_not_exists(#sw, :zero) + :one", "#c = :c AND attribute_not_exists(#o)",
			map[string]string{":c": "3", ":next": "4", ":owner": "w2", ":zero": "0", ":one": "1"}},
		{"steal", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Take(ctx, held, "w2")
		}, "SET #c = :next, #r = :now, #o = :owner, #sw = if_not_exists(#sw, :zero) + :one", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":owner": "w2", ":zero": "0", ":one": "1"}},
		{"take own", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Take(ctx, held, "w1")
		}, "SET #c = :next, #r = :now, #o = :owner", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":owner": "w1"}},
		{"renew", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Renew(ctx, held)
		}, "SET #c = :next, #r = :now", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1"}},
		{"checkpoint", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Checkpoint(ctx, held, lease.ShardEnd)
		}, "SET #c = :next, #r = :now, #cp = :cp", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":cp": "SHARD_END"}},
		{"release", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Release(ctx, held)
		}, "SET #c = :next, #r = :now REMOVE #o", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDynamoDB{t: t, updateItem: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				if got := aws.ToString(in.UpdateExpression); got != tc.wantUpdate {
					t.Errorf("UpdateExpression = %q, want %q", got, tc.wantUpdate)
				}
				if got := aws.ToString(in.ConditionExpression); got != tc.wantCond {
					t.Errorf("ConditionExpression = %q, want %q", got, tc.wantCond)
				}
				values := map[string]string{}
				for k, v := range in.ExpressionAttributeValues {
					switch v := v.(type) {
					case *types.AttributeValueMemberS:
						values[k] = v.Value
					case *types.AttributeValueMemberN:
						values[k] = v.Value
					}
				}
				if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(values[":now"]) {
					t.Errorf(":now = %q, want RFC 3339 UTC with milliseconds", values[":now"])
				}
				delete(values, ":now")
				if diff := cmp.Diff(tc.wantValues, values); diff != "" {
					t.Errorf("values (-want +got):\n%s", diff)
				}
				if got := in.Key["leaseKey"].(*types.AttributeValueMemberS).Value; got != "orders:shardId-0" {
					t.Errorf("Key = %q", got)
				}
				return &dynamodb.UpdateItemOutput{Attributes: row()}, nil
			}}
			l, err := tc.do(t.Context(), lease.NewDynamoDB(f, "leases"), tc.held)
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			if l.Counter != 7 || l.Owner != "w1" {
				t.Errorf("returned %+v, want the row UpdateItem returned", l)
			}
		})
	}
}

func TestDynamoDBEnsureExisting(t *testing.T) {
	f := &fakeDynamoDB{
		t: t,
		putItem: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			if got := aws.ToString(in.ConditionExpression); got != "attribute_not_exists(#k)" {
				t.Errorf("ConditionExpression = %q", got)
			}
			return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
		},
		getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{Item: row()}, nil
		},
	}
	l, err := lease.NewDynamoDB(f, "leases").Ensure(t.Context(), heldW1.Key, []string{"ignored"})
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if l.Owner != "w1" || l.Counter != 7 || len(l.ParentShardIDs) != 2 {
		t.Errorf("Ensure of an existing row = %+v, want the stored row", l)
	}
}

func TestNewDynamoDBNilClientPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "lease: ") {
			t.Fatalf("recover() = %v, want a panic with the package prefix", r)
		}
	}()
	lease.NewDynamoDB(nil, "leases")
}
