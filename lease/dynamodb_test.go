package lease_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

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
	query         func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error)
	updateTable   func(*dynamodb.UpdateTableInput) (*dynamodb.UpdateTableOutput, error)

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
	// Every update but a heartbeat (an upsert of a worker row) is
	// conditional.
	if in.ConditionExpression == nil && !strings.Contains(keyOf(in.Key), ":@worker:") {
		f.t.Error("UpdateItem of a lease without a condition")
	}
	return call(f, "UpdateItem", f.updateItem, in)
}

func (f *fakeDynamoDB) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	f.checkExpressions(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression)
	if in.ConditionExpression == nil {
		f.t.Error("DeleteItem without a condition")
	}
	return call(f, "DeleteItem", f.deleteItem, in)
}

// keyOf returns the leaseKey of a request's key.
func keyOf(key map[string]types.AttributeValue) string {
	k, _ := key["leaseKey"].(*types.AttributeValueMemberS)
	if k == nil {
		return ""
	}
	return k.Value
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

func (f *fakeDynamoDB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.checkExpressions(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.KeyConditionExpression, in.FilterExpression)
	if aws.ToBool(in.ConsistentRead) {
		f.t.Error("Query of a global secondary index with ConsistentRead")
	}
	return call(f, "Query", f.query, in)
}

func (f *fakeDynamoDB) UpdateTable(_ context.Context, in *dynamodb.UpdateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	return call(f, "UpdateTable", f.updateTable, in)
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
		"handoff":        s("w3"),
		"ownerSwitches":  n("2"),
		"renewedAt":      s("2026-12-02T10:11:12.345Z"),
		"parentShardIds": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("shardId-a"), s("shardId-b")}},
	}
}

var heldW1 = lease.Lease{Key: lease.Key{Stream: "orders", ShardID: "shardId-0"}, Owner: "w1", Counter: 7}

// withCheckpoint returns l with checkpoint seq and sub-sequence sub.
func withCheckpoint(l lease.Lease, seq string, sub int) lease.Lease {
	l.Checkpoint, l.SubSequence = seq, sub
	return l
}

// workerRow is a well-formed worker row: worker w1 of orders, counter 4.
func workerRow() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"leaseKey":     s("orders:@worker:w1"),
		"kind":         s("worker"),
		"workerStream": s("orders"),
		"leaseOwner":   s("w1"),
		"leaseCounter": n("4"),
		"renewedAt":    s("2026-12-02T10:11:12.345Z"),
	}
}

var workerW1 = lease.Worker{Stream: "orders", Owner: "w1", Counter: 4}

// goodTable is the description of an ACTIVE lease table.
func goodTable(status types.TableStatus) *dynamodb.DescribeTableOutput {
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName:            aws.String("leases"),
		TableStatus:          status,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
	}}
}

// storeCalls runs every Store method once; conditional tells the calls whose
// request has a condition.
var storeCalls = []struct {
	name        string
	conditional bool
	do          func(ctx context.Context, st lease.Store) error
}{
	{"Ensure", false, func(ctx context.Context, st lease.Store) error { _, err := st.Ensure(ctx, heldW1.Key, nil); return err }},
	{"Snapshot", false, func(ctx context.Context, st lease.Store) error { _, err := st.Snapshot(ctx, "orders"); return err }},
	{"Get", false, func(ctx context.Context, st lease.Store) error { _, err := st.Get(ctx, heldW1.Key); return err }},
	{"Take", true, func(ctx context.Context, st lease.Store) error { _, err := st.Take(ctx, heldW1, "w2"); return err }},
	{"Renew", true, func(ctx context.Context, st lease.Store) error { _, err := st.Renew(ctx, heldW1); return err }},
	{"Checkpoint", true, func(ctx context.Context, st lease.Store) error {
		_, err := st.Checkpoint(ctx, heldW1, "1", 0)
		return err
	}},
	{"Release", true, func(ctx context.Context, st lease.Store) error { _, err := st.Release(ctx, heldW1); return err }},
	{"Transfer", true, func(ctx context.Context, st lease.Store) error { _, err := st.Transfer(ctx, heldW1, "w2"); return err }},
	{"RequestHandoff", true, func(ctx context.Context, st lease.Store) error {
		_, err := st.RequestHandoff(ctx, heldW1, "w2")
		return err
	}},
	{"Delete", true, func(ctx context.Context, st lease.Store) error { return st.Delete(ctx, heldW1) }},
	{"Heartbeat", false, func(ctx context.Context, st lease.Store) error {
		_, err := st.Heartbeat(ctx, "orders", "w1", nil)
		return err
	}},
	{"RemoveWorker", true, func(ctx context.Context, st lease.Store) error { return st.RemoveWorker(ctx, workerW1) }},
	{"Owned", false, func(ctx context.Context, st lease.Store) error { _, err := st.Owned(ctx, "w1"); return err }},
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
		query:         func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) { return nil, err },
		updateTable:   func(*dynamodb.UpdateTableInput) (*dynamodb.UpdateTableOutput, error) { return nil, err },
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
	for _, c := range storeCalls {
		if !c.conditional {
			continue
		}
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
			if wrongSchema := strings.Contains(tc.wantErr, "key schema"); errors.Is(err, lease.ErrNotLeaseTable) != wrongSchema {
				t.Errorf("Check = %v: matches ErrNotLeaseTable %v, want %v", err, !wrongSchema, wrongSchema)
			}
		})
	}
}

