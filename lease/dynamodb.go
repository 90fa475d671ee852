package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
)

// DynamoDBAPI is the part of the DynamoDB client that DynamoDB uses.
// *dynamodb.Client satisfies it; tests may pass a fake.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, params *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	UpdateTable(ctx context.Context, params *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// Attribute names of the lease table; see the package documentation.
const (
	attrKey        = "leaseKey"
	attrOwner      = "leaseOwner"
	attrCounter    = "leaseCounter"
	attrCheckpoint = "checkpoint"
	// attrSubSequence is Lease.SubSequence, present only when not 0.
	attrSubSequence = "checkpointSubSequence"
	attrParents     = "parentShardIds"
	attrSwitches    = "ownerSwitches"
	attrRenewedAt   = "renewedAt"
	attrStream      = "stream"
	attrHandoff     = "handoff"
	// attrWriteToken is a random token that every fenced write of a lease
	// sets, unique to that write (see DynamoDB.write): how a write whose
	// answer was lost recognises its own row.
	attrWriteToken = "writeToken"
	// Worker rows only: they have no stream attribute, so that a scan
	// filtering on stream (an older version's) never sees them.
	attrKind         = "kind"
	attrWorkerStream = "workerStream"
	// attrLoad is Worker.Load, present only when not nil (see encodeLoad).
	attrLoad = "load"
)

// Kinds of the rows that are not a shard's lease. Lease rows have no kind
// attribute.
const (
	kindWorker = "worker"
	// kindLeader is the kind of the leader row (LeaderKey), which an older
	// version's Snapshot skips as a kind it does not know.
	kindLeader = "leader"
)

// ownerIndex is the name of the lease table's global secondary index on
// leaseOwner (hash key, S), keys only, that Owned queries.
const ownerIndex = "leaseOwner-index"

// renewedAtLayout is the format of renewedAt: RFC 3339 in UTC with
// milliseconds.
const renewedAtLayout = "2006-01-02T15:04:05.000Z07:00"

// Bounds of CreateTable's wait for the table to become ACTIVE, and of
// AddOwnerIndex's for the index (backfilling an index of even a small
// table takes minutes).
const (
	createMaxWait  = 5 * time.Minute
	indexMaxWait   = 20 * time.Minute
	createMinDelay = 100 * time.Millisecond
	createMaxDelay = 5 * time.Second
)

// DynamoDB is a Store in a DynamoDB table, shared by every worker of every
// stream that uses the table. Create the table once with CreateTable
// (bootstrap leases init); check it at start with Check.
//
// A DynamoDB is safe for concurrent use (as its client is). Every read is
// strongly consistent; every write is one request, conditional but for
// Heartbeat's upsert, so concurrent writes to one lease have exactly one
// winner. Worker rows live in the same table under keys no lease can have
// (see the package documentation). A canceled context
// ends the pending request with the context's error. Errors are not retried
// beyond what the client's own retryer does.
type DynamoDB struct {
	client DynamoDBAPI
	table  string
	now    func() time.Time // the writer's wall clock, for renewedAt

	// unanswered holds, per lease, the renewals and checkpoints of this
	// process that ended with no answer (a timeout, a reset, a 5xx after
	// the client's retries) since the lease's last answered write: any of
	// them may have been applied (see applied).
	mu         sync.Mutex
	unanswered map[Key][]pendingWrite
}

// pendingWrite is a renewal or checkpoint that got no answer: the counter
// it was conditional on and what it would have written.
type pendingWrite struct {
	base int64
	w    written
}

// maxUnanswered bounds the unanswered writes kept per lease; the oldest go.
const maxUnanswered = 8

var _ Store = (*DynamoDB)(nil)

// NewDynamoDB returns a Store in the table named table, using client. It
// does no I/O; call Check to see that the table exists.
func NewDynamoDB(c DynamoDBAPI, table string) *DynamoDB {
	if c == nil {
		panic("lease: NewDynamoDB with a nil client")
	}
	return &DynamoDB{client: c, table: table, now: time.Now}
}

// CreateTable creates the lease table (on-demand capacity, hash key
// leaseKey of type S, and the owner index that Owned reads: see the
// package documentation) and waits until it is ACTIVE. It is idempotent: a
// table that already exists is not an error, but it must have the lease
// table's key schema (see Check); CreateTable does not add the owner index
// to it (AddOwnerIndex does). It returns when ctx ends, with ctx's error;
// the table may then still be created.
func (d *DynamoDB) CreateTable(ctx context.Context) error {
	_, err := d.client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(d.table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrOwner), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String(ownerIndex),
			KeySchema:  ownerIndexKeys(),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil && awserr.Classify(err) != awserr.InUse {
		return plainError(opCreate, d.table, err)
	}
	w := dynamodb.NewTableExistsWaiter(d.client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = createMinDelay, createMaxDelay
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(d.table)}, createMaxWait); err != nil {
		return plainError(opCreate, d.table, fmt.Errorf("waiting until ACTIVE: %w", err))
	}
	return d.Check(ctx)
}

// Check returns nil when the lease table exists, is usable (ACTIVE or
// UPDATING) and has the lease table's key schema. When the table does not
// exist, its error matches ErrTableNotFound and names the command that
// creates it; when its key schema is another, ErrNotLeaseTable.
//
// A table of another key schema also fails Heartbeat (a worker's first
// call) with ErrNotLeaseTable.
//
// Check does not require the owner index (see HasOwnerIndex): a table
// created by an older version works, but for Owned.
func (d *DynamoDB) Check(ctx context.Context) error {
	t, err := d.describe(ctx, opCheck)
	if err != nil {
		return err
	}
	if s := t.TableStatus; s != types.TableStatusActive && s != types.TableStatusUpdating {
		return plainError(opCheck, d.table, fmt.Errorf("table status is %s, want ACTIVE", s))
	}
	return nil
}

