package awsfake

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shardsettle/lambdaadapter/envelope"
)

// The fake serves the read client the consumer takes and the stream
// summary it asks for.
var _ interface {
	ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(context.Context, *kinesis.GetRecordsInput, ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	DescribeStreamSummary(context.Context, *kinesis.DescribeStreamSummaryInput, ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	PutRecord(context.Context, *kinesis.PutRecordInput, ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error)
	PutRecords(context.Context, *kinesis.PutRecordsInput, ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
} = (*Kinesis)(nil)

// put writes one record with PutRecord and returns its shard and sequence
// number.
func put(t *testing.T, k *Kinesis, stream, key, data string) (shardID, seq string) {
	t.Helper()
	out, err := k.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String(key), Data: []byte(data)})
	if err != nil {
		t.Fatalf("PutRecord(%s, %s): %v", stream, key, err)
	}
	return aws.ToString(out.ShardId), aws.ToString(out.SequenceNumber)
}

// iter returns a shard iterator or fails the test.
func iter(t *testing.T, k *Kinesis, in *kinesis.GetShardIteratorInput) string {
	t.Helper()
	out, err := k.GetShardIterator(t.Context(), in)
	if err != nil {
		t.Fatalf("GetShardIterator(%s, %s): %v", aws.ToString(in.ShardId), in.ShardIteratorType, err)
	}
	return aws.ToString(out.ShardIterator)
}

func horizon(stream, shard string) *kinesis.GetShardIteratorInput {
	return &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
}

// read is one GetRecords call that must succeed.
func read(t *testing.T, k *Kinesis, it string, limit int32) *kinesis.GetRecordsOutput {
	t.Helper()
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String(it)}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	out, err := k.GetRecords(t.Context(), in)
	if err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	return out
}

// dataOf returns the data of records as strings.
func dataOf(recs []types.Record) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, string(r.Data))
	}
	return out
}

// listAll pages through ListShards.
func listAll(t *testing.T, k *Kinesis, in *kinesis.ListShardsInput) []types.Shard {
	t.Helper()
	var all []types.Shard
	for {
		out, err := k.ListShards(t.Context(), in)
		if err != nil {
			t.Fatalf("ListShards: %v", err)
		}
		all = append(all, out.Shards...)
		if out.NextToken == nil {
			return all
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

func ids(shards []types.Shard) []string {
	out := []string{}
	for _, s := range shards {
		out = append(out, aws.ToString(s.ShardId))
	}
	return out
}

func wantErr[E error](t *testing.T, err error) {
	t.Helper()
	if !isErr[E](err) {
		var target E
		t.Fatalf("error %v (%T), want %T", err, err, target)
	}
}

func isErr[E error](err error) bool {
	var target E
	return errors.As(err, &target)
}

func bigOf(t *testing.T, s *string) *big.Int {
	t.Helper()
	b, ok := new(big.Int).SetString(aws.ToString(s), 10)
	if !ok {
		t.Fatalf("%q is not a decimal integer", aws.ToString(s))
	}
	return b
}

func TestCreateStreamHashRanges(t *testing.T) {
	k := NewKinesis()
	arn := k.CreateStream("s", 3)
	if arn != "arn:aws:kinesis:us-east-1:123456789012:stream/s" {
		t.Errorf("ARN %q", arn)
	}
	got := listAll(t, k, &kinesis.ListShardsInput{StreamARN: aws.String(arn)})
	type rng struct{ ID, Lo, Hi string }
	var ranges []rng
	for _, s := range got {
		ranges = append(ranges, rng{aws.ToString(s.ShardId), aws.ToString(s.HashKeyRange.StartingHashKey), aws.ToString(s.HashKeyRange.EndingHashKey)})
		if seq := aws.ToString(s.SequenceNumberRange.StartingSequenceNumber); len(seq) != 56 {
			t.Errorf("%s: StartingSequenceNumber %q is not 56 digits", aws.ToString(s.ShardId), seq)
		}
		if s.SequenceNumberRange.EndingSequenceNumber != nil || s.ParentShardId != nil {
			t.Errorf("%s: new shard has an end or a parent", aws.ToString(s.ShardId))
		}
	}
	// 2^128 / 3 = 113427455640312821154458202477256070485 (rounded down).
	want := []rng{
		{"shardId-000000000000", "0", "113427455640312821154458202477256070484"},
		{"shardId-000000000001", "113427455640312821154458202477256070485", "226854911280625642308916404954512140969"},
		{"shardId-000000000002", "226854911280625642308916404954512140970", "340282366920938463463374607431768211455"},
	}
	if diff := cmp.Diff(want, ranges); diff != "" {
		t.Errorf("hash ranges (-want +got):\n%s", diff)
	}
}

func TestCreateStreamPanics(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 1)
	for name, f := range map[string]func(){
		"duplicate":       func() { k.CreateStream("s", 1) },
		"no shards":       func() { k.CreateStream("t", 0) },
		"bad name":        func() { k.CreateStream("a|b", 1) },
		"split unknown":   func() { k.Split("nope", "shardId-000000000000") },
		"split no shard":  func() { k.Split("s", "shardId-000000000009") },
		"trim open shard": func() { k.Trim("s", "shardId-000000000000") },
		"records unknown": func() { k.Records("nope") },
		"put unknown":     func() { k.Put("nope", "k", nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "awsfake: ") {
					t.Errorf("recovered %v, want an awsfake panic", r)
				}
			}()
			f()
		})
	}
}

