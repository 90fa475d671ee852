package message

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// Unpack is what the Kinesis record whose message is m (opened from data
// with Open) delivers, from user record skip on. agg is false for an
// ordinary record: m itself is delivered. For a KPL aggregate, users are
// its user records from skip on (UserRecords, with m's fields but not its
// payload and headers) and n the number in the aggregate: none are left
// when every one settled before a restart. An aggregate whose MD5 matches
// but whose body is malformed is poison: poison says what is wrong, and m's
// payload becomes the raw aggregate, to be dead-lettered as it came. Both
// runners turn records into deliveries with it.
func Unpack(m *Message, data []byte, skip int) (users []Message, n int, agg bool, poison error) {
	if !MaybeAggregate(data) {
		return nil, 0, false, nil
	}
	base := *m
	base.Payload, base.Headers = nil, nil
	users, n, agg, poison = UserRecords(&base, data, skip)
	if poison != nil {
		m.Payload = data
	}
	return users, n, agg, poison
}

// MaybeAggregate reports whether data starts with the KPL magic bytes: only
// such a record needs UserRecords, which checks its MD5.
func MaybeAggregate(data []byte) bool {
	return kpl.HasMagic(data)
}

// UserRecords opens the Kinesis record that base describes, whose data is
// data, as a KPL aggregated record. It is the one place both modes turn an
// aggregate into messages.
//
// Not an aggregate (no magic, too short, or an MD5 that does not match:
// user data may start with the magic bytes): ok is false and the record is
// an ordinary one. A matching MD5 over a malformed body: ok is true and err
// says what is wrong, naming the record; the record is poison (see
// engine.Delivery.Poison). Otherwise ms holds one Message per user record
// from index skip on (the user records before skip settled before a
// restart): base's fields, with the user record's payload (its RSK1
// envelope opened), partition key, explicit hash key, Aggregated set,
// SubSequenceNumber its index, Attempt from its own retry count, and the
// delivery headers partition-key, kinesis-sequence-number,
// kinesis-shard-id and kinesis-sub-sequence-number. The payloads alias
// data. n is the number of user records in the aggregate.
func UserRecords(base *Message, data []byte, skip int) (ms []Message, n int, ok bool, err error) {
	users, ok, err := kpl.Deaggregate(data)
	if !ok {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, true, fmt.Errorf("shard %s, sequence number %s: %w", base.ShardID, base.SequenceNumber, err)
	}
	skip = min(max(skip, 0), len(users))
	ms = make([]Message, len(users)-skip)
	for i := range ms {
		sub := skip + i
		u := &users[sub]
		h, payload := envelope.Decode(u.Data)
		attempt := AttemptOf(h)
		h = slices.Grow(h, 4) // the delivery headers
		h.Set(envelope.PartitionKeyHeader, u.PartitionKey)
		h.Set(envelope.SequenceNumberHeader, base.SequenceNumber)
		h.Set(envelope.ShardIDHeader, base.ShardID)
		h.Set(envelope.SubSequenceNumberHeader, strconv.Itoa(sub))
		m := *base
		m.replier = nil
		m.Payload = payload
		m.Headers = h
		m.PartitionKey = u.PartitionKey
		m.ExplicitHashKey = u.ExplicitHashKey
		m.Aggregated = true
		m.SubSequenceNumber = sub
		m.Attempt = attempt
		ms[i] = m
	}
	return ms, len(users), true, nil
}
