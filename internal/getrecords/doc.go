// Package getrecords decodes the answer of Kinesis GetRecords faster than the
// AWS SDK's generic JSON deserializer, on the SDK's own middleware stack.
//
// Fast is a per-call option of (*kinesis.Client).GetRecords. It wraps the
// operation's deserializer (the Deserialize step's "OperationDeserializer")
// in place: a 200 answer's body is read once, into a pooled buffer sized by
// its Content-Length, and decoded by Decode in one pass without reflection.
// The records' data are base64-decoded straight into one buffer per answer:
// each Record.Data is a sub-slice of it (capacity clipped to its length), so
// nothing copies them again. Sequence numbers, partition keys and the next
// shard iterator share one string allocation; the timestamps and string
// pointers one slice each. An answer of 1,000 records costs a handful of
// allocations instead of several per record.
//
// The result is exactly what the SDK's deserializer returns for the same
// bytes (the tests compare both on real and fuzzed bodies), so callers,
// interfaces and fakes stay as they are:
//
//	out, err := client.GetRecords(ctx, in, getrecords.Fast)
//
// Everything else stays the SDK's: answers other than 200, bodies Decode does
// not accept (malformed JSON, unexpected types, an unreadable body, data
// with escapes or line breaks in its base64) are handed, byte for byte, to the
// SDK's own deserializer, so errors, their types, retries, throttling and
// signing are unchanged. Unknown fields are skipped (and validated as JSON).
//
// Memory: a record's Data keeps its answer's data buffer alive until every
// record of that answer that shares it is unreachable; strings likewise. A
// caller that knows when no record's Data is read any more gives the buffer
// back (DataOf(out).Release()), and a later answer is decoded into it: the
// consumer does, once the engine finished with every record of the answer.
// DecodeWire is for fakes of Kinesis that want their answers decoded the
// same way (its buffers are overwritten when released, so a late reader
// reads garbage).
package getrecords
