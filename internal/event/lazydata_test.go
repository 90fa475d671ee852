package event

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// checkLazy checks that DecodeKinesis(in), whose data strings take the lazy
// path (decoder.lazy), returns what the full scan of every data string
// returns (want, wantErr: DecodeKinesis before the lazy path): the same
// records, or an error of the same type, message and record.
func checkLazy(t *testing.T, in []byte, got *Kinesis, err error) {
	t.Helper()
	want, wantErr := decodeKinesisWith(in, nil, false)
	if !sameError(err, wantErr) {
		t.Fatalf("lazy data of %q: error %#v, full scan %#v", in, err, wantErr)
	}
	if err == nil && (!sameRecords(want.Records, got.Records) || want.MaybeAggregates != got.MaybeAggregates) {
		t.Fatalf("lazy data of %q: records differ from the full scan's", in)
	}
}

// sameError reports whether a and b are both nil, or errors of the same
// type with the same message, fields and ErrNotKinesis match.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.TypeOf(a) == reflect.TypeOf(b) && a.Error() == b.Error() &&
		errors.Is(a, ErrNotKinesis) == errors.Is(b, ErrNotKinesis) &&
		(reflect.TypeOf(a).Kind() != reflect.Pointer || reflect.DeepEqual(a, b))
}

// TestLazyDataErrors checks that malformed data strings, which the lazy
// path takes unchecked, give exactly the errors the full scan gives: the
// pinned ones (those of DecodeKinesis at dda9ae1, before the lazy path),
// and the same as decodeKinesisWith without the lazy path,
// for DecodeKinesis and DecodeKinesisChunked alike.
func TestLazyDataErrors(t *testing.T) {
	rec := func(data string) string {
		return `{"kinesis":{"sequenceNumber":"1","data":"` + data + `"},"eventSource":"aws:kinesis"}`
	}
	good := rec("QUJD")
	event := func(recs ...string) string { return `{"Records":[` + strings.Join(recs, ",") + `]}` }
	for _, tc := range []struct {
		name, in string
		want     string // the error's message, or "" for none
	}{
		{"control character", event(good, rec("QU\x01D")), "event: invalid JSON at offset 132: invalid control character 0x01 in string"},
		{"tab", event(rec("QUJD\tQUJD")), "event: invalid JSON at offset 57: invalid control character 0x09 in string"},
		{"line breaks decoding", event(good, rec("QUJD\n\n\n\nQUJD")), "event: invalid JSON at offset 134: invalid control character 0x0a in string"},
		{"CR LF", event(rec("QUJD\r\nQUJD")), "event: invalid JSON at offset 57: invalid control character 0x0d in string"},
		{"escaped line breaks", event(rec(`QUJD\r\nQUJD`)), ""},
		{"escaped slash", event(rec(`QU\/D`)), ""},
		{"unicode escape", event(rec(`QU\u004aD`)), ""},
		{"bad escape", event(rec(`QU\xD`)), "event: invalid JSON at offset 55: invalid escape sequence \\x in string"},
		{"invalid base64", event(good, good, rec("QU!D")), "event: record 2: kinesis.data: illegal base64 data at input byte 2"},
		{"bad padding", event(rec("QQ=A")), "event: record 0: kinesis.data: illegal base64 data at input byte 2"},
		{"short", event(rec("QUJ")), "event: record 0: kinesis.data: illegal base64 data at input byte 0"},
		{"non-ASCII", event(rec("QUJ\xc3\xa9")), "event: record 0: kinesis.data: illegal base64 data at input byte 3"},
		{"invalid UTF-8", event(rec("QUJ\xff")), "event: record 0: kinesis.data: illegal base64 data at input byte 3"},
		{"unterminated", `{"Records":[{"kinesis":{"sequenceNumber":"1","data":"QUJD`, "event: invalid JSON at offset 57: unexpected end of input"},
		{"unterminated after escape", `{"Records":[{"kinesis":{"sequenceNumber":"1","data":"QU\"`, "event: invalid JSON at offset 57: unexpected end of input"},
		{"control character before a later syntax error", event(rec("QU\x00D"), good) + "x", "event: invalid JSON at offset 55: invalid control character 0x00 in string"},
		{"control character before a record error", event(rec("QU\x00D"), `{"kinesis":{"sequenceNumber":"x"}}`), "event: invalid JSON at offset 55: invalid control character 0x00 in string"},
		{"control character in a record with an error", event("{\"kinesis\":{\"data\":\"QU\x00D\",\"sequenceNumber\":7}}"), "event: invalid JSON at offset 34: invalid control character 0x00 in string"},
		{"control character in a replaced value", event("{\"kinesis\":{\"sequenceNumber\":\"1\",\"data\":\"QU\x00D\",\"data\":\"QUJD\"}}"), "event: invalid JSON at offset 55: invalid control character 0x00 in string"},
		{"control character before an array", event("{\"kinesis\":{\"sequenceNumber\":\"1\",\"data\":\"QU\x00D\",\"data\":[1]}}"), "event: invalid JSON at offset 55: invalid control character 0x00 in string"},
		{"bad base64 before a record error", event(rec("QU!D"), `{"kinesis":{"sequenceNumber":"x"}}`), "event: record 0: kinesis.data: illegal base64 data at input byte 2"},
		{"bad base64 replaced", event(`{"kinesis":{"sequenceNumber":"1","data":"QU!D","data":"QUJD"}}`), "event: record 0: kinesis.data: illegal base64 data at input byte 2"},
		{"replaced", event(`{"kinesis":{"sequenceNumber":"1","data":"QUJD","data":null}}`), ""},
		{"empty", event(rec("")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			got, err := DecodeKinesis(in)
			if msg := errorString(err); msg != tc.want {
				t.Fatalf("DecodeKinesis(%q): error %q, want %q", in, msg, tc.want)
			}
			checkLazy(t, in, got, err)
			var buf Buffers
			for _, size := range []int{1, 2, chunkRecords} {
				cgot, cerr := decodeKinesisChunked(in, &buf, size)
				if !sameError(cerr, err) {
					t.Fatalf("chunks of %d of %q: error %#v, DecodeKinesis %#v", size, in, cerr, err)
				}
				if err == nil && !sameRecords(got.Records, cgot.Records) {
					t.Fatalf("chunks of %d of %q: records differ", size, in)
				}
			}
		})
	}
}

// errorString is err's message, or "" for nil.
func errorString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
