package getrecords

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// ts is the timestamp the SDK makes of an epoch-seconds value with whole
// milliseconds ms.
func ts(ms int64) *time.Time {
	t := time.Unix(0, ms*1e6).UTC()
	return &t
}

// TestDecodeFields checks every field against a hand-written expectation,
// and the SDK's deserializer against the same one.
func TestDecodeFields(t *testing.T) {
	const seq = "49680806382702797274772113167038461120679885867514331138"
	tests := []struct {
		name string
		body string
		want *kinesis.GetRecordsOutput
	}{
		{"empty Records", `{"Records":[],"NextShardIterator":"it","MillisBehindLatest":0}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{}, NextShardIterator: aws.String("it"), MillisBehindLatest: aws.Int64(0)}},
		{"no members", `{}`, &kinesis.GetRecordsOutput{}},
		{"null members", `{"Records":null,"NextShardIterator":null,"MillisBehindLatest":null,"ChildShards":null}`, &kinesis.GetRecordsOutput{}},
		{"null record and null record members", `{"Records":[null,{"SequenceNumber":null,"ApproximateArrivalTimestamp":null,"Data":null,"PartitionKey":null,"EncryptionType":null}]}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{}, {}}}},
		{"every record field", `{"Records":[{"SequenceNumber":"` + seq + `","ApproximateArrivalTimestamp":1796321909.664,"Data":"cGF5bG9hZA==","PartitionKey":"k1","EncryptionType":"KMS"}]}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{SequenceNumber: aws.String(seq), ApproximateArrivalTimestamp: ts(1796321909664),
				Data: []byte("payload"), PartitionKey: aws.String("k1"), EncryptionType: types.EncryptionTypeKms}}}},
		{"encryption types", `{"Records":[{"EncryptionType":"NONE"},{"EncryptionType":"KMS"},{"EncryptionType":"SOMETHING_NEW"},{"EncryptionType":""}]}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{EncryptionType: types.EncryptionTypeNone}, {EncryptionType: types.EncryptionTypeKms},
				{EncryptionType: "SOMETHING_NEW"}, {}}}},
		{"data", `{"Records":[{"Data":""},{"Data":"QQ=="},{"Data":"QUI="},{"Data":"QUJD"},{"Data":"/+8A"}]}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{Data: []byte{}}, {Data: []byte("A")}, {Data: []byte("AB")}, {Data: []byte("ABC")}, {Data: []byte{0xff, 0xef, 0}}}}},
		{"timestamps as AWS and kinesis-local send them", `{"Records":[{"ApproximateArrivalTimestamp":1.441215410867E9},{"ApproximateArrivalTimestamp":1441215410.867},{"ApproximateArrivalTimestamp":1441215410}]}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{ApproximateArrivalTimestamp: ts(1441215410867)}, {ApproximateArrivalTimestamp: ts(1441215410867)}, {ApproximateArrivalTimestamp: ts(1441215410000)}}}},
		{"timestamps: rounding as the SDK's (float64, then ×1000 truncated)", `{"Records":[{"ApproximateArrivalTimestamp":0.001},{"ApproximateArrivalTimestamp":1.0009},{"ApproximateArrivalTimestamp":-1.5},{"ApproximateArrivalTimestamp":0},{"ApproximateArrivalTimestamp":-0.0},{"ApproximateArrivalTimestamp":4.35E-1},{"ApproximateArrivalTimestamp":1E3}]}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{ApproximateArrivalTimestamp: ts(1)}, {ApproximateArrivalTimestamp: ts(1000)}, {ApproximateArrivalTimestamp: ts(-1500)},
				{ApproximateArrivalTimestamp: ts(0)}, {ApproximateArrivalTimestamp: ts(0)}, {ApproximateArrivalTimestamp: ts(435)}, {ApproximateArrivalTimestamp: ts(1000000)}}}},
		{"partition keys: unicode escapes, surrogate pairs, lone surrogates, raw UTF-8", `{"Records":[{"PartitionKey":"\u00e9\ud83d\ude00\ud800x\udc00\u0001\"\\\/\b\f\n\r\t"},{"PartitionKey":"ключ/é😀"},{"PartitionKey":"\u2028"}]}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{PartitionKey: aws.String("é😀\uFFFDx\uFFFD\x01\"\\/\b\f\n\r\t")}, {PartitionKey: aws.String("ключ/é😀")}, {PartitionKey: aws.String("\u2028")}}}},
		{"partition key: invalid UTF-8 kept raw without escapes, replaced with them", "{\"Records\":[{\"PartitionKey\":\"a\xffb\"},{\"PartitionKey\":\"\\u0041\xff\"}]}",
			&kinesis.GetRecordsOutput{Records: []types.Record{{PartitionKey: aws.String("a\xffb")}, {PartitionKey: aws.String("A\uFFFD")}}}},
		{"MillisBehindLatest", `{"MillisBehindLatest":86400000}`, &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(86400000)}},
		{"negative MillisBehindLatest", `{"MillisBehindLatest":-5}`, &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(-5)}},
		{"ChildShards", `{"ChildShards":[{"HashKeyRange":{"EndingHashKey":"170141183460469231731687303715884105727","StartingHashKey":"0"},"ParentShards":["shardId-000000000000"],"ShardId":"shardId-000000000001"},` +
			`{"ShardId":"shardId-000000000003","ParentShards":["shardId-000000000001","shardId-000000000002"],"HashKeyRange":{}}],"NextShardIterator":null,"Records":[]}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{}, ChildShards: []types.ChildShard{
				{ShardId: aws.String("shardId-000000000001"), ParentShards: []string{"shardId-000000000000"},
					HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String("0"), EndingHashKey: aws.String("170141183460469231731687303715884105727")}},
				{ShardId: aws.String("shardId-000000000003"), ParentShards: []string{"shardId-000000000001", "shardId-000000000002"}, HashKeyRange: &types.HashKeyRange{}},
			}}},
		{"ChildShards: empty, null elements and members", `{"ChildShards":[null,{"ShardId":null,"ParentShards":[null,"p"],"HashKeyRange":null},{"ParentShards":[]}]}`,
			&kinesis.GetRecordsOutput{ChildShards: []types.ChildShard{{}, {ParentShards: []string{"", "p"}}, {ParentShards: []string{}}}}},
		{"ChildShards: empty list", `{"ChildShards":[]}`, &kinesis.GetRecordsOutput{ChildShards: []types.ChildShard{}}},
		{"unknown members skipped at every level", `{"x":{"a":[1,-2.5e+3,true,false,null,"s\u0041",{}]},"Records":[{"Data":"QQ==","y":[[]],"SequenceNumber":"1"}],` +
			`"ChildShards":[{"z":{"ShardId":"no"},"ShardId":"s","HashKeyRange":{"w":1,"StartingHashKey":"0"}}],"message":"hi","__type":"x"}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{Data: []byte("A"), SequenceNumber: aws.String("1")}},
				ChildShards: []types.ChildShard{{ShardId: aws.String("s"), HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String("0")}}}}},
		{"member names are case-sensitive", `{"records":[{"Data":"QQ=="}],"nextShardIterator":"x","Records":[{"data":"QQ==","sequenceNumber":"1"}]}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{}}}},
		{"escaped member names", `{"Rec\u006frds":[{"Partition\u004bey":"k"}],"\u004eextShardIterator":"n"}`,
			&kinesis.GetRecordsOutput{Records: []types.Record{{PartitionKey: aws.String("k")}}, NextShardIterator: aws.String("n")}},
		{"a later member replaces an earlier one, null leaves it", `{"NextShardIterator":"a","NextShardIterator":"b","NextShardIterator":null,"MillisBehindLatest":1,"MillisBehindLatest":2,` +
			`"Records":[{"PartitionKey":"a","PartitionKey":"b","EncryptionType":"KMS","EncryptionType":"x","ApproximateArrivalTimestamp":1,"ApproximateArrivalTimestamp":2}],"Records":null}`,
			&kinesis.GetRecordsOutput{NextShardIterator: aws.String("b"), MillisBehindLatest: aws.Int64(2),
				Records: []types.Record{{PartitionKey: aws.String("b"), EncryptionType: "x", ApproximateArrivalTimestamp: ts(2000)}}}},
		{"whitespace everywhere", " \t\r\n{ \"Records\" : [ { \"Data\" : \"QQ==\" } , null ] , \"MillisBehindLatest\" : 3 } \n",
			&kinesis.GetRecordsOutput{Records: []types.Record{{Data: []byte("A")}, {}}, MillisBehindLatest: aws.Int64(3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Decode([]byte(tt.body))
			if !ok {
				t.Fatalf("Decode did not accept %s", tt.body)
			}
			if eq, diff := equalOutputs(tt.want, got); !eq {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
			sdk, err := sdkDecode([]byte(tt.body))
			if err != nil {
				t.Fatalf("SDK: %v", err)
			}
			if eq, diff := equalOutputs(tt.want, sdk); !eq {
				t.Errorf("the SDK disagrees with this test (-want +sdk):\n%s", diff)
			}
		})
	}
}

// TestDecodeFallback lists bodies Decode leaves to the SDK: the SDK rejects
// most of them, and Decode must not accept what the SDK rejects.
func TestDecodeFallback(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		sdkAccept bool // the SDK decodes it (Decode is stricter)
	}{
		{"empty body", ``, true},
		{"null", `null`, false},
		{"array", `[]`, false},
		{"truncated", `{"Records":[{"Data":"QQ=="}`, false},
		{"truncated in a string", `{"Records":[{"Data":"QQ==`, false},
		{"trailing comma in object", `{"Records":[],}`, false},
		{"trailing comma in list", `{"Records":[null,]}`, false},
		{"bytes after the object", `{"Records":[]}x`, true},
		{"second object", `{"Records":[]}{}`, true},
		{"Records not a list", `{"Records":{}}`, false},
		{"record not an object", `{"Records":["x"]}`, false},
		{"SequenceNumber not a string", `{"Records":[{"SequenceNumber":1}]}`, false},
		{"PartitionKey not a string", `{"Records":[{"PartitionKey":true}]}`, false},
		{"timestamp a string", `{"Records":[{"ApproximateArrivalTimestamp":"1"}]}`, false},
		{"timestamp NaN (the SDK panics: big.NewFloat(NaN))", `{"Records":[{"ApproximateArrivalTimestamp":"NaN"}]}`, false},
		{"timestamp Infinity", `{"Records":[{"ApproximateArrivalTimestamp":"Infinity"}]}`, true},
		{"timestamp out of float64 range", `{"Records":[{"ApproximateArrivalTimestamp":1e400}]}`, false},
		{"MillisBehindLatest fraction", `{"MillisBehindLatest":1.0}`, false},
		{"MillisBehindLatest over int64", `{"MillisBehindLatest":9223372036854775808}`, false},
		{"MillisBehindLatest of 19 digits", `{"MillisBehindLatest":1000000000000000000}`, true},
		{"data not base64", `{"Records":[{"Data":"QQ"}]}`, false},
		{"data with a bad character", `{"Records":[{"Data":"QQ=!"}]}`, false},
		{"data not a string", `{"Records":[{"Data":[65]}]}`, false},
		{"data with an escaped slash", `{"Records":[{"Data":"\/w=="}]}`, true},
		{"data with escaped line breaks", `{"Records":[{"Data":"QQ==\r\n"}]}`, true},
		{"data with a raw line break", "{\"Records\":[{\"Data\":\"QQ==\n\"}]}", false},
		{"data with a control character", "{\"Records\":[{\"Data\":\"QQ=\x01\"}]}", false},
		{"two Data members, the first bad", `{"Records":[{"Data":"!!!!","Data":"QQ=="}]}`, false},
		{"two Records lists", `{"Records":[{"Data":"!!!!"}],"Records":[]}`, false},
		{"control character in a string", "{\"NextShardIterator\":\"a\x01\"}", false},
		{"bad escape", `{"NextShardIterator":"\x41"}`, false},
		{"short unicode escape", `{"NextShardIterator":"\u41"}`, false},
		{"leading zero", `{"MillisBehindLatest":01}`, false},
		{"bad literal", `{"x":nul}`, false},
		{"HashKeyRange not an object", `{"ChildShards":[{"HashKeyRange":[]}]}`, false},
		{"ParentShards element not a string", `{"ChildShards":[{"ParentShards":[1]}]}`, false},
		{"nesting deeper than 256", `{"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, true},
		{"missing colon", `{"Records" []}`, false},
		{"missing value", `{"Records":}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if out, ok := Decode([]byte(tt.body)); ok || out != nil {
				t.Fatalf("Decode accepted %q: %+v", tt.body, out)
			}
			_, err := sdkDecode([]byte(tt.body))
			if (err == nil) != tt.sdkAccept {
				t.Errorf("the SDK's error: %v; this test says it accepts: %v", err, tt.sdkAccept)
			}
		})
	}
}

// TestDecodeFixtures compares Decode with the SDK on real-shaped answers
// and generated ones of every size the consumer reads.
func TestDecodeFixtures(t *testing.T) {
	for _, name := range validFixtures {
		t.Run(name, func(t *testing.T) {
			if !differential(t, readFixture(t, name)) {
				t.Fatal("Decode did not accept it")
			}
		})
	}
	for _, n := range []int{0, 1, 7, 1000} {
		for _, size := range []int{0, 1, 2, 3, 512, 1 << 14} {
			if n*size > 4<<20 {
				continue
			}
			if !differential(t, genBody(n, size, uint64(n*size))) {
				t.Fatalf("Decode did not accept %d records of %d bytes", n, size)
			}
		}
	}
}

// TestDecodeSharesNoMemory checks that the answer does not alias the body
// (which the middleware gives back to a pool), and that a record's Data
// cannot grow into the next one's.
func TestDecodeSharesNoMemory(t *testing.T) {
	body := genBody(3, 10, 1)
	out, ok := Decode(body)
	if !ok {
		t.Fatal("not accepted")
	}
	want, _ := sdkDecode(body)
	for i := range body {
		body[i] = 'x'
	}
	if eq, diff := equalOutputs(want, out); !eq {
		t.Fatalf("the answer changed with the body:\n%s", diff)
	}
	r := out.Records
	if cap(r[0].Data) != len(r[0].Data) {
		t.Fatalf("Data capacity %d, length %d", cap(r[0].Data), len(r[0].Data))
	}
	_ = append(r[0].Data, 1, 2, 3)
	if !bytes.Equal(r[1].Data, want.Records[1].Data) {
		t.Fatal("appending to one record's Data changed the next one's")
	}
}

// TestDecodeAllocs pins Decode's allocations: a constant number per answer,
// not per record.
func TestDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not pinned under the race detector")
	}
	for _, n := range []int{1, 1000} {
		body := genBody(n, 512, 2)
		allocs := testing.AllocsPerRun(20, func() {
			if _, ok := Decode(body); !ok {
				t.Fatal("not accepted")
			}
		})
		// output, records, data, strings, string pointers, timestamps,
		// MillisBehindLatest.
		if allocs > 7 {
			t.Errorf("%d records: %.0f allocations per answer, want at most 7", n, allocs)
		}
		// Fast's way, its Data released after each answer as the consumer
		// does: the data buffer, records, string pointers and timestamps
		// are reused; output, strings, the next iterator's pointer and
		// MillisBehindLatest remain.
		pooled := testing.AllocsPerRun(20, func() {
			_, data, ok := decode(body)
			if !ok {
				t.Fatal("not accepted")
			}
			data.Release()
		})
		if pooled > 4 {
			t.Errorf("%d records, data released: %.0f allocations per answer, want at most 4", n, pooled)
		}
	}
}
