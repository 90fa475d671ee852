package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/internal/ascii"
	"github.com/shardsettle/lambdaadapter/internal/consumer"
	"github.com/shardsettle/lambdaadapter/lease"
)

// leasesCommand implements `bootstrap leases` and `bootstrap leases init`.
func leasesCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	create := len(args) > 0 && args[0] == "init"
	if create {
		args = args[1:]
	}
	fs := newFlagSet("bootstrap leases", "bootstrap leases -table T -stream S   print each shard's lease\n"+
		"bootstrap leases -table T -stream S1,S2,...\n"+
		"                                      the same for each stream in turn, under a heading naming it\n"+
		"bootstrap leases init -table T        create the lease table (PAY_PER_REQUEST) with its owner index,\n"+
		"                                      or add the index to an existing table", stderr)
	table := fs.String("table", getenv("LAMBDAADAPTER_LEASE_TABLE"), "DynamoDB lease table (default: LAMBDAADAPTER_LEASE_TABLE)")
	stream := fs.String("stream", getenv("LAMBDAADAPTER_STREAM"), "for listing: a stream's name or ARN, or several, comma-separated (default: LAMBDAADAPTER_STREAM)")
	leaseDuration := fs.Duration("lease-duration", 10*time.Second, "the workers' lease duration, to show when a lease or a worker would expire")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *table == "" {
		fmt.Fprintln(stderr, "bootstrap leases: -table (or LAMBDAADAPTER_LEASE_TABLE) is required")
		return 2
	}
	var streams []streamArg
	if !create {
		if *stream == "" {
			fmt.Fprintln(stderr, "bootstrap leases: -stream (or LAMBDAADAPTER_STREAM) is required")
			return 2
		}
		var err error
		if streams, err = parseStreams(*stream); err != nil {
			fmt.Fprintf(stderr, "bootstrap leases: -stream %q: %v\n", *stream, err)
			return 2
		}
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
	if err := store.Check(ctx); err != nil {
		fmt.Fprintln(stderr, "bootstrap leases:", err)
		return 1
	}
	return showLeases(ctx, stdout, stderr, store, kinesis.NewFromConfig(awsCfg), streams, *leaseDuration, time.Now())
}

// streamArg is one stream `bootstrap leases` shows: the name its rows are
// keyed by in the lease table, and its ARN when it was given as one (the
// Kinesis calls then name the stream by it).
type streamArg struct{ name, arn string }

// parseStreams parses the value of -stream: a stream's name or ARN
// (arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME), or several,
// comma-separated (spaces around each are ignored, as in
// LAMBDAADAPTER_STREAM), each kept once, in order. Its errors name the
// part that is wrong.
func parseStreams(v string) ([]streamArg, error) {
	var out []streamArg
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		st := streamArg{name: part}
		switch {
		case part == "":
			return nil, errors.New("an empty stream name: give names separated by single commas, as in a,b")
		case strings.HasPrefix(part, "arn:"):
			i := strings.LastIndex(part, ":stream/")
			if i < 0 || !strings.Contains(part[:i], ":kinesis:") {
				return nil, fmt.Errorf("%q is not a Kinesis stream ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME)", part)
			}
			st = streamArg{name: part[i+len(":stream/"):], arn: part}
			if !ascii.StreamName(st.name) {
				return nil, fmt.Errorf("the ARN %q does not end in a valid stream name (1 to %d letters, digits, '_', '-' and '.')", part, ascii.MaxStreamName)
			}
		case !ascii.StreamName(part):
			return nil, fmt.Errorf("stream name %q is not valid: a name has 1 to %d letters, digits, '_', '-' and '.' (or give the stream's ARN)", part, ascii.MaxStreamName)
		}
		if !slices.ContainsFunc(out, func(o streamArg) bool { return o.name == st.name }) {
			out = append(out, st)
		}
	}
	return out, nil
}

// snapshotter reads one stream's rows of the lease table.
type snapshotter interface {
	Snapshot(ctx context.Context, stream string) (lease.Snapshot, error)
}

