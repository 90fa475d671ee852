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

	"github.com/shardsettle/lambdaadapter"
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
		d, table := newLeaseTable(t, env.DynamoDB, env.DynamoDB)
		return olderRows{DynamoDB: d, raw: env.DynamoDB, table: table}
	})
}

// olderRows is a lease table that can also hold rows as an older version
// wrote them, for the conformance kit's EmptyOwnerOfOlderVersion.
type olderRows struct {
	*lease.DynamoDB
	raw   *dynamodb.Client
	table string
}

// PutOlderFreeLease writes a free lease of k at counter 0 with an empty
// owner (leaseOwner = "") instead of none. DynamoDB itself refuses that on
// a table with the owner index (an index key cannot be an empty string):
// such rows are from before the index was added. dynalite does not check
// it, which lets the kit test them on a table with the index.
func (o olderRows) PutOlderFreeLease(ctx context.Context, k lease.Key) error {
	_, err := o.raw.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(o.table),
		Item: map[string]types.AttributeValue{
			"leaseKey":      &types.AttributeValueMemberS{Value: k.String()},
			"stream":        &types.AttributeValueMemberS{Value: k.Stream},
			"leaseOwner":    &types.AttributeValueMemberS{Value: ""},
			"leaseCounter":  &types.AttributeValueMemberN{Value: "0"},
			"ownerSwitches": &types.AttributeValueMemberN{Value: "0"},
		},
	})
	return err
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
	_, err = leasesOf(d.Snapshot(ctx, "orders"))
	check("List", err)
	_, err = d.Take(ctx, lease.Lease{Key: k}, "w1")
	check("Take", err)
	_, err = d.Transfer(ctx, lease.Lease{Key: k, Owner: "w1"}, "w2")
	check("Transfer", err)
	_, err = d.RequestHandoff(ctx, lease.Lease{Key: k, Owner: "w1"}, "w2")
	check("RequestHandoff", err)
	check("Delete", d.Delete(ctx, lease.Lease{Key: k}))
	_, err = d.Heartbeat(ctx, "orders", "w1", nil)
	check("Heartbeat", err)
	check("RemoveWorker", d.RemoveWorker(ctx, lease.Worker{Stream: "orders", Owner: "w1", Counter: 1}))
	_, err = d.Snapshot(ctx, "orders")
	check("Snapshot", err)
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

// TestLeaseDynamoDBWrongSchema checks that Check, CreateTable, Heartbeat
// (a worker's first call) and a long-running adapter's Run refuse a table
// with the lease table's name but another key schema, with
// ErrNotLeaseTable and the schema found.
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
	_, heartbeatErr := d.Heartbeat(ctx, "orders", "w1", nil)
	for name, err := range map[string]error{"Check": d.Check(ctx), "CreateTable": d.CreateTable(ctx), "Heartbeat": heartbeatErr, "Run": runOn(t, env, table)} {
		if !errors.Is(err, lease.ErrNotLeaseTable) || errors.Is(err, lease.ErrTableNotFound) || !strings.Contains(err.Error(), "not a lease table: want only a hash key leaseKey of type S, got key schema [id HASH (S)]") {
			t.Errorf("%s of a table keyed by id = %v, want a \"not a lease table\" error matching ErrNotLeaseTable", name, err)
		}
	}
}

// TestLeaseDynamoDBRunMissingTable: a long-running adapter on a lease table
// that does not exist does not start: Run returns ErrTableNotFound with the
// command that creates the table.
func TestLeaseDynamoDBRunMissingTable(t *testing.T) {
	env := standin.Require(t)
	table := leaseTableName(t)
	err := runOn(t, env, table)
	if !errors.Is(err, lambdaadapter.ErrTableNotFound) || !strings.Contains(err.Error(), "create it with: bootstrap leases init -table "+table) {
		t.Errorf("Run on a missing lease table = %v, want ErrTableNotFound naming bootstrap leases init", err)
	}
}

