package message

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/envelope"
)

// openSlow is what Open replaces: decode the envelope into headers of its
// own, then set the delivery headers with Headers.Set.
func openSlow(data []byte, key, seq, shardID string) ([]byte, envelope.Headers, int) {
	h, payload := envelope.Decode(data)
	attempt := AttemptOf(h)
	h.Set(envelope.PartitionKeyHeader, key)
	h.Set(envelope.SequenceNumberHeader, seq)
	h.Set(envelope.ShardIDHeader, shardID)
	return payload, h, attempt
}

// FuzzOpen: Open gives the payload, headers and Attempt of the slow way, for
// any record, appended to a backing array it shares with the records before,
// which it leaves as they were.
func FuzzOpen(f *testing.F) {
	enc := func(h envelope.Headers, p string) []byte {
		b, err := envelope.Encode(h, []byte(p))
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add([]byte("raw"), "k", "1", "shardId-000000000000")
	f.Add(enc(envelope.Headers{{Name: "x-a", Value: "1"}, {Name: "x-ruststream-retry-count", Value: "3"}}, "p"), "k", "49590", "s")
	f.Add(enc(envelope.Headers{{Name: "partition-key", Value: "old"}, {Name: "Kinesis-Shard-Id", Value: "x"}}, ""), "new", "2", "s2")
	f.Add([]byte(envelope.Magic+"\x00\x00\x00\x05a:b\nc"), "", "", "")
	f.Fuzz(func(t *testing.T, data []byte, key, seq, shardID string) {
		wantPayload, wantHeaders, wantAttempt := openSlow(data, key, seq, shardID)
		// A record before this one in the same backing array.
		_, _, _, backing0 := Open(nil, []byte("first"), "k0", "0", "s0")
		before := append(envelope.Headers(nil), backing0...)
		payload, h, attempt, rest := Open(backing0, data, key, seq, shardID)
		if !bytes.Equal(payload, wantPayload) {
			t.Errorf("payload %q, want %q", payload, wantPayload)
		}
		if diff := cmp.Diff(wantHeaders, h); diff != "" {
			t.Errorf("headers (-slow +Open):\n%s", diff)
		}
		if attempt != wantAttempt {
			t.Errorf("attempt %d, want %d", attempt, wantAttempt)
		}
		if cap(h) != len(h) {
			t.Errorf("headers have room (%d of %d): growing them would overwrite the next record's", len(h), cap(h))
		}
		if diff := cmp.Diff(before, rest[:len(before)]); diff != "" {
			t.Errorf("the record before changed (-was +now):\n%s", diff)
		}
	})
}
