package getrecords

import (
	"bytes"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/internal/pool"
)

// TestDataReleasedIsReused: a released buffer is where the next answer is
// decoded (when the pool keeps it: the race detector makes sync.Pool drop
// some), a too small one is replaced, and a second Release panics.
func TestDataReleasedIsReused(t *testing.T) {
	body := genBody(20, 100, 3)
	want, err := sdkDecode(body)
	if err != nil {
		t.Fatal(err)
	}
	reused := 0
	for range 20 {
		_, a, ok := decode(body)
		if !ok || a == nil {
			t.Fatal("Decode refused the body")
		}
		buf := &a.b[0]
		a.Release()
		got, b, ok := decode(body)
		if !ok {
			t.Fatal("Decode refused the body")
		}
		if eq, diff := equalOutputs(want, got); !eq {
			t.Fatalf("(-sdk +fast):\n%s", diff)
		}
		if &b.b[0] == buf {
			reused++
		}
		b.Release()
	}
	if reused == 0 {
		t.Error("no decoding reused the buffer released just before it")
	}

	// A released buffer too small for the next answer is not used for it.
	_, small, _ := decode(genBody(1, 10, 1))
	small.Release()
	big := genBody(10, 1000, 2)
	got, d, ok := decode(big)
	if !ok {
		t.Fatal("Decode refused the body")
	}
	if cap(d.b) < len(d.b) || len(d.b) < 10*1000 {
		t.Errorf("buffer of len %d cap %d for 10,000 bytes of data", len(d.b), cap(d.b))
	}
	if want, _ := sdkDecode(big); !func() bool { eq, _ := equalOutputs(want, got); return eq }() {
		t.Error("the larger answer decodes wrong after a small buffer was released")
	}
	d.Release()

	defer func() {
		if recover() == nil {
			t.Error("a second Release did not panic")
		}
	}()
	d.Release()
}

// TestDataNil: answers without data have no Data, and releasing nil is
// allowed.
func TestDataNil(t *testing.T) {
	for _, body := range []string{`{"Records":[]}`, `{"Records":[{"SequenceNumber":"1"}]}`, `{"Records":[{"SequenceNumber":"1","Data":""}]}`} {
		out, d, ok := decode([]byte(body))
		if !ok {
			t.Fatalf("Decode refused %s", body)
		}
		if d != nil || DataOf(out) != nil {
			t.Errorf("%s: a Data for an answer without data", body)
		}
	}
	(*Data)(nil).Release()
	if DataOf(nil) != nil {
		t.Error("DataOf(nil) is not nil")
	}
}

// TestWire: Wire writes what the SDK's deserializer reads back as the same
// answer, and DecodeWire gives it with its Data, which is overwritten when
// released.
func TestWire(t *testing.T) {
	outs := []*kinesis.GetRecordsOutput{
		{Records: []types.Record{}},
		{
			Records: []types.Record{
				{SequenceNumber: aws.String("1"), PartitionKey: aws.String("k\u00e9\"\\"), Data: []byte("abc"),
					ApproximateArrivalTimestamp: aws.Time(time.UnixMilli(1700000000007).UTC())},
				{SequenceNumber: aws.String("2"), PartitionKey: aws.String("k"), Data: []byte{},
					ApproximateArrivalTimestamp: aws.Time(time.UnixMilli(1700000000120).UTC()), EncryptionType: types.EncryptionTypeKms},
				{SequenceNumber: aws.String("3"), PartitionKey: aws.String("k"), Data: bytes.Repeat([]byte{0, 0xff}, 300)},
			},
			NextShardIterator: aws.String("it"), MillisBehindLatest: aws.Int64(12),
		},
		{
			Records:            []types.Record{},
			MillisBehindLatest: aws.Int64(0),
			ChildShards: []types.ChildShard{{ShardId: aws.String("shardId-000000000002"), ParentShards: []string{"shardId-000000000000"},
				HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String("0"), EndingHashKey: aws.String("99")}}},
		},
	}
	for i, out := range outs {
		body, err := Wire(out)
		if err != nil {
			t.Fatal(err)
		}
		back, err := sdkDecode(body)
		if err != nil {
			t.Fatalf("%d: the SDK rejects %s: %v", i, body, err)
		}
		if eq, diff := equalOutputs(out, back); !eq {
			t.Fatalf("%d: %s read back differs (-want +got):\n%s", i, body, diff)
		}
		got, err := DecodeWire(out)
		if err != nil {
			t.Fatal(err)
		}
		if eq, diff := equalOutputs(out, got); !eq {
			t.Fatalf("%d: DecodeWire differs (-want +got):\n%s", i, diff)
		}
		if d := DataOf(got); d != nil {
			last := got.Records[len(got.Records)-1].Data
			d.Release()
			if last[0] != 0xDB || last[len(last)-1] != 0xDB {
				t.Errorf("%d: a released DecodeWire buffer keeps its data", i)
			}
		} else if i == 1 {
			t.Errorf("%d: DecodeWire gave no Data for an answer with data", i)
		}
	}
}

// TestDataReleaseKeepsNextIterator: the next shard iterator outlives the
// release of its answer's records (a reader releases them before it makes
// its next call with it), while the records' own fields are cleared.
func TestDataReleaseKeepsNextIterator(t *testing.T) {
	a := []byte(`{"NextShardIterator":"iter-a","Records":[{"SequenceNumber":"1","PartitionKey":"k","Data":"QUJD"}]}`)
	b := []byte(`{"NextShardIterator":"iter-b","Records":[{"SequenceNumber":"2","PartitionKey":"l","Data":"REVG"}]}`)
	out, data, ok := decode(a)
	if !ok {
		t.Fatal("Decode refused the body")
	}
	next, rec := out.NextShardIterator, &out.Records[0]
	data.Release()
	if rec.SequenceNumber != nil || rec.Data != nil {
		t.Error("a released answer's record keeps its fields")
	}
	for range 10 {
		_, d2, _ := decode(b)
		d2.Release()
	}
	if *next != "iter-a" {
		t.Errorf("next iterator %q after its answer was released, want iter-a", *next)
	}
}

// TestDataOversizedNotReused: a released buffer far larger than the next
// answer needs is not used for it (one record of it held for long would
// hold the whole buffer).
func TestDataOversizedNotReused(t *testing.T) {
	for range 10 {
		_, big, _ := decode(genBody(2000, 1000, 4))
		big.Release()
		_, small, ok := decode(genBody(1, 10, 5))
		if !ok {
			t.Fatal("Decode refused the body")
		}
		if pool.Oversized(cap(small.b), len(small.b)) {
			t.Fatalf("a %d-byte answer decoded into a buffer of %d", len(small.b), cap(small.b))
		}
		small.Release()
	}
}
