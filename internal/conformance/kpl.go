package conformance

import (
	"crypto/md5"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// users returns n user records with payloads prefix-0… over keys keys
// (round robin), the odd ones with an RSK1 header.
func users(prefix string, n int, keys ...string) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{Key: keys[i%len(keys)], Payload: fmt.Sprintf("%s-%d", prefix, i)}
		if i%2 == 1 {
			out[i].Headers = []string{"trace", "t-" + strconv.Itoa(i)}
		}
	}
	return out
}

// malformedAggregate is a KPL aggregate whose MD5 matches but whose one
// user record names a partition key the table does not have.
func malformedAggregate() []byte {
	var body []byte
	body = protowire.AppendTag(body, 1, protowire.BytesType)
	body = protowire.AppendString(body, "k")
	var rec []byte
	rec = protowire.AppendTag(rec, 1, protowire.VarintType)
	rec = protowire.AppendVarint(rec, 5)
	rec = protowire.AppendTag(rec, 3, protowire.BytesType)
	rec = protowire.AppendBytes(rec, []byte("poison"))
	body = protowire.AppendTag(body, 3, protowire.BytesType)
	body = protowire.AppendBytes(body, rec)
	sum := md5.Sum(body)
	out := append(kpl.Magic[:], body...)
	return append(out, sum[:]...)
}

