package lease_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/lease"
)

// withIndex returns goodTable with the owner index in status st.
func withIndex(st types.IndexStatus, backfilling bool) *dynamodb.DescribeTableOutput {
	out := goodTable(types.TableStatusActive)
	out.Table.GlobalSecondaryIndexes = []types.GlobalSecondaryIndexDescription{{
		IndexName: aws.String("leaseOwner-index"), IndexStatus: st, Backfilling: aws.Bool(backfilling)}}
	return out
}

// TestDynamoDBOwnedQuery: Owned queries the index page by page and drops
// worker and leader rows by their key.
func TestDynamoDBOwnedQuery(t *testing.T) {
	entry := func(key string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"leaseKey": s(key), "leaseOwner": s("w1")}
	}
	f := &fakeDynamoDB{t: t, query: func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
		if aws.ToString(in.IndexName) != "leaseOwner-index" || aws.ToString(in.KeyConditionExpression) != "#o = :o" || values(in.ExpressionAttributeValues)[":o"] != "w1" {
			t.Errorf("Query %+v", in)
		}
		if len(in.ExclusiveStartKey) == 0 {
			return &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{entry("orders:shardId-2"), entry("orders:@worker:w1"), entry("orders:@leader")},
				LastEvaluatedKey: entry("orders:@leader")}, nil
		}
		return &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{entry("payments:shardId-0"), entry("orders:shardId-1")}}, nil
	}}
	ks, err := lease.NewDynamoDB(f, "leases").Owned(t.Context(), "w1")
	if err != nil {
		t.Fatalf("Owned: %v", err)
	}
	want := []lease.Key{{Stream: "orders", ShardID: "shardId-1"}, {Stream: "orders", ShardID: "shardId-2"}, {Stream: "payments", ShardID: "shardId-0"}}
	if diff := cmp.Diff(want, ks); diff != "" {
		t.Errorf("Owned (-want +got):\n%s", diff)
	}
}

// TestDynamoDBOwnedWithoutIndex: on a table without the owner index, or
// with one not ACTIVE yet, Owned's error matches ErrNoOwnerIndex and names
// the command that adds it; another invalid request does not.
func TestDynamoDBOwnedWithoutIndex(t *testing.T) {
	invalid := &smithyValidation{}
	for _, tc := range []struct {
		name  string
		table *dynamodb.DescribeTableOutput
		want  bool
	}{
		{"no index", goodTable(types.TableStatusActive), true},
		{"creating", withIndex(types.IndexStatusCreating, false), true},
		{"backfilling", withIndex(types.IndexStatusActive, true), true},
		{"active", withIndex(types.IndexStatusActive, false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDynamoDB{t: t,
				query:         func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) { return nil, invalid },
				describeTable: func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) { return tc.table, nil },
			}
			_, err := lease.NewDynamoDB(f, "leases").Owned(t.Context(), "w1")
			if got := errors.Is(err, lease.ErrNoOwnerIndex); got != tc.want {
				t.Fatalf("Owned = %v; matches ErrNoOwnerIndex: %t, want %t", err, got, tc.want)
			}
			if tc.want && !strings.Contains(err.Error(), "add it with: bootstrap leases init -table leases") {
				t.Errorf("error %q does not name the command", err)
			}
			has, herr := lease.NewDynamoDB(f, "leases").HasOwnerIndex(t.Context())
			if herr != nil || has == tc.want {
				t.Errorf("HasOwnerIndex = %t, %v; want %t", has, herr, !tc.want)
			}
		})
	}
}

// TestDynamoDBAddOwnerIndex: AddOwnerIndex creates the index on a table
// without it and waits until it is ACTIVE; it only waits for one being
// built; it does nothing to a table with it; it fails at once when the
// service accepts the update but lists no index (dynalite).
func TestDynamoDBAddOwnerIndex(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tables    []*dynamodb.DescribeTableOutput // DescribeTable's answers in turn (the last repeats)
		ignore    bool                            // UpdateTable answers without the index
		wantCalls []string
		wantErr   string
	}{
		{"added", []*dynamodb.DescribeTableOutput{goodTable(types.TableStatusActive), withIndex(types.IndexStatusCreating, false),
			withIndex(types.IndexStatusActive, true), withIndex(types.IndexStatusActive, false)}, false,
			[]string{"DescribeTable", "UpdateTable", "DescribeTable", "DescribeTable", "DescribeTable"}, ""},
		{"being built", []*dynamodb.DescribeTableOutput{withIndex(types.IndexStatusCreating, false), withIndex(types.IndexStatusActive, false)}, false,
			[]string{"DescribeTable", "DescribeTable"}, ""},
		{"there", []*dynamodb.DescribeTableOutput{withIndex(types.IndexStatusActive, false)}, false, []string{"DescribeTable"}, ""},
		{"ignored", []*dynamodb.DescribeTableOutput{goodTable(types.TableStatusActive)}, true, []string{"DescribeTable", "UpdateTable"},
			"the service does not add indexes to existing tables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := 0
				f := &fakeDynamoDB{t: t,
					describeTable: func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
						out := tc.tables[min(n, len(tc.tables)-1)]
						n++
						return out, nil
					},
					updateTable: func(in *dynamodb.UpdateTableInput) (*dynamodb.UpdateTableOutput, error) {
						c := in.GlobalSecondaryIndexUpdates[0].Create
						if aws.ToString(c.IndexName) != "leaseOwner-index" || c.Projection.ProjectionType != types.ProjectionTypeKeysOnly ||
							aws.ToString(c.KeySchema[0].AttributeName) != "leaseOwner" || c.ProvisionedThroughput != nil {
							t.Errorf("UpdateTable Create %+v", c)
						}
						if tc.ignore {
							return &dynamodb.UpdateTableOutput{TableDescription: goodTable(types.TableStatusActive).Table}, nil
						}
						return &dynamodb.UpdateTableOutput{TableDescription: withIndex(types.IndexStatusCreating, false).Table}, nil
					},
				}
				// goodTable has no billing mode: make it on demand.
				for _, out := range tc.tables {
					out.Table.BillingModeSummary = &types.BillingModeSummary{BillingMode: types.BillingModePayPerRequest}
				}
				err := lease.NewDynamoDB(f, "leases").AddOwnerIndex(t.Context())
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Fatalf("AddOwnerIndex = %v, want error %q", err, tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantCalls, f.calls); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// smithyValidation is DynamoDB's ValidationException as the SDK returns it.
type smithyValidation struct{}

func (*smithyValidation) Error() string {
	return "ValidationException: The table does not have the specified index: leaseOwner-index"
}
func (*smithyValidation) ErrorCode() string { return "ValidationException" }
func (*smithyValidation) ErrorMessage() string {
	return "The table does not have the specified index: leaseOwner-index"
}
func (*smithyValidation) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }
