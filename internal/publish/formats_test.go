package publish

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/envelope"
)

var (
	firstArrival = time.Date(2024, 5, 1, 12, 0, 0, 123_456_789, time.UTC)
	deadAt       = time.Date(2024, 5, 1, 14, 0, 5, 0, time.FixedZone("CEST", 2*3600))
)

func sampleDeadLetter() DeadLetter {
	return DeadLetter{
		Reason:          "handler: bad input\nline two\r\nthree",
		SourceStreamARN: testARN,
		ShardID:         "shardId-000000000001",
		SequenceNumber:  "49590338271490256608559692538361571095921575989136588898",
		PartitionKey:    "user-42",
		Attempts:        3,
		FirstArrival:    firstArrival,
		DeadLetteredAt:  deadAt,
		Headers: envelope.Headers{
			{Name: "content-type", Value: "application/json"},
			{Name: "partition-key", Value: "user-42"},
			{Name: "kinesis-sequence-number", Value: "49590338271490256608559692538361571095921575989136588898"},
			{Name: "x-tenant", Value: "a<b>&c"},
			{Name: "kinesis-shard-id", Value: "shardId-000000000001"},
		},
		Payload: []byte(`{"id":1}`),
	}
}

func TestDeadLetterRecord(t *testing.T) {
	d := sampleDeadLetter()
	before := d.Headers.Clone()
	r := DeadLetterRecord("dead-letters", d)
	want := Record{
		Stream:       "dead-letters",
		PartitionKey: "user-42",
		Headers: envelope.Headers{
			{Name: "content-type", Value: "application/json"},
			{Name: "x-tenant", Value: "a<b>&c"},
			{Name: "x-dead-letter-reason", Value: "handler: bad input line two  three"},
			{Name: "x-dead-letter-source-stream", Value: testARN},
			{Name: "x-dead-letter-shard-id", Value: "shardId-000000000001"},
			{Name: "x-dead-letter-sequence-number", Value: "49590338271490256608559692538361571095921575989136588898"},
			{Name: "x-dead-letter-attempts", Value: "3"},
			{Name: "x-dead-letter-first-arrival", Value: "2024-05-01T12:00:00.123Z"},
		},
		Payload: []byte(`{"id":1}`),
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("DeadLetterRecord (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, d.Headers); diff != "" {
		t.Errorf("DeadLetterRecord changed the headers given (-before +after):\n%s", diff)
	}

	// The bytes Put writes for it.
	f := &fakeKinesis{}
	p := newPublisher(t, f)
	if _, err := p.Put(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	golden := "RSK1\x00\x00\x01\x90" +
		"content-type: application/json\n" +
		"x-tenant: a<b>&c\n" +
		"x-dead-letter-reason: handler: bad input line two  three\n" +
		"x-dead-letter-source-stream: arn:aws:kinesis:eu-west-1:123456789012:stream/orders\n" +
		"x-dead-letter-shard-id: shardId-000000000001\n" +
		"x-dead-letter-sequence-number: 49590338271490256608559692538361571095921575989136588898\n" +
		"x-dead-letter-attempts: 3\n" +
		"x-dead-letter-first-arrival: 2024-05-01T12:00:00.123Z\n" +
		`{"id":1}`
	if got := string(f.Calls()[0].Entries[0].Data); got != golden {
		t.Errorf("record data:\n%q\nwant:\n%q", got, golden)
	}
	if got := f.Calls()[0].Entries[0].PartitionKey; got != "user-42" {
		t.Errorf("partition key %q, want user-42", got)
	}
}

func TestDeadLetterRecordOmitsUnknownDiagnostics(t *testing.T) {
	r := DeadLetterRecord("dl", DeadLetter{
		Headers: envelope.Headers{{Name: "partition-key", Value: "from-header"}, {Name: "x-dead-letter-reason", Value: "old"}},
		Payload: []byte("p"),
	})
	want := Record{
		Stream:       "dl",
		PartitionKey: "from-header",
		Headers:      envelope.Headers{{Name: "x-dead-letter-reason", Value: ""}},
		Payload:      []byte("p"),
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("DeadLetterRecord (-want +got):\n%s", diff)
	}
}

const goldenDeadLetterBody = `{"version":1,"reason":"handler: bad input\nline two\r\nthree","source_stream_arn":"arn:aws:kinesis:eu-west-1:123456789012:stream/orders",` +
	`"shard_id":"shardId-000000000001","sequence_number":"49590338271490256608559692538361571095921575989136588898","partition_key":"user-42",` +
	`"attempts":3,"first_arrival":"2024-05-01T12:00:00.123Z","dead_lettered_at":"2024-05-01T12:00:05.000Z",` +
	`"headers":[{"name":"content-type","value":"application/json"},{"name":"x-tenant","value":"a<b>&c"}],"payload_base64":"eyJpZCI6MX0="}`

func TestDeadLetterBody(t *testing.T) {
	body, err := DeadLetterBody(sampleDeadLetter())
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != goldenDeadLetterBody {
		t.Errorf("body:\n%s\nwant:\n%s", body, goldenDeadLetterBody)
	}
	got, err := ParseDeadLetterBody(body)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleDeadLetter()
	want.FirstArrival = want.FirstArrival.Truncate(time.Millisecond)
	want.DeadLetteredAt = want.DeadLetteredAt.UTC()
	want.Headers = envelope.Headers{{Name: "content-type", Value: "application/json"}, {Name: "x-tenant", Value: "a<b>&c"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestDeadLetterBodyEmpty(t *testing.T) {
	body, err := DeadLetterBody(DeadLetter{DeadLetteredAt: deadAt})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"reason":"","source_stream_arn":"","shard_id":"","sequence_number":"","partition_key":"","attempts":0,` +
		`"first_arrival":"","dead_lettered_at":"2024-05-01T12:00:05.000Z","headers":[],"payload_base64":""}`
	if string(body) != want {
		t.Errorf("body:\n%s\nwant:\n%s", body, want)
	}
	d, err := ParseDeadLetterBody(body)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DeadLetter{DeadLetteredAt: deadAt.UTC(), Payload: []byte{}}, d); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestDeadLetterBodyStampsNow(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	body, err := DeadLetterBody(DeadLetter{})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	d, err := ParseDeadLetterBody(body)
	if err != nil {
		t.Fatal(err)
	}
	if d.DeadLetteredAt.Before(before) || d.DeadLetteredAt.After(after) {
		t.Errorf("dead_lettered_at %s, want between %s and %s", d.DeadLetteredAt, before, after)
	}
}

// Characters SQS refuses are escaped; invalid UTF-8 becomes U+FFFD.
func TestBodiesAreValidSQSBodies(t *testing.T) {
	d := DeadLetter{Reason: "a\uFFFEb\uFFFFc\x00d\xffe", DeadLetteredAt: deadAt}
	body, err := DeadLetterBody(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"reason":"a\ufffeb\uffffc\u0000d\ufffde"`; !bytes.Contains(body, []byte(want)) {
		t.Errorf("body %s lacks %s", body, want)
	}
	for _, r := range string(body) {
		if !(r == 0x9 || r == 0xA || r == 0xD || (0x20 <= r && r <= 0xD7FF) || (0xE000 <= r && r <= 0xFFFD) || r >= 0x10000) {
			t.Errorf("body holds %U, which SQS refuses", r)
		}
	}
	got, err := ParseDeadLetterBody(body)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\uFFFEb\uFFFFc\x00d\uFFFDe"; got.Reason != want {
		t.Errorf("reason %q, want %q", got.Reason, want)
	}
}

func TestParseDeadLetterBodyErrors(t *testing.T) {
	tests := []struct {
		name, body, wantMsg string
	}{
		{"not JSON", `nope`, "publish: invalid dead-letter body: invalid character 'o' in literal null (expecting 'u')"},
		{"version 2", `{"version":2}`, "publish: invalid dead-letter body: version 2, want 1"},
		{"no version", `{}`, "publish: invalid dead-letter body: version 0, want 1"},
		{"bad time", `{"version":1,"first_arrival":"yesterday"}`, `publish: invalid dead-letter body: first_arrival: parsing time "yesterday" as "2006-01-02T15:04:05.999999999Z07:00": cannot parse "yesterday" as "2006"`},
		{"bad base64", `{"version":1,"payload_base64":"!!"}`, "publish: invalid dead-letter body: payload_base64: illegal base64 data at input byte 0"},
		{"wrong type", `{"version":"1"}`, "publish: invalid dead-letter body: json: cannot unmarshal string into Go struct field deadLetterJSON.version of type int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDeadLetterBody([]byte(tt.body))
			if !errors.Is(err, ErrInvalidBody) {
				t.Fatalf("error %v, want ErrInvalidBody", err)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("error %q, want %q", err, tt.wantMsg)
			}
		})
	}
}

func sampleDelayed() Delayed {
	return Delayed{
		StreamARN:    testARN,
		PartitionKey: "user-42",
		Headers: envelope.Headers{
			{Name: "x-ruststream-retry-count", Value: "1"},
			{Name: "kinesis-shard-id", Value: "shardId-000000000001"},
			{Name: "partition-key", Value: "user-42"},
		},
		Payload:   []byte(`{"id":1}`),
		NotBefore: time.Date(2024, 5, 1, 12, 15, 0, 0, time.UTC),
	}
}

const goldenDelayBody = `{"kind":"lambdaadapter.delay/v1","stream_arn":"arn:aws:kinesis:eu-west-1:123456789012:stream/orders","partition_key":"user-42",` +
	`"not_before":"2024-05-01T12:15:00.000Z","headers":[{"name":"x-ruststream-retry-count","value":"1"}],"payload_base64":"eyJpZCI6MX0="}`

func TestDelayedBody(t *testing.T) {
	body, err := sampleDelayed().Body()
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != goldenDelayBody {
		t.Errorf("body:\n%s\nwant:\n%s", body, goldenDelayBody)
	}
	got, ours, err := ParseDelayed(body)
	if err != nil || !ours {
		t.Fatalf("ParseDelayed = %v, %v", ours, err)
	}
	want := sampleDelayed()
	want.Headers = want.Headers[:1]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	wantRecord := Record{Stream: testARN, PartitionKey: "user-42", Headers: want.Headers, Payload: want.Payload}
	if diff := cmp.Diff(wantRecord, got.Record()); diff != "" {
		t.Errorf("Record (-want +got):\n%s", diff)
	}
}

func TestDelayedBodyRefusesNoStream(t *testing.T) {
	_, err := Delayed{Payload: []byte("p")}.Body()
	if !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("Body error %v, want ErrInvalidRecord", err)
	}
}

func TestParseDelayed(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantOurs bool
		wantErr  bool
	}{
		{"ours", goldenDelayBody, true, false},
		{"plain text", "hello", false, false},
		{"empty", "", false, false},
		{"JSON array", `[1,2]`, false, false},
		{"JSON without kind", `{"stream_arn":"x"}`, false, false},
		{"another kind", `{"kind":"other/v1","stream_arn":"x"}`, false, false},
		{"a dead-letter body", goldenDeadLetterBody, false, false},
		{"another version of ours", `{"kind":"lambdaadapter.delay/v2","stream_arn":"x"}`, true, true},
		{"ours without stream", `{"kind":"lambdaadapter.delay/v1"}`, true, true},
		{"ours with a bad time", `{"kind":"lambdaadapter.delay/v1","stream_arn":"x","not_before":"soon"}`, true, true},
		{"ours with bad base64", `{"kind":"lambdaadapter.delay/v1","stream_arn":"x","payload_base64":"%%"}`, true, true},
		{"ours, truncated", goldenDelayBody[:60], true, true},
		{"ours, wrong type", `{"kind":"lambdaadapter.delay/v1","stream_arn":"x","headers":5}`, true, true},
		{"unknown members are ignored", `{"kind":"lambdaadapter.delay/v1","stream_arn":"x","extra":true}`, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ours, err := ParseDelayed([]byte(tt.body))
			if ours != tt.wantOurs || (err != nil) != tt.wantErr {
				t.Fatalf("ParseDelayed = %v, %v; want ours %v, error %v", ours, err, tt.wantOurs, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidBody) {
				t.Errorf("error %v does not match ErrInvalidBody", err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "publish: invalid delay body: ") {
				t.Errorf("error %q lacks its prefix", err)
			}
			if (!ours || err != nil) && d.StreamARN != "" {
				t.Errorf("ParseDelayed returned %+v with ours=%v, err=%v", d, ours, err)
			}
		})
	}
}

func FuzzParseDeadLetterBody(f *testing.F) {
	f.Add([]byte(goldenDeadLetterBody))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"headers":[{"name":"A","value":"1"},{"name":"a","value":"2"}],"payload_base64":"AA=="}`))
	f.Add([]byte(`{"version":1,"first_arrival":"2024-05-01T12:00:00.123456+02:00"}`))
	f.Add([]byte(`nope`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := ParseDeadLetterBody(body)
		if err != nil {
			if !errors.Is(err, ErrInvalidBody) {
				t.Fatalf("error %v does not match ErrInvalidBody", err)
			}
			return
		}
		// What was read writes back to a body that reads the same. A
		// missing dead_lettered_at reads as zero, which DeadLetterBody
		// stamps with the current time: pin it.
		if d.DeadLetteredAt.IsZero() {
			d.DeadLetteredAt = deadAt
		}
		again, err := DeadLetterBody(d)
		if err != nil {
			t.Fatalf("DeadLetterBody of a parsed body: %v", err)
		}
		d2, err := ParseDeadLetterBody(again)
		if err != nil {
			t.Fatalf("ParseDeadLetterBody(%s): %v", again, err)
		}
		if !sameDeadLetter(d, d2) {
			t.Fatalf("round trip changed\n%+v\ninto\n%+v", d, d2)
		}
	})
}

// sameDeadLetter compares dead letters as their body keeps them: times to
// the millisecond, strings after JSON's replacement of invalid UTF-8,
// headers without the delivery ones.
func sameDeadLetter(a, b DeadLetter) bool {
	norm := func(d DeadLetter) DeadLetter {
		body, _ := DeadLetterBody(d)
		d, _ = ParseDeadLetterBody(body)
		return d
	}
	return cmp.Equal(norm(a), b, cmp.Comparer(func(x, y []byte) bool { return bytes.Equal(x, y) }))
}

func FuzzParseDelayed(f *testing.F) {
	f.Add([]byte(goldenDelayBody))
	f.Add([]byte(`{"kind":"lambdaadapter.delay/v1","stream_arn":"x"}`))
	f.Add([]byte(`{"kind":"lambdaadapter.delay/v2"}`))
	f.Add([]byte(`{"kind":"other"}`))
	f.Add([]byte(`hello`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, ours, err := ParseDelayed(body)
		if err != nil {
			if !ours || !errors.Is(err, ErrInvalidBody) {
				t.Fatalf("ParseDelayed = %v, %v; an error is for our bodies and matches ErrInvalidBody", ours, err)
			}
			return
		}
		if !ours {
			return
		}
		if d.StreamARN == "" {
			t.Fatal("ParseDelayed accepted a body without stream_arn")
		}
		again, err := d.Body()
		if err != nil {
			t.Fatalf("Body of a parsed body: %v", err)
		}
		d2, ours2, err := ParseDelayed(again)
		if err != nil || !ours2 {
			t.Fatalf("ParseDelayed(%s) = %v, %v", again, ours2, err)
		}
		again2, _ := d2.Body()
		if !bytes.Equal(again, again2) {
			t.Fatalf("round trip changed\n%s\ninto\n%s", again, again2)
		}
	})
}