// describe returns the description of the lease table, or the error of op
// when it cannot be read or when the table has not the lease table's key
// schema (ErrNotLeaseTable).
func (d *DynamoDB) describe(ctx context.Context, op string) (*types.TableDescription, error) {
	out, err := d.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(d.table)})
	if err != nil {
		return nil, d.fail(op, d.table, err)
	}
	t := out.Table
	if t == nil {
		return nil, plainError(op, d.table, errors.New("DescribeTable returned no table"))
	}
	keyType := types.ScalarAttributeType("")
	for _, a := range t.AttributeDefinitions {
		if aws.ToString(a.AttributeName) == attrKey {
			keyType = a.AttributeType
		}
	}
	if len(t.KeySchema) != 1 || aws.ToString(t.KeySchema[0].AttributeName) != attrKey ||
		t.KeySchema[0].KeyType != types.KeyTypeHash || keyType != types.ScalarAttributeTypeS {
		return nil, &awserr.Error{Pkg: "lease", Op: op, Resource: d.table, Kind: awserr.Invalid, What: "not a lease table",
			Cause: fmt.Errorf("want only a hash key %s of type S, got key schema %s", attrKey, describeKeys(t)), Also: ErrNotLeaseTable}
	}
	return t, nil
}

// HasOwnerIndex reports whether the lease table has the owner index that
// Owned reads, ACTIVE and not backfilling: false for a table created by an
// older version, and while AddOwnerIndex builds it. Its error is Check's
// for a missing table or one of another key schema.
func (d *DynamoDB) HasOwnerIndex(ctx context.Context) (bool, error) {
	t, err := d.describe(ctx, opCheck)
	if err != nil {
		return false, err
	}
	return ownerIndexActive(t), nil
}

// ownerIndexOf returns the owner index of the table t, nil when it has
// none.
func ownerIndexOf(t *types.TableDescription) *types.GlobalSecondaryIndexDescription {
	if t == nil {
		return nil
	}
	for i, x := range t.GlobalSecondaryIndexes {
		if aws.ToString(x.IndexName) == ownerIndex {
			return &t.GlobalSecondaryIndexes[i]
		}
	}
	return nil
}

// ownerIndexActive reports whether t has the owner index, ACTIVE and not
// backfilling.
func ownerIndexActive(t *types.TableDescription) bool {
	x := ownerIndexOf(t)
	return x != nil && x.IndexStatus == types.IndexStatusActive && !aws.ToBool(x.Backfilling)
}

// ownerIndexKeys is the key schema of the owner index.
func ownerIndexKeys() []types.KeySchemaElement {
	return []types.KeySchemaElement{{AttributeName: aws.String(attrOwner), KeyType: types.KeyTypeHash}}
}

// indexWaitError is why AddOwnerIndex stopped waiting after indexMaxWait:
// a deadline (errors.Is context.DeadlineExceeded), the index perhaps still
// being built.
type indexWaitError struct{}

func (indexWaitError) Error() string {
	return fmt.Sprintf("the index is not ACTIVE after %v", indexMaxWait)
}

func (indexWaitError) Unwrap() error { return context.DeadlineExceeded }

// AddOwnerIndex adds the owner index that Owned reads to a lease table
// that has none (one created by an older version), with UpdateTable, and
// waits until it is ACTIVE and backfilled: up to 20 minutes, polling
// DescribeTable. It is idempotent: an index already there (or being built,
// by another call say) is only waited for. Every other call keeps working
// on the table meanwhile, and workers of older versions are not affected.
// A table whose status refuses the update for now (UPDATING) is waited for
// and the update tried again. It returns when ctx ends, with ctx's error,
// or after the 20 minutes with an error that is context.DeadlineExceeded
// too; the index may then still be built. A table of another key schema fails
// with ErrNotLeaseTable, a missing one with ErrTableNotFound.
func (d *DynamoDB) AddOwnerIndex(ctx context.Context) error {
	ctx, cancel := context.WithTimeoutCause(ctx, indexMaxWait, indexWaitError{})
	defer cancel()
	for delay := createMinDelay; ; delay = min(2*delay, createMaxDelay) {
		t, err := d.describe(ctx, opIndex)
		if err != nil {
			return err
		}
		switch {
		case ownerIndexActive(t):
			return nil
		case ownerIndexOf(t) == nil && t.TableStatus == types.TableStatusActive:
			if err := d.createOwnerIndex(ctx, t); err != nil {
				return err
			}
		}
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return plainError(opIndex, d.table, fmt.Errorf("waiting until the index %s is ACTIVE: %w", ownerIndex, context.Cause(ctx)))
		}
	}
}

// createOwnerIndex asks DynamoDB to add the owner index to the table t,
// which has none. A table that refuses it for its state (being updated) is
// not an error: the caller waits and tries again.
func (d *DynamoDB) createOwnerIndex(ctx context.Context, t *types.TableDescription) error {
	create := &types.CreateGlobalSecondaryIndexAction{
		IndexName:  aws.String(ownerIndex),
		KeySchema:  ownerIndexKeys(),
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
	}
	if t.BillingModeSummary == nil || t.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		// A table of provisioned capacity (changed by its operator): the
		// index gets the table's.
		if p := t.ProvisionedThroughput; p != nil {
			create.ProvisionedThroughput = &types.ProvisionedThroughput{ReadCapacityUnits: p.ReadCapacityUnits, WriteCapacityUnits: p.WriteCapacityUnits}
		}
	}
	out, err := d.client.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName:                   aws.String(d.table),
		AttributeDefinitions:        []types.AttributeDefinition{{AttributeName: aws.String(attrOwner), AttributeType: types.ScalarAttributeTypeS}},
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: create}},
	})
	switch {
	case err != nil && awserr.Classify(err) == awserr.InUse:
		return nil // the table is being updated: wait, and try again
	case err != nil:
		return d.fail(opIndex, d.table, err)
	case out.TableDescription != nil && ownerIndexOf(out.TableDescription) == nil:
		// DynamoDB lists an index it accepted at once (CREATING); a
		// stand-in that takes the request and ignores it (dynalite) would
		// be waited for in vain.
		return plainError(opIndex, d.table, fmt.Errorf("UpdateTable succeeded but the table has no index %s: the service does not add indexes to existing tables", ownerIndex))
	}
	return nil
}