// TestDynamoDBHeartbeatExplainsWrongTable: a worker's first call on a table
// of another key schema fails as Check does (ErrNotLeaseTable, the schema
// named), not only with DynamoDB's ValidationException; another refused
// request keeps its own error, and so does any failure on a lease table.
func TestDynamoDBHeartbeatExplainsWrongTable(t *testing.T) {
	invalid := &smithy.GenericAPIError{Code: "ValidationException", Message: "The provided key element does not match the schema"}
	wrongKey := goodTable(types.TableStatusActive)
	wrongKey.Table.AttributeDefinitions[0].AttributeName = aws.String("id")
	wrongKey.Table.KeySchema[0].AttributeName = aws.String("id")
	for _, tc := range []struct {
		name       string
		updateErr  error
		table      *dynamodb.DescribeTableOutput
		wantKind   error
		wantText   string
		wantChecks int
	}{
		{"wrong key schema", invalid, wrongKey, lease.ErrNotLeaseTable, "got key schema [id HASH (S)]", 1},
		{"invalid on a lease table", invalid, goodTable(types.TableStatusActive), nil, "ValidationException", 1},
		{"throttled", &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}, wrongKey, nil, "ThrottlingException", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := 0
			f := &fakeDynamoDB{t: t,
				updateItem: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, tc.updateErr },
				describeTable: func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
					checks++
					return tc.table, nil
				},
			}
			_, err := lease.NewDynamoDB(f, "leases").Heartbeat(t.Context(), "s", "w1", nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("Heartbeat = %v, want an error containing %q", err, tc.wantText)
			}
			if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
				t.Errorf("Heartbeat = %v, want one matching %v", err, tc.wantKind)
			}
			if tc.wantKind == nil && errors.Is(err, lease.ErrNotLeaseTable) {
				t.Errorf("Heartbeat = %v matches ErrNotLeaseTable", err)
			}
			if checks != tc.wantChecks {
				t.Errorf("%d DescribeTable calls, want %d", checks, tc.wantChecks)
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
				TableName:   aws.String("leases"),
				BillingMode: types.BillingModePayPerRequest,
				AttributeDefinitions: []types.AttributeDefinition{
					{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS},
					{AttributeName: aws.String("leaseOwner"), AttributeType: types.ScalarAttributeTypeS},
				},
				KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
				GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
					IndexName:  aws.String("leaseOwner-index"),
					KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("leaseOwner"), KeyType: types.KeyTypeHash}},
					Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
				}},
			}
			if diff := cmp.Diff(want, created, cmpopts.IgnoreUnexported(dynamodb.CreateTableInput{}, types.AttributeDefinition{}, types.KeySchemaElement{},
				types.GlobalSecondaryIndex{}, types.Projection{})); diff != "" {
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
	ls, err := leasesOf(lease.NewDynamoDB(f, "leases").Snapshot(t.Context(), "orders"))
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
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
			ParentShardIDs: []string{"shardId-a", "shardId-b"}, OwnerSwitches: 2, Handoff: "w3"}
		if diff := cmp.Diff(want, l, cmpopts.IgnoreFields(lease.Lease{}, "RenewedAt")); diff != "" {
			t.Errorf("lease (-want +got):\n%s", diff)
		}
		if got, want := l.RenewedAt.Format("2006-01-02T15:04:05.000Z07:00"), "2026-12-02T10:11:12.345Z"; got != want {
			t.Errorf("RenewedAt = %s, want %s", got, want)
		}
	})
	// A row of an older version has no handoff attribute (the minimal row
	// neither).
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
		{"number handoff", func(r map[string]types.AttributeValue) { r["handoff"] = n("1") }, "attribute handoff is *types.AttributeValueMemberN, want S"},
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
		}, "SET #c = :next, #r = :now, #wt = :wt, #o = :owner, #sw = if_not_exists(#sw, :zero) + :one REMOVE #h", "#c = :c AND (attribute_not_exists(#o) OR #o = :none)",
			map[string]string{":c": "3", ":next": "4", ":owner": "w2", ":zero": "0", ":one": "1", ":none": ""}},
		{"steal", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Take(ctx, held, "w2")
		}, "SET #c = :next, #r = :now, #wt = :wt, #o = :owner, #sw = if_not_exists(#sw, :zero) + :one REMOVE #h", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":owner": "w2", ":zero": "0", ":one": "1"}},
		{"take own", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Take(ctx, held, "w1")
		}, "SET #c = :next, #r = :now, #wt = :wt, #o = :owner REMOVE #h", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":owner": "w1"}},
		{"transfer", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Transfer(ctx, held, "w2")
		}, "SET #c = :next, #r = :now, #wt = :wt, #o = :owner, #sw = if_not_exists(#sw, :zero) + :one REMOVE #h", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":owner": "w2", ":zero": "0", ":one": "1"}},
		{"transfer to self", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Transfer(ctx, held, "w1")
		}, "SET #c = :next, #r = :now, #wt = :wt, #o = :owner REMOVE #h", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":owner": "w1"}},
		{"renew", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Renew(ctx, held)
		}, "SET #c = :next, #r = :now, #wt = :wt", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1"}},
		{"checkpoint", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Checkpoint(ctx, held, lease.ShardEnd, 0)
		}, "SET #c = :next, #r = :now, #wt = :wt, #cp = :cp REMOVE #sub", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":cp": "SHARD_END"}},
		{"checkpoint inside an aggregate", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Checkpoint(ctx, held, "12345", 3)
		}, "SET #c = :next, #r = :now, #wt = :wt, #cp = :cp, #sub = :sub", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":cp": "12345", ":sub": "3"}},
		{"release", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Release(ctx, held)
		}, "SET #c = :next, #r = :now, #wt = :wt REMOVE #o, #h", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1"}},
		{"release with the last checkpoint", withCheckpoint(heldW1, "12345", 0), func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Release(ctx, held)
		}, "SET #c = :next, #r = :now, #wt = :wt, #cp = :cp REMOVE #o, #h, #sub", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":cp": "12345"}},
		{"transfer with the last checkpoint inside an aggregate", withCheckpoint(heldW1, "12345", 2), func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.Transfer(ctx, held, "w2")
		}, "SET #c = :next, #r = :now, #wt = :wt, #o = :owner, #sw = if_not_exists(#sw, :zero) + :one, #cp = :cp, #sub = :sub REMOVE #h", "#c = :c AND #o = :o",
			map[string]string{":c": "7", ":next": "8", ":o": "w1", ":owner": "w2", ":zero": "0", ":one": "1", ":cp": "12345", ":sub": "2"}},
		{"request handoff", heldW1, func(ctx context.Context, d *lease.DynamoDB, held lease.Lease) (lease.Lease, error) {
			return d.RequestHandoff(ctx, held, "w2")
		}, "SET #h = :h", "#o = :o AND (attribute_not_exists(#h) OR #h = :h)",
			map[string]string{":o": "w1", ":h": "w2"}},
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
				if tc.name == "request handoff" {
					// Neither the counter nor renewedAt changes.
					if _, ok := values[":now"]; ok {
						t.Error("RequestHandoff sets renewedAt")
					}
				} else if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(values[":now"]) {
					t.Errorf(":now = %q, want RFC 3339 UTC with milliseconds", values[":now"])
				}
				delete(values, ":now")
				if tc.name == "request handoff" {
					if _, ok := values[":wt"]; ok {
						t.Error("RequestHandoff sets a write token")
					}
				} else if !regexp.MustCompile(`^[A-Z2-7]{26}$`).MatchString(values[":wt"]) {
					t.Errorf(":wt = %q, want a random token (crypto/rand.Text)", values[":wt"])
				}
				delete(values, ":wt")
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