func TestPlacementByMD5(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 4)
	// With 4 even shards the first hex digit of MD5(key) picks the shard:
	// 0-3 → 0, 4-7 → 1, 8-b → 2, c-f → 3 (md5sum by hand).
	for _, tc := range []struct{ key, md5, shard string }{
		{"a", "0cc175b9c0f1b6a831c399e269772661", "shardId-000000000000"},
		{"alpha", "2c1743a391305fbf367df8e4f069f9f9", "shardId-000000000000"},
		{"c", "4a8a08f09d37b73795649038408b5f33", "shardId-000000000001"},
		{"order-42", "4f416b0c12aa8c754209da955fb755cc", "shardId-000000000001"},
		{"b", "92eb5ffee6ae2fec3ad71c777531578f", "shardId-000000000002"},
		{"d", "8277e0910d750195b448797616e091ad", "shardId-000000000002"},
		{"e", "e1671797c52e15f763380b45e841ec32", "shardId-000000000003"},
	} {
		if got, _ := put(t, k, "s", tc.key, tc.key); got != tc.shard {
			t.Errorf("key %q (md5 %s): shard %s, want %s", tc.key, tc.md5, got, tc.shard)
		}
	}
	for _, tc := range []struct{ hash, shard string }{
		{"0", "shardId-000000000000"},
		{"85070591730234615865843651857942052863", "shardId-000000000000"}, // 2^126-1
		{"85070591730234615865843651857942052864", "shardId-000000000001"}, // 2^126
		{"170141183460469231731687303715884105728", "shardId-000000000002"},
		{"340282366920938463463374607431768211455", "shardId-000000000003"},
	} {
		out, err := k.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("a"), ExplicitHashKey: aws.String(tc.hash)})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(out.ShardId); got != tc.shard {
			t.Errorf("ExplicitHashKey %s: shard %s, want %s", tc.hash, got, tc.shard)
		}
	}
	for _, bad := range []*kinesis.PutRecordInput{
		{StreamName: aws.String("s"), PartitionKey: aws.String("a"), ExplicitHashKey: aws.String("340282366920938463463374607431768211456")},
		{StreamName: aws.String("s"), PartitionKey: aws.String("a"), ExplicitHashKey: aws.String("-1")},
		{StreamName: aws.String("s"), PartitionKey: aws.String("a"), ExplicitHashKey: aws.String("x")},
		{StreamName: aws.String("s"), PartitionKey: aws.String("")},
		{StreamName: aws.String("s"), PartitionKey: aws.String(strings.Repeat("k", 257))},
	} {
		_, err := k.PutRecord(t.Context(), bad)
		wantErr[*types.InvalidArgumentException](t, err)
	}

	// One key's records stay in one shard, in order.
	var entries []types.PutRecordsRequestEntry
	for i := range 50 {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String("customer-1"), Data: []byte(strconv.Itoa(i))})
	}
	out, err := k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: entries})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	for _, e := range out.Records {
		if aws.ToString(e.ShardId) != "shardId-000000000002" { // md5 9b11…
			t.Fatalf("customer-1 went to %s, want shardId-000000000002", aws.ToString(e.ShardId))
		}
		seqs = append(seqs, aws.ToString(e.SequenceNumber))
	}
	var got []string
	for _, r := range k.Records("s") {
		if r.PartitionKey == "customer-1" {
			got = append(got, string(r.Data))
			if r.SequenceNumber != seqs[len(got)-1] {
				t.Errorf("record %d: sequence number %s, PutRecords said %s", len(got)-1, r.SequenceNumber, seqs[len(got)-1])
			}
		}
	}
	want := []string{}
	for i := range 50 {
		want = append(want, strconv.Itoa(i))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order of customer-1 (-want +got):\n%s", diff)
	}
}

func TestSequenceNumbers(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 4)
	prev := new(big.Int)
	last := map[string]*big.Int{}
	for i := range 200 {
		shard, seq := put(t, k, "s", "key-"+strconv.Itoa(i), "x")
		if len(seq) != 56 || strings.Trim(seq, "0123456789") != "" {
			t.Fatalf("sequence number %q is not 56 decimal digits", seq)
		}
		n := bigOf(t, &seq)
		if n.Cmp(prev) <= 0 {
			t.Fatalf("sequence number %s does not grow across the stream (previous %s)", seq, prev)
		}
		if l := last[shard]; l != nil && n.Cmp(l) <= 0 {
			t.Fatalf("sequence number %s does not grow in %s", seq, shard)
		}
		prev, last[shard] = n, n
	}
	if len(last) != 4 {
		t.Errorf("200 keys reached %d shards, want 4", len(last))
	}
	// Every record's sequence number is above its shard's starting one.
	for _, s := range listAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")}) {
		if bigOf(t, s.SequenceNumberRange.StartingSequenceNumber).Cmp(last[aws.ToString(s.ShardId)]) >= 0 {
			t.Errorf("%s starts above its records", aws.ToString(s.ShardId))
		}
	}
}

