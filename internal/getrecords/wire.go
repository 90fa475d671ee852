package getrecords

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Wire returns out as Kinesis sends it: the JSON body of a 200 GetRecords
// answer (timestamps in epoch seconds with milliseconds, data in base64).
func Wire(out *kinesis.GetRecordsOutput) ([]byte, error) {
	type record struct {
		SequenceNumber              *string
		PartitionKey                *string
		Data                        *string     `json:",omitempty"`
		ApproximateArrivalTimestamp json.Number `json:",omitempty"`
		EncryptionType              string      `json:",omitempty"`
	}
	type answer struct {
		Records            []record
		NextShardIterator  *string            `json:",omitempty"`
		MillisBehindLatest *int64             `json:",omitempty"`
		ChildShards        []types.ChildShard `json:",omitempty"`
	}
	a := answer{Records: make([]record, len(out.Records)), NextShardIterator: out.NextShardIterator,
		MillisBehindLatest: out.MillisBehindLatest, ChildShards: out.ChildShards}
	for i, r := range out.Records {
		w := record{SequenceNumber: r.SequenceNumber, PartitionKey: r.PartitionKey, EncryptionType: string(r.EncryptionType)}
		if r.Data != nil {
			s := base64.StdEncoding.EncodeToString(r.Data)
			w.Data = &s
		}
		if t := r.ApproximateArrivalTimestamp; t != nil {
			ms := t.UnixMilli()
			if ms < 0 {
				return nil, errors.New("getrecords: Wire: an arrival time before 1970")
			}
			w.ApproximateArrivalTimestamp = json.Number(strconv.FormatInt(ms/1000, 10) + "." + strconv.FormatInt(1000+ms%1000, 10)[1:])
		}
		a.Records[i] = w
	}
	return json.Marshal(a)
}

// DecodeWire sends out over the wire and back: Wire, then Decode, as Fast
// decodes an answer. It is for fakes of Kinesis that want their callers to
// get answers as the SDK with Fast gives them: the records' data in one
// pooled Data (DataOf). That Data is overwritten with garbage when it is
// released, so a caller reading a record's data after releasing it reads
// garbage instead of a later answer's records, which may look right.
func DecodeWire(out *kinesis.GetRecordsOutput) (*kinesis.GetRecordsOutput, error) {
	body, err := Wire(out)
	if err != nil {
		return nil, err
	}
	res, data, ok := decode(body)
	if !ok {
		return nil, errors.New("getrecords: DecodeWire: Decode did not accept the answer")
	}
	if data != nil {
		data.scribble = true
		res.ResultMetadata.Set(dataKey{}, data)
	}
	return res, nil
}