// showLeases prints the lease table of each stream (printLeases), one
// after the other. With several streams each comes under a heading naming
// the stream (and its leader row, when it has one: the row of a service's
// first stream names the streams its leader plans), with a blank line
// between two. A stream whose rows cannot be read is reported on stderr
// and skipped, and so is each row that cannot be read (lease.Snapshot's
// Malformed), after its stream's leases; the exit code is then 1.
func showLeases(ctx context.Context, stdout, stderr io.Writer, store snapshotter, k lagReader, streams []streamArg, leaseDuration time.Duration, now time.Time) int {
	code := 0
	printed := false
	for _, st := range streams {
		snap, err := store.Snapshot(ctx, st.name)
		if err != nil {
			fmt.Fprintf(stderr, "bootstrap leases: stream %s: %v\n", st.name, err)
			code = 1
			continue
		}
		if len(streams) > 1 {
			if printed {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintln(stdout, streamHeading(st, snap))
		}
		printLeases(ctx, stdout, k, st, snap, leaseDuration, now)
		printed = true
		for _, key := range slices.Sorted(maps.Keys(snap.Malformed)) {
			fmt.Fprintf(stderr, "bootstrap leases: stream %s: row %s cannot be read (repair or delete it): %v\n", st.name, key, snap.Malformed[key])
			code = 1
		}
	}
	return code
}

// streamHeading is the line above a stream's leases when several streams
// are shown: "stream NAME", its ARN if it was given as one, and its leader
// row's owner and plan ("plan:leader:a,b": the streams that leader plans).
func streamHeading(st streamArg, snap lease.Snapshot) string {
	h := "stream " + st.name
	if st.arn != "" {
		h += " (" + st.arn + ")"
	}
	if l := snap.Leader; l != nil {
		owner := l.Owner
		if owner == "" {
			owner = "(none)"
		}
		h += fmt.Sprintf(": leader row: owner %s, %s", owner, l.Checkpoint)
	}
	return h
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
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				// Stopped waiting: DynamoDB goes on building the index.
				return fmt.Errorf("%w (the index may still be being built: run this command again to wait for it)", err)
			}
			return err // refused (access, validation): running it again does the same
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
// far behind the tip the checkpoint is (or, when the stream has no lease
// rows, a line that says so: a misspelt name shows). Below, it prints one
// line per registered worker: counter, last heartbeat (by the worker's clock), when
// the worker would expire without a heartbeat, and whether it looks expired
// now, comparing that time with now (this machine's clock: skew shows).
func printLeases(ctx context.Context, w io.Writer, k lagReader, stream streamArg, snap lease.Snapshot, leaseDuration time.Duration, now time.Time) {
	if len(snap.Leases) == 0 {
		fmt.Fprintf(w, "no lease rows for stream %s in this table (no worker has read it from this table yet: is the name right?)\n", stream.name)
	} else {
		printShards(ctx, w, k, stream, snap, leaseDuration)
	}
	printWorkers(w, snap, leaseDuration, now)
}

// printShards prints the lease lines of printLeases.
func printShards(ctx context.Context, w io.Writer, k lagReader, stream streamArg, snap lease.Snapshot, leaseDuration time.Duration) {
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
}

// printWorkers prints the worker lines of printLeases.
func printWorkers(w io.Writer, snap lease.Snapshot, leaseDuration time.Duration, now time.Time) {
	fmt.Fprintln(w)
	if len(snap.Workers) == 0 {
		fmt.Fprintln(w, "no registered workers")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
// as Kinesis reports it (MillisBehindLatest of a read right after it). It
// names the stream by its ARN when it was given as one.
func behind(ctx context.Context, k lagReader, stream streamArg, l lease.Lease) string {
	if l.Checkpoint == lease.ShardEnd {
		return "done"
	}
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(l.Key.ShardID), ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon}
	if stream.arn != "" {
		in.StreamARN = aws.String(stream.arn)
	} else {
		in.StreamName = aws.String(stream.name)
	}
	t, pinned := consumer.LatestStart(l.Checkpoint)
	switch {
	case pinned: // read from the tip at t, nothing settled yet
		in.ShardIteratorType, in.Timestamp = kinesistypes.ShardIteratorTypeAtTimestamp, aws.Time(t)
	case l.Checkpoint == lease.TrimHorizon || l.Checkpoint == lease.AtTimestamp:
		// A child read from where its parents ended: from its start.
	case l.Checkpoint != "":
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