func TestIteratorTypes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKinesis()
		k.CreateStream("s", 1)
		const sh = "shardId-000000000000"
		_, seq0 := put(t, k, "s", "k", "r0")
		t0 := time.Now()
		time.Sleep(time.Second)
		t1 := time.Now()
		_, seq1 := put(t, k, "s", "k", "r1")
		put(t, k, "s", "k", "r2")
		time.Sleep(time.Second)
		_, seq3 := put(t, k, "s", "k", "r3")
		start := aws.ToString(listAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")})[0].SequenceNumberRange.StartingSequenceNumber)

		latest := iter(t, k, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(sh), ShardIteratorType: types.ShardIteratorTypeLatest})
		for _, tc := range []struct {
			name string
			in   kinesis.GetShardIteratorInput
			want []string
		}{
			{"TRIM_HORIZON", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeTrimHorizon}, []string{"r0", "r1", "r2", "r3"}},
			{"LATEST", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeLatest}, []string{}},
			{"AT_SEQUENCE_NUMBER", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seq1)}, []string{"r1", "r2", "r3"}},
			{"AT_SEQUENCE_NUMBER first", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seq0)}, []string{"r0", "r1", "r2", "r3"}},
			{"AT_SEQUENCE_NUMBER shard start", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(start)}, []string{"r0", "r1", "r2", "r3"}},
			{"AFTER_SEQUENCE_NUMBER", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String(seq1)}, []string{"r2", "r3"}},
			{"AFTER_SEQUENCE_NUMBER last", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String(seq3)}, []string{}},
			{"AT_TIMESTAMP first", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(t0.Add(-time.Hour))}, []string{"r0", "r1", "r2", "r3"}},
			{"AT_TIMESTAMP exact", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(t1)}, []string{"r1", "r2", "r3"}},
			{"AT_TIMESTAMP between", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(t0.Add(500 * time.Millisecond))}, []string{"r1", "r2", "r3"}},
			{"AT_TIMESTAMP future", kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(t1.Add(time.Hour))}, []string{}},
		} {
			// No t.Run in a synctest bubble: the name goes in the message.
			in := tc.in
			in.StreamName, in.ShardId = aws.String("s"), aws.String(sh)
			out := read(t, k, iter(t, k, &in), 0)
			if diff := cmp.Diff(tc.want, dataOf(out.Records)); diff != "" {
				t.Errorf("%s: records (-want +got):\n%s", tc.name, diff)
			}
			if out.NextShardIterator == nil {
				t.Errorf("%s: open shard: NextShardIterator is nil", tc.name)
			}
		}

		// A LATEST iterator taken before a write sees it.
		put(t, k, "s", "k", "r4")
		if got := dataOf(read(t, k, latest, 0).Records); !cmp.Equal(got, []string{"r4"}) {
			t.Errorf("LATEST then a write: %v, want [r4]", got)
		}
		// Arrival times are whole milliseconds of the write's time.
		if got := k.Records("s")[1].ApproximateArrivalTimestamp; !got.Equal(t1.Truncate(time.Millisecond)) {
			t.Errorf("arrival %v, want %v", got, t1)
		}

		for name, in := range map[string]kinesis.GetShardIteratorInput{
			"no type":               {},
			"unknown type":          {ShardIteratorType: "SOMEWHERE"},
			"AT without seq":        {ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber},
			"AFTER with bad seq":    {ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String("abc")},
			"seq from other shard":  {ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seq1[:44] + "000000000001")},
			"seq of legacy format":  {ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String("49600000000000000000000000000000000000000000000000000001")},
			"AT_TIMESTAMP, no time": {ShardIteratorType: types.ShardIteratorTypeAtTimestamp},
		} {
			in.StreamName, in.ShardId = aws.String("s"), aws.String(sh)
			_, err := k.GetShardIterator(t.Context(), &in)
			if !isErr[*types.InvalidArgumentException](err) {
				t.Errorf("%s: error %v (%T), want InvalidArgumentException", name, err, err)
			}
		}
	})
}

func TestSequenceNumberOfAnotherShard(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 2)
	_, seq := put(t, k, "s", "b", "x") // md5 92eb… → shard 1
	_, err := k.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"),
		ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seq)})
	wantErr[*types.InvalidArgumentException](t, err)
}

func TestGetRecordsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKinesis()
		k.CreateStream("s", 1)
		for i := range 25 {
			put(t, k, "s", "k", strconv.Itoa(i))
		}
		time.Sleep(2 * time.Second)
		it := iter(t, k, horizon("s", "shardId-000000000000"))
		var got []string
		var sizes []int
		var behind []int64
		for range 4 {
			out := read(t, k, it, 10)
			got = append(got, dataOf(out.Records)...)
			sizes = append(sizes, len(out.Records))
			behind = append(behind, aws.ToInt64(out.MillisBehindLatest))
			if out.NextShardIterator == nil {
				t.Fatal("open shard: NextShardIterator is nil")
			}
			it = *out.NextShardIterator
		}
		if diff := cmp.Diff([]int{10, 10, 5, 0}, sizes); diff != "" {
			t.Errorf("page sizes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int64{2000, 2000, 0, 0}, behind); diff != "" {
			t.Errorf("MillisBehindLatest (-want +got):\n%s", diff)
		}
		if len(got) != 25 || got[0] != "0" || got[24] != "24" {
			t.Errorf("records %v", got)
		}
		// The iterator at the tip sees a later write.
		put(t, k, "s", "k", "late")
		if got := dataOf(read(t, k, it, 0).Records); !cmp.Equal(got, []string{"late"}) {
			t.Errorf("after the tip: %v", got)
		}
		// Default Limit reads everything.
		if n := len(read(t, k, iter(t, k, horizon("s", "shardId-000000000000")), 0).Records); n != 26 {
			t.Errorf("default limit read %d records, want 26", n)
		}
		for _, limit := range []int32{0, -1, 10001} {
			_, err := k.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(limit)})
			wantErr[*types.InvalidArgumentException](t, err)
		}
		if out := read(t, k, it, 10000); len(out.Records) != 1 {
			t.Errorf("Limit 10000: %d records", len(out.Records))
		}
		for _, bad := range []string{"", "garbage", "AAAAAAAAAAFbm9wZQ"} {
			_, err := k.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String(bad)})
			wantErr[*types.InvalidArgumentException](t, err)
		}
		_, err := k.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String(it), StreamARN: aws.String(arnPrefix + "other")})
		wantErr[*types.InvalidArgumentException](t, err)
		if _, err := k.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String(it), StreamARN: aws.String(arnPrefix + "s")}); err != nil {
			t.Errorf("with the stream's own ARN: %v", err)
		}
	})
}