// values returns the S and N values of a request, by placeholder.
func values(in map[string]types.AttributeValue) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[k] = v.Value
		case *types.AttributeValueMemberN:
			out[k] = v.Value
		}
	}
	return out
}

func TestDynamoDBDeleteRequests(t *testing.T) {
	for _, tc := range []struct {
		name       string
		held       lease.Lease
		wantCond   string
		wantValues map[string]string
	}{
		{"owned", heldW1, "#c = :c AND #o = :o", map[string]string{":c": "7", ":o": "w1"}},
		{"free", lease.Lease{Key: heldW1.Key, Counter: 3}, "#c = :c AND (attribute_not_exists(#o) OR #o = :none)", map[string]string{":c": "3", ":none": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDynamoDB{t: t, deleteItem: func(in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
				if got := aws.ToString(in.ConditionExpression); got != tc.wantCond {
					t.Errorf("ConditionExpression = %q, want %q", got, tc.wantCond)
				}
				if diff := cmp.Diff(tc.wantValues, values(in.ExpressionAttributeValues)); diff != "" {
					t.Errorf("values (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(map[string]string{"#c": "leaseCounter", "#o": "leaseOwner"}, in.ExpressionAttributeNames); diff != "" {
					t.Errorf("names (-want +got):\n%s", diff)
				}
				if got := keyOf(in.Key); got != "orders:shardId-0" {
					t.Errorf("Key = %q", got)
				}
				return &dynamodb.DeleteItemOutput{}, nil
			}}
			if err := lease.NewDynamoDB(f, "leases").Delete(t.Context(), tc.held); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if diff := cmp.Diff([]string{"DeleteItem"}, f.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDynamoDBHeartbeatRequest(t *testing.T) {
	f := &fakeDynamoDB{t: t, updateItem: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		if got := keyOf(in.Key); got != "orders:@worker:w1" {
			t.Errorf("Key = %q, want orders:@worker:w1", got)
		}
		if got, want := aws.ToString(in.UpdateExpression), "SET #kind = :kind, #ws = :s, #o = :o, #r = :now ADD #c :one REMOVE #l"; got != want {
			t.Errorf("UpdateExpression = %q, want %q", got, want)
		}
		if in.ConditionExpression != nil {
			t.Errorf("ConditionExpression = %q, want none (an upsert)", aws.ToString(in.ConditionExpression))
		}
		wantNames := map[string]string{"#kind": "kind", "#ws": "workerStream", "#o": "leaseOwner", "#r": "renewedAt", "#c": "leaseCounter", "#l": "load"}
		if diff := cmp.Diff(wantNames, in.ExpressionAttributeNames); diff != "" {
			t.Errorf("names (-want +got):\n%s", diff)
		}
		vs := values(in.ExpressionAttributeValues)
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(vs[":now"]) {
			t.Errorf(":now = %q, want RFC 3339 UTC with milliseconds", vs[":now"])
		}
		delete(vs, ":now")
		if diff := cmp.Diff(map[string]string{":kind": "worker", ":s": "orders", ":o": "w1", ":one": "1"}, vs); diff != "" {
			t.Errorf("values (-want +got):\n%s", diff)
		}
		return &dynamodb.UpdateItemOutput{Attributes: workerRow()}, nil
	}}
	w, err := lease.NewDynamoDB(f, "leases").Heartbeat(t.Context(), "orders", "w1", nil)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	want := workerW1
	want.RenewedAt = time.Date(2026, 12, 2, 10, 11, 12, 345e6, time.UTC)
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("worker (-want +got):\n%s", diff)
	}
}

func TestDynamoDBRemoveWorkerRequest(t *testing.T) {
	f := &fakeDynamoDB{t: t, deleteItem: func(in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
		if got := keyOf(in.Key); got != "orders:@worker:w1" {
			t.Errorf("Key = %q, want orders:@worker:w1", got)
		}
		if got, want := aws.ToString(in.ConditionExpression), "#c = :c AND #kind = :kind"; got != want {
			t.Errorf("ConditionExpression = %q, want %q", got, want)
		}
		if diff := cmp.Diff(map[string]string{":c": "4", ":kind": "worker"}, values(in.ExpressionAttributeValues)); diff != "" {
			t.Errorf("values (-want +got):\n%s", diff)
		}
		return &dynamodb.DeleteItemOutput{}, nil
	}}
	if err := lease.NewDynamoDB(f, "leases").RemoveWorker(t.Context(), workerW1); err != nil {
		t.Fatalf("RemoveWorker: %v", err)
	}
}

// TestDynamoDBInvalidWritesDoNoIO checks that the calls refused for their
// arguments make no request.
func TestDynamoDBInvalidWritesDoNoIO(t *testing.T) {
	free := lease.Lease{Key: heldW1.Key, Counter: 3}
	reserved := lease.Lease{Key: lease.Key{Stream: "orders", ShardID: "@worker:w1"}, Owner: "w1", Counter: 4}
	for _, tc := range []struct {
		name     string
		do       func(ctx context.Context, d *lease.DynamoDB) error
		wantLost bool
	}{
		{"transfer of a free lease", func(ctx context.Context, d *lease.DynamoDB) error { _, err := d.Transfer(ctx, free, "w2"); return err }, true},
		{"transfer to nobody", func(ctx context.Context, d *lease.DynamoDB) error { _, err := d.Transfer(ctx, heldW1, ""); return err }, false},
		{"handoff of a free lease", func(ctx context.Context, d *lease.DynamoDB) error {
			_, err := d.RequestHandoff(ctx, free, "w2")
			return err
		}, true},
		{"handoff to nobody", func(ctx context.Context, d *lease.DynamoDB) error {
			_, err := d.RequestHandoff(ctx, heldW1, "")
			return err
		}, false},
		{"handoff to the owner", func(ctx context.Context, d *lease.DynamoDB) error {
			_, err := d.RequestHandoff(ctx, heldW1, "w1")
			return err
		}, false},
		{"take of a worker row", func(ctx context.Context, d *lease.DynamoDB) error { _, err := d.Take(ctx, reserved, "w2"); return err }, false},
		{"delete of a worker row", func(ctx context.Context, d *lease.DynamoDB) error { return d.Delete(ctx, reserved) }, false},
		{"get of a worker row", func(ctx context.Context, d *lease.DynamoDB) error { _, err := d.Get(ctx, reserved.Key); return err }, false},
		{"heartbeat without owner", func(ctx context.Context, d *lease.DynamoDB) error {
			_, err := d.Heartbeat(ctx, "orders", "", nil)
			return err
		}, false},
		{"heartbeat of an ARN", func(ctx context.Context, d *lease.DynamoDB) error {
			_, err := d.Heartbeat(ctx, "arn:aws:kinesis:us-east-1:1:stream/orders", "w1", nil)
			return err
		}, false},
		{"remove worker without owner", func(ctx context.Context, d *lease.DynamoDB) error {
			return d.RemoveWorker(ctx, lease.Worker{Stream: "orders", Counter: 1})
		}, false},
		{"snapshot without stream", func(ctx context.Context, d *lease.DynamoDB) error { _, err := d.Snapshot(ctx, ""); return err }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := failingFake(t, errUnexpected)
			err := tc.do(t.Context(), lease.NewDynamoDB(f, "leases"))
			if err == nil || errors.Is(err, lease.ErrLeaseLost) != tc.wantLost || !strings.HasPrefix(err.Error(), "lease: ") {
				t.Fatalf("error = %v, want a \"lease: \" error that matches lease.ErrLeaseLost: %t", err, tc.wantLost)
			}
			if len(f.calls) != 0 {
				t.Errorf("calls = %q, want none", f.calls)
			}
		})
	}
}

func TestDynamoDBSnapshot(t *testing.T) {
	leaseRow := func(key string) map[string]types.AttributeValue {
		r := row()
		r["leaseKey"] = s(key)
		return r
	}
	worker := func(owner string, counter string) map[string]types.AttributeValue {
		r := workerRow()
		r["leaseKey"], r["leaseOwner"], r["leaseCounter"] = s("orders:@worker:"+owner), s(owner), n(counter)
		return r
	}
	future := map[string]types.AttributeValue{"leaseKey": s("orders:@shape:x"), "kind": s("shape"), "stream": s("orders")}
	var scans int
	f := &fakeDynamoDB{t: t, scan: func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		scans++
		if got, want := aws.ToString(in.FilterExpression), "#s = :s OR #ws = :s"; got != want {
			t.Errorf("FilterExpression = %q, want %q", got, want)
		}
		if diff := cmp.Diff(map[string]string{"#s": "stream", "#ws": "workerStream"}, in.ExpressionAttributeNames); diff != "" {
			t.Errorf("names (-want +got):\n%s", diff)
		}
		if got := values(in.ExpressionAttributeValues)[":s"]; got != "orders" {
			t.Errorf("Scan filtered by stream %q", got)
		}
		switch keyOf(in.ExclusiveStartKey) {
		case "":
			return &dynamodb.ScanOutput{
				Items:            []map[string]types.AttributeValue{leaseRow("orders:shardId-2"), worker("w2", "9"), future},
				LastEvaluatedKey: map[string]types.AttributeValue{"leaseKey": s("orders:@worker:w2")},
			}, nil
		case "orders:@worker:w2":
			return &dynamodb.ScanOutput{Items: []map[string]types.AttributeValue{worker("w1", "4"), leaseRow("orders:shardId-0")}}, nil
		}
		t.Fatalf("Scan from unexpected key %q", keyOf(in.ExclusiveStartKey))
		return nil, nil
	}}
	snap, err := lease.NewDynamoDB(f, "leases").Snapshot(t.Context(), "orders")
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	var shards, owners []string
	for _, l := range snap.Leases {
		shards = append(shards, l.Key.ShardID)
	}
	for _, w := range snap.Workers {
		owners = append(owners, fmt.Sprintf("%s@%d", w.Owner, w.Counter))
	}
	if diff := cmp.Diff([]string{"shardId-0", "shardId-2"}, shards); diff != "" {
		t.Errorf("leases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"w1@4", "w2@9"}, owners); diff != "" {
		t.Errorf("workers, ordered by owner (-want +got):\n%s", diff)
	}
	if scans != 2 {
		t.Errorf("%d scans, want 2 (one per page)", scans)
	}
}

// TestDynamoDBSnapshotStreams: the rows of several streams come from ONE
// Scan, filtered by the list of streams, and are sorted into each
// stream's Snapshot; a stream not asked for is left out.
func TestDynamoDBSnapshotStreams(t *testing.T) {
	leaseRow := func(stream, shard string) map[string]types.AttributeValue {
		r := row()
		r["leaseKey"], r["stream"] = s(stream+":"+shard), s(stream)
		return r
	}
	worker := func(stream, owner string) map[string]types.AttributeValue {
		r := workerRow()
		r["leaseKey"], r["workerStream"], r["leaseOwner"] = s(stream+":@worker:"+owner), s(stream), s(owner)
		return r
	}
	leader := func(stream string) map[string]types.AttributeValue {
		r := leaseRow(stream, "@leader")
		r["kind"] = s("leader")
		delete(r, "stream")
		return r
	}
	var scans int
	f := &fakeDynamoDB{t: t, scan: func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		scans++
		if got, want := aws.ToString(in.FilterExpression), "#s IN (:s0, :s1) OR #ws IN (:s0, :s1)"; got != want {
			t.Errorf("FilterExpression = %q, want %q", got, want)
		}
		if diff := cmp.Diff(map[string]string{":s0": "orders", ":s1": "payments"}, values(in.ExpressionAttributeValues)); diff != "" {
			t.Errorf("values (-want +got):\n%s", diff)
		}
		return &dynamodb.ScanOutput{Items: []map[string]types.AttributeValue{
			leaseRow("payments", "shardId-1"), leaseRow("orders", "shardId-2"), worker("payments", "w2"), leaseRow("orders", "shardId-0"),
			worker("orders", "w1"), leaseRow("refunds", "shardId-0"), worker("refunds", "w1"), leader("orders"),
		}}, nil
	}}
	snaps, err := lease.NewDynamoDB(f, "leases").SnapshotStreams(t.Context(), "orders", "payments")
	if err != nil {
		t.Fatalf("SnapshotStreams: %v", err)
	}
	got := map[string][]string{}
	for stream, snap := range snaps {
		for _, l := range snap.Leases {
			got[stream] = append(got[stream], l.Key.ShardID)
		}
		for _, w := range snap.Workers {
			got[stream] = append(got[stream], "worker "+w.Owner)
		}
		if snap.Leader != nil {
			got[stream] = append(got[stream], "leader")
		}
	}
	want := map[string][]string{
		"orders":   {"shardId-0", "shardId-2", "worker w1", "leader"},
		"payments": {"shardId-1", "worker w2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshots (-want +got):\n%s", diff)
	}
	if scans != 1 {
		t.Errorf("%d scans, want 1", scans)
	}
	for _, bad := range [][]string{nil, {"orders", "a:b"}} {
		if _, err := lease.NewDynamoDB(f, "leases").SnapshotStreams(t.Context(), bad...); err == nil {
			t.Errorf("SnapshotStreams(%q) succeeded", bad)
		}
	}
	if scans != 1 {
		t.Errorf("bad arguments scanned the table")
	}
}

func TestDynamoDBDecodeWorker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(map[string]types.AttributeValue)
		wantErr string
	}{
		{"no owner", func(r map[string]types.AttributeValue) { delete(r, "leaseOwner") }, "no attribute leaseOwner"},
		{"no stream", func(r map[string]types.AttributeValue) { delete(r, "workerStream") }, "no attribute workerStream"},
		{"no counter", func(r map[string]types.AttributeValue) { delete(r, "leaseCounter") }, "no attribute leaseCounter"},
		{"key of another worker", func(r map[string]types.AttributeValue) { r["leaseOwner"] = s("w2") }, `key does not match stream "orders" and owner "w2"`},
		{"bad time", func(r map[string]types.AttributeValue) { r["renewedAt"] = s("now") }, "attribute renewedAt"},
		{"number kind", func(r map[string]types.AttributeValue) { r["kind"] = n("1") }, "attribute kind is *types.AttributeValueMemberN, want S"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := workerRow()
			tc.change(r)
			f := &fakeDynamoDB{t: t, scan: func(*dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
				return &dynamodb.ScanOutput{Items: []map[string]types.AttributeValue{r}}, nil
			}}
			snap, err := lease.NewDynamoDB(f, "leases").Snapshot(t.Context(), "orders")
			if err != nil {
				t.Fatalf("Snapshot: %v; want the row reported as malformed, not an error", err)
			}
			bad := snap.Malformed["orders:@worker:w1"]
			if bad == nil || !strings.Contains(bad.Error(), tc.wantErr) || !strings.Contains(bad.Error(), "malformed") || len(snap.Workers) != 0 {
				t.Fatalf("Snapshot = %+v; want the row in Malformed with an error containing %q", snap, tc.wantErr)
			}
		})
	}
}