// aggregateCases are the rows of the semantics table about KPL aggregated
// records: user records settle one by one, their parent once all have.
func aggregateCases() []Case {
	return []Case{
		{
			Name: "AggregateAck", Row: "KPL aggregate: one message per user record", Shards: 2,
			Records: []Record{
				{Shard: 0, Key: "p0", Payload: "plain-0"},
				{Shard: 0, Key: "agg", Users: users("ua", 7, "a", "b", "c")},
				{Shard: 0, Key: "p0", Payload: "plain-1"},
				{Shard: 1, Key: "agg", Users: users("ub", 3, "a")},
				{Shard: 1, Key: "p1", Payload: "plain-2"},
			},
			Script: ack,
			Check: func(t *testing.T, r *Result) {
				handledOnce(t, r, 13)
				noCopies(t, r)
				for _, h := range r.Log.All() {
					plain := len(h.Payload) > 5 && h.Payload[:5] == "plain"
					if plain == h.Aggregated || plain != (h.Sub == "") {
						t.Errorf("%s: aggregated %v, sub-sequence header %q", h.Payload, h.Aggregated, h.Sub)
					}
				}
				// Per user-record key order, and sub-sequence numbers.
				last := map[string]int{}
				for _, h := range r.Log.All() {
					if !h.Aggregated {
						continue
					}
					i, _ := strconv.Atoi(h.Payload[3:])
					if h.Sub != strconv.Itoa(i) {
						t.Errorf("%s: sub-sequence number %q, want %d", h.Payload, h.Sub, i)
					}
					k := h.Shard + "/" + h.Key
					if p, ok := last[k]; ok && p > i {
						t.Errorf("key %s: %s handled after user record %d", k, h.Payload, p)
					}
					last[k] = i
				}
				wantKeys := map[string]string{"ua-0": "a", "ua-1": "b", "ua-2": "c", "ua-3": "a", "ub-2": "a"}
				for _, h := range r.Log.All() {
					if k, ok := wantKeys[h.Payload]; ok && h.Key != k {
						t.Errorf("%s: partition key %q, want its user record's %q", h.Payload, h.Key, k)
					}
				}
			},
		},
		{
			Name: "AggregateRetryNotCounted", Row: "KPL aggregate: Retry(err) of one user record, not counted",
			Records: []Record{{Key: "agg", Users: users("ur", 4, "a", "b")}, {Key: "z", Payload: "after"}},
			Script:  failFirst(1, lambdaadapter.Retry(errHandler), "ur-1"),
			Check: func(t *testing.T, r *Result) {
				handlings(t, r, "ur-1", 2)
				noCopies(t, r)
				// Long-running mode delivers the user record again in process;
				// Lambda redelivers its whole parent and what came after it (at
				// least once: "after", on another key, may have run already).
				for _, p := range []string{"ur-0", "ur-2", "after"} {
					n := len(r.Log.Of(p))
					if r.Mode == lambdaadapter.ModeECS && n != 1 || n < 1 {
						t.Errorf("%s handled %d times", p, n)
					}
				}
			},
		},
		{
			Name: "AggregateRetryCounted", Row: "KPL aggregate: Retry(err) of one user record, counted: a plain copy",
			Records: []Record{{Key: "agg", Users: users("uc", 3, "a", "b", "c")}},
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(2), lambdaadapter.WithDeadLetterStream(DeadLetterStream)},
			Script: func(h Handling, _ *lambdaadapter.Message) lambdaadapter.Outcome {
				if h.Payload == "uc-1" {
					return lambdaadapter.Retry(errHandler)
				}
				return lambdaadapter.Ack()
			},
			Check: func(t *testing.T, r *Result) {
				hs := handlings(t, r, "uc-1", 2)
				attemptsAndCounts(t, hs, []int{1, 2}, []string{"", "1"})
				if !hs[0].Aggregated || hs[1].Aggregated || hs[1].Sub != "" {
					t.Errorf("uc-1: first handling aggregated=%v, the copy's aggregated=%v sub=%q; want the copy plain",
						hs[0].Aggregated, hs[1].Aggregated, hs[1].Sub)
				}
				cs := copies(t, r, "uc-1", "1")
				if cs[0].Key != "b" || cs[0].Headers.Get("trace") != "t-1" || cs[0].Headers.Get("kinesis-sub-sequence-number") != "" {
					t.Errorf("copy of uc-1: key %q, headers %v; want key b, trace=t-1 and no delivery header", cs[0].Key, cs[0].Headers)
				}
				handlings(t, r, "uc-0", 1)
				handlings(t, r, "uc-2", 1)
				dls := r.StreamRecords(DeadLetterStream)
				if len(dls) != 1 || dls[0].Payload != "uc-1" || dls[0].Key != "b" {
					t.Fatalf("dead letters %+v, want uc-1 under key b", dls)
				}
			},
		},
		{
			Name: "AggregateMalformed", Row: "KPL aggregate, MD5 matches, body malformed: poison, like Drop",
			Records: []Record{
				{Key: "k", Payload: "before"},
				{Key: "k", Raw: malformedAggregate()},
				{Key: "k", Payload: "after"},
			},
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithDeadLetterStream(DeadLetterStream), lambdaadapter.WithDeadLetterDrops()},
			Script:  ack,
			Check: func(t *testing.T, r *Result) {
				handledOnce(t, r, 2)
				handlings(t, r, "before", 1)
				handlings(t, r, "after", 1)
				dls := r.StreamRecords(DeadLetterStream)
				if len(dls) != 1 || dls[0].Payload != string(malformedAggregate()) {
					t.Fatalf("dead letters %+v, want the raw malformed aggregate", dls)
				}
				if reason := dls[0].Headers.Get("x-dead-letter-reason"); !strings.Contains(reason, "partition key index 5") {
					t.Errorf("dead-letter reason %q does not say what is malformed", reason)
				}
			},
		},
		{
			Name: "AggregateBadDigest", Row: "KPL magic with an MD5 that does not match: an ordinary record",
			Records: func() []Record {
				data := malformedAggregate()
				data[len(data)-1] ^= 0xff
				return []Record{{Key: "k", Raw: data}}
			}(),
			Script: ack,
			Check: func(t *testing.T, r *Result) {
				hs := r.Log.All()
				if len(hs) != 1 || hs[0].Aggregated {
					t.Fatalf("handlings %+v, want the record once, as an ordinary record", hs)
				}
			},
		},
	}
}