// covers reports whether the ranges of children partition [lo, hi] in
// order.
func covers(t *testing.T, lo, hi *big.Int, children []*types.HashKeyRange) bool {
	t.Helper()
	next := new(big.Int).Set(lo)
	for _, c := range children {
		if bigOf(t, c.StartingHashKey).Cmp(next) != 0 {
			return false
		}
		next = new(big.Int).Add(bigOf(t, c.EndingHashKey), big.NewInt(1))
	}
	return next.Cmp(new(big.Int).Add(hi, big.NewInt(1))) == 0
}

func TestSplit(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 2)
	const parent = "shardId-000000000000"
	put(t, k, "s", "a", "before-1") // md5 0c… → shard 0
	put(t, k, "s", "alpha", "before-2")
	left, right := k.Split("s", parent)
	if left != "shardId-000000000002" || right != "shardId-000000000003" {
		t.Fatalf("children %s, %s; want shardId-000000000002 and 3", left, right)
	}
	shards := map[string]types.Shard{}
	for _, s := range listAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")}) {
		shards[aws.ToString(s.ShardId)] = s
	}
	p := shards[parent]
	if p.SequenceNumberRange.EndingSequenceNumber == nil {
		t.Fatal("split parent has no EndingSequenceNumber")
	}
	if shards["shardId-000000000001"].SequenceNumberRange.EndingSequenceNumber != nil {
		t.Error("the other shard was closed")
	}
	for _, c := range []string{left, right} {
		if got := aws.ToString(shards[c].ParentShardId); got != parent || shards[c].AdjacentParentShardId != nil {
			t.Errorf("%s: parent %q, adjacent %v", c, got, shards[c].AdjacentParentShardId)
		}
		if bigOf(t, shards[c].SequenceNumberRange.StartingSequenceNumber).Cmp(bigOf(t, p.SequenceNumberRange.EndingSequenceNumber)) <= 0 {
			t.Errorf("%s starts at or before its parent's end", c)
		}
	}
	if !covers(t, bigOf(t, p.HashKeyRange.StartingHashKey), bigOf(t, p.HashKeyRange.EndingHashKey), []*types.HashKeyRange{shards[left].HashKeyRange, shards[right].HashKeyRange}) {
		t.Errorf("children %v %v do not partition the parent's range %v", shards[left].HashKeyRange, shards[right].HashKeyRange, p.HashKeyRange)
	}
	// 2^127/2 = 2^126 starts the right child.
	if got := aws.ToString(shards[right].HashKeyRange.StartingHashKey); got != "85070591730234615865843651857942052864" {
		t.Errorf("right child starts at %s, want 2^126", got)
	}

	// Writes now go to the children: "a" (0c…) left, "c" (4a…) right.
	if sh, _ := put(t, k, "s", "a", "after-a"); sh != left {
		t.Errorf("key a went to %s, want %s", sh, left)
	}
	if sh, _ := put(t, k, "s", "c", "after-c"); sh != right {
		t.Errorf("key c went to %s, want %s", sh, right)
	}
	if got := dataOf(read(t, k, iter(t, k, horizon("s", left)), 0).Records); !cmp.Equal(got, []string{"after-a"}) {
		t.Errorf("left child holds %v", got)
	}

	// Reading the parent to its end: records, then no iterator and the
	// children.
	out := read(t, k, iter(t, k, horizon("s", parent)), 1)
	if got := dataOf(out.Records); !cmp.Equal(got, []string{"before-1"}) || out.NextShardIterator == nil || out.ChildShards != nil {
		t.Fatalf("first page of the parent: %v, next %v, children %v", got, out.NextShardIterator, out.ChildShards)
	}
	out = read(t, k, *out.NextShardIterator, 1)
	if got := dataOf(out.Records); !cmp.Equal(got, []string{"before-2"}) {
		t.Errorf("last page of the parent: %v", got)
	}
	if out.NextShardIterator != nil {
		t.Errorf("closed shard read to its end: NextShardIterator %q, want nil", *out.NextShardIterator)
	}
	want := []types.ChildShard{
		{ShardId: aws.String(left), ParentShards: []string{parent}, HashKeyRange: shards[left].HashKeyRange},
		{ShardId: aws.String(right), ParentShards: []string{parent}, HashKeyRange: shards[right].HashKeyRange},
	}
	if diff := cmp.Diff(want, out.ChildShards, cmpopts.IgnoreUnexported(types.ChildShard{}, types.HashKeyRange{})); diff != "" {
		t.Errorf("ChildShards (-want +got):\n%s", diff)
	}
	// LATEST on a closed shard is its end at once.
	out = read(t, k, iter(t, k, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(parent), ShardIteratorType: types.ShardIteratorTypeLatest}), 0)
	if len(out.Records) != 0 || out.NextShardIterator != nil || len(out.ChildShards) != 2 {
		t.Errorf("LATEST on a closed shard: %d records, next %v, %d children", len(out.Records), out.NextShardIterator, len(out.ChildShards))
	}
	// A second split numbers after the highest id.
	if l, r := k.Split("s", "shardId-000000000001"); l != "shardId-000000000004" || r != "shardId-000000000005" {
		t.Errorf("second split: %s, %s", l, r)
	}
	if n := aws.ToInt32(describe(t, k, "s").OpenShardCount); n != 4 {
		t.Errorf("OpenShardCount %d, want 4", n)
	}
}