// describeKeys formats a table's key schema for an error message.
func describeKeys(t *types.TableDescription) string {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	s := "["
	for i, k := range t.KeySchema {
		if i > 0 {
			s += " "
		}
		name := aws.ToString(k.AttributeName)
		s += fmt.Sprintf("%s %s (%s)", name, k.KeyType, attrTypes[name])
	}
	return s + "]"
}

// Ensure implements Store with a PutItem conditional on the row's absence,
// followed by a consistent GetItem when the row exists.
func (d *DynamoDB) Ensure(ctx context.Context, k Key, parents []string) (Lease, error) {
	if err := k.check(); err != nil {
		return Lease{}, plainError(opEnsure, k.String(), err)
	}
	l := Lease{Key: k, ParentShardIDs: clonePresent(parents), RenewedAt: wallClock(d.now)}
	_, err := d.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(d.table),
		Item:                     encode(l),
		ConditionExpression:      aws.String("attribute_not_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#k": attrKey},
	}, within(ctx)...)
	switch {
	case err == nil:
		return l, nil
	case awserr.Classify(err) == awserr.ConditionFailed:
		return d.Get(ctx, k) // the row exists
	}
	return Lease{}, d.fail(opEnsure, k.String(), err)
}

// Snapshot implements Store with one paginated, consistent Scan filtered by
// the stream attribute of lease rows or the workerStream attribute of
// worker rows and the leader row; the rows are told apart by their kind
// attribute.
func (d *DynamoDB) Snapshot(ctx context.Context, stream string) (Snapshot, error) {
	if err := checkStream(stream); err != nil {
		return Snapshot{}, plainError(opSnapshot, stream, err)
	}
	snaps, err := d.scan(ctx, opSnapshot, []string{stream})
	return snaps[stream], err
}

// SnapshotStreams returns what Snapshot returns for each of streams, by
// stream name, from ONE consistent, paginated Scan of the table: the read
// units of one Snapshot, where a Snapshot per stream reads the whole table
// once per stream. The leader of a service that reads several streams
// uses it (see the package documentation, "Read cost"). At most 100
// streams; each must be a valid stream name.
func (d *DynamoDB) SnapshotStreams(ctx context.Context, streams ...string) (map[string]Snapshot, error) {
	return d.scan(ctx, opSnapshot, streams)
}

// scan reads the rows of streams, leases, workers and the leader rows,
// with a paginated, consistent Scan. Rows of a kind this version does not
// know (written by a newer one) are skipped; rows that cannot be decoded
// are reported in their stream's Snapshot.Malformed (the stream the row's
// stream or workerStream attribute names, which the Scan's filter matched),
// so that one bad row fails neither its stream's read nor the others'.
func (d *DynamoDB) scan(ctx context.Context, op string, streams []string) (map[string]Snapshot, error) {
	what := strings.Join(streams, ",")
	if len(streams) == 0 || len(streams) > 100 {
		return nil, plainError(op, what, fmt.Errorf("%d streams, want 1 to 100", len(streams)))
	}
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(d.table),
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("#s = :s OR #ws = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": attrStream, "#ws": attrWorkerStream},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: streams[0]}},
	}
	snaps := make(map[string]Snapshot, len(streams))
	names := make([]string, len(streams))
	for i, stream := range streams {
		if err := checkStream(stream); err != nil {
			return nil, plainError(op, stream, err)
		}
		snaps[stream] = Snapshot{Leases: []Lease{}, Workers: []Worker{}}
		names[i] = ":s" + strconv.Itoa(i)
		in.ExpressionAttributeValues[names[i]] = &types.AttributeValueMemberS{Value: stream}
	}
	if len(streams) > 1 {
		list := strings.Join(names, ", ")
		in.FilterExpression = aws.String("#s IN (" + list + ") OR #ws IN (" + list + ")")
		delete(in.ExpressionAttributeValues, ":s")
	} else {
		delete(in.ExpressionAttributeValues, ":s0")
	}
	for {
		out, err := d.client.Scan(ctx, in, within(ctx)...)
		if err != nil {
			return nil, d.fail(op, what, err)
		}
		for _, item := range out.Items {
			stream, ok := rowStream(item, streams)
			if !ok {
				continue // not of these streams (the filter keeps such rows out)
			}
			snap := snaps[stream]
			kind, err := stringAttr(item, attrKind, false)
			if err != nil {
				err = fmt.Errorf("malformed row: %w", err)
			}
			switch {
			case err != nil:
			case kind == "" || kind == kindLeader:
				var l Lease
				if l, err = decode(item); err != nil {
					break
				}
				switch {
				case l.Key.Stream != stream:
					err = fmt.Errorf("malformed row %q: the key does not name the stream %q of its attributes", l.Key, stream)
				case l.Key.ShardID == leaderShardID:
					snap.Leader = &l
				default:
					snap.Leases = append(snap.Leases, l)
				}
			case kind == kindWorker:
				var w Worker
				if w, err = decodeWorker(item); err != nil {
					break
				}
				if w.Stream != stream {
					err = fmt.Errorf("malformed worker row of %q: stream %q, want %q", w.Owner, w.Stream, stream)
					break
				}
				snap.Workers = append(snap.Workers, w)
			}
			if err != nil {
				key, _ := stringAttr(item, attrKey, false)
				if snap.Malformed == nil {
					snap.Malformed = map[string]error{}
				}
				snap.Malformed[key] = fmt.Errorf("lease: %w", err)
			}
			snaps[stream] = snap
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	for _, snap := range snaps {
		sortLeases(snap.Leases)
		sortWorkers(snap.Workers)
	}
	return snaps, nil
}

// rowStream is the stream of streams a scanned row belongs to: the one its
// stream attribute (a lease row's) or its workerStream attribute (a worker
// or leader row's) names, as the Scan's filter matched it, else the one
// its key starts with. ok is false for a row that names none of them.
func rowStream(item map[string]types.AttributeValue, streams []string) (stream string, ok bool) {
	for _, attr := range []string{attrStream, attrWorkerStream} {
		if s, err := stringAttr(item, attr, true); err == nil && slices.Contains(streams, s) {
			return s, true
		}
	}
	key, _ := stringAttr(item, attrKey, true)
	if s, _, found := strings.Cut(key, ":"); found && slices.Contains(streams, s) {
		return s, true
	}
	return "", false
}

// Get implements Store with a consistent GetItem.
func (d *DynamoDB) Get(ctx context.Context, k Key) (Lease, error) {
	if err := k.check(); err != nil {
		return Lease{}, plainError(opGet, k.String(), err)
	}
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.table),
		Key:            keyItem(k),
		ConsistentRead: aws.Bool(true),
	}, within(ctx)...)
	if err != nil {
		return Lease{}, d.fail(opGet, k.String(), err)
	}
	if len(out.Item) == 0 {
		return Lease{}, noRowError(opGet, k.String())
	}
	l, err := decode(out.Item)
	if err != nil {
		return Lease{}, plainError(opGet, k.String(), err)
	}
	return l, nil
}

