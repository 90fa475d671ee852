package envelope_test

import (
	"fmt"
	"strings"

	"github.com/shardsettle/lambdaadapter/envelope"
)

func ExampleEncode() {
	var h envelope.Headers
	h.Set("Content-Type", "application/json")
	h.Set("x-tenant", "acme")
	h.Set(envelope.PartitionKeyHeader, "user-42") // travels as the record's key

	data, err := envelope.Encode(h, []byte(`{"id":1}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d bytes: % x\n", len(data), data[:8])
	fmt.Printf("%q\n", data[8:])

	// Without headers other than the partition key, the record is the payload.
	data, _ = envelope.Encode(envelope.Headers{{Name: envelope.PartitionKeyHeader, Value: "user-42"}}, []byte(`{"id":1}`))
	fmt.Printf("%s\n", data)

	_, err = envelope.Encode(envelope.Headers{{Name: "x-a", Value: "1\n2"}}, nil)
	fmt.Println(err)
	// Output:
	// 62 bytes: 52 53 4b 31 00 00 00 2e
	// "content-type: application/json\nx-tenant: acme\n{\"id\":1}"
	// {"id":1}
	// envelope: header "x-a" value contains newline
}

func ExampleDecode() {
	data := []byte("RSK1\x00\x00\x00\x2econtent-type: application/json\nx-tenant: acme\n{\"id\":1}")
	h, payload := envelope.Decode(data)
	for name, value := range h.All() {
		fmt.Printf("%s = %s\n", name, value)
	}
	fmt.Printf("payload %s\n", payload)

	// Anything that is not an envelope is a payload without headers.
	h, payload = envelope.Decode([]byte(`{"id":2}`))
	fmt.Println(h.Len(), string(payload))
	// Output:
	// content-type = application/json
	// x-tenant = acme
	// payload {"id":1}
	// 0 {"id":2}
}

func ExampleAppend() {
	buf := make([]byte, 0, 1024) // reused for every record
	for i := range 2 {
		h := envelope.Headers{{Name: "x-n", Value: fmt.Sprint(i)}}
		var err error
		buf, err = envelope.Append(buf[:0], h, []byte("payload"))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("% x %q\n", buf[:8], buf[8:])
	}
	// Output:
	// 52 53 4b 31 00 00 00 07 "x-n: 0\npayload"
	// 52 53 4b 31 00 00 00 07 "x-n: 1\npayload"
}

func ExampleDecodeInto() {
	records := [][]byte{
		[]byte("RSK1\x00\x00\x00\x05a: 1\none"),
		[]byte("two"),
	}
	var backing envelope.Headers // one array for the headers of every record
	for _, data := range records {
		start := len(backing)
		var payload []byte
		backing, payload = envelope.DecodeInto(backing, data)
		h := backing[start:len(backing):len(backing)] // this record's own
		fmt.Println(h, string(payload))
	}
	// Output:
	// [{a 1}] one
	// [] two
}

func ExampleDecodeIntoBuilder() {
	records := [][]byte{
		[]byte("RSK1\x00\x00\x00\x05a: 1\none"),
		[]byte("RSK1\x00\x00\x00\x05b: 2\ntwo"),
	}
	var strs strings.Builder // one allocation for the header strings of every record
	strs.Grow(64)
	var backing envelope.Headers
	for _, data := range records {
		start := len(backing)
		var payload []byte
		backing, payload = envelope.DecodeIntoBuilder(backing, data, &strs)
		fmt.Println(backing[start:len(backing):len(backing)], string(payload))
	}
	// Output:
	// [{a 1}] one
	// [{b 2}] two
}