func describe(t *testing.T, k *Kinesis, stream string) *types.StreamDescriptionSummary {
	t.Helper()
	out, err := k.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	return out.StreamDescriptionSummary
}

func TestMerge(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 3)
	put(t, k, "s", "a", "in-0") // 0c… → shard 0
	put(t, k, "s", "b", "in-1") // 92eb… → shard 1 of 3
	// The order of the arguments does not matter, but names the parents.
	child := k.Merge("s", "shardId-000000000001", "shardId-000000000000")
	if child != "shardId-000000000003" {
		t.Fatalf("child %s, want shardId-000000000003", child)
	}
	shards := map[string]types.Shard{}
	for _, s := range listAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")}) {
		shards[aws.ToString(s.ShardId)] = s
	}
	c := shards[child]
	if aws.ToString(c.ParentShardId) != "shardId-000000000001" || aws.ToString(c.AdjacentParentShardId) != "shardId-000000000000" {
		t.Errorf("child parents %v, %v", aws.ToString(c.ParentShardId), aws.ToString(c.AdjacentParentShardId))
	}
	if !covers(t, big.NewInt(0), bigOf(t, shards["shardId-000000000001"].HashKeyRange.EndingHashKey), []*types.HashKeyRange{c.HashKeyRange}) {
		t.Errorf("child range %v is not the union of its parents'", c.HashKeyRange)
	}
	for _, p := range []string{"shardId-000000000000", "shardId-000000000001"} {
		if shards[p].SequenceNumberRange.EndingSequenceNumber == nil {
			t.Errorf("%s is still open", p)
		}
		out := read(t, k, iter(t, k, horizon("s", p)), 0)
		if len(out.Records) != 1 || out.NextShardIterator != nil {
			t.Errorf("%s: %d records, next %v", p, len(out.Records), out.NextShardIterator)
		}
		want := []types.ChildShard{{ShardId: aws.String(child), ParentShards: []string{"shardId-000000000001", "shardId-000000000000"}, HashKeyRange: c.HashKeyRange}}
		if diff := cmp.Diff(want, out.ChildShards, cmpopts.IgnoreUnexported(types.ChildShard{}, types.HashKeyRange{})); diff != "" {
			t.Errorf("%s ChildShards (-want +got):\n%s", p, diff)
		}
	}
	if sh, _ := put(t, k, "s", "a", "x"); sh != child {
		t.Errorf("write after the merge went to %s", sh)
	}
	if sh, _ := put(t, k, "s", "e", "x"); sh != "shardId-000000000002" { // e1… → shard 2
		t.Errorf("write outside the merge went to %s", sh)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("merging shards that are not adjacent did not panic")
			}
		}()
		k.CreateStream("t", 3)
		k.Merge("t", "shardId-000000000000", "shardId-000000000002")
	}()
}

func TestTrim(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 1)
	const parent = "shardId-000000000000"
	put(t, k, "s", "k", "old")
	early := iter(t, k, horizon("s", parent))
	k.Split("s", parent)
	put(t, k, "s", "k", "new")
	k.Trim("s", parent)

	if got := ids(listAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")})); !cmp.Equal(got, []string{"shardId-000000000001", "shardId-000000000002"}) {
		t.Errorf("ListShards after the trim: %v", got)
	}
	_, err := k.GetShardIterator(t.Context(), horizon("s", parent))
	wantErr[*types.ResourceNotFoundException](t, err)
	_, err = k.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String(early)})
	wantErr[*types.ResourceNotFoundException](t, err)
	var data []string
	for _, r := range k.Records("s") {
		data = append(data, string(r.Data))
	}
	if !cmp.Equal(data, []string{"new"}) {
		t.Errorf("Records after the trim: %v", data)
	}
	// The children are now at the trim horizon.
	got := ids(listAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon}}))
	if !cmp.Equal(got, []string{"shardId-000000000001", "shardId-000000000002"}) {
		t.Errorf("AT_TRIM_HORIZON after the trim: %v", got)
	}
}

