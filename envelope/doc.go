// Package envelope reads and writes the RSK1 envelope, the way
// ruststream-kinesis carries message headers in a Kinesis record.
//
// A Kinesis record holds only a data blob and a partition key. Headers other
// than the partition key (which travels as the record's own key, see
// PartitionKeyHeader) ride in front of the payload:
//
//	"RSK1"                        4 bytes, Magic
//	length of the header block    u32, big-endian
//	header block                  "name: value\n" per header, in order
//	payload                       the rest of the record
//
// Names are lower-case; the block is written only when there is a header to
// put in it, so a record without headers is its payload unchanged and any
// consumer can read it. For example, the headers content-type:
// application/json, x-tenant: acme and partition-key: user-42 with the payload
// {"id":1} encode to 62 bytes:
//
//	52 53 4b 31 00 00 00 2e                          RSK1, block of 46 bytes
//	content-type: application/json\nx-tenant: acme\n  the block
//	{"id":1}                                         the payload
//
// # Compatibility
//
// Append and Encode write the same bytes as ruststream-kinesis's
// encode_envelope for every header list they accept, among them an empty
// name and '\r' inside a name or value. They are stricter on what would
// corrupt the framing or not read back as the same name (a '\n' in a name
// or value, a ':' in a name, a name of whitespace only): they refuse it with
// an error matching ErrInvalidHeader, where ruststream writes it anyway.
// Values are bytes kept as they are; ruststream replaces invalid UTF-8 with
// U+FFFD.
//
// Decode, DecodeInto and DecodeIntoBuilder read what decode_envelope reads, with its leniency:
// data too short for the prefix, without Magic, or with a length prefix
// pointing past its end is a raw payload; lines without ':' are skipped; names
// and values are trimmed of surrounding whitespace, so a value with leading
// or trailing spaces does not survive a round trip; a repeated name keeps its
// first position and takes its last value; a line with an empty name is a
// header named "", and '\r' inside a name or value is kept. Every decoded
// header can be encoded again. They depart from ruststream only on input its
// encoder never writes: bytes that are not UTF-8 are kept where ruststream
// substitutes U+FFFD. They never allocate more than
// O(len(data)) bytes, whatever the length prefix claims, and nothing for a
// raw payload.
//
// The format is ambiguous in one case, as it is in ruststream: a payload sent
// without headers that itself begins with Magic and a length prefix that fits
// reads as an envelope. A publisher that must carry such payloads sets any
// header, which forces the envelope.
//
// # Usage
//
//	var h envelope.Headers
//	h.Set("content-type", "application/json")
//	h.Set(envelope.PartitionKeyHeader, "user-42") // not written into the data
//	data, err := envelope.Encode(h, payload)
//	...
//	headers, payload := envelope.Decode(data)
//
// The package is pure: no I/O, no goroutines. Its functions are safe for
// concurrent use; a Headers value is not safe for concurrent mutation.
package envelope