// TestDynamoDBSnapshotMalformedRows: a row another tool wrote (a counter
// of the wrong type, a worker row without its owner, a lease row whose key
// names a stream its attributes do not, a kind of the wrong type) fails
// neither a one-stream Snapshot nor SnapshotStreams: it is reported in its
// stream's Malformed, by its key, and the other rows are read.
func TestDynamoDBSnapshotMalformedRows(t *testing.T) {
	leaseRow := func(stream, shard string) map[string]types.AttributeValue {
		r := row()
		r["leaseKey"], r["stream"] = s(stream+":"+shard), s(stream)
		return r
	}
	badCounter := leaseRow("payments", "shardId-3")
	badCounter["leaseCounter"] = s("seven")
	noOwner := workerRow()
	delete(noOwner, "leaseOwner")
	otherStream := leaseRow("orders", "shardId-4")
	otherStream["leaseKey"] = s("refunds:shardId-4")
	badKind := leaseRow("payments", "shardId-5")
	badKind["kind"] = n("1")
	items := []map[string]types.AttributeValue{
		leaseRow("orders", "shardId-0"), badCounter, noOwner, leaseRow("payments", "shardId-1"), otherStream, badKind,
	}
	f := &fakeDynamoDB{t: t, scan: func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		return &dynamodb.ScanOutput{Items: items}, nil
	}}
	d := lease.NewDynamoDB(f, "leases")
	want := map[string]map[string]string{
		"orders": {
			"orders:@worker:w1": "no attribute leaseOwner",
			"refunds:shardId-4": `the key does not name the stream "orders"`,
		},
		"payments": {
			"payments:shardId-3": "attribute leaseCounter is *types.AttributeValueMemberS, want N",
			"payments:shardId-5": "attribute kind is *types.AttributeValueMemberN, want S",
		},
	}
	wantLeases := map[string][]string{"orders": {"shardId-0"}, "payments": {"shardId-1"}}
	check := func(stream string, snap lease.Snapshot) {
		t.Helper()
		var ids []string
		for _, l := range snap.Leases {
			ids = append(ids, l.Key.ShardID)
		}
		if diff := cmp.Diff(wantLeases[stream], ids); diff != "" {
			t.Errorf("%s: leases (-want +got):\n%s", stream, diff)
		}
		if len(snap.Workers) != 0 {
			t.Errorf("%s: workers %+v, want none", stream, snap.Workers)
		}
		if len(snap.Malformed) != len(want[stream]) {
			t.Errorf("%s: malformed %v, want %d rows", stream, snap.Malformed, len(want[stream]))
		}
		for key, part := range want[stream] {
			if err := snap.Malformed[key]; err == nil || !strings.Contains(err.Error(), part) || !strings.HasPrefix(err.Error(), "lease: malformed") {
				t.Errorf("%s: row %s: %v, want an error containing %q", stream, key, err, part)
			}
		}
	}
	snaps, err := d.SnapshotStreams(t.Context(), "orders", "payments")
	if err != nil {
		t.Fatalf("SnapshotStreams: %v", err)
	}
	for _, stream := range []string{"orders", "payments"} {
		check(stream, snaps[stream])
		snap, err := d.Snapshot(t.Context(), stream)
		if err != nil {
			t.Fatalf("Snapshot %s: %v", stream, err)
		}
		check(stream, snap)
	}
}

