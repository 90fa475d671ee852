package event

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
)

// readByTemplate returns how many records of payload recordFast read.
func readByTemplate(payload []byte) int {
	d := decoder{buf: payload, lazy: true}
	_ = d.parse()
	return d.fast
}

// checkTemplates decodes payload with templates and without them (every
// record field by field), with DecodeKinesis and DecodeKinesisChunked
// (filling every 2 records), and reports any difference in the records or
// the error.
func checkTemplates(t *testing.T, payload []byte) {
	t.Helper()
	decoders := []struct {
		name string
		f    func([]byte) (*Kinesis, error)
	}{
		{"DecodeKinesis", DecodeKinesis},
		{"chunked", func(p []byte) (*Kinesis, error) { return decodeKinesisChunked(p, nil, 2) }},
	}
	for _, dec := range decoders {
		got, gotErr := dec.f(payload)
		noTemplates = true
		want, wantErr := dec.f(payload)
		noTemplates = false
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s of %q: error %v with templates, %v field by field", dec.name, payload, gotErr, wantErr)
		}
		if wantErr != nil {
			continue
		}
		if diff := cmp.Diff(want.Records, got.Records); diff != "" {
			t.Fatalf("%s of %q: records differ (-field by field +templates):\n%s", dec.name, payload, diff)
		}
	}
}

