package lease_test

import (
	"strings"
	"testing"

	"github.com/shardsettle/lambdaadapter/lease"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    lease.Key
		wantErr string // substring of the error; "" for success
	}{
		{in: "orders:shardId-000000000000", want: lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}},
		{in: "a.b_c-d:shardId-1", want: lease.Key{Stream: "a.b_c-d", ShardID: "shardId-1"}},
		// The split is at the first ':': stream names never contain one.
		{in: "orders:odd:shard", want: lease.Key{Stream: "orders", ShardID: "odd:shard"}},
		{in: "orders", wantErr: `lease: malformed key "orders": want stream:shardId`},
		{in: "", wantErr: "want stream:shardId"},
		{in: ":shardId-0", wantErr: "empty stream name"},
		{in: "orders:", wantErr: "empty shard id"},
		{in: ":", wantErr: "empty stream name"},
		// The key of a worker row is never a lease's.
		{in: "orders:@worker:w1", wantErr: `shard id starts with "@"`},
		{in: "orders:@", wantErr: "reserved"},
		{in: "orders:shard@1", want: lease.Key{Stream: "orders", ShardID: "shard@1"}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := lease.ParseKey(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseKey(%q) = %#v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
				}
				if got != (lease.Key{}) {
					t.Fatalf("ParseKey(%q) returned %#v with its error, want the zero Key", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseKey(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
			}
			if s := got.String(); s != tc.in {
				t.Fatalf("String() = %q, want %q", s, tc.in)
			}
		})
	}
}

func TestKeyString(t *testing.T) {
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000007"}
	if got, want := k.String(), "orders:shardId-000000000007"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

// FuzzParseKey checks that ParseKey never panics, that what it accepts
// prints back to its input, and that every valid key survives a round trip.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"orders:shardId-000000000000", "orders:@worker:w1", "a:b:c", ":", "", "x:", ":y", "\x00:\xff", "arn:aws:kinesis:us-east-1:1:stream/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := lease.ParseKey(s)
		if err != nil {
			if k != (lease.Key{}) {
				t.Fatalf("ParseKey(%q) returned %#v with error %v", s, k, err)
			}
			if !strings.HasPrefix(err.Error(), "lease: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
			return
		}
		if k.Stream == "" || k.ShardID == "" || strings.Contains(k.Stream, ":") || strings.HasPrefix(k.ShardID, "@") {
			t.Fatalf("ParseKey(%q) accepted invalid key %#v", s, k)
		}
		if got := k.String(); got != s {
			t.Fatalf("ParseKey(%q).String() = %q", s, got)
		}
		again, err := lease.ParseKey(k.String())
		if err != nil || again != k {
			t.Fatalf("round trip of %#v: %#v, %v", k, again, err)
		}
	})
}
