//go:build integration

package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/lease/leasetest"
)

// leaseTableTimeout bounds creating or deleting one lease table.
const leaseTableTimeout = 30 * time.Second

// leaseTableName returns a table name unique to this test: its name, cut
// to fit, and a random suffix, in the characters DynamoDB accepts.
func leaseTableName(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random table name: %v", err)
	}
	prefix := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '-'
	}, t.Name())
	if len(prefix) > 200 {
		prefix = prefix[:200]
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

// deleteTableAtCleanup deletes the table when the test ends, failing the
// test if that fails for another reason than the table being gone.
func deleteTableAtCleanup(t *testing.T, client *dynamodb.Client, table string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), leaseTableTimeout)
		defer cancel()
		_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		var gone *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &gone) {
			t.Errorf("deleting lease table %s: %v", table, err)
		}
	})
}

// newLeaseTable creates a lease table unique to the test with
// lease.DynamoDB.CreateTable, deleted when the test ends, and returns the
// store and the table's name.
func newLeaseTable(t *testing.T, client lease.DynamoDBAPI, raw *dynamodb.Client) (*lease.DynamoDB, string) {
	t.Helper()
	table := leaseTableName(t)
	d := lease.NewDynamoDB(client, table)
	ctx, cancel := context.WithTimeout(t.Context(), leaseTableTimeout)
	defer cancel()
	deleteTableAtCleanup(t, raw, table)
	if err := d.CreateTable(ctx); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	return d, table
}

// TestLeaseDynamoDBConformance runs the Store conformance suite against
// lease.DynamoDB on dynalite, one fresh table per subtest.
func TestLeaseDynamoDBConformance(t *testing.T) {
	env := standin.Require(t)
	leasetest.TestStore(t, func(t *testing.T) lease.Store {
		d, _ := newLeaseTable(t, env.DynamoDB, env.DynamoDB)
		return d
	})
}

// TestLeaseDynamoDBCheckMissingTable checks that a missing table is
// reported as lease.ErrTableNotFound with the command that creates it, by
// Check and by every other call.
func TestLeaseDynamoDBCheckMissingTable(t *testing.T) {
	env := standin.Require(t)
	table := leaseTableName(t)
	d := lease.NewDynamoDB(env.DynamoDB, table)
	hint := "create it with: bootstrap leases init -table " + table
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, lease.ErrTableNotFound) {
			t.Errorf("%s on a missing table: error = %v, want one matching lease.ErrTableNotFound", what, err)
			return
		}
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("%s on a missing table: error %q lacks %q", what, err, hint)
		}
	}
	ctx := t.Context()
	check("Check", d.Check(ctx))
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}
	_, err := d.Ensure(ctx, k, nil)
	check("Ensure", err)
	_, err = d.Get(ctx, k)
	check("Get", err)
	_, err = d.List(ctx, "orders")
	check("List", err)
	_, err = d.Take(ctx, lease.Lease{Key: k}, "w1")
	check("Take", err)
	check("Delete", d.Delete(ctx, k))
	t.Logf("Check on a missing table: %v", d.Check(ctx))
}

// TestLeaseDynamoDBCreateTableIdempotent checks that CreateTable of an
// existing lease table succeeds and keeps its rows.
func TestLeaseDynamoDBCreateTableIdempotent(t *testing.T) {
	env := standin.Require(t)
	d, table := newLeaseTable(t, env.DynamoDB, env.DynamoDB)
	ctx := t.Context()
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}
	l, err := d.Ensure(ctx, k, nil)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	again := lease.NewDynamoDB(env.DynamoDB, table)
	if err := again.CreateTable(ctx); err != nil {
		t.Fatalf("second CreateTable: %v", err)
	}
	if err := again.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	got, err := again.Get(ctx, k)
	if err != nil || got.Key != l.Key || got.Counter != l.Counter {
		t.Fatalf("Get after a second CreateTable = %+v, %v; want %+v", got, err, l)
	}
}

// TestLeaseDynamoDBWrongSchema checks that Check and CreateTable refuse a
// table with the lease table's name but another key schema.
func TestLeaseDynamoDBWrongSchema(t *testing.T) {
	env := standin.Require(t)
	table := leaseTableName(t)
	ctx, cancel := context.WithTimeout(t.Context(), leaseTableTimeout)
	defer cancel()
	deleteTableAtCleanup(t, env.DynamoDB, table)
	_, err := env.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	if err := dynamodb.NewTableExistsWaiter(env.DynamoDB, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 20 * time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, leaseTableTimeout); err != nil {
		t.Fatalf("waiting for the table: %v", err)
	}
	d := lease.NewDynamoDB(env.DynamoDB, table)
	for name, err := range map[string]error{"Check": d.Check(ctx), "CreateTable": d.CreateTable(ctx)} {
		if err == nil || errors.Is(err, lease.ErrTableNotFound) || !strings.Contains(err.Error(), "not a lease table") {
			t.Errorf("%s of a table keyed by id = %v, want a \"not a lease table\" error", name, err)
		}
	}
}