// templateRecords are records of the shapes the template must handle: as
// Lambda sends them, indented, with keys in other orders or letter cases,
// unknown keys, nulls, and values that keep a record from being a template
// (escapes, non-ASCII, data as an array, a key given twice).
func templateRecords(t testing.TB) [][]string {
	t.Helper()
	rec := func(pk, seq string, data []byte, ms int64) events.KinesisEventRecord {
		return events.KinesisEventRecord{
			AwsRegion: "us-east-2", EventID: "shardId-000000000001:" + seq, EventName: "aws:kinesis:record",
			EventSource: "aws:kinesis", EventSourceArn: "arn:aws:kinesis:us-east-2:123456789012:stream/s",
			EventVersion: "1.0", InvokeIdentityArn: "arn:aws:iam::123456789012:role/r",
			Kinesis: events.KinesisRecord{
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: time.UnixMilli(ms)},
				Data:                        data, EncryptionType: "NONE", PartitionKey: pk, SequenceNumber: seq,
				KinesisSchemaVersion: "1.0",
			},
		}
	}
	marshal := func(r events.KinesisEventRecord, indent bool) string {
		var b []byte
		var err error
		if indent {
			b, err = json.MarshalIndent(r, "  ", "  ")
		} else {
			b, err = json.Marshal(r)
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r1 := rec("key-1", "49640912823549326457189238172346126735640000000000000001", []byte("hello"), 1716199999123)
	r2 := rec("k2", "49640912823549326457189238172346126735640000000000000002", []byte("a longer payload, so the slots move"), 1716200000000)
	r3 := rec("key-three", "49640912823549326457189238172346126735640000000000000003", nil, 1716200000001)
	sets := [][]string{
		{marshal(r1, false), marshal(r2, false), marshal(r3, false)},
		{marshal(r1, true), marshal(r2, true), marshal(r3, true)},
	}
	// Hand-written shapes, each as three records that differ in the slots.
	for _, shape := range []string{
		`{"kinesis":{"partitionKey":"%s","sequenceNumber":"%s","data":"%s","approximateArrivalTimestamp":%s},"eventSource":"aws:kinesis","eventID":"shardId-000000000006:%[2]s","awsRegion":"us-east-2","eventSourceARN":"arn:aws:kinesis:us-east-2:123456789012:stream/x"}`,
		`{"eventSourceARN":"arn:x","EventSource":"aws:kinesis","kinesis":{"approximateArrivalTimestamp":%[4]s,"Data":"%[3]s","SequenceNumber":"%[2]s","partitionkey":"%[1]s","extra":[1,{"a":null}]},"unknown":"u"}`,
		`{"kinesis":{"partitionKey":"%s","sequenceNumber":"%s","data":"%s","approximateArrivalTimestamp":null,"encryptionType":null},"eventID":null,"awsRegion":null,"eventSource":"aws:kinesis","x":%[4]s}`,
		`{ "kinesis" : { "partitionKey" : "%s" , "sequenceNumber" : "%s" , "data" : "%s" , "approximateArrivalTimestamp" : %s } , "eventSource" : "aws:kinesis" }`,
		`{"kinesis":{"partitionKey":"%s","sequenceNumber":"%s","data":"%s","approximateArrivalTimestamp":%s},"eventSourceARN":"arn:\u00e9"}`,
		`{"kinesis":{"partitionKey":"%s","sequenceNumber":"%s","data":"%s","approximateArrivalTimestamp":%s},"eventSourceARN":"arn:é"}`,
		`{"kinesis":{"partitionKey":"%s","sequenceNumber":"%s","data":"%s","data":null,"approximateArrivalTimestamp":%s}}`,
		`{"kinesis":{"partitionKey":"%s","sequenceNumber":"%s","data":[1,2,%[4]s],"approximateArrivalTimestamp":%[4]s},"data":"%[3]s"}`,
		`{"kinesis":null,"kinesis":{"partitionKey":"%s","sequenceNumber":"%s","data":"%s","approximateArrivalTimestamp":%s}}`,
	} {
		var set []string
		for k, v := range [][4]string{
			{"p", "1", "QUJD", "1716200000.5"},
			{"partition-22", "12345678901234567890", "SGVsbG8gd29ybGQ=", "-1.25e3"},
			{"", "7", "", "0"},
		} {
			set = append(set, fmt.Sprintf(shape, v[0], v[1]+fmt.Sprint(k), v[2], v[3]))
		}
		sets = append(sets, set)
	}
	return sets
}

// TestTemplatesMatchFieldByField: a record read by the template of the one
// before gives what parsing it field by field gives, whatever one byte of
// it is changed to, removed or followed by: the same records or the same
// error.
func TestTemplatesMatchFieldByField(t *testing.T) {
	variants := []func(s string, p int) string{
		func(s string, p int) string { return s[:p] + s[p+1:] },     // removed
		func(s string, p int) string { return s[:p] + "x" + s[p:] }, // one more
		func(s string, p int) string { return s[:p] + `"` + s[p:] }, // one more quote
		func(s string, p int) string { return s[:p] + "9" + s[p:] }, // one more digit
	}
	for _, c := range []string{"x", "0", `"`, `\`, " ", "}", ",", ":", "\x00", "\xc3", "é", "A", "=", "-", "e", "n"} {
		variants = append(variants, func(s string, p int) string { return s[:p] + c + s[p+1:] })
	}
	for _, set := range templateRecords(t) {
		checkTemplates(t, []byte(`{"Records":[`+strings.Join(set, ",")+`]}`))
		for p := range len(set[1]) {
			for _, v := range variants {
				mutated := []string{set[0], v(set[1], p), set[2]}
				checkTemplates(t, []byte(`{"Records":[`+strings.Join(mutated, ",")+`]}`))
			}
		}
	}
}

// TestTemplatesRead: the records Lambda sends are read by the template
// after the first, and records that cannot be a template are parsed field
// by field.
func TestTemplatesRead(t *testing.T) {
	if got := readByTemplate(genEvent(100, 50, 1)); got != 99 {
		t.Errorf("genEvent(100): %d records read by template, want 99", got)
	}
	sets := templateRecords(t)
	// The third record of the first two sets has null data, which the
	// template's data string does not match; the third set's unknown key
	// holds a value that varies.
	for i, want := range []int{1, 1, 2, 2, 0, 2, 0, 2, 0, 0, 0} {
		payload := []byte(`{"Records":[` + strings.Join(sets[i], ",") + `]}`)
		if got := readByTemplate(payload); got != want {
			t.Errorf("set %d %q: %d records read by template, want %d", i, sets[i][0], got, want)
		}
	}
}

// FuzzTemplates checks on arbitrary payloads that reading records by
// templates gives what parsing every record field by field gives.
func FuzzTemplates(f *testing.F) {
	for _, set := range templateRecords(f) {
		f.Add([]byte(`{"Records":[` + strings.Join(set, ",") + `]}`))
	}
	f.Add(genEvent(3, 5, 9))
	f.Fuzz(func(t *testing.T, payload []byte) {
		checkTemplates(t, payload)
	})
}
