package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/middleware"
	consumer "github.com/harlow/kinesis-consumer"
	harlowddb "github.com/harlow/kinesis-consumer/store/ddb"
	harlowmemory "github.com/harlow/kinesis-consumer/store/memory"
)

// The peer phases: github.com/harlow/kinesis-consumer v0.5.0 (only this
// module's go.mod requires it) reading the same stream with the same
// Limit, with its in-memory checkpoint store or its DynamoDB one.
const (
	phaseHarlowMemory = "harlow-memory"
	phaseHarlowDynamo = "harlow-dynamodb"
	phaseHarlowKill   = "harlow-kill"
)

// harlowAppName is the app name of harlow's DynamoDB checkpoint store: its
// rows are keyed by namespace "<app>-<stream>" and shard_id.
const harlowAppName = "bench"

// isHarlow reports whether phase ph runs harlow/kinesis-consumer.
func isHarlow(ph string) bool {
	return ph == phaseHarlowMemory || ph == phaseHarlowDynamo || ph == phaseHarlowKill
}

// harlowStore returns the checkpoint store of a harlow phase and a
// function that stops it: harlow's in-memory store (store/memory), or
// its DynamoDB store (store/ddb) on table, which buffers checkpoints and
// writes each shard's latest with PutItem every checkpointInterval (its
// WithMaxInterval) and when Scan returns. client is the DynamoDB client
// of the DynamoDB store; harlow takes the concrete *dynamodb.Client.
func harlowStore(ph, table string, client *dynamodb.Client, checkpointInterval time.Duration) (consumer.Store, func() error, error) {
	switch ph {
	case phaseHarlowMemory:
		return harlowmemory.New(), func() error { return nil }, nil
	case phaseHarlowDynamo, phaseHarlowKill:
		if table == "" {
			return nil, nil, errors.New("no -table")
		}
		if client == nil {
			return nil, nil, errors.New("no DynamoDB client")
		}
		ck, err := harlowddb.New(harlowAppName, table,
			harlowddb.WithDynamoClient(client),
			harlowddb.WithMaxInterval(checkpointInterval))
		if err != nil {
			return nil, nil, err
		}
		// Shutdown stops the store's flush loop and writes what is
		// still buffered (Scan has flushed it already).
		return ck, ck.Shutdown, nil
	}
	return nil, nil, fmt.Errorf("unknown harlow phase %q", ph)
}

// harlowOptions are the harlow/kinesis-consumer options of every harlow
// phase (see the package documentation for why each is set):
// TRIM_HORIZON, GetRecords Limit o.limit (WithMaxRecords), one
// GetRecords call per shard per minCallInterval at most
// (WithScanInterval), the benchmark's counting Kinesis client and the
// phase's checkpoint store.
func harlowOptions(o options, kc *countingKinesis, store consumer.Store, logs io.Writer) []consumer.Option {
	opts := []consumer.Option{
		consumer.WithClient(kc),
		consumer.WithStore(store),
		consumer.WithShardIteratorType(string(kinesistypes.ShardIteratorTypeTrimHorizon)),
		consumer.WithMaxRecords(int64(o.limit)),
		consumer.WithScanInterval(minCallInterval),
	}
	if o.level <= slog.LevelInfo {
		opts = append(opts, consumer.WithLogger(harlowLogger{slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: o.level}))}))
	}
	return opts
}

// harlowLogger passes harlow's log lines (it has no levels) to a
// *slog.Logger at level Info.
type harlowLogger struct{ l *slog.Logger }

// Log implements consumer.Logger.
func (h harlowLogger) Log(args ...any) {
	h.l.Info(fmt.Sprint(args...), "peer", "harlow/kinesis-consumer")
}

