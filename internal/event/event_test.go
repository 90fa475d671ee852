package event

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/internal/jsonscan"
)

// validFixtures are the fixtures under testdata/ that both decoders accept.
var validFixtures = []string{
	"aws-sample.json",
	"real.json",
	"tumbling-window.json",
	"escaped.json",
	"seq-lengths.json",
	"quirks.json",
}

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fromReference converts what encoding/json decodes into
// events.KinesisEvent to what DecodeKinesis must return for the same input.
func fromReference(ev events.KinesisEvent) []KinesisRecord {
	out := make([]KinesisRecord, len(ev.Records))
	for i, r := range ev.Records {
		shard, _, found := strings.Cut(r.EventID, ":")
		if !found {
			shard = ""
		}
		out[i] = KinesisRecord{
			Data:           r.Kinesis.Data,
			PartitionKey:   r.Kinesis.PartitionKey,
			SequenceNumber: r.Kinesis.SequenceNumber,
			ArrivalTime:    r.Kinesis.ApproximateArrivalTimestamp.Time.Round(time.Millisecond).UTC(),
			EventID:        r.EventID,
			ShardID:        shard,
			EventSourceARN: r.EventSourceArn,
			AWSRegion:      r.AwsRegion,
			EventSource:    r.EventSource,
		}
	}
	return out
}

// genEvent builds an event of n records with m random data bytes each the
// way a producer of test events would: encoding/json on events.KinesisEvent.
func genEvent(n, m int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 42))
	base := time.Date(2024, 5, 20, 10, 13, 20, 0, time.UTC)
	ev := events.KinesisEvent{Records: make([]events.KinesisEventRecord, n)}
	for i := range ev.Records {
		data := make([]byte, m)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		seq := fmt.Sprintf("4964091282354932645718923817234612673564%016d", rng.Uint64()%1e16) // 56 digits
		shard := fmt.Sprintf("shardId-%012d", i%4)
		ev.Records[i] = events.KinesisEventRecord{
			AwsRegion:         "us-east-2",
			EventID:           shard + ":" + seq,
			EventName:         "aws:kinesis:record",
			EventSource:       "aws:kinesis",
			EventSourceArn:    "arn:aws:kinesis:us-east-2:123456789012:stream/lambda-stream",
			EventVersion:      "1.0",
			InvokeIdentityArn: "arn:aws:iam::123456789012:role/lambda-role",
			Kinesis: events.KinesisRecord{
				// Kinesis timestamps have millisecond precision.
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: base.Add(time.Duration(rng.Int64N(1e9)) * time.Millisecond)},
				Data:                        data,
				EncryptionType:              "NONE",
				PartitionKey:                fmt.Sprintf("partition-%d", rng.IntN(64)),
				SequenceNumber:              seq,
				KinesisSchemaVersion:        "1.0",
			},
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err) // cannot happen: the event holds only strings, bytes and times
	}
	return b
}

// checkAgainstReference decodes payload with both decoders and reports any
// difference; both must succeed.
func checkAgainstReference(t *testing.T, payload []byte) {
	t.Helper()
	var ref events.KinesisEvent
	if err := json.Unmarshal(payload, &ref); err != nil {
		t.Fatalf("encoding/json rejects the input: %v", err)
	}
	got, err := DecodeKinesis(payload)
	if err != nil {
		t.Fatalf("DecodeKinesis: %v", err)
	}
	if diff := cmp.Diff(fromReference(ref), got.Records); diff != "" {
		t.Errorf("DecodeKinesis differs from encoding/json (-want +got):\n%s", diff)
	}
}

func TestDecodeKinesisMatchesReference(t *testing.T) {
	for _, name := range validFixtures {
		t.Run(name, func(t *testing.T) {
			checkAgainstReference(t, readFixture(t, name))
		})
	}
	for _, size := range []struct{ n, m int }{{0, 0}, {1, 0}, {1, 1}, {3, 2}, {7, 3}, {100, 512}, {1000, 100}, {17, 4096}} {
		t.Run(fmt.Sprintf("generated/%dx%dB", size.n, size.m), func(t *testing.T) {
			checkAgainstReference(t, genEvent(size.n, size.m, uint64(size.n*31+size.m)))
		})
	}
}

