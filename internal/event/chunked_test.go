package event

import (
	"strconv"
	"testing"
)

// TestDecodeKinesisChunkedLarge runs checkChunked on events of many records
// (checkOracle's inputs have few) and on the hostile inputs: every chunk
// size gives DecodeKinesis's result or error.
func TestDecodeKinesisChunkedLarge(t *testing.T) {
	inputs := map[string][]byte{
		"1000 records":               genEvent(1000, 64, 7),
		"300 records of 2 KB":        genEvent(300, 2048, 3),
		"129 records":                genEvent(129, 100, 1),
		"bad data in record 200":     []byte(badDataEvent(300, 200)),
		"bad sequence number in 250": []byte(badSeqEvent(300, 250)),
	}
	for name, in := range hostileInputs() {
		inputs["hostile: "+name] = in
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			want, err := DecodeKinesis(in)
			checkChunked(t, in, want, err)
		})
	}
}

// badDataEvent is an event of n records whose record bad has data that is
// not base64.
func badDataEvent(n, bad int) string {
	s := `{"Records":[`
	for i := range n {
		if i > 0 {
			s += ","
		}
		data := "QUJD"
		if i == bad {
			data = "QU!D"
		}
		s += `{"kinesis":{"sequenceNumber":"` + strconv.Itoa(i+1) + `","data":"` + data + `"}}`
	}
	return s + `]}`
}

// badSeqEvent is an event of n records whose record bad has a sequence
// number that is not a number, and a record after it with bad data.
func badSeqEvent(n, bad int) string {
	s := `{"Records":[`
	for i := range n {
		if i > 0 {
			s += ","
		}
		seq, data := strconv.Itoa(i+1), "QUJD"
		if i == bad {
			seq = "x"
		}
		if i == bad+1 || i == bad-100 {
			data = "QU!D"
		}
		s += `{"kinesis":{"sequenceNumber":"` + seq + `","data":"` + data + `"}}`
	}
	return s + `]}`
}