// TestDynamoDBLoadPolls: a shard's polls are the third element of its list
// in the load attribute, absent when unknown; a list of two (a row written
// by a version that did not publish polls) reads as Polls unknown (-1), and
// a longer list (a later version's) is read for what this version knows.
// The first two elements stay records and bytes, all that a version before
// the polls read of a list (it required at least two and ignored the rest:
// oldShard below is its reading), so it reads a new row as before.
func TestDynamoDBLoadPolls(t *testing.T) {
	// oldShard reads one shard's list as the versions before the polls did.
	oldShard := func(v types.AttributeValue) (records, bytes string, ok bool) {
		l, isList := v.(*types.AttributeValueMemberL)
		if !isList || len(l.Value) < 2 {
			return "", "", false
		}
		r, okR := l.Value[0].(*types.AttributeValueMemberN)
		b, okB := l.Value[1].(*types.AttributeValueMemberN)
		if !okR || !okB {
			return "", "", false
		}
		return r.Value, b.Value, true
	}
	var written types.AttributeValue
	f := &fakeDynamoDB{t: t, updateItem: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		written = in.ExpressionAttributeValues[":l"]
		r := workerRow()
		r["load"] = written
		return &dynamodb.UpdateItemOutput{Attributes: r}, nil
	}}
	in := &lease.Load{CPU: 0.5, Shards: map[string]lease.Throughput{
		"known":   {Records: 12, Bytes: 3400, Polls: 4.5},
		"unknown": {Records: 1, Bytes: 20, Polls: -1},
	}}
	w, err := lease.NewDynamoDB(f, "leases").Heartbeat(t.Context(), "orders", "w1", in)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if diff := cmp.Diff(in, w.Load); diff != "" {
		t.Errorf("load read back (-want +got):\n%s", diff)
	}
	shards := written.(*types.AttributeValueMemberM).Value["shards"].(*types.AttributeValueMemberM).Value
	want := map[string][]string{"known": {"12", "3400", "4.5"}, "unknown": {"1", "20"}}
	for id, elems := range want {
		var got []string
		for _, e := range shards[id].(*types.AttributeValueMemberL).Value {
			got = append(got, e.(*types.AttributeValueMemberN).Value)
		}
		if diff := cmp.Diff(elems, got); diff != "" {
			t.Errorf("shard %s stored (-want +got):\n%s", id, diff)
		}
		r, b, ok := oldShard(shards[id])
		if !ok || r != elems[0] || b != elems[1] {
			t.Errorf("shard %s as an older version reads it: %q, %q, %v; want %q, %q", id, r, b, ok, elems[0], elems[1])
		}
	}

	list := func(vs ...string) types.AttributeValue {
		l := &types.AttributeValueMemberL{}
		for _, v := range vs {
			l.Value = append(l.Value, n(v))
		}
		return l
	}
	r := workerRow()
	r["load"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"cpu": n("0.25"),
		"shards": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"old":   list("10", "1000"),
			"new":   list("10", "1000", "5"),
			"later": list("10", "1000", "0", "7"),
		}},
	}}
	f = &fakeDynamoDB{t: t, scan: func(*dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		return &dynamodb.ScanOutput{Items: []map[string]types.AttributeValue{r}}, nil
	}}
	snap, err := lease.NewDynamoDB(f, "leases").Snapshot(t.Context(), "orders")
	if err != nil || len(snap.Workers) != 1 {
		t.Fatalf("Snapshot = %+v, %v; want one worker", snap, err)
	}
	wantLoad := &lease.Load{CPU: 0.25, Shards: map[string]lease.Throughput{
		"old":   {Records: 10, Bytes: 1000, Polls: -1},
		"new":   {Records: 10, Bytes: 1000, Polls: 5},
		"later": {Records: 10, Bytes: 1000, Polls: 0},
	}}
	if diff := cmp.Diff(wantLoad, snap.Workers[0].Load); diff != "" {
		t.Errorf("loads of three versions (-want +got):\n%s", diff)
	}
}