func TestDecodeKinesisAWSSample(t *testing.T) {
	got, err := DecodeKinesis(readFixture(t, "aws-sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	const arn = "arn:aws:kinesis:us-east-2:123456789012:stream/lambda-stream"
	want := []KinesisRecord{{
		Data:           []byte("Hello, this is a test."),
		PartitionKey:   "1",
		SequenceNumber: "49590338271490256608559692538361571095921575989136588898",
		ArrivalTime:    time.Date(2018, 12, 17, 22, 10, 50, 987e6, time.UTC),
		EventID:        "shardId-000000000006:49590338271490256608559692538361571095921575989136588898",
		ShardID:        "shardId-000000000006",
		EventSourceARN: arn,
		AWSRegion:      "us-east-2",
		EventSource:    "aws:kinesis",
	}, {
		Data:           []byte("This is only a test."),
		PartitionKey:   "1",
		SequenceNumber: "49590338271490256608559692538362780021741190618311294050",
		ArrivalTime:    time.Date(2018, 12, 17, 22, 11, 51, 166e6, time.UTC),
		EventID:        "shardId-000000000006:49590338271490256608559692538362780021741190618311294050",
		ShardID:        "shardId-000000000006",
		EventSourceARN: arn,
		AWSRegion:      "us-east-2",
		EventSource:    "aws:kinesis",
	}}
	if diff := cmp.Diff(want, got.Records); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	for i, r := range got.Records {
		if r.ArrivalTime.Location() != time.UTC {
			t.Errorf("record %d: ArrivalTime location %v, want UTC", i, r.ArrivalTime.Location())
		}
		if cap(r.Data) != len(r.Data) {
			t.Errorf("record %d: cap(Data) = %d, want len(Data) = %d", i, cap(r.Data), len(r.Data))
		}
	}
}

// TestDecodeKinesisQuirks pins the encoding/json behaviours DecodeKinesis
// reproduces, with values written out by hand rather than taken from the
// reference decoder.
func TestDecodeKinesisQuirks(t *testing.T) {
	got, err := DecodeKinesis(readFixture(t, "quirks.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []KinesisRecord{{
		// Keys in any letter case; data as an array of byte values, a null
		// element being 0; an exponent timestamp; a null string is "".
		Data: []byte("hi\x00!"), PartitionKey: "pk", SequenceNumber: "100",
		ArrivalTime: time.Unix(17e8, 0).UTC(),
		EventID:     "shardId-000000000002:100", ShardID: "shardId-000000000002",
		EventSourceARN: "arn:1", EventSource: "aws:kinesis",
	}, {
		// A repeated kinesis object merges into the first; a later null
		// keeps the earlier string; a null element keeps the byte decoded
		// from "QUJD"; a null timestamp is the Unix epoch.
		Data: []byte("ABCD"), PartitionKey: "second", SequenceNumber: "200",
		ArrivalTime: time.Unix(0, 0).UTC(),
		EventID:     "shardId-000000000002:200", ShardID: "shardId-000000000002",
	}, {
		// "kinesis": null leaves the first kinesis object in place; data
		// null is nil; an integer timestamp.
		SequenceNumber: "300", ArrivalTime: time.Unix(1700000000, 0).UTC(), AWSRegion: "us-west-2",
	}, {
		// A shorter array truncates; nulls beyond it bring the old bytes
		// back, then zeros; a negative timestamp.
		Data: []byte{9, 2, 3, 0}, SequenceNumber: "400",
		ArrivalTime: time.Unix(-2, 750e6).UTC(), EventSourceARN: "arn:1",
	}, {
		// "" and [] are empty, not nil; the timestamp rounds down.
		Data: []byte{}, SequenceNumber: "500", ArrivalTime: time.Unix(1700000000, 0).UTC(),
	}, {
		Data: []byte{}, SequenceNumber: "600", ArrivalTime: time.Unix(1700000000, 0).UTC(),
	}}
	if diff := cmp.Diff(want, got.Records); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestDecodeKinesisEscapes(t *testing.T) {
	got, err := DecodeKinesis(readFixture(t, "escaped.json"))
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := got.Records[0], got.Records[1]
	checks := []struct{ name, got, want string }{
		{"record 0 partition key", r0.PartitionKey, "quote \" backslash \\ slash / tab \t nl \n uni \u00e9 pair \U0001F600 nul \x00"},
		{"record 0 sequence number", r0.SequenceNumber, "49590"},
		{"record 0 data (base64 with \\/ and \\u escapes)", string(r0.Data), string(mustBase64(t, "SGVs/bG8+//="))},
		{"record 0 event source", r0.EventSource, "aws:kinesis"},
		{"record 0 shard", r0.ShardID, "shardId-000000000006"},
		{"record 0 ARN", r0.EventSourceARN, "arn:aws:kinesis:us-east-2:123456789012:stream/lambda-stream"},
		{"record 1 partition key", r1.PartitionKey, "lone high \uFFFD then text, lone low \uFFFD, reversed \uFFFD\uFFFD, high+BMP \uFFFDA"},
		{"record 1 data (CR and LF ignored)", string(r1.Data), "ABCDEF"},
		{"record 1 event source (escaped key)", r1.EventSource, "aws:kinesis"},
		{"record 1 region", r1.AWSRegion, "日本"},
		{"record 1 ARN", r1.EventSourceARN, "arn:aws"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func mustBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeKinesisInvalidUTF8 checks that raw invalid UTF-8 in strings and
// keys is handled as encoding/json handles it (U+FFFD per bad byte).
func TestDecodeKinesisInvalidUTF8(t *testing.T) {
	for _, in := range []string{
		"{\"Records\":[{\"kinesis\":{\"sequenceNumber\":\"1\",\"partitionKey\":\"a\xffb\xc3\"}}]}",
		"{\"Records\":[{\"kinesis\":{\"sequenceNumber\":\"1\",\"partitionKey\":\"\xed\xa0\x80 surrogate, \xc0\xaf overlong\"}}]}",
		"{\"Records\":[{\"kinesis\":{\"sequenceNumber\":\"1\",\"partitionKey\":\"ok \xe2\x98\x83\",\"data\\u00ff\":\"x\"},\"awsRegion\xff\":1}]}",
		"{\"Records\":[{\"kinesis\":{\"sequenceNumber\":\"1\",\"partitionKey\":\"\\u00e9\xff\"}}]}",
	} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			checkAgainstReference(t, []byte(in))
		})
	}
}

// TestDecodeKinesisKeyFolding checks case-insensitive key matching,
// including the two non-ASCII runes that fold to ASCII letters.
func TestDecodeKinesisKeyFolding(t *testing.T) {
	in := "{\"RECORDS\":[{\"\u212Ainesis\":{\"\u017FequenceNumber\":\"7\",\"DATA\":\"QQ==\"},\"EVENTsource\":\"aws:kinesis\",\"eventSource\u212A\":5}]}"
	checkAgainstReference(t, []byte(in))
	got, err := DecodeKinesis([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Records[0]; r.SequenceNumber != "7" || string(r.Data) != "A" || r.EventSource != "aws:kinesis" {
		t.Errorf("got %+v, want sequence number 7, data A, event source aws:kinesis", r)
	}
}

func TestDecodeKinesisTimestamps(t *testing.T) {
	tests := []struct {
		num  string
		want time.Time
	}{
		{"1545084650.987", time.Date(2018, 12, 17, 22, 10, 50, 987e6, time.UTC)},
		{"1545084650.9874", time.Date(2018, 12, 17, 22, 10, 50, 987e6, time.UTC)},
		{"1545084650.9876", time.Date(2018, 12, 17, 22, 10, 50, 988e6, time.UTC)},
		{"1545084650.9999", time.Date(2018, 12, 17, 22, 10, 51, 0, time.UTC)},
		{"1545084650", time.Date(2018, 12, 17, 22, 10, 50, 0, time.UTC)},
		{"1.545084650987e9", time.Date(2018, 12, 17, 22, 10, 50, 987e6, time.UTC)},
		{"154508465098.7E-2", time.Date(2018, 12, 17, 22, 10, 50, 987e6, time.UTC)},
		{"1545084650.98700000000000000001", time.Date(2018, 12, 17, 22, 10, 50, 987e6, time.UTC)},
		{"0", time.Unix(0, 0).UTC()},
		{"-0", time.Unix(0, 0).UTC()},
		{"0.0005", time.Unix(0, 1e6).UTC()},
		{"-1.5", time.Unix(-2, 5e8).UTC()},
		{"1e-400", time.Unix(0, 0).UTC()},
	}
	for _, tt := range tests {
		t.Run(tt.num, func(t *testing.T) {
			in := []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","approximateArrivalTimestamp":` + tt.num + `}}]}`)
			checkAgainstReference(t, in)
			got, err := DecodeKinesis(in)
			if err != nil {
				t.Fatal(err)
			}
			if at := got.Records[0].ArrivalTime; !at.Equal(tt.want) || at.Location() != time.UTC {
				t.Errorf("ArrivalTime = %v, want %v", at, tt.want)
			}
		})
	}
	t.Run("absent", func(t *testing.T) {
		got, err := DecodeKinesis([]byte(`{"Records":[{"kinesis":{"sequenceNumber":"1"}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if at := got.Records[0].ArrivalTime; !at.IsZero() {
			t.Errorf("ArrivalTime = %v, want the zero time", at)
		}
	})
}

func TestDecodeKinesisNesting(t *testing.T) {
	// The top-level object is depth 1, so an unknown value nested n deep
	// inside it reaches depth n+1; encoding/json allows up to 10,000.
	nested := func(n int) []byte {
		return []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1"}}],"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	checkAgainstReference(t, nested(jsonscan.MaxDepth-1))
	checkAgainstReference(t, []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","x":`+strings.Repeat(`{"a":`, jsonscan.MaxDepth-4)+"1"+strings.Repeat("}", jsonscan.MaxDepth-4)+`}}]}`))
	_, err := DecodeKinesis(nested(jsonscan.MaxDepth))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Msg != "nesting depth exceeds 10000" {
		t.Errorf("depth 10001: err = %v, want nesting depth SyntaxError", err)
	}
	if err := json.Unmarshal(nested(jsonscan.MaxDepth), new(events.KinesisEvent)); err == nil {
		t.Error("encoding/json accepts depth 10001; the limits no longer agree")
	}
}

func TestDecodeKinesisDoesNotRetainPayload(t *testing.T) {
	payload := readFixture(t, "real.json")
	got, err := DecodeKinesis(payload)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%+v", got.Records)
	for i := range payload {
		payload[i] = 'X'
	}
	if after := fmt.Sprintf("%+v", got.Records); after != want {
		t.Errorf("records changed when the payload was overwritten:\nbefore %s\nafter  %s", want, after)
	}
}

func TestDecodeKinesisEmptyRecords(t *testing.T) {
	got, err := DecodeKinesis([]byte(` { "Records" : [ ] } `))
	if err != nil {
		t.Fatal(err)
	}
	if got.Records == nil || len(got.Records) != 0 {
		t.Errorf("Records = %#v, want empty and non-nil", got.Records)
	}
}

// errCase is one row of TestDecodeKinesisErrors.
type errCase struct {
	name       string
	in         string
	want       string       // the exact error text
	syntax     *SyntaxError // when non-nil, errors.As must yield this
	record     *RecordError // when non-nil, errors.As must yield these exported fields
	notKinesis bool         // errors.Is(err, ErrNotKinesis)
	refAccepts bool         // encoding/json accepts the input: a rule of our own rejects it
	_          struct{}     // keep literals keyed
}

func TestDecodeKinesisErrors(t *testing.T) {
	const ok1 = `{"kinesis":{"sequenceNumber":"1"}}`
	fixture := func(name string) string { return string(readFixture(t, "malformed/"+name)) }
	tests := []errCase{
		// Malformed JSON.
		{name: "empty", in: "", want: "event: invalid JSON at offset 0: unexpected end of input",
			syntax: &SyntaxError{0, "unexpected end of input"}},
		{name: "truncated", in: fixture("truncated.json"), want: "event: invalid JSON at offset 58: unexpected end of input",
			syntax: &SyntaxError{58, "unexpected end of input"}},
		{name: "trailing comma in object", in: fixture("trailing-comma.json"), want: "event: invalid JSON at offset 60: expected string after ',' in object",
			syntax: &SyntaxError{60, "expected string after ',' in object"}},
		{name: "trailing comma in array", in: `{"Records":[` + ok1 + `,]}`, want: "event: invalid JSON at offset 47: expected value, found ']'",
			syntax: &SyntaxError{47, "expected value, found ']'"}},
		{name: "bad escape", in: fixture("bad-escape.json"), want: `event: invalid JSON at offset 62: invalid escape sequence \q in string`,
			syntax: &SyntaxError{62, `invalid escape sequence \q in string`}},
		{name: "bad unicode escape", in: `{"Records":[],"x":"\u12G4"}`, want: `event: invalid JSON at offset 23: invalid \u escape in string: 'G' is not a hex digit`,
			syntax: &SyntaxError{23, `invalid \u escape in string: 'G' is not a hex digit`}},
		{name: "unterminated string", in: fixture("unterminated-string.json"), want: "event: invalid JSON at offset 68: unexpected end of input",
			syntax: &SyntaxError{68, "unexpected end of input"}},
		{name: "control character in string", in: "{\"Records\":[],\"x\":\"a\nb\"}", want: "event: invalid JSON at offset 20: invalid control character 0x0a in string",
			syntax: &SyntaxError{20, "invalid control character 0x0a in string"}},
		{name: "trailing garbage", in: fixture("trailing-garbage.json"), want: "event: invalid JSON at offset 49: unexpected 'x' after top-level value",
			syntax: &SyntaxError{49, "unexpected 'x' after top-level value"}},
		{name: "second top-level value", in: `{"Records":[]}{}`, want: "event: invalid JSON at offset 14: unexpected '{' after top-level value",
			syntax: &SyntaxError{14, "unexpected '{' after top-level value"}},
		{name: "missing colon", in: `{"Records" []}`, want: "event: invalid JSON at offset 11: expected ':' after object key",
			syntax: &SyntaxError{11, "expected ':' after object key"}},
		{name: "missing comma", in: `{"Records":[] "x":1}`, want: "event: invalid JSON at offset 14: expected ',' or '}' after object value",
			syntax: &SyntaxError{14, "expected ',' or '}' after object value"}},
		{name: "leading zero", in: `{"Records":[],"x":01}`, want: "event: invalid JSON at offset 19: expected ',' or '}' after object value",
			syntax: &SyntaxError{19, "expected ',' or '}' after object value"}},
		{name: "bad number", in: `{"Records":[],"x":1.}`, want: "event: invalid JSON at offset 20: expected digit after decimal point in number",
			syntax: &SyntaxError{20, "expected digit after decimal point in number"}},
		{name: "bad literal", in: `{"Records":[],"x":nul}`, want: "event: invalid JSON at offset 21: invalid literal, expected null",
			syntax: &SyntaxError{21, "invalid literal, expected null"}},
		{name: "non-string key", in: `{"Records":[],1:2}`, want: "event: invalid JSON at offset 14: expected string after ',' in object",
			syntax: &SyntaxError{14, "expected string after ',' in object"}},
		{name: "too deep", in: strings.Repeat("[", jsonscan.MaxDepth+1), want: "event: invalid JSON at offset 10000: nesting depth exceeds 10000",
			syntax: &SyntaxError{10000, "nesting depth exceeds 10000"}},
		{name: "syntax error wins over record error", in: `{"Records":[{"kinesis":{}}],"x":tru}`, want: "event: invalid JSON at offset 35: invalid literal, expected true",
			syntax: &SyntaxError{35, "invalid literal, expected true"}},

		// Not a Kinesis event.
		{name: "wrong top-level type", in: fixture("top-level-array.json"), want: "event: not a Kinesis event: top-level value is an array, not an object",
			notKinesis: true},
		{name: "top-level null", in: `null`, want: "event: not a Kinesis event: top-level value is null, not an object",
			notKinesis: true, refAccepts: true},
		{name: "no Records", in: `{"records ":[]}`, want: "event: not a Kinesis event: no Records array",
			notKinesis: true, refAccepts: true},
		{name: "Records null", in: `{"Records":null}`, want: "event: not a Kinesis event: Records is null",
			notKinesis: true, refAccepts: true},
		{name: "Records object", in: `{"Records":{}}`, want: "event: not a Kinesis event: Records is an object, not an array",
			notKinesis: true},
		{name: "Records repeated", in: `{"Records":[` + ok1 + `],"records":[` + ok1 + `]}`, want: "event: not a Kinesis event: Records key repeated at offset 58",
			notKinesis: true, refAccepts: true},
		{name: "record is null", in: `{"Records":[` + ok1 + `,null]}`, want: "event: record 1: not a Kinesis record (null)",
			record: &RecordError{Index: 1, Msg: "not a Kinesis record (null)"}, notKinesis: true, refAccepts: true},
		{name: "record is a string", in: `{"Records":["x"]}`, want: "event: record 0: not a Kinesis record (a string, not an object)",
			record: &RecordError{Index: 0, Msg: "not a Kinesis record (a string, not an object)"}, notKinesis: true},
		{name: "no kinesis object", in: `{"Records":[{"eventSource":"aws:kinesis"}]}`, want: "event: record 0: not a Kinesis record (no kinesis object)",
			record: &RecordError{Index: 0, Field: "kinesis", Msg: "not a Kinesis record (no kinesis object)"}, notKinesis: true, refAccepts: true},
		{name: "SQS record", in: `{"Records":[` + ok1 + `,` + ok1 + `,{"kinesis":{"sequenceNumber":"3"},"eventSource":"aws:sqs"}]}`,
			want:   `event: record 2: not a Kinesis record (eventSource "aws:sqs")`,
			record: &RecordError{Index: 2, Field: "eventSource", Msg: `not a Kinesis record (eventSource "aws:sqs")`}, notKinesis: true, refAccepts: true},

		// Bad records.
		{name: "sequence number missing", in: `{"Records":[` + ok1 + `,` + ok1 + `,` + ok1 + `,{"kinesis":{"partitionKey":"a"}}]}`,
			want:   "event: record 3: kinesis.sequenceNumber missing",
			record: &RecordError{Index: 3, Field: "kinesis.sequenceNumber", Msg: "kinesis.sequenceNumber missing"}, refAccepts: true},
		{name: "sequence number empty", in: `{"Records":[{"kinesis":{"sequenceNumber":""}}]}`, want: "event: record 0: kinesis.sequenceNumber missing",
			record: &RecordError{Index: 0, Field: "kinesis.sequenceNumber", Msg: "kinesis.sequenceNumber missing"}, refAccepts: true},
		{name: "sequence number null", in: `{"Records":[{"kinesis":{"sequenceNumber":null}}]}`, want: "event: record 0: kinesis.sequenceNumber missing",
			record: &RecordError{Index: 0, Field: "kinesis.sequenceNumber", Msg: "kinesis.sequenceNumber missing"}, refAccepts: true},
		{name: "sequence number not digits", in: `{"Records":[{"kinesis":{"sequenceNumber":"12a"}}]}`, want: `event: record 0: kinesis.sequenceNumber "12a" is not a decimal number`,
			record: &RecordError{Index: 0, Field: "kinesis.sequenceNumber", Msg: `kinesis.sequenceNumber "12a" is not a decimal number`}, refAccepts: true},
		{name: "sequence number a number", in: `{"Records":[{"kinesis":{"sequenceNumber":12}}]}`, want: "event: record 0: kinesis.sequenceNumber: expected a string, found a number",
			record: &RecordError{Index: 0, Field: "kinesis.sequenceNumber", Msg: "kinesis.sequenceNumber: expected a string, found a number"}},
		{name: "bad base64", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","data":"QUJD$A=="}}]}`, want: "event: record 0: kinesis.data: illegal base64 data at input byte 4",
			record: &RecordError{Index: 0, Field: "kinesis.data", Msg: "kinesis.data: illegal base64 data at input byte 4"}},
		{name: "unpadded base64", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","data":"QQ"}}]}`, want: "event: record 0: kinesis.data: illegal base64 data at input byte 0",
			record: &RecordError{Index: 0, Field: "kinesis.data", Msg: "kinesis.data: illegal base64 data at input byte 0"}},
		{name: "bad base64 before a later record error", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","data":"!!!!"}},{"kinesis":{}}]}`,
			want:   "event: record 0: kinesis.data: illegal base64 data at input byte 0",
			record: &RecordError{Index: 0, Field: "kinesis.data", Msg: "kinesis.data: illegal base64 data at input byte 0"}},
		{name: "bad base64 overwritten", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","data":"!!!!","data":"QUJD"}}]}`,
			want:   "event: record 0: kinesis.data: illegal base64 data at input byte 0",
			record: &RecordError{Index: 0, Field: "kinesis.data", Msg: "kinesis.data: illegal base64 data at input byte 0"}},
		{name: "data a number", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","data":5}}]}`, want: "event: record 0: kinesis.data: expected a base64 string, found a number",
			record: &RecordError{Index: 0, Field: "kinesis.data", Msg: "kinesis.data: expected a base64 string, found a number"}},
		{name: "data byte out of range", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","data":[1,256]}}]}`, want: "event: record 0: kinesis.data: array element 1: 256 is not a byte value",
			record: &RecordError{Index: 0, Field: "kinesis.data", Msg: "kinesis.data: array element 1: 256 is not a byte value"}},
		{name: "data element a string", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","data":[1,"2"]}}]}`, want: "event: record 0: kinesis.data: array element 1 is a string, not a byte value",
			record: &RecordError{Index: 0, Field: "kinesis.data", Msg: "kinesis.data: array element 1 is a string, not a byte value"}},
		{name: "timestamp a string", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","approximateArrivalTimestamp":"1"}}]}`,
			want:   "event: record 0: kinesis.approximateArrivalTimestamp: expected a number, found a string",
			record: &RecordError{Index: 0, Field: "kinesis.approximateArrivalTimestamp", Msg: "kinesis.approximateArrivalTimestamp: expected a number, found a string"}},
		{name: "timestamp out of range", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","approximateArrivalTimestamp":1e400}}]}`,
			want:   "event: record 0: kinesis.approximateArrivalTimestamp: number 1e400 is out of range",
			record: &RecordError{Index: 0, Field: "kinesis.approximateArrivalTimestamp", Msg: "kinesis.approximateArrivalTimestamp: number 1e400 is out of range"}},
		{name: "kinesis an array", in: `{"Records":[{"kinesis":[]}]}`, want: "event: record 0: kinesis: expected an object, found an array",
			record: &RecordError{Index: 0, Field: "kinesis", Msg: "kinesis: expected an object, found an array"}},
		{name: "ignored string field of wrong type", in: `{"Records":[{"kinesis":{"sequenceNumber":"1","encryptionType":true},"eventName":1}]}`,
			want:   "event: record 0: kinesis.encryptionType: expected a string, found a boolean",
			record: &RecordError{Index: 0, Field: "kinesis.encryptionType", Msg: "kinesis.encryptionType: expected a string, found a boolean"}},
		{name: "region of wrong type", in: `{"Records":[{"kinesis":{"sequenceNumber":"1"},"awsRegion":{}}]}`,
			want:   "event: record 0: awsRegion: expected a string, found an object",
			record: &RecordError{Index: 0, Field: "awsRegion", Msg: "awsRegion: expected a string, found an object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeKinesis([]byte(tt.in))
			if err == nil {
				t.Fatalf("DecodeKinesis = %+v, want error %q", got, tt.want)
			}
			if got != nil {
				t.Errorf("DecodeKinesis returned %+v with the error, want nil", got)
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q\n         want %q", err, tt.want)
			}
			var se *SyntaxError
			if isSyntax := errors.As(err, &se); isSyntax != (tt.syntax != nil) {
				t.Errorf("errors.As(*SyntaxError) = %v, want %v", isSyntax, tt.syntax != nil)
			} else if isSyntax && *se != *tt.syntax {
				t.Errorf("SyntaxError = %+v, want %+v", *se, *tt.syntax)
			}
			var re *RecordError
			if isRecord := errors.As(err, &re); isRecord != (tt.record != nil) {
				t.Errorf("errors.As(*RecordError) = %v, want %v", isRecord, tt.record != nil)
			} else if isRecord && (re.Index != tt.record.Index || re.Field != tt.record.Field || re.Msg != tt.record.Msg) {
				t.Errorf("RecordError = {%d %q %q}, want {%d %q %q}", re.Index, re.Field, re.Msg, tt.record.Index, tt.record.Field, tt.record.Msg)
			}
			if is := errors.Is(err, ErrNotKinesis); is != tt.notKinesis {
				t.Errorf("errors.Is(err, ErrNotKinesis) = %v, want %v", is, tt.notKinesis)
			}
			refErr := json.Unmarshal([]byte(tt.in), new(events.KinesisEvent))
			if refAccepts := refErr == nil; refAccepts != tt.refAccepts {
				t.Errorf("encoding/json accepts = %v (err %v), want %v", refAccepts, refErr, tt.refAccepts)
			}
			var jse *json.SyntaxError
			if refSyntax := errors.As(refErr, &jse); refSyntax != (tt.syntax != nil) {
				t.Errorf("encoding/json syntax error = %v (%v), ours %v", refSyntax, refErr, tt.syntax != nil)
			}
		})
	}
}

// TestDecodeKinesisAllocs pins the allocation count: constant in the number
// of records.
func TestDecodeKinesisAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	const want = 4 // result slice, data arena, string buffer, *Kinesis (the working records come from a pool)
	for _, n := range []int{1, 10, 1000} {
		payload := genEvent(n, 64, 7)
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := DecodeKinesis(payload); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != want {
			t.Errorf("%d records: %v allocations per call, want %d", n, allocs, want)
		}
	}
}

// hostileInputs are payloads built to make a decoder allocate or recurse a
// lot; TestDecodeKinesisBoundedAllocation and the fuzz seeds use them.
func hostileInputs() map[string][]byte {
	const n = 20000
	rep := func(s string, k int) string { return strings.Repeat(s, k) }
	list := func(elem string, k int) string { return strings.TrimSuffix(rep(elem+",", k), ",") }
	return map[string][]byte{
		"deep arrays":             []byte(`{"Records":[],"x":` + rep("[", jsonscan.MaxDepth-1) + rep("]", jsonscan.MaxDepth-1) + `}`),
		"too deep":                []byte(rep("[", 3*jsonscan.MaxDepth)),
		"deep objects unclosed":   []byte(`{"Records":[` + rep(`{"a":`, 3*jsonscan.MaxDepth)),
		"empty records":           []byte(`{"Records":[` + list(`{}`, n) + `]}`),
		"null records":            []byte(`{"Records":[` + list(`null`, n) + `]}`),
		"minimal records":         []byte(`{"Records":[` + list(`{"kinesis":{"sequenceNumber":"1"}}`, n) + `]}`),
		"braces in strings":       []byte(`{"Records":[` + list(`{"kinesis":{"sequenceNumber":"1"}}`, 10) + `],"x":"` + rep("{", 50*n) + `"}`),
		"escaped strings":         []byte(`{"Records":[` + list(`{"kinesis":{"sequenceNumber":"\u0031","partitionKey":"`+rep(`\u00e9`, 20)+`"}}`, n/10) + `]}`),
		"invalid UTF-8 strings":   []byte(`{"Records":[` + list(`{"kinesis":{"sequenceNumber":"1","partitionKey":"`+rep("\xff", 200)+`"}}`, n/10) + `]}`),
		"escaped keys":            []byte(`{"Records":[` + list(`{"\u006binesis":{"\u0073equenceNumber":"1"},"`+rep(`\u0041`, 100)+`":1}`, n/10) + `]}`),
		"long unknown keys":       []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1",` + list(`"`+rep("k", 200)+`":1`, n/10) + `}}]}`),
		"data arrays":             []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","data":[` + list("255", n) + `]}}]}`),
		"repeated data arrays":    []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","data":[` + list("255", n) + `],` + list(`"data":[null]`, n/10) + `}}]}`),
		"repeated data":           []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1",` + list(`"data":"`+rep("QUJD", 100)+`"`, n/10) + `}}]}`),
		"escaped base64":          []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","data":"` + rep(`\u0051\/\u0042\u0043`, n) + `"}}]}`),
		"huge numbers":            []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","approximateArrivalTimestamp":1` + rep("0", n) + `}}],"x":` + rep("9", n) + `e999999999}`),
		"huge exponent":           []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","approximateArrivalTimestamp":1e99999999999999999999}}]}`),
		"lone surrogates":         []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","partitionKey":"` + rep(`\ud800`, n) + `"}}]}`),
		"NUL escapes":             []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","partitionKey":"` + rep(`\u0000`, n) + `"}}]}`),
		"giant declared nothing":  []byte(`{"Records":[{"kinesis":{"sequenceNumber":"99999999999999999999999999999999999999999999999999999999","data":"`),
		"many records, big data":  genEvent(200, 4096, 1),
		"long sequence numbers":   []byte(`{"Records":[` + list(`{"kinesis":{"sequenceNumber":"`+rep("9", 1000)+`"}}`, 100) + `]}`),
		"unterminated big string": []byte(`{"Records":[],"x":"` + rep("a", 10*n)),
	}
}

// TestDecodeKinesisBoundedAllocation checks that no input makes DecodeKinesis
// allocate more than a constant factor of its size.
func TestDecodeKinesisBoundedAllocation(t *testing.T) {
	// The worst case is a stream of minimal valid records,
	// {"kinesis":{"sequenceNumber":"1"}}, 35 bytes each: 80 bytes of working
	// state plus a 160-byte KinesisRecord, about 6.9 per input byte.
	const (
		perByte = 10       // bytes allocated per input byte
		slack   = 64 << 10 // fixed overhead and unrelated runtime allocations
	)
	if raceEnabled {
		// The race detector drops a quarter of sync.Pool's puts, so the
		// decoder's pooled buffers count again at random (seen as 5.3–7.1
		// MB instead of 3.2); make test runs this without it.
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	// No collection between the warm-up and the measure: one would empty
	// the decoder's pools in the same way.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// One P: a sync.Pool keeps the buffer last put in its P's private
	// slot, which a Get on another P cannot take, so a goroutine moved to
	// another P between the warm-up and the measure allocated the decoder's
	// buffers again (on a loaded machine: 7.6 per byte in 5 of 400 runs,
	// 10.2 in one CI run, against 4.6).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for name, in := range hostileInputs() {
		t.Run(name, func(t *testing.T) {
			DecodeKinesis(in) // warm up lazily initialised runtime state
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			DecodeKinesis(in)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			if limit := uint64(perByte*len(in) + slack); alloc > limit {
				t.Errorf("allocated %d bytes for %d input bytes, limit %d", alloc, len(in), limit)
			}
			t.Logf("%s: %d input bytes, %d allocated (%.2f per byte)", name, len(in), alloc, float64(alloc)/float64(len(in)))
		})
	}
}

// TestEstimateRecords checks the pre-sizing of the working slice: exact for
// Lambda-shaped events and capped for hostile ones.
func TestEstimateRecords(t *testing.T) {
	if got := estimateRecords(genEvent(300, 10, 3)); got != 300 {
		t.Errorf("300 records: estimate %d", got)
	}
	if got, limit := estimateRecords(bytes.Repeat([]byte("{"), 3400)), 3400/minRecordLen; got != limit {
		t.Errorf("all braces: estimate %d, want the cap %d", got, limit)
	}
	if got := estimateRecords([]byte(`{"Records":[]}`)); got != 0 {
		t.Errorf("no records: estimate %d, want 0", got)
	}
}