// Take implements Store with a conditional UpdateItem.
func (d *DynamoDB) Take(ctx context.Context, held Lease, owner string) (Lease, error) {
	return d.write(ctx, opTake, held, owner, "", 0)
}

// Renew implements Store with a conditional UpdateItem.
func (d *DynamoDB) Renew(ctx context.Context, held Lease) (Lease, error) {
	return d.write(ctx, opRenew, held, "", "", 0)
}

// Checkpoint implements Store with a conditional UpdateItem.
func (d *DynamoDB) Checkpoint(ctx context.Context, held Lease, seq string, sub int) (Lease, error) {
	return d.write(ctx, opCheckpoint, held, "", seq, sub)
}

// Release implements Store with a conditional UpdateItem that removes the
// owner and handoff attributes.
func (d *DynamoDB) Release(ctx context.Context, held Lease) (Lease, error) {
	return d.write(ctx, opRelease, held, "", "", 0)
}

// Transfer implements Store with a conditional UpdateItem.
func (d *DynamoDB) Transfer(ctx context.Context, held Lease, to string) (Lease, error) {
	return d.write(ctx, opTransfer, held, to, "", 0)
}

// RequestHandoff implements Store with an UpdateItem conditional on the
// owner and the handoff attribute, which sets nothing but the handoff
// attribute.
func (d *DynamoDB) RequestHandoff(ctx context.Context, held Lease, requester string) (Lease, error) {
	if err := checkWrite(opHandoff, held, requester, "", 0); err != nil {
		return Lease{}, err
	}
	out, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(d.table),
		Key:                      keyItem(held.Key),
		UpdateExpression:         aws.String("SET #h = :h"),
		ConditionExpression:      aws.String("#o = :o AND (attribute_not_exists(#h) OR #h = :h)"),
		ExpressionAttributeNames: map[string]string{"#o": attrOwner, "#h": attrHandoff},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: held.Owner},
			":h": &types.AttributeValueMemberS{Value: requester},
		},
		ReturnValues: types.ReturnValueAllNew,
	}, within(ctx)...)
	if err != nil {
		return Lease{}, d.fail(opHandoff, held.Key.String(), err)
	}
	l, err := decode(out.Attributes)
	if err != nil {
		return Lease{}, plainError(opHandoff, held.Key.String(), err)
	}
	return l, nil
}

// Delete implements Store with a DeleteItem conditional on owner and
// counter.
func (d *DynamoDB) Delete(ctx context.Context, held Lease) error {
	if err := checkWrite(opDelete, held, "", "", 0); err != nil {
		return err
	}
	cond, names, values := fenceCondition(held)
	_, err := d.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(d.table),
		Key:                       keyItem(held.Key),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}, within(ctx)...)
	if err != nil {
		return d.fail(opDelete, held.Key.String(), err)
	}
	return nil
}

// Heartbeat implements Store with one unconditional UpdateItem that creates
// the worker row or adds 1 to its counter, and sets or removes its load.
func (d *DynamoDB) Heartbeat(ctx context.Context, stream, owner string, load *Load) (Worker, error) {
	what := workerKey(stream, owner)
	if err := checkWorker(stream, owner); err != nil {
		return Worker{}, plainError(opHeartbeat, what, err)
	}
	update := "SET #kind = :kind, #ws = :s, #o = :o, #r = :now"
	names := map[string]string{
		"#kind": attrKind, "#ws": attrWorkerStream, "#o": attrOwner, "#r": attrRenewedAt, "#c": attrCounter, "#l": attrLoad,
	}
	values := map[string]types.AttributeValue{
		":kind": &types.AttributeValueMemberS{Value: kindWorker},
		":s":    &types.AttributeValueMemberS{Value: stream},
		":o":    &types.AttributeValueMemberS{Value: owner},
		":now":  &types.AttributeValueMemberS{Value: wallClock(d.now).Format(renewedAtLayout)},
		":one":  number(1),
	}
	if load != nil {
		update += ", #l = :l ADD #c :one"
		values[":l"] = encodeLoad(compactLoad(load))
	} else {
		update += " ADD #c :one REMOVE #l"
	}
	out, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(d.table),
		Key:                       map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: what}},
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	}, within(ctx)...)
	if err != nil {
		if awserr.Classify(err) == awserr.Invalid {
			// On a table of another key schema (a worker's first call is
			// its heartbeat), say so as Check does, not only that the key
			// is wrong.
			if cerr := d.Check(ctx); errors.Is(cerr, ErrNotLeaseTable) {
				return Worker{}, cerr
			}
		}
		return Worker{}, d.fail(opHeartbeat, what, err)
	}
	w, err := decodeWorker(out.Attributes)
	if err != nil {
		return Worker{}, plainError(opHeartbeat, what, err)
	}
	return w, nil
}

