package getrecords

import (
	"strings"
	"testing"
)

// FuzzGetRecordsDecode feeds the same bytes to the SDK's own deserializer
// and to Decode: Decode never panics, never accepts what the SDK rejects
// (or panics on), and when it accepts returns exactly the SDK's answer
// (reflect.DeepEqual, ResultMetadata aside). Falling back is always allowed.
func FuzzGetRecordsDecode(f *testing.F) {
	for _, name := range validFixtures {
		f.Add(readFixture(f, name))
	}
	f.Add(genBody(3, 5, 9))
	f.Add(genBody(2, 0, 3))
	for _, s := range []string{
		`{"Records":[{"SequenceNumber":"1","ApproximateArrivalTimestamp":1e308,"Data":"QQ=="}]}`,
		`{"Records":[{"ApproximateArrivalTimestamp":-9.3e15},{"ApproximateArrivalTimestamp":9223372036854775.807}]}`,
		`{"Records":[{"ApproximateArrivalTimestamp":123456789012345678901234567890}]}`,
		`{"Records":[{"ApproximateArrivalTimestamp":1796321909.6649999999999999}]}`,
		`{"Records":[{"PartitionKey":"\ud800\udc00\udbff\udfff\ud800\u0000"}]}`,
		`{"Records":[{"Data":"QU\/D\u0044\r\n"}]}`,
		`{"Records":[{"Data":"QUJD","Data":null,"EncryptionType":"KMS","EncryptionType":null}],"Records":null}`,
		`{"Records":[}]}`,
		`{"Records":[null,{}],"ChildShards":[{"ParentShards":[null],"HashKeyRange":{"StartingHashKey":"0"}}]}`,
		`{"MillisBehindLatest":-9223372036854775808,"NextShardIterator":"\u0041"}`,
		"{\"Records\":[{\"PartitionKey\":\"\xff\xfe\xc0\x80\",\"SequenceNumber\":\"\\u00e9\xff\"}]}",
		`{"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`,
		`null`, `[]`, `{}`, ` {"Records" : [ ] } `, `{"Records":[]}x`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		differential(t, body)
	})
}
