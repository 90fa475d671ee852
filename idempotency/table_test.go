package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shardsettle/lambdaadapter/idempotency"
)

// fakeTables is a scripted idempotency.TableAPI.
type fakeTables struct {
	exists    bool
	keys      []types.KeySchemaElement
	attrs     []types.AttributeDefinition
	ttl       *types.TimeToLiveDescription
	ttlErr    error // returned by UpdateTimeToLive
	created   *dynamodb.CreateTableInput
	ttlUpdate *dynamodb.UpdateTimeToLiveInput
	calls     []string
}

func (f *fakeTables) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	f.calls = append(f.calls, "CreateTable")
	if f.exists {
		return nil, sdkWrap("CreateTable", &types.ResourceInUseException{Message: aws.String("Table already exists")})
	}
	f.created, f.exists, f.keys, f.attrs = in, true, in.KeySchema, in.AttributeDefinitions
	return &dynamodb.CreateTableOutput{}, nil
}

func (f *fakeTables) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	f.calls = append(f.calls, "DescribeTable")
	if !f.exists {
		return nil, sdkWrap("DescribeTable", &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")})
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName: in.TableName, TableStatus: types.TableStatusActive, KeySchema: f.keys, AttributeDefinitions: f.attrs,
	}}, nil
}

func (f *fakeTables) DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	f.calls = append(f.calls, "DescribeTimeToLive")
	d := f.ttl
	if d == nil {
		d = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
	}
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: d}, nil
}

func (f *fakeTables) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	f.calls = append(f.calls, "UpdateTimeToLive")
	if f.ttlErr != nil {
		return nil, sdkWrap("UpdateTimeToLive", f.ttlErr)
	}
	f.ttlUpdate = in
	f.ttl = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusEnabling, AttributeName: in.TimeToLiveSpecification.AttributeName}
	return &dynamodb.UpdateTimeToLiveOutput{}, nil
}

var idKey = []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}}
var idAttr = []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}}

func TestCreateTable(t *testing.T) {
	f := &fakeTables{}
	if err := idempotency.CreateTable(t.Context(), f, "idem"); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	want := &dynamodb.CreateTableInput{
		TableName: aws.String("idem"), BillingMode: types.BillingModePayPerRequest, KeySchema: idKey, AttributeDefinitions: idAttr,
	}
	ignore := cmpopts.IgnoreUnexported(dynamodb.CreateTableInput{}, types.AttributeDefinition{}, types.KeySchemaElement{},
		dynamodb.UpdateTimeToLiveInput{}, types.TimeToLiveSpecification{})
	if diff := cmp.Diff(want, f.created, ignore); diff != "" {
		t.Errorf("CreateTable input (-want +got):\n%s", diff)
	}
	wantTTL := &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("idem"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiration"), Enabled: aws.Bool(true)}}
	if diff := cmp.Diff(wantTTL, f.ttlUpdate, ignore); diff != "" {
		t.Errorf("UpdateTimeToLive input (-want +got):\n%s", diff)
	}

	// Again: nothing changes, time to live is left alone.
	f.calls = nil
	if err := idempotency.CreateTable(t.Context(), f, "idem"); err != nil {
		t.Fatalf("CreateTable of an existing table: %v", err)
	}
	if diff := cmp.Diff([]string{"CreateTable", "DescribeTable", "DescribeTable", "DescribeTimeToLive"}, f.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestCreateTableErrors(t *testing.T) {
	t.Run("other key schema", func(t *testing.T) {
		f := &fakeTables{exists: true, keys: []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
			attrs: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}}}
		err := idempotency.CreateTable(t.Context(), f, "leases")
		if err == nil || !strings.Contains(err.Error(), "want only the hash key id of type S") {
			t.Errorf("CreateTable on a lease table: %v", err)
		}
	})
	t.Run("time to live on another attribute", func(t *testing.T) {
		f := &fakeTables{exists: true, keys: idKey, attrs: idAttr,
			ttl: &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusEnabled, AttributeName: aws.String("ttl")}}
		if err := idempotency.CreateTable(t.Context(), f, "idem"); err == nil || !strings.Contains(err.Error(), `"ttl", want "expiration"`) {
			t.Errorf("CreateTable: %v", err)
		}
	})
	t.Run("service without time to live", func(t *testing.T) {
		f := &fakeTables{ttlErr: &smithy.GenericAPIError{Code: "UnknownOperationException", Message: "unknown"}}
		err := idempotency.CreateTable(t.Context(), f, "idem")
		if !errors.Is(err, idempotency.ErrTTLUnsupported) || !f.exists {
			t.Errorf("CreateTable: %v (table created: %v), want ErrTTLUnsupported after creating it", err, f.exists)
		}
	})
	t.Run("time to live refused", func(t *testing.T) {
		f := &fakeTables{ttlErr: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no"}}
		err := idempotency.CreateTable(t.Context(), f, "idem")
		if err == nil || errors.Is(err, idempotency.ErrTTLUnsupported) || !strings.Contains(err.Error(), "AccessDeniedException") {
			t.Errorf("CreateTable: %v", err)
		}
	})
}

func TestCheckMissingTable(t *testing.T) {
	err := idempotency.Check(t.Context(), &fakeTables{}, "idem")
	if !errors.Is(err, idempotency.ErrTableNotFound) || !strings.Contains(err.Error(), "create it with: bootstrap idempotency init -table idem") {
		t.Errorf("Check: %v, want ErrTableNotFound with the command", err)
	}
	t.Logf("Check on a missing table: %v", err)
}
