package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/lease"
)

// fakeTable is a lease table as DescribeTable, CreateTable and UpdateTable
// see it: missing, without the owner index, or with it. Other calls panic
// (the embedded nil interface).
type fakeTable struct {
	lease.DynamoDBAPI
	exists bool
	index  types.IndexStatus // "" when the table has no owner index
	stuck  bool              // an index being created stays CREATING
	refuse error             // UpdateTable's answer, when set
	calls  []string
}

func (f *fakeTable) describe() *types.TableDescription {
	t := &types.TableDescription{
		TableName:            aws.String("leases"),
		TableStatus:          types.TableStatusActive,
		BillingModeSummary:   &types.BillingModeSummary{BillingMode: types.BillingModePayPerRequest},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
	}
	if f.index != "" {
		t.GlobalSecondaryIndexes = []types.GlobalSecondaryIndexDescription{{IndexName: aws.String("leaseOwner-index"), IndexStatus: f.index}}
	}
	return t
}

func (f *fakeTable) DescribeTable(_ context.Context, _ *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	f.calls = append(f.calls, "DescribeTable")
	if !f.exists {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	}
	t := f.describe()
	if f.index == types.IndexStatusCreating && !f.stuck {
		f.index = types.IndexStatusActive // built by the next look
	}
	return &dynamodb.DescribeTableOutput{Table: t}, nil
}

func (f *fakeTable) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	f.calls = append(f.calls, "CreateTable")
	if len(in.GlobalSecondaryIndexes) != 1 || aws.ToString(in.GlobalSecondaryIndexes[0].IndexName) != "leaseOwner-index" {
		panic("CreateTable without the owner index")
	}
	f.exists, f.index = true, types.IndexStatusActive
	return &dynamodb.CreateTableOutput{TableDescription: f.describe()}, nil
}

func (f *fakeTable) UpdateTable(_ context.Context, in *dynamodb.UpdateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	f.calls = append(f.calls, "UpdateTable")
	if len(in.GlobalSecondaryIndexUpdates) != 1 || in.GlobalSecondaryIndexUpdates[0].Create == nil {
		panic("UpdateTable without an index to create")
	}
	if f.refuse != nil {
		return nil, f.refuse
	}
	f.index = types.IndexStatusCreating
	return &dynamodb.UpdateTableOutput{TableDescription: f.describe()}, nil
}

// TestLeasesInit: bootstrap leases init creates a missing table with the
// owner index, adds the index to a table without it, and leaves a table
// with it alone, saying which it did.
func TestLeasesInit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		table     fakeTable
		wantOut   string
		wantCalls []string
	}{
		{"missing", fakeTable{}, "lease table leases created (PAY_PER_REQUEST, hash key leaseKey, owner index leaseOwner-index)",
			[]string{"DescribeTable", "CreateTable", "DescribeTable", "DescribeTable"}},
		{"without the index", fakeTable{exists: true}, "lease table leases exists without the owner index: adding leaseOwner-index; running workers are not affected, and this can take minutes\n" +
			"lease table leases is ready: owner index leaseOwner-index added and ACTIVE",
			[]string{"DescribeTable", "DescribeTable", "UpdateTable", "DescribeTable", "DescribeTable"}},
		{"with the index", fakeTable{exists: true, index: types.IndexStatusActive}, "lease table leases is ready (it exists, with its owner index leaseOwner-index); nothing to do",
			[]string{"DescribeTable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := tc.table
				var out strings.Builder
				if err := initLeaseTable(t.Context(), lease.NewDynamoDB(&f, "leases"), "leases", &out); err != nil {
					t.Fatalf("initLeaseTable: %v", err)
				}
				if got := strings.TrimSpace(out.String()); got != tc.wantOut {
					t.Errorf("output:\n got %s\nwant %s", got, tc.wantOut)
				}
				if diff := cmp.Diff(tc.wantCalls, f.calls); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestLeasesInitFails: when the owner index cannot be added, the error says
// to run the command again only where that helps: after it stopped waiting
// for an index DynamoDB goes on building, not after a refusal.
func TestLeasesInitFails(t *testing.T) {
	refused := &smithy.GenericAPIError{Code: "ValidationException", Message: "1 validation error detected"}
	for _, tc := range []struct {
		name  string
		table fakeTable
		again bool
	}{
		{"refused", fakeTable{exists: true, refuse: refused}, false},
		{"still building", fakeTable{exists: true, stuck: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := tc.table
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
				defer cancel()
				err := initLeaseTable(ctx, lease.NewDynamoDB(&f, "leases"), "leases", io.Discard)
				if err == nil {
					t.Fatal("initLeaseTable succeeded")
				}
				if again := strings.Contains(err.Error(), "run this command again"); again != tc.again {
					t.Errorf("error %q: says to run it again %t, want %t", err, again, tc.again)
				}
			})
		})
	}
}