// Owned implements Store with a paginated Query of the owner index (keys
// only, eventually consistent). The index holds the worker rows of owner
// too (they carry leaseOwner, which older versions read) and the leader
// rows it holds: they are dropped by their key. When DynamoDB refuses the
// Query as invalid, Owned asks DescribeTable whether the table has the
// index, ACTIVE, and reports ErrNoOwnerIndex when it has not.
func (d *DynamoDB) Owned(ctx context.Context, owner string) ([]Key, error) {
	if owner == "" {
		return nil, plainError(opOwned, owner, errors.New("empty owner"))
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.table),
		IndexName:                 aws.String(ownerIndex),
		KeyConditionExpression:    aws.String("#o = :o"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: owner}},
	}
	ks := []Key{}
	for {
		out, err := d.client.Query(ctx, in, within(ctx)...)
		if err != nil {
			return nil, d.failOwned(ctx, owner, err)
		}
		for _, item := range out.Items {
			s, err := stringAttr(item, attrKey, true)
			if err != nil {
				return nil, plainError(opOwned, owner, fmt.Errorf("malformed index entry: %w", err))
			}
			if _, shard, _ := strings.Cut(s, ":"); reserved(shard) {
				continue // a worker row or a leader row
			}
			k, err := parseKey(s)
			if err != nil {
				return nil, plainError(opOwned, owner, fmt.Errorf("malformed index entry: %w", err))
			}
			ks = append(ks, k)
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	sortKeys(ks)
	return ks, nil
}

// failOwned returns the error of Owned for err, the error of its Query:
// one matching ErrNoOwnerIndex when DynamoDB refused the Query as invalid
// and the table has no ACTIVE owner index (the Query names an index that
// does not exist, or one still backfilling).
func (d *DynamoDB) failOwned(ctx context.Context, owner string, err error) error {
	if awserr.Classify(err) == awserr.Invalid {
		if t, derr := d.describe(ctx, opOwned); derr == nil && !ownerIndexActive(t) {
			what := "no owner index " + ownerIndex
			if x := ownerIndexOf(t); x != nil {
				what = fmt.Sprintf("owner index %s is %s, not yet ACTIVE", ownerIndex, x.IndexStatus)
				if aws.ToBool(x.Backfilling) {
					what += " (backfilling)"
				}
			}
			return &awserr.Error{Pkg: "lease", Op: opOwned, Resource: owner, Kind: awserr.Invalid,
				What: "lease table " + strconv.Quote(d.table) + " has " + what, Cause: err, Also: ErrNoOwnerIndex,
				Hint: "add it with: bootstrap leases init -table " + d.table}
		}
	}
	return d.fail(opOwned, owner, err)
}

// RemoveWorker implements Store with a DeleteItem conditional on the
// worker's counter.
func (d *DynamoDB) RemoveWorker(ctx context.Context, w Worker) error {
	what := workerKey(w.Stream, w.Owner)
	if err := checkWorker(w.Stream, w.Owner); err != nil {
		return plainError(opRemove, what, err)
	}
	_, err := d.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(d.table),
		Key:                       map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: what}},
		ConditionExpression:       aws.String("#c = :c AND #kind = :kind"),
		ExpressionAttributeNames:  map[string]string{"#c": attrCounter, "#kind": attrKind},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": number(w.Counter), ":kind": &types.AttributeValueMemberS{Value: kindWorker}},
	}, within(ctx)...)
	if err != nil {
		return d.fail(opRemove, what, err)
	}
	return nil
}

// fenceCondition returns the condition that the row still has held's owner
// (no owner when held.Owner is "") and counter, with its names and values.
// A free lease has no owner attribute; an empty one (leaseOwner = "") is
// free too. This version never writes an empty owner: it could not, on a
// table with the owner index, whose key attribute cannot be an empty
// string. A row an older writer left with one reads as free and is taken
// or deleted as such (both writes leave no empty owner behind).
func fenceCondition(held Lease) (string, map[string]string, map[string]types.AttributeValue) {
	names := map[string]string{"#c": attrCounter, "#o": attrOwner}
	values := map[string]types.AttributeValue{":c": number(held.Counter)}
	if held.Owner == "" {
		values[":none"] = &types.AttributeValueMemberS{Value: ""}
		return "#c = :c AND (attribute_not_exists(#o) OR #o = :none)", names, values
	}
	values[":o"] = &types.AttributeValueMemberS{Value: held.Owner}
	return "#c = :c AND #o = :o", names, values
}

// write performs the conditional write op of held (with owner for a take or
// a transfer, seq for a checkpoint) as one UpdateItem returning the new
// row.
func (d *DynamoDB) write(ctx context.Context, op string, held Lease, owner, seq string, sub int) (Lease, error) {
	if err := checkWrite(op, held, owner, seq, sub); err != nil {
		return Lease{}, err
	}
	cond, names, values := fenceCondition(held)
	// The write's own token, sent unchanged in every attempt the client's
	// retryer makes of this request (see applied).
	token := rand.Text()
	names["#r"], names["#wt"] = attrRenewedAt, attrWriteToken
	values[":next"] = number(held.Counter + 1)
	values[":now"] = &types.AttributeValueMemberS{Value: wallClock(d.now).Format(renewedAtLayout)}
	values[":wt"] = &types.AttributeValueMemberS{Value: token}
	set := []string{"#c = :next", "#r = :now", "#wt = :wt"}
	var remove []string
	switch op {
	case opTake, opTransfer:
		set = append(set, "#o = :owner")
		values[":owner"] = &types.AttributeValueMemberS{Value: owner}
		if owner != held.Owner {
			set = append(set, "#sw = if_not_exists(#sw, :zero) + :one")
			names["#sw"] = attrSwitches
			values[":zero"], values[":one"] = number(0), number(1)
		}
		remove = append(remove, "#h")
		names["#h"] = attrHandoff
	case opRelease:
		remove = append(remove, "#o", "#h")
		names["#h"] = attrHandoff
	}
	// Checkpoint writes seq; Transfer and Release write held's checkpoint
	// (see Store), unless it is empty; the other writes have none.
	if op == opTransfer || op == opRelease {
		seq, sub = held.Checkpoint, held.SubSequence
	}
	if seq != "" {
		set = append(set, "#cp = :cp")
		names["#cp"] = attrCheckpoint
		values[":cp"] = &types.AttributeValueMemberS{Value: seq}
		names["#sub"] = attrSubSequence
		if sub > 0 {
			set = append(set, "#sub = :sub")
			values[":sub"] = number(int64(sub))
		} else {
			remove = append(remove, "#sub")
		}
	}
	update := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	out, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(d.table),
		Key:                       keyItem(held.Key),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	}, within(ctx)...)
	newOwner := held.Owner
	switch op {
	case opTake, opTransfer:
		newOwner = owner
	case opRelease:
		newOwner = ""
	}
	w := written{owner: newOwner, seq: seq, sub: sub, token: token}
	if err != nil && awserr.Classify(err) == awserr.ConditionFailed {
		l, err := d.applied(ctx, op, held, w, err)
		var earlier *earlierApplied
		if errors.As(err, &earlier) {
			// An earlier renewal or checkpoint of this process, whose
			// answer never came, was applied: the lease is still ours,
			// one counter on. Make this write again from there, once
			// (applied forgot the unanswered writes).
			again := held
			again.Counter = earlier.row.Counter
			return d.write(ctx, op, again, owner, seq, sub)
		}
		return l, err
	}
	if err != nil {
		if op == opRenew || op == opCheckpoint {
			d.noteUnanswered(held, w)
		}
		return Lease{}, d.fail(op, held.Key.String(), err)
	}
	d.forgetUnanswered(held.Key)
	l, err := decode(out.Attributes)
	if err != nil {
		return Lease{}, plainError(op, held.Key.String(), err)
	}
	return l, nil
}