// runOn runs a long-running adapter with the lease table named table and
// returns what Run returned: it must return by itself (it cannot start),
// well before the test's deadline.
func runOn(t *testing.T, env *standin.Env, table string) error {
	t.Helper()
	a, err := lambdaadapter.NewService(lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
		return lambdaadapter.Ack()
	}), lambdaadapter.WithStream("orders-"+strings.ToLower(rand.Text()[:8])),
		lambdaadapter.WithKinesisClient(env.Kinesis), lambdaadapter.WithLeaseTable(table), lambdaadapter.WithDynamoDBClient(env.DynamoDB))
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), leaseTableTimeout)
	defer cancel()
	err = a.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Run did not return by itself within %v (%v)", leaseTableTimeout, err)
	}
	return err
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
	ls, err := leasesOf(d.Snapshot(ctx, "orders"))
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

	// Snapshot reads the same pages once, and the workers with them.
	for _, owner := range []string{"w3", "w1", "w2"} {
		for _, stream := range []string{"orders", "payments"} {
			if _, err := d.Heartbeat(ctx, stream, owner, nil); err != nil {
				t.Fatalf("Heartbeat: %v", err)
			}
		}
	}
	scans := client.scans.Load()
	client.scans.Store(0)
	snap, err := d.Snapshot(ctx, "orders")
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if len(snap.Leases) != shards || len(snap.Workers) != 3 {
		t.Fatalf("Snapshot returned %d leases and %d workers, want %d and 3", len(snap.Leases), len(snap.Workers), shards)
	}
	for i, w := range snap.Workers {
		if want := fmt.Sprintf("w%d", i+1); w.Owner != want || w.Stream != "orders" || w.Counter != 1 {
			t.Fatalf("worker %d = %+v, want %s of orders at counter 1", i, w, want)
		}
	}
	if n := client.scans.Load(); n != scans {
		t.Fatalf("Snapshot made %d Scan calls, List %d: want one scan of the table", n, scans)
	}
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
	if w1, err = a.Checkpoint(ctx, w1, "100", 0); err != nil {
		t.Fatalf("Checkpoint by w1: %v", err)
	}
	// w2 watches the counter with a Tracker on its own clock.
	tracker := lease.NewTracker(time.Millisecond)
	seen, err := leasesOf(b.Snapshot(ctx, "orders"))
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
	if _, err := a.Checkpoint(ctx, w1, "200", 0); !errors.Is(err, lease.ErrLeaseLost) {
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

// TestLeaseDynamoDBOldRows checks the table format across versions: a lease
// row written by a version without handoffs (no handoff attribute) reads and
// takes part in handoffs, and worker rows stay out of the filtered scan an
// older version's List makes.
func TestLeaseDynamoDBOldRows(t *testing.T) {
	env := standin.Require(t)
	d, table := newLeaseTable(t, env.DynamoDB, env.DynamoDB)
	ctx := t.Context()
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}
	_, err := env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"leaseKey":      &types.AttributeValueMemberS{Value: k.String()},
			"stream":        &types.AttributeValueMemberS{Value: "orders"},
			"leaseOwner":    &types.AttributeValueMemberS{Value: "old-worker"},
			"leaseCounter":  &types.AttributeValueMemberN{Value: "41"},
			"ownerSwitches": &types.AttributeValueMemberN{Value: "3"},
			"checkpoint":    &types.AttributeValueMemberS{Value: "100"},
			"renewedAt":     &types.AttributeValueMemberS{Value: "2026-12-02T10:11:12.345Z"},
		},
	})
	if err != nil {
		t.Fatalf("PutItem of an old row: %v", err)
	}
	old, err := d.Get(ctx, k)
	if err != nil {
		t.Fatalf("Get of an old row: %v", err)
	}
	if old.Owner != "old-worker" || old.Counter != 41 || old.Handoff != "" || old.Checkpoint != "100" {
		t.Fatalf("old row = %+v", old)
	}
	asked, err := d.RequestHandoff(ctx, old, "new-worker")
	if err != nil || asked.Handoff != "new-worker" || asked.Counter != 41 {
		t.Fatalf("RequestHandoff of an old row = %+v, %v", asked, err)
	}
	// The old version renews without knowing of handoffs; the request stays.
	if _, err := env.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: k.String()}},
		UpdateExpression:          aws.String("SET #c = :next"),
		ConditionExpression:       aws.String("#c = :c AND #o = :o"),
		ExpressionAttributeNames:  map[string]string{"#c": "leaseCounter", "#o": "leaseOwner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberN{Value: "41"}, ":next": &types.AttributeValueMemberN{Value: "42"}, ":o": &types.AttributeValueMemberS{Value: "old-worker"}},
	}); err != nil {
		t.Fatalf("renewal as an old version makes it: %v", err)
	}
	if got, err := d.Get(ctx, k); err != nil || got.Counter != 42 || got.Handoff != "new-worker" {
		t.Fatalf("after the old renewal: %+v, %v", got, err)
	}

	if _, err := d.Heartbeat(ctx, "orders", "new-worker", nil); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	// The scan an older List makes: filter on stream only, every row
	// decoded as a lease.
	out, err := env.DynamoDB.Scan(ctx, &dynamodb.ScanInput{
		TableName:                 aws.String(table),
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("#s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "stream"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "orders"}},
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if len(out.Items) != 1 {
		t.Fatalf("an older List would see %d rows, want only the lease: %v", len(out.Items), out.Items)
	}
	raw, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: "orders:@worker:new-worker"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil || len(raw.Item) == 0 {
		t.Fatalf("GetItem of the worker row = %v, %v", raw, err)
	}
	if _, ok := raw.Item["stream"]; ok {
		t.Error("the worker row has a stream attribute")
	}
	if kind, ok := raw.Item["kind"].(*types.AttributeValueMemberS); !ok || kind.Value != "worker" {
		t.Errorf("the worker row's kind = %#v, want S worker", raw.Item["kind"])
	}
}

// TestLeaseDynamoDBHandoff plays a planned move between two workers with
// their own clients on one table: the request, the owner's renewals that
// show it, the transfer, and the previous owner fenced off.
func TestLeaseDynamoDBHandoff(t *testing.T) {
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
	if _, err := a.Heartbeat(ctx, "orders", "w1", nil); err != nil {
		t.Fatalf("Heartbeat by w1: %v", err)
	}
	if _, err := b.Heartbeat(ctx, "orders", "w2", nil); err != nil {
		t.Fatalf("Heartbeat by w2: %v", err)
	}
	snap, err := b.Snapshot(ctx, "orders")
	if err != nil || len(snap.Leases) != 1 || len(snap.Workers) != 2 {
		t.Fatalf("Snapshot by w2 = %+v, %v", snap, err)
	}
	if _, err := b.RequestHandoff(ctx, snap.Leases[0], "w2"); err != nil {
		t.Fatalf("RequestHandoff by w2: %v", err)
	}
	if w1, err = a.Renew(ctx, w1); err != nil || w1.Handoff != "w2" {
		t.Fatalf("Renew by w1 after the request = %+v, %v; want Handoff w2", w1, err)
	}
	if w1, err = a.Checkpoint(ctx, w1, "100", 0); err != nil {
		t.Fatalf("Checkpoint by w1: %v", err)
	}
	moved, err := a.Transfer(ctx, w1, w1.Handoff)
	if err != nil {
		t.Fatalf("Transfer: %v", err)
	}
	if _, err := a.Renew(ctx, w1); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Renew by w1 after the transfer: %v, want lease.ErrLeaseLost", err)
	}
	snap, err = b.Snapshot(ctx, "orders")
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	got := snap.Leases[0]
	if got.Owner != "w2" || got.Handoff != "" || got.Checkpoint != "100" || got.Counter != moved.Counter || got.OwnerSwitches != 2 {
		t.Fatalf("lease after the transfer = %+v, want owner w2, no handoff, checkpoint 100, counter %d, 2 owner switches", got, moved.Counter)
	}
	if _, err := b.Renew(ctx, got); err != nil {
		t.Fatalf("Renew by w2: %v", err)
	}
	// w1 shuts down and removes its row; w2 then finds only itself.
	for _, w := range snap.Workers {
		if w.Owner == "w1" {
			if err := a.RemoveWorker(ctx, w); err != nil {
				t.Fatalf("RemoveWorker of its own row: %v", err)
			}
		}
	}
	if snap, err = b.Snapshot(ctx, "orders"); err != nil || len(snap.Workers) != 1 || snap.Workers[0].Owner != "w2" {
		t.Fatalf("workers after w1 left = %+v, %v", snap.Workers, err)
	}
}

// leasesOf returns a snapshot's leases.
func leasesOf(s lease.Snapshot, err error) ([]lease.Lease, error) { return s.Leases, err }

// TestLeaseDynamoDBOldTable: a lease table of an older version (no owner
// index) keeps working but for Owned, which reports ErrNoOwnerIndex naming
// the command that adds the index. dynalite cannot add an index to an
// existing table: AddOwnerIndex says so at once instead of waiting.
func TestLeaseDynamoDBOldTable(t *testing.T) {
	env := standin.Require(t)
	table := leaseTableName(t)
	ctx, cancel := context.WithTimeout(t.Context(), leaseTableTimeout)
	defer cancel()
	deleteTableAtCleanup(t, env.DynamoDB, table)
	if _, err := env.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	if err := dynamodb.NewTableExistsWaiter(env.DynamoDB, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 20 * time.Millisecond }).
		Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, leaseTableTimeout); err != nil {
		t.Fatalf("waiting for the table: %v", err)
	}
	d := lease.NewDynamoDB(env.DynamoDB, table)
	if err := d.Check(ctx); err != nil {
		t.Fatalf("Check of a table without the owner index: %v", err)
	}
	if has, err := d.HasOwnerIndex(ctx); has || err != nil {
		t.Fatalf("HasOwnerIndex = %t, %v; want false", has, err)
	}
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}
	l, err := d.Ensure(ctx, k, nil)
	if err == nil {
		l, err = d.Take(ctx, l, "w1")
	}
	if err == nil {
		_, err = d.Heartbeat(ctx, "orders", "w1", &lease.Load{CPU: 0.5})
	}
	if err != nil {
		t.Fatalf("lease calls on a table without the owner index: %v", err)
	}
	_, err = d.Owned(ctx, "w1")
	if !errors.Is(err, lease.ErrNoOwnerIndex) || !strings.Contains(err.Error(), "bootstrap leases init -table "+table) {
		t.Fatalf("Owned on a table without the owner index = %v, want ErrNoOwnerIndex naming bootstrap leases init", err)
	}
	t.Logf("Owned: %v", err)
	err = d.AddOwnerIndex(ctx)
	if err == nil {
		t.Fatal("AddOwnerIndex on dynalite succeeded; dynalite learnt to add indexes: test the index it adds")
	}
	t.Logf("AddOwnerIndex on dynalite: %v", err)
}