func TestListShardsPagination(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKinesis()
		arn := k.CreateStream("s", 5)
		all := []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003", "shardId-000000000004"}

		var pages [][]string
		in := &kinesis.ListShardsInput{StreamARN: aws.String(arn), MaxResults: aws.Int32(2)}
		for {
			out, err := k.ListShards(t.Context(), in)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, ids(out.Shards))
			if out.NextToken == nil {
				break
			}
			in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(2)}
		}
		if diff := cmp.Diff([][]string{all[:2], all[2:4], all[4:]}, pages); diff != "" {
			t.Errorf("pages of 2 (-want +got):\n%s", diff)
		}

		k.ListPageSize = 3
		out, err := k.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String("s")})
		if err != nil || len(out.Shards) != 3 || out.NextToken == nil {
			t.Fatalf("ListPageSize 3: %v shards, token %v, err %v", len(out.Shards), out.NextToken, err)
		}
		token := out.NextToken
		if got := ids(listAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")})); !cmp.Equal(got, all) {
			t.Errorf("all pages with ListPageSize 3: %v", got)
		}
		// A NextToken may come with the stream's ARN, not its name.
		if _, err := k.ListShards(t.Context(), &kinesis.ListShardsInput{NextToken: token, StreamARN: aws.String(arn)}); err != nil {
			t.Errorf("NextToken with StreamARN: %v", err)
		}
		k.ListPageSize = 0

		if got := ids(listAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ExclusiveStartShardId: aws.String(all[2])})); !cmp.Equal(got, all[3:]) {
			t.Errorf("ExclusiveStartShardId: %v", got)
		}
		for name, in := range map[string]*kinesis.ListShardsInput{
			"token and name":      {NextToken: token, StreamName: aws.String("s")},
			"token and start":     {NextToken: token, ExclusiveStartShardId: aws.String(all[0])},
			"token and filter":    {NextToken: token, ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}},
			"token of other ARN":  {NextToken: token, StreamARN: aws.String(arnPrefix + "t")},
			"bad token":           {NextToken: aws.String("nope")},
			"nothing":             {},
			"MaxResults 0":        {StreamName: aws.String("s"), MaxResults: aws.Int32(0)},
			"MaxResults 10001":    {StreamName: aws.String("s"), MaxResults: aws.Int32(10001)},
			"filter without id":   {StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAfterShardId}},
			"filter without time": {StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp}},
			"unknown filter":      {StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: "SOMETIME"}},
		} {
			if _, err := k.ListShards(t.Context(), in); !isErr[*types.InvalidArgumentException](err) {
				t.Errorf("%s: error %v (%T), want InvalidArgumentException", name, err, err)
			}
		}
		time.Sleep(300*time.Second + time.Millisecond)
		_, err = k.ListShards(t.Context(), &kinesis.ListShardsInput{NextToken: token})
		wantErr[*types.ExpiredNextTokenException](t, err)
	})
}

func TestListShardsFilters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKinesis()
		k.CreateStream("s", 2) // 0, 1
		created := time.Now()
		time.Sleep(time.Minute)
		k.Split("s", "shardId-000000000000") // 2, 3
		split := time.Now()
		time.Sleep(time.Minute)
		k.Merge("s", "shardId-000000000002", "shardId-000000000003") // 4
		time.Sleep(time.Minute)
		for _, tc := range []struct {
			name string
			f    types.ShardFilter
			want []string
		}{
			{"AFTER_SHARD_ID", types.ShardFilter{Type: types.ShardFilterTypeAfterShardId, ShardId: aws.String("shardId-000000000002")}, []string{"shardId-000000000003", "shardId-000000000004"}},
			{"AT_TRIM_HORIZON", types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon}, []string{"shardId-000000000000", "shardId-000000000001"}},
			{"FROM_TRIM_HORIZON", types.ShardFilter{Type: types.ShardFilterTypeFromTrimHorizon}, []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003", "shardId-000000000004"}},
			{"AT_LATEST", types.ShardFilter{Type: types.ShardFilterTypeAtLatest}, []string{"shardId-000000000001", "shardId-000000000004"}},
			{"AT_TIMESTAMP creation", types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: aws.Time(created)}, []string{"shardId-000000000000", "shardId-000000000001"}},
			{"AT_TIMESTAMP before", types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: aws.Time(created.Add(-time.Hour))}, []string{"shardId-000000000000", "shardId-000000000001"}},
			{"AT_TIMESTAMP split", types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: aws.Time(split)}, []string{"shardId-000000000001", "shardId-000000000002", "shardId-000000000003"}},
			{"FROM_TIMESTAMP split", types.ShardFilter{Type: types.ShardFilterTypeFromTimestamp, Timestamp: aws.Time(split)}, []string{"shardId-000000000001", "shardId-000000000002", "shardId-000000000003", "shardId-000000000004"}},
		} {
			got := ids(listAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &tc.f}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: shards (-want +got):\n%s", tc.name, diff)
			}
		}
	})
}

func TestExpiredIterator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKinesis()
		k.CreateStream("s", 1)
		it := iter(t, k, horizon("s", "shardId-000000000000"))
		time.Sleep(5 * time.Minute)
		out := read(t, k, it, 0) // exactly 5 minutes old: still valid
		time.Sleep(5*time.Minute + time.Millisecond)
		_, err := k.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
		wantErr[*types.ExpiredIteratorException](t, err)
		// Each answer's NextShardIterator is fresh.
		it = iter(t, k, horizon("s", "shardId-000000000000"))
		for range 4 {
			time.Sleep(2 * time.Minute)
			it = *read(t, k, it, 0).NextShardIterator
		}
	})
}

func TestReadFail(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 2)
	put(t, k, "s", "b", "x") // shard 1
	var mu sync.Mutex
	var asked []string
	throttle := 2
	k.ReadFail = func(api, shardID string) error {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, api+" "+shardID)
		if api == "GetRecords" && shardID == "shardId-000000000001" && throttle > 0 {
			throttle--
			return &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
		}
		if api == "GetShardIterator" && shardID == "shardId-000000000000" {
			return errors.New("outage")
		}
		return nil
	}
	if _, err := k.GetShardIterator(t.Context(), horizon("s", "shardId-000000000000")); err == nil || err.Error() != "outage" {
		t.Errorf("GetShardIterator on shard 0: %v, want the outage", err)
	}
	it := iter(t, k, horizon("s", "shardId-000000000001"))
	for range 2 {
		_, err := k.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
		wantErr[*types.ProvisionedThroughputExceededException](t, err)
	}
	if got := dataOf(read(t, k, it, 0).Records); !cmp.Equal(got, []string{"x"}) {
		t.Errorf("after the throttling the same iterator reads %v", got)
	}
	want := []string{"GetShardIterator shardId-000000000000", "GetShardIterator shardId-000000000001", "GetRecords shardId-000000000001", "GetRecords shardId-000000000001", "GetRecords shardId-000000000001"}
	if diff := cmp.Diff(want, asked); diff != "" {
		t.Errorf("ReadFail asked (-want +got):\n%s", diff)
	}
	if g, r := k.Calls("GetShardIterator"), k.Calls("GetRecords"); g != 2 || r != 3 {
		t.Errorf("Calls: GetShardIterator %d, GetRecords %d; want 2 and 3", g, r)
	}
}