// countingScans counts the Scan calls of a DynamoDB client.
type countingScans struct {
	*dynamodb.Client
	scans atomic.Int64
}

func (c *countingScans) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.scans.Add(1)
	return c.Client.Scan(ctx, in, opts...)
}

// TestLeaseDynamoDBListPages checks that List reads every page of a scan:
// rows large enough (big parent lists) that the table exceeds the 1 MB a
// Scan page holds.
func TestLeaseDynamoDBListPages(t *testing.T) {
	env := standin.Require(t)
	client := &countingScans{Client: env.DynamoDB}
	d, _ := newLeaseTable(t, client, env.DynamoDB)
	ctx := t.Context()
	parents := make([]string, 100)
	for i := range parents {
		parents[i] = fmt.Sprintf("shardId-%012d-%s", i, strings.Repeat("p", 1000)) // ~100 KB per row
	}
	const shards = 14
	for i := range shards {
		for _, stream := range []string{"orders", "payments"} {
			if _, err := d.Ensure(ctx, lease.Key{Stream: stream, ShardID: fmt.Sprintf("shardId-%012d", i)}, parents); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
		}
	}
	client.scans.Store(0)
	ls, err := d.List(ctx, "orders")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(ls) != shards {
		t.Fatalf("List returned %d leases, want %d", len(ls), shards)
	}
	for i, l := range ls {
		if want := fmt.Sprintf("shardId-%012d", i); l.Key.Stream != "orders" || l.Key.ShardID != want || len(l.ParentShardIDs) != len(parents) {
			t.Fatalf("lease %d = %v with %d parents, want orders:%s with %d", i, l.Key, len(l.ParentShardIDs), want, len(parents))
		}
	}
	if n := client.scans.Load(); n < 2 {
		t.Fatalf("List made %d Scan call(s) over ~2.8 MB of rows, want several pages", n)
	}
	t.Logf("List made %d Scan calls", client.scans.Load())
}

// TestLeaseDynamoDBTwoWorkers plays two workers with their own clients on
// one table: a steal, and the fenced-off checkpoint of the worker that lost.
func TestLeaseDynamoDBTwoWorkers(t *testing.T) {
	env := standin.Require(t)
	a, table := newLeaseTable(t, env.DynamoDB, env.DynamoDB)
	b := lease.NewDynamoDB(dynamodb.NewFromConfig(env.Config, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(env.DynamoDBEndpoint)
	}), table)
	ctx := t.Context()
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}
	free, err := a.Ensure(ctx, k, nil)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	w1, err := a.Take(ctx, free, "w1")
	if err != nil {
		t.Fatalf("Take by w1: %v", err)
	}
	if w1, err = a.Checkpoint(ctx, w1, "100"); err != nil {
		t.Fatalf("Checkpoint by w1: %v", err)
	}
	// w2 watches the counter with a Tracker on its own clock.
	tracker := lease.NewTracker(time.Millisecond)
	seen, err := b.List(ctx, "orders")
	if err != nil || len(seen) != 1 {
		t.Fatalf("List by w2 = %v, %v", seen, err)
	}
	tracker.Observe(seen)
	deadline := time.Now().Add(5 * time.Second)
	for !tracker.Expired(seen[0]) {
		if time.Now().After(deadline) {
			t.Fatal("w1's lease did not expire for w2")
		}
		time.Sleep(time.Millisecond)
	}
	w2, err := b.Take(ctx, seen[0], "w2")
	if err != nil {
		t.Fatalf("steal by w2: %v", err)
	}
	if _, err := a.Checkpoint(ctx, w1, "200"); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("checkpoint by w1 after the steal: %v, want lease.ErrLeaseLost", err)
	}
	got, err := a.Get(ctx, k)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Owner != "w2" || got.Checkpoint != "100" || got.Counter != w2.Counter || got.OwnerSwitches != 2 {
		t.Fatalf("lease after the steal = %+v, want owner w2, checkpoint 100, counter %d, 2 owner switches", got, w2.Counter)
	}
}
