package consumer

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// TestCheckpointOfAnotherShard (fault: a checkpoint that is a sequence
// number of another shard made the reader ask for an iterator every second,
// for ever, with a warning): Kinesis refuses the position, and the worker
// keeps the lease (no record skipped, the checkpoint untouched), says so in
// an error log naming the shard and the sequence number, and asks again less
// and less often; the other shards are read; a Seek to a sequence number of
// another shard is refused at once and moves nothing; a Seek to one of the
// shard's own reads it from there.
func TestCheckpointOfAnotherShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(2)
		bad, good := shardID(0), shardID(1)
		own := f.putNumbered(bad, 3, true)
		foreign := f.put(good, "k", "other")
		store := lease.NewMemory()
		// Another tool, or a hand edit, wrote shard 1's sequence number as
		// shard 0's checkpoint; its worker died.
		l, err := store.Ensure(t.Context(), lease.Key{Stream: testStream, ShardID: bad}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l, err = store.Take(t.Context(), l, "dead"); err != nil {
			t.Fatal(err)
		}
		if _, err = store.Checkpoint(t.Context(), l, foreign, 0); err != nil {
			t.Fatal(err)
		}
		var iterCalls atomic.Int64
		f.ReadFail = func(api, shard string) error {
			if api == "GetShardIterator" && shard == bad {
				iterCalls.Add(1)
			}
			return nil
		}
		logs := newAttrLog(slog.LevelError)
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", LeaseDuration: 3 * time.Second, Logger: slog.New(logs)}, handler(h))
		waitFor(t, "the other shard read", func() bool { return h.on(good) == 1 })
		waitFor(t, "both leases held", func() bool { return len(c.Owned()) == 2 })
		start := iterCalls.Load()
		time.Sleep(10 * time.Minute)
		// 1 s doubling to a minute: about 14 calls in ten minutes (600 at
		// one a second).
		if n := iterCalls.Load() - start; n > 20 {
			t.Errorf("%d GetShardIterator calls for the refused position in 10 minutes, want at most 20", n)
		}
		if got := c.Owned(); !slices.Contains(got, bad) {
			t.Errorf("held %v: the lease of the shard whose position is refused was given up", got)
		}
		if n := h.on(bad); n != 0 {
			t.Errorf("%d records of the shard handled: its position was skipped", n)
		}
		if got := checkpointOf(t, store, bad); got != foreign {
			t.Errorf("checkpoint %q, want it kept at %q", got, foreign)
		}
		if !logs.has("refuses the shard's position", "shard_id="+bad, "sequence_number="+foreign) {
			t.Errorf("error logs %q: want one naming shard %s and sequence number %s", logs.lines(), bad, foreign)
		}
		// A seek to a sequence number of another shard is refused.
		err = c.Seek(t.Context(), AtSequence(good, own[0]))
		if err == nil || !strings.Contains(err.Error(), own[0]) || !strings.Contains(err.Error(), good) {
			t.Errorf("Seek to shard 0's sequence number on shard 1: %v, want an error naming both", err)
		}
		time.Sleep(5 * time.Second)
		if n := h.on(good); n != 1 {
			t.Errorf("%d records of shard 1 handled after a refused seek, want 1 (the reader reads on)", n)
		}
		// A seek to one of the shard's own sequence numbers reads it.
		if err := c.Seek(t.Context(), AtSequence(bad, own[0])); err != nil {
			t.Fatalf("Seek: %v", err)
		}
		waitFor(t, "the shard read after the seek", func() bool { return h.on(bad) == 3 })
		stop()
	})
}

// TestGroupSeekRefused: in a group, a Seek by shard id to a sequence
// number of another stream is refused by the member that holds the shard,
// and that refusal is Seek's error, not another member's "not held".
func TestGroupSeekRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := awsfake.NewKinesis()
		k := &stream{Kinesis: fk}
		mem := lease.NewMemory()
		var cs []*Consumer
		for i, s := range []string{"a", "b"} {
			fk.CreateStream(s, 2-i) // shard 1 is a's alone
			cs = append(cs, newConsumer(t, Config{Stream: s, Kinesis: k, Store: mem, Owner: "w0", LeaseDuration: 3 * time.Second, Start: TrimHorizon()}, handler(newRecorder())))
		}
		g, err := NewGroup(cs...)
		if err != nil {
			t.Fatal(err)
		}
		foreign := fk.PutTo("b", shardID(0), "k", []byte("b-0"))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		waitFor(t, "every lease held", func() bool { return len(g.Owned()) == 3 })
		err = g.Seek(t.Context(), AtSequence(shardID(1), foreign))
		if err == nil || !strings.Contains(err.Error(), "is not of shard") {
			t.Errorf("Seek: %v, want the refusal of stream a's member", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// attrLog is a slog.Handler that keeps the records at or above a level,
// each as its message and its attributes as key=value.
type attrLog struct {
	level slog.Level
	mu    *sync.Mutex
	recs  *[]string
}

func newAttrLog(level slog.Level) attrLog {
	return attrLog{level: level, mu: new(sync.Mutex), recs: new([]string)}
}

func (a attrLog) Enabled(_ context.Context, l slog.Level) bool { return l >= a.level }
func (a attrLog) WithAttrs([]slog.Attr) slog.Handler           { return a }
func (a attrLog) WithGroup(string) slog.Handler                { return a }
func (a attrLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(at slog.Attr) bool {
		b.WriteString(" " + at.Key + "=" + at.Value.String())
		return true
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	*a.recs = append(*a.recs, b.String())
	return nil
}

func (a attrLog) lines() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(*a.recs)
}

// has reports whether one record contains every part.
func (a attrLog) has(parts ...string) bool { return a.count(parts...) > 0 }

// count returns how many records contain every part.
func (a attrLog) count(parts ...string) int {
	n := 0
	for _, l := range a.lines() {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			n++
		}
	}
	return n
}

// TestSubscribeRefusedPosition: with enhanced fan-out, a starting sequence
// number Kinesis refuses for the shard is not skipped past either: each
// refusal is an error log naming the shard and the sequence number, and
// the subscription is asked for again after 1 s, 2 s, 4 s, ... (not every
// few seconds for ever, as a passing fault is); once a subscription is
// accepted, reading goes on from there.
func TestSubscribeRefusedPosition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFanOutStream(1)
		refused := &kinesistypes.InvalidArgumentException{Message: aws.String("StartingSequenceNumber s9 used in SubscribeToShard on shard shardId-000000000000 is invalid because it did not come from this stream")}
		sub := newFakeSub()
		sb := &subscriber{replies: []any{refused, refused, refused, refused, refused, refused, sub}}
		s := fanOutShard(t, f, shardID(0), sb)
		logs := newAttrLog(slog.LevelError)
		s.c.log = slog.New(logs)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		out := make(chan batch)
		done := subscribeIn(ctx, s, Position{kind: posSequence, seq: "s9"}, out)
		sub.send(event("s10", "s10"))
		if got := seqsOf(receive(t, out)); !slices.Equal(got, []string{"s10"}) {
			t.Errorf("batch %v", got)
		}
		times := sb.callTimes()
		var gaps []time.Duration
		for i := 1; i < len(times); i++ {
			gaps = append(gaps, times[i].Sub(times[i-1]))
		}
		if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second}, gaps); diff != "" {
			t.Errorf("waits between the calls (-want +got):\n%s", diff)
		}
		if n := logs.count("refuses the shard's position", "shard_id="+shardID(0), "sequence_number=s9"); n != 6 {
			t.Errorf("%d error logs naming the shard and s9, want 6: %q", n, logs.lines())
		}
		cancel()
		<-done
	})
}
