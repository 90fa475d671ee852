package consumer

import (
	"context"
	"encoding/base64"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// deletable is the fake Kinesis with one stream that can be deleted:
// every call about it then answers ResourceNotFoundException, as Kinesis
// does.
type deletable struct {
	*stream
	name string
	gone atomic.Bool
}

func (d *deletable) missing(name, arn *string) error {
	if d.gone.Load() && (aws.ToString(name) == d.name || strings.HasSuffix(aws.ToString(arn), ":stream/"+d.name)) {
		return &kinesistypes.ResourceNotFoundException{Message: aws.String("Stream " + d.name + " not found")}
	}
	return nil
}

func (d *deletable) ListShards(ctx context.Context, in *kinesis.ListShardsInput, o ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if err := d.missing(in.StreamName, in.StreamARN); err != nil {
		return nil, err
	}
	return d.stream.ListShards(ctx, in, o...)
}

func (d *deletable) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, o ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if err := d.missing(in.StreamName, in.StreamARN); err != nil {
		return nil, err
	}
	return d.stream.GetShardIterator(ctx, in, o...)
}

// GetRecords knows the stream of an iterator from the fake's iterator
// (its stream's name first).
func (d *deletable) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, o ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(aws.ToString(in.ShardIterator), "AAAAAAAAAAF"))
	if name, _, _ := strings.Cut(string(raw), "|"); name != "" {
		if err := d.missing(aws.String(name), nil); err != nil {
			return nil, err
		}
	}
	return d.stream.GetRecords(ctx, in, o...)
}

// takeCounter counts the takes of one stream's leases.
type takeCounter struct {
	lease.Store
	stream string
	takes  atomic.Int64
}

func (s *takeCounter) Take(ctx context.Context, l lease.Lease, owner string) (lease.Lease, error) {
	if l.Key.Stream == s.stream {
		s.takes.Add(1)
	}
	return s.Store.Take(ctx, l, owner)
}

// TestGroupStreamDeleted: a stream of a group deleted while it runs is
// logged at every listing and tried again, and the other streams are read
// on. Its shards are not taken again and again: each of its readers stops
// (the shard is gone), and balancing leaves its leases alone until a
// listing finds the stream again (its last listing, from before the
// deletion, took and released every lease every round). Whichever stream
// goes, the primary's or another, the leader goes on planning the rest.
func TestGroupStreamDeleted(t *testing.T) {
	for _, deleted := range []string{"a", "b"} {
		t.Run(deleted, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fk := awsfake.NewKinesis()
				k := &deletable{stream: &stream{Kinesis: fk}, name: deleted}
				store := &takeCounter{Store: lease.NewMemory(), stream: deleted}
				recs := map[string]*recorder{}
				streams := []string{"a", "b", "c"}
				var ws []worker
				for _, s := range streams {
					fk.CreateStream(s, 2)
					recs[s] = newRecorder()
				}
				for _, owner := range []string{"w0", "w1"} {
					ws = append(ws, startGroup(t, k, store, owner, streams, recs, AssignByLoad, func(c *Config) { c.ListInterval = 5 * time.Second }))
				}
				waitFor(t, "every lease held", func() bool { return ws[0].owned()+ws[1].owned() == 6 })
				k.gone.Store(true)
				time.Sleep(10 * time.Second) // the readers find the stream gone
				before := store.takes.Load()
				time.Sleep(60 * time.Second)
				if n := store.takes.Load() - before; n > 2 {
					t.Errorf("stream %s deleted: its leases were taken %d times in a minute, want none", deleted, n)
				}
				for _, s := range streams {
					if s == deleted {
						continue
					}
					fk.PutTo(s, shardID(0), "k", []byte(s+"-after"))
					fk.PutTo(s, shardID(1), "k", []byte(s+"-after"))
				}
				waitFor(t, "the other streams read on", func() bool {
					for _, s := range streams {
						if s != deleted && recs[s].count() < 2 {
							return false
						}
					}
					return true
				})
				// A worker that stops: its leases of the other streams go to the other.
				ws[0].stop()
				waitFor(t, "the other streams' leases all held by the worker left", func() bool {
					return ws[1].owned() == 4
				})
				ws[1].stop()
			})
		})
	}
}

// listFails fails the first n ListShards calls about one stream, as a
// throttled or unreachable Kinesis would.
type listFails struct {
	*stream
	name string
	n    atomic.Int64
}

func (l *listFails) ListShards(ctx context.Context, in *kinesis.ListShardsInput, o ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if (aws.ToString(in.StreamName) == l.name || strings.HasSuffix(aws.ToString(in.StreamARN), ":stream/"+l.name)) && l.n.Add(-1) >= 0 {
		return nil, &kinesistypes.LimitExceededException{Message: aws.String("Rate exceeded for stream " + l.name)}
	}
	return l.stream.ListShards(ctx, in, o...)
}

// TestGroupFirstListingFails: a worker whose first listing of a stream
// fails (throttled) lists it again at its next balancing round, not a
// listing interval later: until a stream is listed the group's leader
// plans none of its leases (the others' it plans: see
// TestLeaderPlansOtherStreamsWhileItsOwnIsUnlisted), and the
// leader row, written by the fleet's last leader, keeps every member from
// balancing for itself meanwhile.
func TestGroupFirstListingFails(t *testing.T) {
	for _, failing := range []string{"a", "b"} {
		t.Run(failing, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fk := awsfake.NewKinesis()
				k := &listFails{stream: &stream{Kinesis: fk}, name: failing}
				mem := lease.NewMemory()
				streams := []string{"a", "b"}
				for _, s := range streams {
					fk.CreateStream(s, 2)
				}
				start := func(owner string) worker {
					var cs []*Consumer
					for _, s := range streams {
						cs = append(cs, newConsumer(t, Config{Stream: s, Kinesis: k, Store: mem, Owner: owner, LeaseDuration: 3 * time.Second, ListInterval: 2 * time.Minute, Start: TrimHorizon()}, handler(newRecorder())))
					}
					g, err := NewGroup(cs...)
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithCancel(t.Context())
					done := make(chan error, 1)
					go func() { done <- g.Run(ctx) }()
					return worker{cs: cs, stop: func() {
						cancel()
						if err := <-done; err != nil {
							t.Errorf("Run: %v", err)
						}
					}}
				}
				// The fleet's last leader planned both streams, and stopped.
				old := start("w9")
				waitFor(t, "the old worker holds every lease, planning both streams", func() bool {
					l, _ := mem.Get(context.Background(), lease.LeaderKey("a"))
					return old.owned() == 4 && l.Checkpoint == "plan:leader:a,b"
				})
				old.stop()
				k.n.Store(1)
				began := time.Now()
				w := start("w0")
				waitFor(t, "every lease held", func() bool { return w.owned() == 4 })
				if took := time.Since(began); took > 15*time.Second {
					t.Errorf("the first listing of %s failed: every lease held after %v, want a few balancing rounds", failing, took)
				}
				w.stop()
			})
		})
	}
}
