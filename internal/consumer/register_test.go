package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/kpl"
	"github.com/shardsettle/lambdaadapter/internal/pool"
)

// kinesisRecord is a Kinesis record of the shard, as GetRecords returns it.
func kinesisRecord(seq, key string, data []byte) kinesistypes.Record {
	return kinesistypes.Record{SequenceNumber: aws.String(seq), PartitionKey: aws.String(key), Data: data,
		ApproximateArrivalTimestamp: aws.Time(time.Unix(1700000000, 0))}
}

// TestRegisterAnswer: an answer is registered in one piece, in order: a run
// of ordinary records under one lock, an aggregate as one entry of its user
// records, and a record the watermark refuses (a sequence number that does
// not grow, or is not one) left out without losing the records after it.
// Each message gets its own headers, envelope headers first.
func TestRegisterAnswer(t *testing.T) {
	c := newConsumer(t, Config{Kinesis: newStream(1)}, handler(newRecorder()))
	s := testShard(t, c, shardID(0))
	e := s.es.Reset("")
	enveloped, err := envelope.Encode(envelope.Headers{{Name: "x-a", Value: "1"}}, []byte("r4"))
	if err != nil {
		t.Fatal(err)
	}
	recs := []kinesistypes.Record{
		kinesisRecord("100", "k1", []byte("r1")),
		kinesisRecord("200", "agg", kpl.Aggregate([]kpl.Record{{PartitionKey: "u", Data: []byte("u-0")}, {PartitionKey: "u", Data: []byte("u-1")}})),
		kinesisRecord("150", "k3", []byte("r3")), // does not grow: refused
		kinesisRecord("300", "k4", enveloped),
		kinesisRecord("0300", "k5", []byte("r5")), // not a sequence number: refused
		kinesisRecord("400", "k6", []byte("r6")),
	}
	var resume Position
	ds, spans, _, ok := s.register(context.Background(), e, recs, nil, &resume)
	if !ok {
		t.Fatal("register refused the answer as stale")
	}
	var got []string
	for _, sp := range spans {
		for i := sp.from; i < sp.to; i++ {
			m := &ds[i].Msg
			got = append(got, m.SequenceNumber+" "+m.PartitionKey+" "+string(m.Payload)+" "+m.Headers.Get("x-a")+" "+m.Headers.Get(envelope.SequenceNumberHeader))
		}
	}
	want := []string{
		"100 k1 r1  100",
		"200 u u-0  200",
		"200 u u-1  200",
		"300 k4 r4 1 300",
		"400 k6 r6  400",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registered deliveries (-want +got):\n%s", diff)
	}
	if n := s.es.Inflight(); n != len(want) {
		t.Errorf("%d deliveries in flight, want %d", n, len(want))
	}
	// Growing one message's headers leaves the next one's alone.
	first := &ds[spans[0].from].Msg
	first.Headers = append(first.Headers, envelope.Header{Name: "x-grown", Value: "1"})
	if next := ds[spans[0].from+1].Msg.Headers; next.Get("x-grown") != "" {
		t.Errorf("the next message's headers changed: %v", next)
	}
	// The watermark holds four entries (the aggregate is one), from 100.
	wm := s.es.Watermark()
	if n := wm.Pending(); n != 4 {
		t.Errorf("watermark holds %d unsettled entries, want 4", n)
	}
	if seq, _ := wm.FirstUnsettled(); seq != "100" {
		t.Errorf("first unsettled %q, want 100", seq)
	}

	// An epoch that ended (a seek, a lost lease) registers nothing.
	before := s.es.Inflight()
	s.es.Reset("")
	if _, _, _, ok := s.register(context.Background(), e, []kinesistypes.Record{kinesisRecord("500", "k", []byte("r"))}, nil, &resume); ok {
		t.Error("register accepted an answer for an ended epoch")
	}
	if n := s.es.Inflight(); n != before {
		t.Errorf("in flight %d after a stale answer, want %d", n, before)
	}
}

// TestPooledStorageFits: a pooled slab or header backing far larger than
// an answer needs is not used for it (one of its records held for long
// would hold it all), one large enough is, and both come back empty.
func TestPooledStorageFits(t *testing.T) {
	for range 10 {
		slabs.Put(slabs.Get(5000))
		if sp := slabs.Get(10); pool.Oversized(cap(*sp), 10) || len(*sp) != 0 {
			t.Fatalf("a slab of len %d, cap %d for 10 deliveries", len(*sp), cap(*sp))
		}
		backings.Put(backings.Get(5000))
		if bp := backings.Get(10); pool.Oversized(cap(*bp), 10) || len(*bp) != 0 {
			t.Fatalf("a backing of len %d, cap %d for 10 headers", len(*bp), cap(*bp))
		}
	}
	if sp := slabs.Get(100); cap(*sp) < 100 {
		t.Fatalf("a slab of cap %d for 100 deliveries", cap(*sp))
	}
}
