package message

import "github.com/shardsettle/lambdaadapter/envelope"

// DeliveryHeaders is the number of headers Open gives every record besides
// its own: partition-key, kinesis-sequence-number and kinesis-shard-id.
const DeliveryHeaders = 3

// Open splits a Kinesis record's data into its RSK1 headers and payload,
// as both runners deliver it: the record's own headers are appended to
// backing, then the delivery headers are set from the record's key,
// sequence number and shard (replacing any of those names the envelope
// carried). It returns the payload (aliasing data), the record's headers as
// a full slice of backing (growing them cannot overwrite the next record's),
// the record's Attempt (from its retry count) and backing extended, for the
// next record.
func Open(backing envelope.Headers, data []byte, key, seq, shardID string) (payload []byte, h envelope.Headers, attempt int, rest envelope.Headers) {
	start := len(backing)
	backing, payload = envelope.DecodeInto(backing, data)
	attempt = AttemptOf(backing[start:])
	backing = setIn(backing, start, envelope.PartitionKeyHeader, key)
	backing = setIn(backing, start, envelope.SequenceNumberHeader, seq)
	backing = setIn(backing, start, envelope.ShardIDHeader, shardID)
	return payload, backing[start:len(backing):len(backing)], attempt, backing
}

// setIn sets name (lower-case, as DecodeInto leaves every name) among the
// headers backing[start:], appending it when missing.
func setIn(backing envelope.Headers, start int, name, value string) envelope.Headers {
	for i := start; i < len(backing); i++ {
		if backing[i].Name == name {
			backing[i].Value = value
			return backing
		}
	}
	return append(backing, envelope.Header{Name: name, Value: value})
}
