package message

import (
	"strings"

	"github.com/shardsettle/lambdaadapter/envelope"
)

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
//
// blocks, when not nil, holds the header strings (see Blocks); otherwise
// the record's headers get a string of their own.
func Open(blocks *Blocks, backing envelope.Headers, data []byte, key, seq, shardID string) (payload []byte, h envelope.Headers, attempt int, rest envelope.Headers) {
	start := len(backing)
	if blocks != nil && len(data) >= len(envelope.Magic) && string(data[:len(envelope.Magic)]) == envelope.Magic {
		backing, payload = envelope.DecodeIntoBuilder(backing, data, blocks.room())
	} else {
		backing, payload = envelope.DecodeInto(backing, data)
	}
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

// Blocks holds the header blocks of many records' envelopes in a few
// allocations instead of one each: a strings.Builder, started anew with
// room for more once it has less than blockSpare left. A builder never
// changes what it wrote, so the headers stay valid and unchanged for as
// long as a handler keeps them, whatever Blocks holds later. The zero value
// is ready; a Blocks is not safe for concurrent use.
type Blocks struct{ sb strings.Builder }

const (
	// blockSpare is the room below which Blocks starts a new builder (a
	// larger header block grows the builder, which copies it once).
	blockSpare = 256
	// blockMax is the size Blocks' builders double to, from blockSpare.
	blockMax = 8 << 10
)

// room returns the builder, with at least blockSpare bytes of room.
func (b *Blocks) room() *strings.Builder {
	if b.sb.Cap()-b.sb.Len() < blockSpare {
		size := min(max(2*b.sb.Cap(), blockSpare), blockMax)
		b.sb = strings.Builder{}
		b.sb.Grow(size)
	}
	return &b.sb
}