func TestUnknownStream(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 1)
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"ListShards": func() error {
			_, err := k.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("nope")})
			return err
		},
		"ListShards by ARN": func() error {
			_, err := k.ListShards(ctx, &kinesis.ListShardsInput{StreamARN: aws.String(arnPrefix + "nope")})
			return err
		},
		"GetShardIterator": func() error {
			_, err := k.GetShardIterator(ctx, horizon("nope", "shardId-000000000000"))
			return err
		},
		"GetShardIterator unknown shard": func() error {
			_, err := k.GetShardIterator(ctx, horizon("s", "shardId-000000000001"))
			return err
		},
		// Shard ids are looked up by their number: other spellings of it
		// are unknown shards.
		"GetShardIterator short shard id": func() error {
			_, err := k.GetShardIterator(ctx, horizon("s", "shardId-0"))
			return err
		},
		"GetShardIterator signed shard id": func() error {
			_, err := k.GetShardIterator(ctx, horizon("s", "shardId-+00000000000"))
			return err
		},
		"GetShardIterator other prefix": func() error {
			_, err := k.GetShardIterator(ctx, horizon("s", "shard-000000000000"))
			return err
		},
		"DescribeStreamSummary": func() error {
			_, err := k.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String("arn:aws:kinesis:eu-west-1:1:stream/s")})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { wantErr[*types.ResourceNotFoundException](t, call()) })
	}
	for name, call := range map[string]func() error{
		"GetShardIterator without stream": func() error {
			_, err := k.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeLatest})
			return err
		},
		"GetShardIterator without shard": func() error {
			_, err := k.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardIteratorType: types.ShardIteratorTypeLatest})
			return err
		},
		"name and ARN differ": func() error {
			k.CreateStream("t", 1)
			_, err := k.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("t"), StreamARN: aws.String(arnPrefix + "s")})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { wantErr[*types.InvalidArgumentException](t, call()) })
	}
}

func TestDescribeStreamSummary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKinesis()
		arn := k.CreateStream("s", 3)
		out, err := k.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(arn)})
		if err != nil {
			t.Fatal(err)
		}
		d := out.StreamDescriptionSummary
		if aws.ToString(d.StreamName) != "s" || aws.ToString(d.StreamARN) != arn || d.StreamStatus != types.StreamStatusActive ||
			aws.ToInt32(d.OpenShardCount) != 3 || !aws.ToTime(d.StreamCreationTimestamp).Equal(time.Now()) {
			t.Errorf("summary %+v", d)
		}
		k.Merge("s", "shardId-000000000000", "shardId-000000000001")
		if n := aws.ToInt32(describe(t, k, "s").OpenShardCount); n != 2 {
			t.Errorf("after a merge OpenShardCount %d, want 2", n)
		}
		if k.Calls("DescribeStreamSummary") != 2 {
			t.Errorf("Calls(DescribeStreamSummary) = %d", k.Calls("DescribeStreamSummary"))
		}
	})
}

func TestPutRecordsFailPlacesOthers(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 2)
	k.Fail = func(_, key string, _ []byte) string {
		if key == "bad" {
			return "ProvisionedThroughputExceededException"
		}
		return ""
	}
	data, err := envelope.Encode(envelope.Headers{{Name: "x-attempt", Value: "2"}}, []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{
		{PartitionKey: aws.String("a"), Data: data},
		{PartitionKey: aws.String("bad"), Data: []byte("lost")},
		{PartitionKey: aws.String("b"), Data: []byte("raw")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(out.FailedRecordCount) != 1 || aws.ToString(out.Records[1].ErrorCode) != "ProvisionedThroughputExceededException" || out.Records[1].ShardId != nil {
		t.Errorf("failed entry %+v, count %d", out.Records[1], aws.ToInt32(out.FailedRecordCount))
	}
	recs := k.Records("s")
	want := []Record{
		{ShardID: "shardId-000000000000", SequenceNumber: aws.ToString(out.Records[0].SequenceNumber), PartitionKey: "a", Data: data, Headers: envelope.Headers{{Name: "x-attempt", Value: "2"}}, Payload: []byte("p")},
		{ShardID: "shardId-000000000001", SequenceNumber: aws.ToString(out.Records[2].SequenceNumber), PartitionKey: "b", Data: []byte("raw"), Payload: []byte("raw")},
	}
	if diff := cmp.Diff(want, recs, cmpopts.IgnoreFields(Record{}, "ApproximateArrivalTimestamp")); diff != "" {
		t.Errorf("Records (-want +got):\n%s", diff)
	}
	for i, e := range []int{0, 2} {
		if aws.ToString(out.Records[e].ShardId) != want[i].ShardID {
			t.Errorf("entry %d: ShardId %s, want %s", e, aws.ToString(out.Records[e].ShardId), want[i].ShardID)
		}
	}
	if w := k.Written(); len(w) != 2 || w[0].PartitionKey != "a" || w[1].PartitionKey != "b" || w[0].Stream != "s" {
		t.Errorf("Written %+v", w)
	}
	// PutRecord with a Fail returns its error and places nothing.
	_, err = k.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("bad")})
	if err == nil || len(k.Records("s")) != 2 {
		t.Errorf("failed PutRecord: err %v, %d records", err, len(k.Records("s")))
	}
	// A bad entry fails the whole call and accepts nothing.
	_, err = k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamARN: aws.String(arnPrefix + "s"), Records: []types.PutRecordsRequestEntry{
		{PartitionKey: aws.String("a")}, {PartitionKey: aws.String("")},
	}})
	wantErr[*types.InvalidArgumentException](t, err)
	if len(k.Written()) != 2 || len(k.Records("s")) != 2 {
		t.Errorf("a refused call accepted records")
	}
}

