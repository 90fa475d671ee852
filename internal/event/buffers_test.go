package event

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// sameResult describes how two decodings differ, or returns "".
func sameResult(want *Kinesis, wantErr error, got *Kinesis, gotErr error) string {
	switch {
	case (wantErr == nil) != (gotErr == nil):
		return "error " + errString(gotErr) + ", want " + errString(wantErr)
	case wantErr != nil:
		var ws, gs *SyntaxError
		var wr, gr *RecordError
		switch {
		case wantErr.Error() != gotErr.Error():
			return "error " + errString(gotErr) + ", want " + errString(wantErr)
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
// the KPL magic wherever it is (first record, last, in between, data given
// as base64 or as an array of bytes), and only then.
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
		{"in between", withData(2000, 1500, magic), true},
		{"magic alone", withData(2000, 700, kpl.Magic[:]), true},
		{"three bytes of it", withData(2000, 700, kpl.Magic[:3]), false},
		{"magic later in the data", withData(2000, 700, append([]byte("x"), magic...)), false},
		{"one small record", withData(1, 0, magic), true},
		{"data as bytes", []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","data":[243,137,154,194,1]}}]}`), true},
		{"data as other bytes", []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1","data":[243,137,154]}}]}`), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := DecodeKinesis(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if k.MaybeAggregates != tt.want || anyMagic(k.Records) != tt.want {
				t.Errorf("MaybeAggregates %v (records say %v), want %v", k.MaybeAggregates, anyMagic(k.Records), tt.want)
			}
		})
	}
}

// TestBuffersKeepWorkingRecords checks that a Buffers keeps the decoder's
// working records from one call to the next, with both decoders: the next
// call with it parses into the same slice, whichever processor the
// goroutine runs on (recsPool keeps a slice for the processor that put it
// back), and a call without one leaves it alone.
func TestBuffersKeepWorkingRecords(t *testing.T) {
	payload := genEvent(300, 40, 1)
	for _, tc := range []struct {
		name   string
		decode func([]byte, *Buffers) (*Kinesis, error)
	}{{"DecodeKinesisWith", DecodeKinesisWith}, {"DecodeKinesisChunked", DecodeKinesisChunked}} {
		t.Run(tc.name, func(t *testing.T) {
			var buf Buffers
			if _, err := tc.decode(payload, &buf); err != nil {
				t.Fatal(err)
			}
			if cap(buf.work) < 300 {
				t.Fatalf("kept room for %d working records, want at least 300", cap(buf.work))
			}
			first := &buf.work[:1][0]
			if _, err := tc.decode(payload, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := tc.decode(payload, &buf); err != nil {
				t.Fatal(err)
			}
			if cap(buf.work) == 0 || &buf.work[:1][0] != first {
				t.Fatal("the second call with the Buffers parsed into another working slice")
			}
		})
	}
}
