package scalesim

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// TestShardPolls: GetRecords calls are counted by the shard their
// iterator reads, following each answer's next iterator; a call with an
// iterator nobody handed out counts for no shard, and a failed call
// leaves its iterator usable.
func TestShardPolls(t *testing.T) {
	p := newShardPolls()
	p.track(aws.String("a1"), "A")
	p.track(aws.String("b1"), "B")
	s := p.call(aws.String("a1"))
	p.answered(aws.String("a1"), aws.String("a2"), s)
	s = p.call(aws.String("a2"))
	p.answered(aws.String("a2"), aws.String("a3"), s)
	p.call(aws.String("b1")) // failed: b1 stays
	s = p.call(aws.String("b1"))
	p.answered(aws.String("b1"), nil, s) // the shard ended
	if s := p.call(aws.String("x")); s != "" {
		t.Errorf("an unknown iterator counted for %q", s)
	}
	if s := p.call(aws.String("a1")); s != "" {
		t.Errorf("a used-up iterator counted for %q", s)
	}
	got := p.counts()
	if got["A"] != 2 || got["B"] != 2 || len(got) != 2 {
		t.Errorf("counts %v, want A 2, B 2", got)
	}
	var none *shardPolls
	none.track(aws.String("a"), "A") // nil: counts nothing, and does not fail
	if s := none.call(aws.String("a")); s != "" {
		t.Errorf("nil counter counted for %q", s)
	}
}
