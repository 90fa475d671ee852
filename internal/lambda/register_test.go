package lambda

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/shardsettle/lambdaadapter/internal/event"
	"github.com/shardsettle/lambdaadapter/internal/message"
)

// TestRegistrableMatchesWatermark: registrable, which lets an invocation
// register its records while the lanes run, says yes exactly when
// registering every record first (what the watermarks check) succeeds, for
// batches of up to maxCheckedShards shards; for more it says no and the
// batch takes the register-first path.
func TestRegistrableMatchesWatermark(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	seqOf := func(v uint64) string {
		switch rng.IntN(40) {
		case 0:
			return "0" + strconv.FormatUint(v, 10) // leading zero
		case 1:
			return strconv.FormatUint(v, 10) + "x"
		case 2:
			return ""
		}
		return strconv.FormatUint(v, 10)
	}
	for round := range 5000 {
		shards := 1 + rng.IntN(maxCheckedShards+2)
		recs := make([]event.KinesisRecord, rng.IntN(12))
		next := make([]uint64, shards)
		for i := range recs {
			s := rng.IntN(shards)
			if rng.IntN(30) == 0 && next[s] > 0 {
				next[s] -= uint64(rng.IntN(2)) // the same number again or one below
			} else {
				next[s] += 1 + uint64(rng.IntN(1e6))
			}
			recs[i] = event.KinesisRecord{ShardID: "shardId-" + strconv.Itoa(s), SequenceNumber: seqOf(next[s])}
		}
		b := batch{recs: recs}
		var set shardSet
		err := set.registerAll(b.open(0, len(recs)), nil)
		ok := registrable(recs)
		distinct := map[string]bool{}
		for _, r := range recs {
			distinct[r.ShardID] = true
		}
		switch {
		case ok && err != nil:
			t.Fatalf("round %d: registrable, but registering fails: %v (%+v)", round, err, recs)
		case !ok && err == nil && len(distinct) <= maxCheckedShards:
			t.Fatalf("round %d: not registrable, but registering succeeds (%+v)", round, recs)
		}
	}
}

// TestPlainIntoSetsEveryField guards plainInto, which sets the fields of a
// message one by one over whatever a recycled delivery held: a field added
// to message.Message must be set there too.
func TestPlainIntoSetsEveryField(t *testing.T) {
	if n := reflect.TypeFor[message.Message]().NumField(); n != 13 {
		t.Fatalf("message.Message has %d fields; plainInto sets 13: set the new ones there and update this count", n)
	}
	var m message.Message
	m.ExplicitHashKey, m.Aggregated, m.SubSequenceNumber, m.Attempt = "stale", true, 7, 9
	message.Bind(&m, nil)
	rec := event.KinesisRecord{Data: []byte("x"), PartitionKey: "k", SequenceNumber: "1", ShardID: "shardId-1", EventSourceARN: "arn:aws:kinesis:us-east-1:1:stream/s"}
	var sh shared
	plainInto(&m, &rec, nil, &sh)
	want, _ := plain(&rec, nil, &sh)
	if m.ExplicitHashKey != "" || m.Aggregated || m.SubSequenceNumber != 0 || m.Attempt != want.Attempt ||
		string(m.Payload) != "x" || m.PartitionKey != "k" || m.StreamARN != want.StreamARN {
		t.Errorf("plainInto over a used message = %+v, want %+v", m, want)
	}
}
