package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
)

// TableAPI is the part of the DynamoDB client that CreateTable and Check
// use. *dynamodb.Client satisfies it.
type TableAPI interface {
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, params *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// Bounds of CreateTable's wait for the table to become ACTIVE.
const (
	createMaxWait  = 5 * time.Minute
	createMinDelay = 100 * time.Millisecond
	createMaxDelay = 5 * time.Second
)

// CreateTable creates the idempotency table named table (on-demand
// capacity, hash key id of type S, the layout of Powertools' table), waits
// until it is ACTIVE and enables time to live on the expiration attribute.
// It is idempotent: an existing table is not an error, but it must have that
// key schema (see Check), and time to live already enabled on expiration is
// left alone; enabled on another attribute, it is an error. When the
// service does not know UpdateTimeToLive (dynalite), the table is ready and
// the error matches ErrTTLUnsupported. It returns when ctx ends, with ctx's
// error; the table may then still be created.
func CreateTable(ctx context.Context, c TableAPI, table string) error {
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrID), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrID), KeyType: types.KeyTypeHash}},
	})
	if err != nil && awserr.Classify(err) != awserr.InUse {
		return plainError(opCreate, table, err)
	}
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = createMinDelay, createMaxDelay
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, createMaxWait); err != nil {
		return plainError(opCreate, table, fmt.Errorf("waiting until ACTIVE: %w", err))
	}
	if err := Check(ctx, c, table); err != nil {
		return err
	}
	return enableTTL(ctx, c, table)
}

// enableTTL enables time to live on expiration unless it is already.
func enableTTL(ctx context.Context, c TableAPI, table string) error {
	out, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return ttlError(table, err)
	}
	if d := out.TimeToLiveDescription; d != nil {
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if a := aws.ToString(d.AttributeName); a != attrExpiration {
				return plainError(opTTL, table, fmt.Errorf("time to live is on attribute %q, want %q", a, attrExpiration))
			}
			return nil
		case types.TimeToLiveStatusDisabling:
			return plainError(opTTL, table, errors.New("time to live is being disabled; run this again once it is DISABLED"))
		}
	}
	_, err = c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrExpiration), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return ttlError(table, err)
	}
	return nil
}

// ttlError returns the error of a time-to-live call: an operation the
// service does not know (awserr.Unsupported) matches ErrTTLUnsupported.
func ttlError(table string, err error) error {
	return &awserr.Error{Pkg: "idempotency", Op: opTTL, Resource: table, Kind: awserr.Classify(err), Cause: err, Sentinels: &ttlErrs}
}

// Check returns nil when the idempotency table exists, is usable (ACTIVE or
// UPDATING) and has the key schema of CreateTable (only the hash key id, a
// string). When the table does not exist, its error matches
// ErrTableNotFound and names the command that creates it.
func Check(ctx context.Context, c TableAPI, table string) error {
	out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return (&store{table: table}).fail(opCheck, table, err)
	}
	t := out.Table
	if t == nil {
		return plainError(opCheck, table, errors.New("DescribeTable returned no table"))
	}
	if s := t.TableStatus; s != types.TableStatusActive && s != types.TableStatusUpdating {
		return plainError(opCheck, table, fmt.Errorf("table status is %s, want ACTIVE", s))
	}
	keyType := types.ScalarAttributeType("")
	for _, a := range t.AttributeDefinitions {
		if aws.ToString(a.AttributeName) == attrID {
			keyType = a.AttributeType
		}
	}
	if len(t.KeySchema) != 1 || aws.ToString(t.KeySchema[0].AttributeName) != attrID ||
		t.KeySchema[0].KeyType != types.KeyTypeHash || keyType != types.ScalarAttributeTypeS {
		return plainError(opCheck, table, fmt.Errorf(
			"key schema %s, want only the hash key %s of type S (the layout of Powertools' idempotency table)", describeKeys(t), attrID))
	}
	return nil
}

func describeKeys(t *types.TableDescription) string {
	s := "["
	for i, k := range t.KeySchema {
		if i > 0 {
			s += " "
		}
		s += aws.ToString(k.AttributeName) + " " + string(k.KeyType)
	}
	return s + "]"
}