// written is what a fenced write sets besides the counter: the owner the
// row has afterwards, the checkpoint (seq, sub) when the write sets one (seq
// not empty), and the write's token.
type written struct {
	owner, seq string
	sub        int
	token      string
}

// applied decides, after the condition of the write op of held failed with
// refused, whether the write was applied all the same: whether its answer
// was lost after DynamoDB applied it (a timeout, a connection reset or a
// 500 after the write), the client's retryer sent it again, and the retry's
// condition failed because the first attempt had moved the counter on. It
// reads the row with a consistent GetItem and returns it as the write's
// result when it is exactly the row the write produces: the write's token,
// counter held.Counter+1, the owner w.owner, and the checkpoint w.seq with
// sub-sequence w.sub when the write sets one. Otherwise, or when the row is
// gone or cannot be read, it returns the error of a lost lease, as for any
// failed condition: the caller stops using the lease, which is safe even
// when the write was applied after all (it only leaves the lease unrenewed
// until it expires).
//
// This cannot take another write for this one. The token is random (128
// bits from crypto/rand), new for each call of write, and sent unchanged in
// each attempt of its request, so a row carrying it was last written by an
// attempt of this very request: not by another worker, nor by another write
// of this process from the same held lease (a renewal racing a take of a
// lease handed over, say), which has a token of its own. Every fenced write
// of this version sets the token, so a later one replaces it; an older
// version's write leaves it in place but bumps the counter, which the
// counter check catches. The owner and checkpoint checks are then implied,
// and kept as a guard. Unique owner ids and the consumer's one lease write
// at a time per shard would not be enough without the token: a write of
// this owner from the same held lease finds exactly the row it would
// produce when an earlier one was applied (a renewal of a lease handed
// over, made from a snapshot outside the shard's turn; a write repeated
// from a stale copy), and would pass for applied when it was refused.
//
// RequestHandoff is the one write that changes a lease without bumping the
// counter or setting the token: a request that came after this write
// leaves the row this write's, with Handoff set, and is returned as such
// (the caller sees the request, as in the answer of any later write), so
// Handoff is not compared. It cannot make a false match either: a row this
// write did not produce does not carry its token. A false miss (a later
// write bumped the counter before the read) costs what any failed
// condition costs, ErrLeaseLost, and is safe.
//
// The write's success is only as fresh as the call: the row was written by
// an attempt sent after the call began, which is when a caller such as the
// consumer dates its renewal (it extends its fence from the call's start).
func (d *DynamoDB) applied(ctx context.Context, op string, held Lease, w written, refused error) (Lease, error) {
	lost := func(detail error) (Lease, error) {
		cause := refused
		if detail != nil {
			cause = fmt.Errorf("%w (%w)", refused, detail)
		}
		return Lease{}, lostError(op, held.Key.String(), cause)
	}
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.table),
		Key:            keyItem(held.Key),
		ConsistentRead: aws.Bool(true),
	}, within(ctx)...)
	if err != nil {
		// Undecided: the unanswered writes are kept for the next refusal.
		return lost(fmt.Errorf("reading the row back to see whether the write was applied: %w", err))
	}
	if len(out.Item) == 0 {
		return lost(errNoRow)
	}
	token, err := stringAttr(out.Item, attrWriteToken, false)
	if err != nil {
		return lost(fmt.Errorf("malformed row: %w", err))
	}
	l, err := decode(out.Item)
	if err != nil {
		return lost(err)
	}
	if token != w.token || l.Counter != held.Counter+1 || l.Owner != w.owner ||
		(w.seq != "" && (l.Checkpoint != w.seq || l.SubSequence != w.sub)) {
		if d.unansweredApplied(held, l, token) {
			return l, &earlierApplied{row: l}
		}
		return lost(fmt.Errorf("stored owner %q counter %d, held owner %q counter %d", l.Owner, l.Counter, held.Owner, held.Counter))
	}
	d.forgetUnanswered(held.Key)
	return l, nil
}

// earlierApplied is applied's answer when the row is not the refused
// write's but an earlier unanswered renewal's or checkpoint's of this
// process from the same held lease (see unansweredApplied): row is the row
// that write produced.
type earlierApplied struct{ row Lease }

func (e *earlierApplied) Error() string {
	return fmt.Sprintf("lease: an earlier write of %s whose answer was lost was applied", e.row.Key)
}

// noteUnanswered remembers w, a renewal or checkpoint of held that ended
// with no answer.
func (d *DynamoDB) noteUnanswered(held Lease, w written) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unanswered == nil {
		d.unanswered = map[Key][]pendingWrite{}
	}
	ws := append(d.unanswered[held.Key], pendingWrite{base: held.Counter, w: w})
	if len(ws) > maxUnanswered {
		ws = ws[len(ws)-maxUnanswered:]
	}
	d.unanswered[held.Key] = ws
}

// forgetUnanswered forgets the unanswered writes of k: a write of k was
// answered, or decided.
func (d *DynamoDB) forgetUnanswered(k Key) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.unanswered, k)
}

