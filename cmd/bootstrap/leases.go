package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/lease"
)

// leasesCommand implements `bootstrap leases` and `bootstrap leases init`.
func leasesCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	create := len(args) > 0 && args[0] == "init"
	if create {
		args = args[1:]
	}
	fs := newFlagSet("bootstrap leases", "bootstrap leases -table T -stream S   print each shard's lease\nbootstrap leases init -table T        create the lease table (PAY_PER_REQUEST) with its owner index,\n                                      or add the index to an existing table", stderr)
	table := fs.String("table", getenv("LAMBDAADAPTER_LEASE_TABLE"), "DynamoDB lease table (default: LAMBDAADAPTER_LEASE_TABLE)")
	stream := fs.String("stream", getenv("LAMBDAADAPTER_STREAM"), "stream name, for listing (default: LAMBDAADAPTER_STREAM)")
	leaseDuration := fs.Duration("lease-duration", 10*time.Second, "the workers' lease duration, to show when a lease or a worker would expire")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *table == "" {
		fmt.Fprintln(stderr, "bootstrap leases: -table (or LAMBDAADAPTER_LEASE_TABLE) is required")
		return 2
	}
	timeout := 2 * time.Minute
	if create {
		timeout = initTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap leases:", err)
		return 1
	}
	store := lease.NewDynamoDB(dynamodb.NewFromConfig(awsCfg), *table)
	if create {
		if err := initLeaseTable(ctx, store, *table, stdout); err != nil {
			fmt.Fprintln(stderr, "bootstrap leases init:", err)
			return 1
		}
		return 0
	}
	if *stream == "" {
		fmt.Fprintln(stderr, "bootstrap leases: -stream (or LAMBDAADAPTER_STREAM) is required")
		return 2
	}
	if err := store.Check(ctx); err != nil {
		fmt.Fprintln(stderr, "bootstrap leases:", err)
		return 1
	}
	snap, err := store.Snapshot(ctx, *stream)
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap leases:", err)
		return 1
	}
	printLeases(ctx, stdout, kinesis.NewFromConfig(awsCfg), *stream, snap, *leaseDuration, time.Now())
	return 0
}

// initTimeout bounds bootstrap leases init: adding the owner index to an
// existing table (backfilling it) takes minutes.
const initTimeout = 25 * time.Minute

// initLeaseTable creates the lease table with its owner index, or adds the
// index to an existing table that has none (a table of an older version),
// or does nothing to a table that has both, and prints what it did. Workers
// keep running on the table while the index is added.
func initLeaseTable(ctx context.Context, store *lease.DynamoDB, table string, stdout io.Writer) error {
	has, err := store.HasOwnerIndex(ctx)
	switch {
	case errors.Is(err, lease.ErrTableNotFound):
		if err := store.CreateTable(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "lease table %s created (PAY_PER_REQUEST, hash key leaseKey, owner index leaseOwner-index)\n", table)
	case err != nil:
		return err
	case has:
		fmt.Fprintf(stdout, "lease table %s is ready (it exists, with its owner index leaseOwner-index); nothing to do\n", table)
	default:
		fmt.Fprintf(stdout, "lease table %s exists without the owner index: adding leaseOwner-index; running workers are not affected, and this can take minutes\n", table)
		if err := store.AddOwnerIndex(ctx); err != nil {
			return fmt.Errorf("%w (the index may still be being built: run this command again to wait for it)", err)
		}
		fmt.Fprintf(stdout, "lease table %s is ready: owner index leaseOwner-index added and ACTIVE\n", table)
	}
	return nil
}

// lagReader is what printLeases needs to measure how far behind a
// checkpoint is.
type lagReader interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// printLeases prints one line per shard: owner, the worker that asked for
// the lease (handoff), checkpoint, lease counter, last renewal (by the
// owner's clock) and when the lease would expire without renewal, and how
// far behind the tip the checkpoint is. Below, it prints one line per
// registered worker: counter, last heartbeat (by the worker's clock), when
// the worker would expire without a heartbeat, and whether it looks expired
// now, comparing that time with now (this machine's clock: skew shows).
func printLeases(ctx context.Context, w io.Writer, k lagReader, stream string, snap lease.Snapshot, leaseDuration time.Duration, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tOWNER\tHANDOFF\tCHECKPOINT\tCOUNTER\tRENEWED\tEXPIRES (owner clock)\tBEHIND")
	for _, l := range snap.Leases {
		owner := l.Owner
		if owner == "" {
			owner = "(free)"
		}
		handoff := l.Handoff
		if handoff == "" {
			handoff = "-"
		}
		cp := l.Checkpoint
		switch {
		case cp == "":
			cp = "(none)"
		case l.SubSequence > 0:
			// Inside a KPL aggregate: its first SubSequence user records settled.
			cp += fmt.Sprintf(" (sub-sequence %d)", l.SubSequence)
		}
		renewed, expires := "-", "-"
		if !l.RenewedAt.IsZero() {
			renewed = l.RenewedAt.UTC().Format(time.RFC3339)
			if l.Owner != "" {
				expires = l.RenewedAt.Add(leaseDuration).UTC().Format(time.RFC3339)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l.Key.ShardID, owner, handoff, cp, l.Counter, renewed, expires, behind(ctx, k, stream, l))
	}
	tw.Flush()

	fmt.Fprintln(w)
	if len(snap.Workers) == 0 {
		fmt.Fprintln(w, "no registered workers")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tCOUNTER\tHEARTBEAT\tEXPIRES (worker clock)\tLOOKS EXPIRED")
	for _, wk := range snap.Workers {
		beat, expires, expired := "-", "-", "?"
		if !wk.RenewedAt.IsZero() {
			at := wk.RenewedAt.Add(leaseDuration)
			beat = wk.RenewedAt.UTC().Format(time.RFC3339)
			expires = at.UTC().Format(time.RFC3339)
			expired = "no"
			if !now.Before(at) {
				expired = "yes"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", wk.Owner, wk.Counter, beat, expires, expired)
	}
	tw.Flush()
}

// behind returns how far behind the stream's tip the checkpoint of l is,
// as Kinesis reports it (MillisBehindLatest of a read right after it).
func behind(ctx context.Context, k lagReader, stream string, l lease.Lease) string {
	if l.Checkpoint == lease.ShardEnd {
		return "done"
	}
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(l.Key.ShardID), ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon}
	if l.Checkpoint != "" {
		in.ShardIteratorType = kinesistypes.ShardIteratorTypeAfterSequenceNumber
		if l.SubSequence > 0 {
			in.ShardIteratorType = kinesistypes.ShardIteratorTypeAtSequenceNumber // inside an aggregate
		}
		in.StartingSequenceNumber = aws.String(l.Checkpoint)
	}
	it, err := k.GetShardIterator(ctx, in)
	if err != nil {
		return "? (" + shortErr(err) + ")"
	}
	out, err := k.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
	if err != nil {
		return "? (" + shortErr(err) + ")"
	}
	if len(out.Records) == 0 {
		return "0s (caught up)"
	}
	return (time.Duration(aws.ToInt64(out.MillisBehindLatest)) * time.Millisecond).String()
}

func shortErr(err error) string {
	var nf *kinesistypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return "not found"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}
