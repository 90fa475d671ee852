package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/lease"
)

// fakeLag answers the reads of behind: shards in behind are that many
// milliseconds behind, the others caught up. With named set, it records
// how each GetShardIterator call named its stream ("name S" or "arn A").
type fakeLag struct {
	behind map[string]int64
	named  *[]string
}

func (f fakeLag) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if f.named != nil {
		switch {
		case in.StreamARN != nil && in.StreamName != nil:
			*f.named = append(*f.named, "both")
		case in.StreamARN != nil:
			*f.named = append(*f.named, "arn "+*in.StreamARN)
		default:
			*f.named = append(*f.named, "name "+aws.ToString(in.StreamName))
		}
	}
	return &kinesis.GetShardIteratorOutput{ShardIterator: in.ShardId}, nil
}

func (f fakeLag) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	ms, ok := f.behind[*in.ShardIterator]
	if !ok {
		return &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(0)}, nil
	}
	return &kinesis.GetRecordsOutput{Records: []kinesistypes.Record{{}}, MillisBehindLatest: aws.Int64(ms)}, nil
}

func TestPrintLeases(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	snap := lease.Snapshot{
		Leases: []lease.Lease{
			{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000000"}, Owner: "w1", Counter: 7, Checkpoint: "49590338271490256608559692538361571095921575989136588898", RenewedAt: at},
			{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000001"}, Counter: 3, RenewedAt: at},
			{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000002"}, Owner: "w2", Counter: 12, Checkpoint: lease.ShardEnd, RenewedAt: at},
			{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000003"}, Owner: "w1", Counter: 4, Checkpoint: "100", SubSequence: 5, Handoff: "w2", RenewedAt: at},
		},
		Workers: []lease.Worker{
			{Stream: "s", Owner: "w1", Counter: 40, RenewedAt: at.Add(25 * time.Second)},
			{Stream: "s", Owner: "w2", Counter: 9, RenewedAt: at},
			{Stream: "s", Owner: "w3", Counter: 1},
		},
	}
	var b strings.Builder
	now := at.Add(30 * time.Second)
	printLeases(t.Context(), &b, fakeLag{behind: map[string]int64{"shardId-000000000000": 90_000}}, streamArg{name: "s"}, snap, 10*time.Second, now)
	want := `SHARD                 OWNER   HANDOFF  CHECKPOINT                                                COUNTER  RENEWED               EXPIRES (owner clock)  BEHIND
shardId-000000000000  w1      -        49590338271490256608559692538361571095921575989136588898  7        2026-12-02T10:00:00Z  2026-12-02T10:00:10Z   1m30s
shardId-000000000001  (free)  -        (none)                                                    3        2026-12-02T10:00:00Z  -                      0s (caught up)
shardId-000000000002  w2      -        SHARD_END                                                 12       2026-12-02T10:00:00Z  2026-12-02T10:00:10Z   done
shardId-000000000003  w1      w2       100 (sub-sequence 5)                                      4        2026-12-02T10:00:00Z  2026-12-02T10:00:10Z   0s (caught up)

WORKER  COUNTER  HEARTBEAT             EXPIRES (worker clock)  LOOKS EXPIRED
w1      40       2026-12-02T10:00:25Z  2026-12-02T10:00:35Z    no
w2      9        2026-12-02T10:00:00Z  2026-12-02T10:00:10Z    yes
w3      1        -                     -                       ?
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestPrintLeasesNoWorkers(t *testing.T) {
	snap := lease.Snapshot{Leases: []lease.Lease{{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000000"}, Counter: 0}}}
	var b strings.Builder
	printLeases(t.Context(), &b, fakeLag{}, streamArg{name: "s"}, snap, 10*time.Second, time.Now())
	out := b.String()
	for _, want := range []string{"shardId-000000000000  (free)  -        (none)", "\n\nno registered workers\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestParseStreams: -stream takes a name or an ARN, or several
// comma-separated (spaces around each ignored, each kept once); a bad one is
// an error that quotes it.
func TestParseStreams(t *testing.T) {
	arn := "arn:aws:kinesis:us-east-1:123456789012:stream/payments"
	for _, c := range []struct {
		in   string
		want []streamArg
	}{
		{"orders", []streamArg{{name: "orders"}}},
		{"orders,payments", []streamArg{{name: "orders"}, {name: "payments"}}},
		{" orders , payments,refunds ", []streamArg{{name: "orders"}, {name: "payments"}, {name: "refunds"}}},
		{"orders,payments,orders", []streamArg{{name: "orders"}, {name: "payments"}}},
		{"orders," + arn, []streamArg{{name: "orders"}, {name: "payments", arn: arn}}},
		{"My_stream.v2-a", []streamArg{{name: "My_stream.v2-a"}}},
		{strings.Repeat("x", 128), []streamArg{{name: strings.Repeat("x", 128)}}},
	} {
		got, err := parseStreams(c.in)
		if err != nil {
			t.Errorf("parseStreams(%q): %v", c.in, err)
			continue
		}
		if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(streamArg{})); diff != "" {
			t.Errorf("parseStreams(%q) (-want +got):\n%s", c.in, diff)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"orders,,payments", "an empty stream name"},
		{"orders,", "an empty stream name"},
		{",orders", "an empty stream name"},
		{"orders, ,payments", "an empty stream name"},
		{"orders,pay ments", `stream name "pay ments" is not valid`},
		{"orders;payments", `stream name "orders;payments" is not valid`},
		{"orders:x", `stream name "orders:x" is not valid`},
		{"orders/x", `stream name "orders/x" is not valid`},
		{strings.Repeat("x", 129), "is not valid: a name has 1 to 128"},
		{"arn:aws:sqs:us-east-1:123456789012:queue", `"arn:aws:sqs:us-east-1:123456789012:queue" is not a Kinesis stream ARN`},
		{"orders,arn:aws:kinesis:us-east-1:123456789012:stream/", "does not end in a valid stream name"},
		{"arn:aws:kinesis:us-east-1:123456789012:stream/a b", "does not end in a valid stream name"},
	} {
		got, err := parseStreams(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseStreams(%q) = %v, %v; want an error containing %q", c.in, got, err, c.want)
		}
	}
}

// fakeSnapshots is a lease table of several streams as Snapshot reads it;
// a stream in errs fails.
type fakeSnapshots struct {
	snaps map[string]lease.Snapshot
	errs  map[string]error
	asked []string
}

func (f *fakeSnapshots) Snapshot(_ context.Context, stream string) (lease.Snapshot, error) {
	f.asked = append(f.asked, stream)
	if err := f.errs[stream]; err != nil {
		return lease.Snapshot{}, err
	}
	return f.snaps[stream], nil
}

// severalStreams is a table of three streams read by a service whose
// group is named after orders; refunds has no rows yet.
func severalStreams(at time.Time) *fakeSnapshots {
	return &fakeSnapshots{snaps: map[string]lease.Snapshot{
		"orders": {
			Leases: []lease.Lease{
				{Key: lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}, Owner: "w1", Counter: 7, Checkpoint: "100", RenewedAt: at},
				{Key: lease.Key{Stream: "orders", ShardID: "shardId-000000000001"}, Owner: "w2", Counter: 3, Checkpoint: "200", RenewedAt: at},
			},
			Workers: []lease.Worker{{Stream: "orders", Owner: "w1", Counter: 4, RenewedAt: at}, {Stream: "orders", Owner: "w2", Counter: 5, RenewedAt: at}},
			Leader:  &lease.Lease{Key: lease.LeaderKey("orders"), Owner: "w1", Counter: 9, Checkpoint: "plan:leader:orders,payments,refunds", RenewedAt: at},
		},
		"payments": {
			Leases:  []lease.Lease{{Key: lease.Key{Stream: "payments", ShardID: "shardId-000000000000"}, Owner: "w2", Counter: 2, Checkpoint: "300", RenewedAt: at}},
			Workers: []lease.Worker{{Stream: "payments", Owner: "w1", Counter: 4, RenewedAt: at}, {Stream: "payments", Owner: "w2", Counter: 5, RenewedAt: at}},
		},
	}}
}

// TestShowLeasesSeveralStreams: with several streams each stream's table
// comes under a heading naming it (with its ARN when given as one, and its
// leader row when it has one), in the order given, a blank line between
// two; a stream without rows says so. Each stream's lag is read from that
// stream, by its ARN when it was given as one.
func TestShowLeasesSeveralStreams(t *testing.T) {
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	store := severalStreams(at)
	var named []string
	var out, errb strings.Builder
	arn := "arn:aws:kinesis:us-east-1:123456789012:stream/payments"
	streams := []streamArg{{name: "orders"}, {name: "payments", arn: arn}, {name: "refunds"}}
	code := showLeases(t.Context(), &out, &errb, store, fakeLag{named: &named}, streams, 10*time.Second, at.Add(time.Second))
	if code != 0 || errb.Len() != 0 {
		t.Errorf("code %d, stderr %q; want 0 and nothing", code, errb.String())
	}
	want := `stream orders: leader row: owner w1, plan:leader:orders,payments,refunds
SHARD                 OWNER  HANDOFF  CHECKPOINT  COUNTER  RENEWED               EXPIRES (owner clock)  BEHIND
shardId-000000000000  w1     -        100         7        2026-12-06T04:00:00Z  2026-12-06T04:00:10Z   0s (caught up)
shardId-000000000001  w2     -        200         3        2026-12-06T04:00:00Z  2026-12-06T04:00:10Z   0s (caught up)

WORKER  COUNTER  HEARTBEAT             EXPIRES (worker clock)  LOOKS EXPIRED
w1      4        2026-12-06T04:00:00Z  2026-12-06T04:00:10Z    no
w2      5        2026-12-06T04:00:00Z  2026-12-06T04:00:10Z    no

stream payments (arn:aws:kinesis:us-east-1:123456789012:stream/payments)
SHARD                 OWNER  HANDOFF  CHECKPOINT  COUNTER  RENEWED               EXPIRES (owner clock)  BEHIND
shardId-000000000000  w2     -        300         2        2026-12-06T04:00:00Z  2026-12-06T04:00:10Z   0s (caught up)

WORKER  COUNTER  HEARTBEAT             EXPIRES (worker clock)  LOOKS EXPIRED
w1      4        2026-12-06T04:00:00Z  2026-12-06T04:00:10Z    no
w2      5        2026-12-06T04:00:00Z  2026-12-06T04:00:10Z    no

stream refunds
no lease rows for stream refunds in this table (no worker has read it from this table yet: is the name right?)

no registered workers
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"orders", "payments", "refunds"}, store.asked); diff != "" {
		t.Errorf("streams read (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"name orders", "name orders", "arn " + arn}, named); diff != "" {
		t.Errorf("how the lag reads named the stream (-want +got):\n%s", diff)
	}
}

// TestShowLeasesOneStream: one stream prints its table alone, without a
// heading, as before several streams could be given.
func TestShowLeasesOneStream(t *testing.T) {
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	store := severalStreams(at)
	var one, table, errb strings.Builder
	if code := showLeases(t.Context(), &one, &errb, store, fakeLag{}, []streamArg{{name: "orders"}}, 10*time.Second, at); code != 0 {
		t.Fatalf("code %d, stderr %q", code, errb.String())
	}
	printLeases(t.Context(), &table, fakeLag{}, streamArg{name: "orders"}, store.snaps["orders"], 10*time.Second, at)
	if diff := cmp.Diff(table.String(), one.String()); diff != "" {
		t.Errorf("one stream (-printLeases +showLeases):\n%s", diff)
	}
	if strings.Contains(one.String(), "stream orders") {
		t.Errorf("one stream printed a heading:\n%s", one.String())
	}
}

// TestShowLeasesStreamFails: a stream whose rows cannot be read is
// reported on stderr, naming it, and the others are still printed; the
// exit code is 1.
func TestShowLeasesStreamFails(t *testing.T) {
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	store := severalStreams(at)
	store.errs = map[string]error{"orders": errors.New("lease: snapshot stream \"orders\": throttled")}
	var out, errb strings.Builder
	code := showLeases(t.Context(), &out, &errb, store, fakeLag{}, []streamArg{{name: "orders"}, {name: "payments"}}, 10*time.Second, at)
	if code != 1 {
		t.Errorf("code %d, want 1", code)
	}
	if !strings.Contains(errb.String(), "bootstrap leases: stream orders: ") || !strings.Contains(errb.String(), "throttled") {
		t.Errorf("stderr %q, want the failure of stream orders", errb.String())
	}
	if !strings.HasPrefix(out.String(), "stream payments\nSHARD") || strings.Contains(out.String(), "stream orders") {
		t.Errorf("output, want payments' table alone under its heading:\n%s", out.String())
	}
}

// TestShowLeasesMalformedRows: a row the store could not read is reported
// on stderr after its stream's table, by key, with what is wrong; the rows
// read are printed, and the exit code is 1.
func TestShowLeasesMalformedRows(t *testing.T) {
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	store := severalStreams(at)
	snap := store.snaps["orders"]
	snap.Malformed = map[string]error{"orders:shardId-000000000009": errors.New(`lease: malformed row "orders:shardId-000000000009": attribute leaseCounter is *types.AttributeValueMemberS, want N`)}
	store.snaps["orders"] = snap
	var out, errb strings.Builder
	code := showLeases(t.Context(), &out, &errb, store, fakeLag{}, []streamArg{{name: "orders"}}, 10*time.Second, at)
	if code != 1 {
		t.Errorf("code %d, want 1", code)
	}
	want := "bootstrap leases: stream orders: row orders:shardId-000000000009 cannot be read (repair or delete it): lease: malformed row"
	if !strings.HasPrefix(errb.String(), want) || !strings.Contains(errb.String(), "leaseCounter") {
		t.Errorf("stderr %q, want it to start %q", errb.String(), want)
	}
	if !strings.Contains(out.String(), "shardId-000000000001") {
		t.Errorf("output, want the rows read:\n%s", out.String())
	}
}

// TestLeasesCommandBadStream: a bad -stream, or LAMBDAADAPTER_STREAM, is a
// usage error (exit 2) that quotes the value and names the bad part,
// reported before any AWS call.
func TestLeasesCommandBadStream(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"-table", "leases", "-stream", "orders,,payments"}, "", `-stream "orders,,payments": an empty stream name`},
		{[]string{"-table", "leases", "-stream", "orders,pay ments"}, "", `stream name "pay ments" is not valid`},
		{[]string{"-table", "leases"}, "orders,refunds:x", `-stream "orders,refunds:x": stream name "refunds:x" is not valid`},
		{[]string{"-table", "leases"}, "arn:aws:s3:::bucket", `is not a Kinesis stream ARN`},
	} {
		env := map[string]string{"LAMBDAADAPTER_STREAM": c.env}
		var out, errb strings.Builder
		code := leasesCommand(c.args, func(k string) string { return env[k] }, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) || !strings.HasPrefix(errb.String(), "bootstrap leases: ") {
			t.Errorf("%v with LAMBDAADAPTER_STREAM=%q: code %d, stderr %q; want 2 and %q", c.args, c.env, code, errb.String(), c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%v: printed %q", c.args, out.String())
		}
	}
}

// iteratorKinds records the iterator type (and timestamp) of each
// GetShardIterator call.
type iteratorKinds struct {
	fakeLag
	got *[]string
}

func (f iteratorKinds) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, o ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	k := string(in.ShardIteratorType)
	if in.Timestamp != nil {
		k += " " + in.Timestamp.UTC().Format(time.RFC3339)
	}
	*f.got = append(*f.got, k)
	return f.fakeLag.GetShardIterator(ctx, in, o...)
}

// TestBehindReadsFromTheCheckpoint: the lag of a lease is read from where
// its next reader would start: after its sequence number, from the time a
// shard first read at the tip started (LATEST@), from the start of a
// child (its sentinels) or of a shard without a checkpoint.
func TestBehindReadsFromTheCheckpoint(t *testing.T) {
	start := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	var got []string
	k := iteratorKinds{got: &got}
	for _, cp := range []string{"", "100", lease.TrimHorizon, lease.AtTimestamp, "LATEST@" + strconv.FormatInt(start.UnixMilli(), 10)} {
		behind(t.Context(), k, streamArg{name: "s"}, lease.Lease{Key: lease.Key{Stream: "s", ShardID: "shardId-0"}, Checkpoint: cp})
	}
	want := []string{"TRIM_HORIZON", "AFTER_SEQUENCE_NUMBER", "TRIM_HORIZON", "TRIM_HORIZON", "AT_TIMESTAMP 2026-12-06T04:00:00Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("iterators (-want +got):\n%s", diff)
	}
}