// unansweredApplied reports whether row, read back after a write of held
// was refused, is exactly what one of this process's unanswered renewals
// or checkpoints of held produced: it carries that write's token, counter
// held.Counter+1, held's owner and that write's checkpoint. A renewal or
// checkpoint whose call timed out (or lost its connection, or got a 5xx
// after its retries) may have been applied all the same; the lease is then
// still held, one counter on, and nobody wrote it since (the token is that
// write's and only its attempts carry it; see applied). It forgets the
// unanswered writes of the lease either way: they are decided.
func (d *DynamoDB) unansweredApplied(held Lease, row Lease, token string) bool {
	d.mu.Lock()
	ws := d.unanswered[held.Key]
	delete(d.unanswered, held.Key)
	d.mu.Unlock()
	if held.Owner == "" || row.Owner != held.Owner || row.Counter != held.Counter+1 {
		return false
	}
	for _, p := range ws {
		if p.base == held.Counter && p.w.token == token && p.w.owner == row.Owner &&
			(p.w.seq == "" || (row.Checkpoint == p.w.seq && row.SubSequence == p.w.sub)) {
			return true
		}
	}
	return false
}

// fail returns the error of op on what for err, the error of a DynamoDB
// call, by its kind (awserr.Classify): a failed condition matches
// ErrLeaseLost, a missing table ErrTableNotFound (and names the command
// that creates it).
func (d *DynamoDB) fail(op, what string, err error) error {
	e := &awserr.Error{Pkg: "lease", Op: op, Resource: what, Kind: awserr.Classify(err), Cause: err, Sentinels: &leaseErrs}
	if e.Kind == awserr.NotFound {
		e.Hint = "create it with: bootstrap leases init -table " + d.table
	}
	return e
}

// keyItem returns the primary key of k's row.
func keyItem(k Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: k.String()}}
}

