package event

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// checkSplit decodes in with a helper starting at split and the result
// built in halves, and fails unless that gives exactly what the sequential
// decoder gives: the same records, or the same error.
func checkSplit(t *testing.T, in []byte, split int) {
	t.Helper()
	want, wantErr := decode(in, -1, false, nil)
	got, gotErr := decode(in, split, true, nil)
	if msg := sameResult(want, wantErr, got, gotErr); msg != "" {
		t.Fatalf("split at %d of %q: %s", split, clip(in), msg)
	}
}

// sameResult describes how two decodings differ, or returns "".
func sameResult(want *Kinesis, wantErr error, got *Kinesis, gotErr error) string {
	switch {
	case (wantErr == nil) != (gotErr == nil):
		return "error " + errString(gotErr) + ", sequential " + errString(wantErr)
	case wantErr != nil:
		var ws, gs *SyntaxError
		var wr, gr *RecordError
		switch {
		case wantErr.Error() != gotErr.Error():
			return "error " + errString(gotErr) + ", sequential " + errString(wantErr)
		case errors.As(wantErr, &ws) != errors.As(gotErr, &gs),
			errors.As(wantErr, &wr) != errors.As(gotErr, &gr),
			errors.Is(wantErr, ErrNotKinesis) != errors.Is(gotErr, ErrNotKinesis):
			return "error types differ: " + errString(gotErr)
		case wr != nil && (wr.Field != gr.Field || wr.Index != gr.Index):
			return "record errors differ: " + errString(gotErr)
		case ws != nil && ws.Offset != gs.Offset:
			return "syntax error offsets differ: " + errString(gotErr)
		}
		return ""
	case !reflect.DeepEqual(want, got):
		return "records differ"
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// splitInputs are small payloads whose every offset TestSplitMatchesSequential
// tries as a split: valid events, errors before, at and after the middle, and
// "},{" where it is not a record boundary.
func splitInputs(t testing.TB) map[string][]byte {
	rec := func(seq, extra string) string {
		return `{"kinesis":{"partitionKey":"k","sequenceNumber":"` + seq + `","data":"QUJD"` + extra + `},"eventSource":"aws:kinesis","eventID":"shardId-000000000000:` + seq + `","awsRegion":"us-east-2","eventSourceARN":"arn:aws:kinesis:us-east-2:1:stream/s"}`
	}
	recs := func(parts ...string) []byte {
		return []byte(`{"Records":[` + strings.Join(parts, ",") + `]}`)
	}
	ok := rec("1", "")
	in := map[string][]byte{
		"valid":                 recs(ok, rec("2", ""), rec("3", ""), rec("4", "")),
		"one":                   recs(ok),
		"empty":                 recs(),
		"braces in key":         recs(ok, strings.Replace(rec("2", ""), `"k"`, `"},{\"kinesis\":{}},{"`, 1), rec("3", "")),
		"braces in unknown":     recs(ok, rec("2", `,"x":{"a":[{},{}],"b":"},{"}`), rec("3", "")),
		"bad sequence later":    recs(ok, rec("2", ""), rec("x3", ""), rec("4", "")),
		"bad sequence first":    recs(rec("x1", ""), rec("2", ""), rec("3", "")),
		"two bad":               recs(ok, rec("x2", ""), rec("3", ""), rec("x4", "")),
		"bad base64 later":      recs(ok, rec("2", ""), rec("3", `,"data":"QU$D"`), rec("4", "")),
		"bad base64 both":       recs(ok, rec("2", `,"data":"Q"`), rec("3", ""), rec("4", `,"data":"Q"`)),
		"syntax later":          []byte(strings.TrimSuffix(string(recs(ok, rec("2", ""), rec("3", ""))), "]}") + `,}`),
		"semantic then syntax":  []byte(strings.TrimSuffix(string(recs(rec("x1", ""), rec("2", ""), rec("3", ""))), "]}") + `,]`),
		"null record later":     recs(ok, rec("2", ""), "null", rec("4", "")),
		"not kinesis later":     recs(ok, rec("2", ""), `{"eventSource":"aws:sqs"}`, rec("4", "")),
		"escapes both halves":   recs(rec("1", `,"partitionKey":"\u00e9\n"`), rec("2", `,"partitionKey":"\"q\""`), rec("3", `,"data":"QU\/D"`), rec("4", `,"partitionKey":"\u00e9\n"`)),
		"data arrays":           recs(rec("1", `,"data":[1,2,3]`), rec("2", `,"data":"QUJD","data":[null,9]`), rec("3", `,"data":[4,5]`), rec("4", `,"data":[]`)),
		"invalid utf8":          recs(ok, rec("2", ""), rec("3", ",\"partitionKey\":\"\xff\xfe\""), rec("4", "")),
		"repeated Records":      []byte(`{"Records":[` + ok + `,` + rec("2", "") + `],"Records":[` + ok + `,` + ok + `]}`),
		"records after unknown": []byte(`{"x":[{},{},{}],"Records":[` + ok + `,` + rec("2", "") + `],"y":{"z":[{"a":1},{"b":2}]}}`),
		"not an object":         []byte(`[{"a":1},{"b":2},{"c":3}]`),
		"truncated":             recs(ok, rec("2", ""), rec("3", ""))[:200],
		"other shards":          recs(ok, strings.Replace(rec("2", ""), "shardId-000000000000", "shardId-000000000001", 1), rec("3", "")),
		"sequence not in id":    recs(ok, strings.Replace(rec("2", ""), ":2", ":9", 1), rec("3", "")),
	}
	for _, name := range validFixtures {
		in["fixture "+name] = readFixture(t, name)
	}
	for name, p := range hostileInputs() {
		if len(p) < 4096 {
			in["hostile "+name] = p
		}
	}
	in["generated"] = genEvent(12, 9, 5)
	return in
}

// TestSplitMatchesSequential decodes each input with a helper starting at
// every offset and compares with the sequential decoder: a wrong guess may
// cost time, never change the result.
func TestSplitMatchesSequential(t *testing.T) {
	for name, in := range splitInputs(t) {
		t.Run(name, func(t *testing.T) {
			for split := 1; split < len(in); split++ {
				checkSplit(t, in, split)
			}
			checkSplit(t, in, -1) // halves only
		})
	}
}

// TestSplitLarge compares both ways on large generated events at the split
// DecodeKinesis chooses and at random offsets, and checks that the chosen
// split is joined (the parallel path is taken, not just harmless).
func TestSplitLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{2, 3, 100, 2000} {
		in := genEvent(n, 50, uint64(n))
		split := splitPoint(in)
		if split < 0 {
			t.Fatalf("%d records: no split point", n)
		}
		checkSplit(t, in, split)
		d := decoder{buf: in}
		d.startAhead(split)
		if err := d.parse(); err != nil {
			t.Fatal(err)
		}
		d.abandon()
		if !d.joined {
			t.Errorf("%d records: the helper was not joined", n)
		}
		if len(d.recs) != n {
			t.Errorf("%d records: %d working records", n, len(d.recs))
		}
		for range 20 {
			checkSplit(t, in, 1+rng.IntN(len(in)-1))
		}
	}
}

// TestDecodeKinesisParallelAllocs pins the allocations of the two-goroutine
// path: constant in the number of records.
func TestDecodeKinesisParallelAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	// Result slice, data arena, two string buffers, *Kinesis; the parse
	// helper and its goroutine's closure; the second half's goroutine
	// closure, wait group and error (the working records come from a pool,
	// which may miss once after garbage collections: one more).
	const most = 11
	for _, n := range []int{1000, 10000} {
		payload := genEvent(n, 100, 3)
		split := splitPoint(payload)
		allocs := testing.AllocsPerRun(10, func() {
			if _, err := decode(payload, split, true, nil); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > most {
			t.Errorf("%d records: %v allocations per call, want at most %d", n, allocs, most)
		}
	}
}

// FuzzSplit compares the two-goroutine decoder with the sequential one at
// any split offset.
func FuzzSplit(f *testing.F) {
	for _, in := range splitInputs(f) {
		f.Add(in, uint32(len(in)/2))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint32) {
		if len(in) == 0 {
			return
		}
		checkSplit(t, in, int(split%uint32(len(in))))
	})
}

// TestDecodeKinesisWithReuse decodes payloads one after another with one
// Buffers, larger and smaller, with and without data and timestamps: each
// result equals a fresh decoding, whatever the buffers held before.
func TestDecodeKinesisWithReuse(t *testing.T) {
	sparse := []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1"}},{"kinesis":{"sequenceNumber":"2","data":null}},{"kinesis":{"sequenceNumber":"3","data":"","approximateArrivalTimestamp":null}}]}`)
	payloads := [][]byte{genEvent(300, 40, 1), sparse, genEvent(50, 200, 2), genEvent(2000, 10, 3), sparse, genEvent(10, 0, 4)}
	var buf Buffers
	for round := range 2 {
		for i, p := range payloads {
			want, wantErr := DecodeKinesis(p)
			got, gotErr := DecodeKinesisWith(p, &buf)
			if msg := sameResult(want, wantErr, got, gotErr); msg != "" {
				t.Fatalf("round %d, payload %d: %s", round, i, msg)
			}
		}
	}
	// A failed decoding leaves the buffers usable.
	if _, err := DecodeKinesisWith([]byte(`{"Records":[{"kinesis":{"sequenceNumber":"x"}}]}`), &buf); err == nil {
		t.Fatal("no error")
	}
	want, _ := DecodeKinesis(payloads[0])
	got, err := DecodeKinesisWith(payloads[0], &buf)
	if msg := sameResult(want, nil, got, err); msg != "" {
		t.Fatal(msg)
	}
}

// TestMaybeAggregates: the decoder notes a record whose data starts with
// the KPL magic wherever it is (first record, last, either half of a split
// decoding, data given as base64 or as an array of bytes), and only then.
func TestMaybeAggregates(t *testing.T) {
	magic := append(kpl.Magic[:], "rest"...)
	withData := func(n, at int, data []byte) []byte {
		var ev events.KinesisEvent
		if err := json.Unmarshal(genEvent(n, 20, uint64(n)), &ev); err != nil {
			t.Fatal(err)
		}
		if at >= 0 {
			ev.Records[at].Kinesis.Data = data
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range []struct {
		name string
		in   []byte
		want bool
	}{
		{"none", withData(2000, -1, nil), false},
		{"first", withData(2000, 0, magic), true},
		{"last", withData(2000, 1999, magic), true},
		{"second half", withData(2000, 1500, magic), true},
		{"magic alone", withData(2000, 700, kpl.Magic[:]), true},
		{"three bytes of it", withData(2000, 700, kpl.Magic[:3]), false},
		{"magic later in the data", withData(2000, 700, append([]byte("x"), magic...)), false},
		{"one small record", withData(1, 0, magic), true},
		{"data as bytes", []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","data":[243,137,154,194,1]}}]}`), true},
		{"data as other bytes", []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","data":[243,137,154]}}]}`), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, split := range []int{-1, splitPoint(tt.in)} {
				k, err := decode(tt.in, split, split > 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				if k.MaybeAggregates != tt.want || anyMagic(k.Records) != tt.want {
					t.Errorf("split at %d: MaybeAggregates %v (records say %v), want %v", split, k.MaybeAggregates, anyMagic(k.Records), tt.want)
				}
			}
		})
	}
}
