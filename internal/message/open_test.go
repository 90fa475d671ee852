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
	prev := enc(envelope.Headers{{Name: "x-prev", Value: "kept"}}, "p0")
	f.Fuzz(func(t *testing.T, data []byte, key, seq, shardID string) {
		wantPayload, wantHeaders, wantAttempt := openSlow(data, key, seq, shardID)
		for _, blocks := range []*Blocks{nil, {}} {
			// A record before this one in the same backing array (and,
			// with blocks, the same header blocks).
			_, h0, _, backing0 := Open(blocks, nil, prev, "k0", "0", "s0")
			before := append(envelope.Headers(nil), backing0...)
			payload, h, attempt, rest := Open(blocks, backing0, data, key, seq, shardID)
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
			if got := h0.Get("x-prev"); got != "kept" {
				t.Errorf("the record before's header x-prev = %q, want kept", got)
			}
		}
	})
}

// TestBlocks: the header strings of many records share a few allocations,
// and a block larger than the room left grows the builder without changing
// the strings handed out before.
func TestBlocks(t *testing.T) {
	small, err := envelope.Encode(envelope.Headers{{Name: "x-a", Value: "1"}}, []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	big, err := envelope.Encode(envelope.Headers{{Name: "x-big", Value: string(bytes.Repeat([]byte("v"), 3*blockSpare))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var blocks Blocks
	var kept []envelope.Headers
	backing := make(envelope.Headers, 0, 1024*(DeliveryHeaders+2))
	allocs := testing.AllocsPerRun(1, func() {
		for range 1000 {
			var h envelope.Headers
			_, h, _, backing = Open(&blocks, backing, small, "k", "1", "s")
			kept = append(kept, h)
		}
	})
	if allocs > 20 {
		t.Errorf("1,000 records with headers: %v allocations (beyond the kept list), want a few blocks", allocs)
	}
	_, hb, _, _ := Open(&blocks, backing, big, "k", "2", "s")
	if got := len(hb.Get("x-big")); got != 3*blockSpare {
		t.Errorf("x-big has %d bytes, want %d", got, 3*blockSpare)
	}
	for i, h := range kept {
		if h.Get("x-a") != "1" {
			t.Fatalf("record %d's x-a = %q after more records, want 1", i, h.Get("x-a"))
		}
	}
}