// runHarlow consumes o.stream with harlow/kinesis-consumer's Scan and
// store, its callback doing the same per-record work as the consumer's
// handler and returning nil (harlow then sets the record's checkpoint in
// the store). In timed phases it stops (cancels Scan's context) once every
// record was handled; with untilSignal it runs until SIGTERM or SIGINT
// (the kill -9 test). stop ends the store after Scan returned.
func runHarlow(o options, kc *countingKinesis, store consumer.Store, stop func() error, tr *tracker, untilSignal bool, logs io.Writer) error {
	c, err := consumer.New(o.stream, harlowOptions(o, kc, store, logs)...)
	if err != nil {
		_ = stop()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	tr.begin()
	go func() {
		errc <- c.Scan(ctx, func(r *consumer.Record) error { return tr.mark(r.Data) })
	}()
	// finish cancels Scan, waits for it and stops the store.
	finish := func() error {
		cancel()
		err := <-errc
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return errors.Join(err, stop())
	}
	if untilSignal {
		sig, stopSig := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stopSig()
		select {
		case <-sig.Done():
		case <-time.After(o.timeout):
			_ = finish()
			return fmt.Errorf("no SIGTERM within %v", o.timeout)
		case err := <-errc:
			_ = stop()
			return fmt.Errorf("Scan returned before SIGTERM: %v", err)
		}
	} else {
		select {
		case <-tr.done:
		case <-time.After(o.timeout):
			_ = finish()
			return fmt.Errorf("only %d of %d records within %v", tr.count(), o.records, o.timeout)
		case err := <-errc:
			_ = stop()
			return fmt.Errorf("Scan returned before the last record: %v", err)
		}
	}
	err = finish()
	tr.finish()
	return err
}

// countCalls is an SDK client option (an APIOptions entry) that counts
// the calls of a *dynamodb.Client in d, as d's wrapper methods count the
// calls of the interface they wrap. harlow's DynamoDB checkpoint store
// takes the concrete client (store/ddb.WithDynamoClient), so its calls
// are counted inside the client: at the start of each call's middleware
// stack (the Initialize step), once per call like the wrapper, not once
// per retried attempt.
func (d *countingDynamoDB) countCalls(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("BenchCountCalls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if op := d.count(in.Parameters); op != "" {
				defer d.trace.add(op, time.Now())
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// count counts one call with input params by operation and returns the
// operation's name, or "" for an operation it does not count.
func (d *countingDynamoDB) count(params any) string {
	switch params.(type) {
	case *dynamodb.PutItemInput:
		d.put.Add(1)
		return "PutItem"
	case *dynamodb.UpdateItemInput:
		d.update.Add(1)
		return "UpdateItem"
	case *dynamodb.DeleteItemInput:
		d.del.Add(1)
		return "DeleteItem"
	case *dynamodb.GetItemInput:
		d.get.Add(1)
		return "GetItem"
	case *dynamodb.ScanInput:
		d.scan.Add(1)
		return "Scan"
	case *dynamodb.DescribeTableInput:
		d.describe.Add(1)
		return "DescribeTable"
	}
	return ""
}

// createHarlowTable creates the table harlow's DynamoDB checkpoint store
// expects (its README: partition key "namespace", sort key "shard_id",
// both strings) and waits until it is ACTIVE.
func (c *clients) createHarlowTable(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	_, err := c.dynamo.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: dynamodbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dynamodbtypes.AttributeDefinition{
			{AttributeName: aws.String("namespace"), AttributeType: dynamodbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("shard_id"), AttributeType: dynamodbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []dynamodbtypes.KeySchemaElement{
			{AttributeName: aws.String("namespace"), KeyType: dynamodbtypes.KeyTypeHash},
			{AttributeName: aws.String("shard_id"), KeyType: dynamodbtypes.KeyTypeRange},
		},
	})
	if err != nil {
		return fmt.Errorf("create harlow checkpoint table %s: %w", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(c.dynamo, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = pollInterval, 100*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, setupTimeout); err != nil {
		return fmt.Errorf("harlow checkpoint table %s did not become ACTIVE: %w", name, err)
	}
	return nil
}
