package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// FuzzDecodeKinesis checks DecodeKinesis against encoding/json into
// events.KinesisEvent on arbitrary input:
//
//   - it never panics;
//   - it rejects as malformed JSON exactly what encoding/json rejects as
//     malformed JSON;
//   - it accepts nothing encoding/json rejects;
//   - of what encoding/json accepts, it rejects exactly the inputs that
//     break one of its documented rules, and otherwise returns the same
//     values.
func FuzzDecodeKinesis(f *testing.F) {
	for _, name := range validFixtures {
		f.Add(readFixture(f, name))
	}
	for _, name := range []string{"truncated.json", "trailing-comma.json", "bad-escape.json", "unterminated-string.json", "trailing-garbage.json", "top-level-array.json"} {
		f.Add(readFixture(f, "malformed/"+name))
	}
	for _, in := range hostileInputs() {
		if len(in) < 4096 {
			f.Add(in)
		}
	}
	f.Add(genEvent(3, 5, 9))
	for _, s := range []string{
		`{"Records":[` + strings.Repeat("[", 200) + `]}`,
		`{"Records":[{"kinesis":{"sequenceNumber":"1","approximateArrivalTimestamp":1e308}}]}`,
		`{"Records":[{"kinesis":{"sequenceNumber":"1","approximateArrivalTimestamp":-9.3e18}}]}`,
		`{"Records":[{"kinesis":{"sequenceNumber":"1","approximateArrivalTimestamp":123456789012345678901234567890}}]}`,
		`{"Records":[{"kinesis":{"sequenceNumber":"1","partitionKey":"\ud800\udc00\udbff\udfff\ud800"}}]}`,
		`{"Records":[{"kinesis":{"sequenceNumber":"1","partitionKey":"\u0000"}}]}`,
		`{"Records":[{"kinesis":{"sequenceNumber":"1","data":"QU\/D\u0044\r\n"}}]}`,
		`{"Records":[{"kinesis":{"sequenceNumber":"1","data":[1,2,3],"data":[null,null,null,null],"data":"QQ==","data":[null,7]}}]}`,
		`{"Records":[{"kinesis":{"sequenceNumber":"1","data":"QUJD","data":[]}},{"kinesis":{"sequenceNumber":"2"},"kinesis":null}]}`,
		`{"Records":[{"kinesis":{"sequenceNumber":"1"},"eventSource":"aws:sqs","eventSource":"aws:kinesis"}]}`,
		`{"records":null,"Records":[{"kinesis":{"sequenceNumber":"1"}}]}`,
		`{"Records":[],"RECORDS":[]}`,
		`{"Records":[{"KINESIS":{"sequencenumber":"1"}}],"window":{"start":null}}`,
		"{\"Records\":[{\"kinesis\":{\"sequenceNumber\":\"1\",\"partitionKey\":\"\xff\xfe\xc0\x80\"}}]}",
		`null`, `[]`, `"Records"`, `{}`, ` {"Records" : [ ] } `, `{"Records":[]}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkOracle(t, in)
	})
}

// checkOracle checks DecodeKinesis(in) against json.Unmarshal into
// events.KinesisEvent, as described on FuzzDecodeKinesis.
func checkOracle(t *testing.T, in []byte) {
	t.Helper()
	got, err := DecodeKinesis(in)
	checkChunked(t, in, got, err)
	checkLazy(t, in, got, err)
	var ref events.KinesisEvent
	refErr := json.Unmarshal(in, &ref)

	var se *SyntaxError
	var jse *json.SyntaxError
	if ours, theirs := errors.As(err, &se), errors.As(refErr, &jse); ours != theirs {
		t.Fatalf("malformed JSON disagreement on %q: ours %v, encoding/json %v", in, err, refErr)
	}
	if (err == nil) != (got != nil) {
		t.Fatalf("DecodeKinesis returned %v and error %v", got, err)
	}
	if refErr != nil {
		if err == nil {
			t.Fatalf("DecodeKinesis accepts %q, which encoding/json rejects (%v)", in, refErr)
		}
		return
	}
	if reason := breaksRules(in, ref); reason != "" {
		if err == nil {
			t.Fatalf("DecodeKinesis accepts %q, which breaks a rule: %s", in, reason)
		}
		var re *RecordError
		if !errors.Is(err, ErrNotKinesis) && !errors.As(err, &re) {
			t.Fatalf("error %v for %q is neither a RecordError nor ErrNotKinesis", err, in)
		}
		return
	}
	if err != nil {
		t.Fatalf("DecodeKinesis rejects %q, which encoding/json accepts and which keeps the rules: %v", in, err)
	}
	if diff := cmp.Diff(fromReference(ref), got.Records); diff != "" {
		t.Fatalf("DecodeKinesis differs from encoding/json on %q (-want +got):\n%s", in, diff)
	}
	if want := anyMagic(got.Records); got.MaybeAggregates != want {
		t.Fatalf("DecodeKinesis(%q): MaybeAggregates %v, want %v", in, got.MaybeAggregates, want)
	}
}

// checkChunked checks that DecodeKinesisChunked, filling every 1, 2 or
// chunkRecords records, with and without Buffers, returns what
// DecodeKinesis returned for in (want, wantErr).
func checkChunked(t *testing.T, in []byte, want *Kinesis, wantErr error) {
	t.Helper()
	var buf Buffers
	for _, size := range []int{1, 2, chunkRecords} {
		for _, b := range []*Buffers{nil, &buf, &buf} {
			got, err := decodeKinesisChunked(in, b, size)
			if (err == nil) != (wantErr == nil) || err != nil && (err.Error() != wantErr.Error() || reflect.TypeOf(err) != reflect.TypeOf(wantErr) || errors.Is(err, ErrNotKinesis) != errors.Is(wantErr, ErrNotKinesis)) {
				t.Fatalf("chunks of %d of %q: error %v, DecodeKinesis %v", size, in, err, wantErr)
			}
			if err != nil {
				continue
			}
			if (got.Records == nil) != (want.Records == nil) || !sameRecords(want.Records, got.Records) || got.MaybeAggregates != want.MaybeAggregates {
				t.Fatalf("chunks of %d of %q differ from DecodeKinesis (-want +got):\n%s", size, in, cmp.Diff(want, got))
			}
		}
	}
}

// sameRecords reports whether a and b hold equal records, Data nil in
// both or in neither (cmp.Diff, which says the same, is slow on large
// events).
func sameRecords(a, b []KinesisRecord) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if (x.Data == nil) != (y.Data == nil) || !bytes.Equal(x.Data, y.Data) || !x.ArrivalTime.Equal(y.ArrivalTime) || x.ArrivalTime.Location() != y.ArrivalTime.Location() {
			return false
		}
		if x.PartitionKey != y.PartitionKey || x.SequenceNumber != y.SequenceNumber || x.EventID != y.EventID || x.ShardID != y.ShardID ||
			x.EventSourceARN != y.EventSourceARN || x.AWSRegion != y.AWSRegion || x.EventSource != y.EventSource {
			return false
		}
	}
	return true
}

// anyMagic reports whether the data of a record starts with the KPL magic.
func anyMagic(recs []KinesisRecord) bool {
	for _, r := range recs {
		if bytes.HasPrefix(r.Data, kpl.Magic[:]) {
			return true
		}
	}
	return false
}

// breaksRules reports which of DecodeKinesis's own rules an input that
// encoding/json decodes to ref breaks, or "" if none.
func breaksRules(in []byte, ref events.KinesisEvent) string {
	if ref.Records == nil {
		return "no Records array"
	}
	if recordsKeys(in) > 1 {
		return "Records key repeated"
	}
	for i, r := range ref.Records {
		seq := r.Kinesis.SequenceNumber
		if seq == "" || strings.Trim(seq, "0123456789") != "" {
			return "record " + strconv.Itoa(i) + ": sequence number missing or not digits"
		}
		if r.EventSource != "" && r.EventSource != "aws:kinesis" {
			return "eventSource is not aws:kinesis"
		}
	}
	return ""
}

// recordsKeys counts the top-level keys of the JSON object in that
// encoding/json would match to Records.
func recordsKeys(in []byte) int {
	dec := json.NewDecoder(bytes.NewReader(in))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		if k, _ := tok.(string); strings.EqualFold(k, "Records") {
			n++
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return n
		}
	}
	return n
}

// FuzzEpochTime checks epochTime against Time.Round, which it does
// itself for times within maxEpochSec of the epoch, to the nanosecond and
// location.
func FuzzEpochTime(f *testing.F) {
	for _, v := range []float64{0, 1, -1, 0.0005, -0.0005, 0.0015, -0.0015, 1716389453.7510002, 1767323045.7299998,
		1545084650.987, -1545084650.9995, 0.9995, -0.9995, 1 << 40, -(1 << 40), 1<<40 + 0.5, 1e300, -1e300, math.NaN(), math.Inf(1), math.Inf(-1)} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		sec := int64(v)
		want := time.Unix(sec, int64((v-float64(sec))*1e9)).Round(time.Millisecond).UTC()
		if got := epochTime(v); !got.Equal(want) || got.Location() != want.Location() || got != want {
			t.Fatalf("epochTime(%v) = %v, want %v", v, got, want)
		}
	})
}

// TestEpochTimeMatchesRound is FuzzEpochTime on random timestamps of the
// last and next centuries, on values just around half milliseconds, and on
// any magnitude up to 2^41.
func TestEpochTimeMatchesRound(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	check := func(v float64) {
		sec := int64(v)
		want := time.Unix(sec, int64((v-float64(sec))*1e9)).Round(time.Millisecond).UTC()
		if got := epochTime(v); got != want {
			t.Fatalf("epochTime(%v) = %v, want %v", v, got, want)
		}
	}
	for range 300_000 {
		check((rng.Float64()*2 - 1) * 4e9)
		half := float64(rng.Int64N(4e12)-2e12)/1e3 + 0.0005
		check(half)
		check(math.Nextafter(half, 0))
		check(math.Nextafter(half, math.Inf(1)))
		check((rng.Float64()*2 - 1) * math.Ldexp(1, rng.IntN(42)))
	}
}