func TestUncreatedStreamWritesAsBefore(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("created", 1)
	out, err := k.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/other"), PartitionKey: aws.String(""), Data: []byte("one")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.ShardId) != "shardId-000000000000" || aws.ToString(out.SequenceNumber) != "49600000000000000000000000000000000000000000000000000001" {
		t.Errorf("PutRecord: %s %s", aws.ToString(out.ShardId), aws.ToString(out.SequenceNumber))
	}
	outs, err := k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String("other"), Records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: []byte("two")}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := outs.Records[0]; aws.ToString(e.ShardId) != "shardId-000000000000" || aws.ToString(e.SequenceNumber) != "49600000000000000000000000000000000000000000000000000002" {
		t.Errorf("PutRecords: %s %s", aws.ToString(e.ShardId), aws.ToString(e.SequenceNumber))
	}
	want := []Written{
		{Stream: "arn:aws:kinesis:us-east-1:123456789012:stream/other", PartitionKey: "", Data: []byte("one"), Payload: []byte("one")},
		{Stream: "other", PartitionKey: "k", Data: []byte("two"), Payload: []byte("two")},
	}
	if diff := cmp.Diff(want, k.Written()); diff != "" {
		t.Errorf("Written (-want +got):\n%s", diff)
	}
	if n := len(k.Records("created")); n != 0 {
		t.Errorf("%d records placed in another stream", n)
	}
	_, err = k.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String("other")})
	wantErr[*types.ResourceNotFoundException](t, err)
	if k.Calls("PutRecord") != 1 || k.Calls("PutRecords") != 1 {
		t.Errorf("Calls %d %d", k.Calls("PutRecord"), k.Calls("PutRecords"))
	}
}

func TestPut(t *testing.T) {
	k := NewKinesis()
	arn := k.CreateStream("s", 2)
	k.Fail = func(string, string, []byte) string { return "Nope" }
	shard, seq := k.Put(arn, "b", []byte("seed")) // 92eb… → shard 1
	if shard != "shardId-000000000001" || len(seq) != 56 {
		t.Errorf("Put: %s %s", shard, seq)
	}
	if len(k.Written()) != 0 || k.Calls("PutRecord") != 0 {
		t.Error("Put shows in Written or Calls")
	}
	if r := k.Records("s"); len(r) != 1 || r[0].SequenceNumber != seq || string(r[0].Payload) != "seed" {
		t.Errorf("Records %+v", r)
	}
}

func TestDelayAndContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKinesis()
		k.CreateStream("s", 1)
		k.Delay = 50 * time.Millisecond
		start := time.Now()
		if _, err := k.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String("s")}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("ListShards took %v, want the Delay", d)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		_, err := k.GetShardIterator(ctx, horizon("s", "shardId-000000000000"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("GetShardIterator past its deadline: %v", err)
		}
		k.Delay = 0
		_, err = k.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("x")})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("GetRecords on a done context: %v", err)
		}
		if k.Calls("GetShardIterator") != 0 || k.Calls("ListShards") != 1 {
			t.Errorf("Calls: %d %d", k.Calls("GetShardIterator"), k.Calls("ListShards"))
		}
	})
}

// TestConcurrentWritesAndReads runs writers and per-shard readers at once
// (meant for -race) and checks every record comes round, in order per key.
func TestConcurrentWritesAndReads(t *testing.T) {
	k := NewKinesis()
	k.CreateStream("s", 4)
	const writers, perWriter = 8, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				_, err := k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{
					{PartitionKey: aws.String("w" + strconv.Itoa(w)), Data: []byte(strconv.Itoa(i))},
				}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	got := map[string][]string{}
	var readers sync.WaitGroup
	done := make(chan struct{})
	for _, s := range []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"} {
		readers.Go(func() {
			it := iter(t, k, horizon("s", s))
			for {
				// Once every write is done, a read that finds nothing is at
				// the tip for good.
				var finished bool
				select {
				case <-done:
					finished = true
				default:
				}
				out, err := k.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(7)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, r := range out.Records {
					got[aws.ToString(r.PartitionKey)] = append(got[aws.ToString(r.PartitionKey)], string(r.Data))
				}
				mu.Unlock()
				it = *out.NextShardIterator
				if len(out.Records) == 0 && finished {
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	for w := range writers {
		key := "w" + strconv.Itoa(w)
		if len(got[key]) != perWriter {
			t.Fatalf("%s: read %d records, want %d", key, len(got[key]), perWriter)
		}
		for i, d := range got[key] {
			if d != strconv.Itoa(i) {
				t.Fatalf("%s: record %d is %s", key, i, d)
			}
		}
	}
}