// number returns n as a DynamoDB number.
func number(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// encode returns l as a row. Empty optional attributes are left out. The
// leader row (LeaderKey) has kind "leader" and workerStream instead of
// stream, so that an older version's scans skip it.
func encode(l Lease) map[string]types.AttributeValue {
	item := keyItem(l.Key)
	if l.Key.ShardID == leaderShardID {
		item[attrKind] = &types.AttributeValueMemberS{Value: kindLeader}
		item[attrWorkerStream] = &types.AttributeValueMemberS{Value: l.Key.Stream}
	} else {
		item[attrStream] = &types.AttributeValueMemberS{Value: l.Key.Stream}
	}
	item[attrCounter] = number(l.Counter)
	item[attrSwitches] = number(l.OwnerSwitches)
	if l.Owner != "" {
		item[attrOwner] = &types.AttributeValueMemberS{Value: l.Owner}
	}
	if l.Checkpoint != "" {
		item[attrCheckpoint] = &types.AttributeValueMemberS{Value: l.Checkpoint}
	}
	if l.SubSequence > 0 {
		item[attrSubSequence] = number(int64(l.SubSequence))
	}
	if l.Handoff != "" {
		item[attrHandoff] = &types.AttributeValueMemberS{Value: l.Handoff}
	}
	if len(l.ParentShardIDs) > 0 {
		ps := make([]types.AttributeValue, len(l.ParentShardIDs))
		for i, p := range l.ParentShardIDs {
			ps[i] = &types.AttributeValueMemberS{Value: p}
		}
		item[attrParents] = &types.AttributeValueMemberL{Value: ps}
	}
	if !l.RenewedAt.IsZero() {
		item[attrRenewedAt] = &types.AttributeValueMemberS{Value: l.RenewedAt.UTC().Format(renewedAtLayout)}
	}
	return item
}

// decode returns the lease in a row, or an error naming the attribute that
// is missing or malformed. Only leaseKey and leaseCounter are required; a
// row of an older version, without handoff, decodes with Handoff "".
func decode(item map[string]types.AttributeValue) (Lease, error) {
	var l Lease
	s, err := stringAttr(item, attrKey, true)
	if err == nil {
		l.Key, err = parseKey(s)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("malformed row: %w", err)
	}
	bad := func(err error) (Lease, error) {
		return Lease{}, fmt.Errorf("malformed row %q: %w", s, err)
	}
	if l.Counter, err = numberAttr(item, attrCounter, true); err != nil {
		return bad(err)
	}
	if l.OwnerSwitches, err = numberAttr(item, attrSwitches, false); err != nil {
		return bad(err)
	}
	if l.Owner, err = stringAttr(item, attrOwner, false); err != nil {
		return bad(err)
	}
	if l.Checkpoint, err = stringAttr(item, attrCheckpoint, false); err != nil {
		return bad(err)
	}
	sub, err := numberAttr(item, attrSubSequence, false)
	if err != nil {
		return bad(err)
	}
	if sub < 0 || sub > math.MaxInt32 {
		return bad(fmt.Errorf("attribute %s: %d out of range", attrSubSequence, sub))
	}
	l.SubSequence = int(sub)
	if l.Handoff, err = stringAttr(item, attrHandoff, false); err != nil {
		return bad(err)
	}
	if l.RenewedAt, err = timeAttr(item, attrRenewedAt); err != nil {
		return bad(err)
	}
	switch v := item[attrParents].(type) {
	case nil:
	case *types.AttributeValueMemberL:
		for i, p := range v.Value {
			ps, ok := p.(*types.AttributeValueMemberS)
			if !ok {
				return bad(fmt.Errorf("attribute %s: element %d is %T, want S", attrParents, i, p))
			}
			l.ParentShardIDs = append(l.ParentShardIDs, ps.Value)
		}
	default:
		return bad(fmt.Errorf("attribute %s is %T, want L", attrParents, v))
	}
	return l, nil
}

// decodeWorker returns the worker in a worker row, or an error naming the
// attribute that is missing or malformed. leaseKey, kind, workerStream,
// leaseOwner and leaseCounter are required, and the key must be the
// worker's.
func decodeWorker(item map[string]types.AttributeValue) (Worker, error) {
	key, err := stringAttr(item, attrKey, true)
	if err != nil {
		return Worker{}, fmt.Errorf("malformed worker row: %w", err)
	}
	bad := func(err error) (Worker, error) {
		return Worker{}, fmt.Errorf("malformed worker row %q: %w", key, err)
	}
	var w Worker
	if kind, err := stringAttr(item, attrKind, true); err != nil {
		return bad(err)
	} else if kind != kindWorker {
		return bad(fmt.Errorf("attribute %s is %q, want %q", attrKind, kind, kindWorker))
	}
	if w.Stream, err = stringAttr(item, attrWorkerStream, true); err != nil {
		return bad(err)
	}
	if w.Owner, err = stringAttr(item, attrOwner, true); err != nil {
		return bad(err)
	}
	if want := workerKey(w.Stream, w.Owner); key != want {
		return bad(fmt.Errorf("key does not match stream %q and owner %q", w.Stream, w.Owner))
	}
	if w.Counter, err = numberAttr(item, attrCounter, true); err != nil {
		return bad(err)
	}
	if w.RenewedAt, err = timeAttr(item, attrRenewedAt); err != nil {
		return bad(err)
	}
	if w.Load, err = decodeLoad(item[attrLoad]); err != nil {
		return bad(err)
	}
	return w, nil
}

// Names in the load attribute (see encodeLoad).
const (
	loadCPU    = "cpu"
	loadShards = "shards"
)

// encodeLoad returns l, compacted (see Load), as the load attribute of a
// worker row: a map of cpu (N, absent when unknown) and shards (a map by
// shard id of a list [records per second, bytes per second, GetRecords
// calls per second], the third absent when unknown; shards absent when
// empty). A shard costs about its id's length plus 16 bytes of the row.
// The polls came after the first two: a version that reads only those
// ignores them (decodeLoad ignores list elements it does not know).
func encodeLoad(l *Load) types.AttributeValue {
	m := map[string]types.AttributeValue{}
	if l.CPU >= 0 {
		m[loadCPU] = &types.AttributeValueMemberN{Value: formatLoad(l.CPU)}
	}
	if len(l.Shards) > 0 {
		shards := make(map[string]types.AttributeValue, len(l.Shards))
		for id, t := range l.Shards {
			list := []types.AttributeValue{
				&types.AttributeValueMemberN{Value: formatLoad(t.Records)},
				&types.AttributeValueMemberN{Value: formatLoad(t.Bytes)},
			}
			if t.Polls >= 0 {
				list = append(list, &types.AttributeValueMemberN{Value: formatLoad(t.Polls)})
			}
			shards[id] = &types.AttributeValueMemberL{Value: list}
		}
		m[loadShards] = &types.AttributeValueMemberM{Value: shards}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// formatLoad formats a compacted value as a DynamoDB number: its shortest
// decimal form, without exponent.
func formatLoad(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// decodeLoad returns the load in the load attribute v of a worker row, nil
// when v is nil (a row without load). Names and list elements it does not
// know (of a newer version) are ignored.
func decodeLoad(v types.AttributeValue) (*Load, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return nil, fmt.Errorf("attribute %s is %T, want M", attrLoad, v)
	}
	l := &Load{CPU: -1}
	if c, ok := m.Value[loadCPU]; ok {
		cpu, err := loadNumber(c)
		if err != nil {
			return nil, fmt.Errorf("attribute %s.%s: %w", attrLoad, loadCPU, err)
		}
		l.CPU = cpu
	}
	switch shards := m.Value[loadShards].(type) {
	case nil:
	case *types.AttributeValueMemberM:
		if len(shards.Value) > 0 {
			l.Shards = make(map[string]Throughput, len(shards.Value))
		}
		for id, sv := range shards.Value {
			list, ok := sv.(*types.AttributeValueMemberL)
			if !ok || len(list.Value) < 2 {
				return nil, fmt.Errorf("attribute %s.%s.%s: want a list of 2 numbers, got %T", attrLoad, loadShards, id, sv)
			}
			t := Throughput{Polls: -1} // unknown in a row of a version that did not publish it
			var err error
			if t.Records, err = loadNumber(list.Value[0]); err == nil {
				t.Bytes, err = loadNumber(list.Value[1])
			}
			if err == nil && len(list.Value) > 2 {
				t.Polls, err = loadNumber(list.Value[2])
			}
			if err != nil {
				return nil, fmt.Errorf("attribute %s.%s.%s: %w", attrLoad, loadShards, id, err)
			}
			l.Shards[id] = t
		}
	default:
		return nil, fmt.Errorf("attribute %s.%s is %T, want M", attrLoad, loadShards, shards)
	}
	return l, nil
}

// loadNumber returns the number v of a load attribute.
func loadNumber(v types.AttributeValue) (float64, error) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%T, want N", v)
	}
	return strconv.ParseFloat(n.Value, 64)
}

// timeAttr returns the time in the S attribute name of item (RFC 3339), in
// UTC; the zero time when it is absent.
func timeAttr(item map[string]types.AttributeValue, name string) (time.Time, error) {
	s, err := stringAttr(item, name, false)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("attribute %s: %w", name, err)
	}
	return t.UTC(), nil
}

// stringAttr returns the S attribute name of item, "" when it is absent
// and not required.
func stringAttr(item map[string]types.AttributeValue, name string, required bool) (string, error) {
	switch v := item[name].(type) {
	case *types.AttributeValueMemberS:
		return v.Value, nil
	case nil:
		if required {
			return "", fmt.Errorf("no attribute %s", name)
		}
		return "", nil
	default:
		return "", fmt.Errorf("attribute %s is %T, want S", name, v)
	}
}

// numberAttr returns the N attribute name of item as an int64, 0 when it
// is absent and not required.
func numberAttr(item map[string]types.AttributeValue, name string, required bool) (int64, error) {
	switch v := item[name].(type) {
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("attribute %s: %w", name, err)
		}
		return n, nil
	case nil:
		if required {
			return 0, fmt.Errorf("no attribute %s", name)
		}
		return 0, nil
	default:
		return 0, fmt.Errorf("attribute %s is %T, want N", name, v)
	}
}
