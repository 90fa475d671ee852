package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"golang.org/x/sync/errgroup"

	"github.com/shardsettle/lambdaadapter/lease"
)

// discover lists the shards (paginated) and makes sure each has a lease
// row, parents before children. A closed shard gets a row too, except on a
// LATEST start when none of its parents has one: it closed before this
// consumer's time and holds nothing after "now". (From TRIM_HORIZON or a
// timestamp a closed shard may hold records to read, so it always gets one.)
//
// It returns the stream's rows as it left them: those it read and those it
// wrote.
func (c *Consumer) discover(ctx context.Context) (lease.Snapshot, error) {
	// The lease rows are read while the shards are listed.
	var (
		snap     lease.Snapshot
		snapErr  error
		snapDone = make(chan struct{})
	)
	go func() {
		defer close(snapDone)
		sctx, cancel := c.storeContext(ctx)
		defer cancel()
		snap, snapErr = c.cfg.Store.Snapshot(sctx, c.cfg.Stream)
	}()
	defer func() { <-snapDone }()
	listed := map[string]kinesistypes.Shard{}
	var next *string
	for {
		in := &kinesis.ListShardsInput{}
		if next != nil {
			in.NextToken = next
		} else {
			c.streamInput(&in.StreamName, &in.StreamARN)
		}
		lctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := c.cfg.Kinesis.ListShards(lctx, in)
		cancel()
		var missing *kinesistypes.ResourceNotFoundException
		if errors.As(err, &missing) {
			// A stream deleted since the last listing: none of its shards
			// is listed now, so balancing takes none of its leases (each
			// would be taken and released as gone every round) until a
			// listing finds it again; its rows stay.
			c.mu.Lock()
			if c.listed != nil {
				c.listed, c.maxListed = map[string]kinesistypes.Shard{}, ""
			}
			c.mu.Unlock()
			return lease.Snapshot{}, &streamNotFound{fmt.Sprintf("consumer: stream not found: %s (ListShards: %s)", c.streamRef(), aws.ToString(missing.Message))}
		}
		if err != nil {
			return lease.Snapshot{}, fmt.Errorf("consumer: list shards of %s: %w", c.cfg.Stream, err)
		}
		for _, s := range out.Shards {
			listed[aws.ToString(s.ShardId)] = s
		}
		if out.NextToken == nil {
			break
		}
		next = out.NextToken
	}
	<-snapDone
	if snapErr != nil {
		return lease.Snapshot{}, snapErr
	}
	c.noteMalformed(ctx, c.cfg.Stream, snap)
	hasRow := make(map[string]bool, len(snap.Leases))
	for _, l := range snap.Leases {
		hasRow[l.Key.ShardID] = true
	}
	// A shard whose row cannot be read has one: it waits for the row's
	// repair (Ensure would find it and fail to read it, failing the
	// listing).
	for key := range snap.Malformed {
		if stream, shard, ok := strings.Cut(key, ":"); ok && stream == c.cfg.Stream {
			hasRow[shard] = true
		}
	}
	// Parents first: Kinesis numbers children after their parents.
	ids := make([]string, 0, len(listed))
	for id := range listed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Rows are written generation by generation, each generation
	// concurrently: a shard's row is written after its parents' rows.
	gen := map[string]int{}
	var gens [][]lease.Key
	for _, id := range ids {
		s := listed[id]
		parents := shardParents(s)
		if hasRow[id] {
			continue
		}
		closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
		if closed && c.cfg.Start.kind == posLatest && !slices.ContainsFunc(parents, func(p string) bool { return hasRow[p] }) {
			continue
		}
		g := 0
		for _, p := range parents {
			if pg, pending := gen[p]; pending {
				g = max(g, pg+1)
			}
		}
		gen[id] = g
		for len(gens) <= g {
			gens = append(gens, nil)
		}
		gens[g] = append(gens[g], lease.Key{Stream: c.cfg.Stream, ShardID: id})
		hasRow[id] = true
	}
	var mu sync.Mutex
	for _, keys := range gens {
		err := concurrently(keys, func(k lease.Key) error {
			sctx, cancel := c.storeContext(ctx)
			defer cancel()
			l, err := c.cfg.Store.Ensure(sctx, k, shardParents(listed[k.ShardID]))
			if err == nil {
				mu.Lock()
				snap.Leases = append(snap.Leases, l)
				mu.Unlock()
			}
			return err
		})
		if err != nil {
			return lease.Snapshot{}, err
		}
	}
	slices.SortFunc(snap.Leases, func(a, b lease.Lease) int { return strings.Compare(a.Key.ShardID, b.Key.ShardID) })
	c.mu.Lock()
	c.listed = listed
	c.maxListed = ""
	if len(ids) > 0 {
		c.maxListed = ids[len(ids)-1]
	}
	// The shards that ended so far have their children's rows now: a
	// leader planning on these rows need not list again (leadPart).
	c.leader.ended = endedIn(snap)
	c.mu.Unlock()
	return snap, nil
}

// endedIn counts the leases of snap checkpointed at SHARD_END.
func endedIn(snap lease.Snapshot) int {
	n := 0
	for _, l := range snap.Leases {
		if l.Checkpoint == lease.ShardEnd {
			n++
		}
	}
	return n
}

// StreamDescriber is the optional part of a KinesisAPI (a *kinesis.Client
// has it) that Run uses to learn the stream's ARN when Config.StreamARN is
// empty.
type StreamDescriber interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// resolveStreamARN learns the stream's ARN from DescribeStreamSummary when
// Config.StreamARN is empty and the client can describe streams; API calls
// keep naming the stream as configured. Without it, messages carry the
// stream's name in Message.StreamARN, and copies, dead-letter headers and
// delay messages name the stream by its name.
func (c *Consumer) resolveStreamARN(ctx context.Context) {
	d, ok := c.cfg.Kinesis.(StreamDescriber)
	if c.cfg.StreamARN != "" || !ok {
		return
	}
	for attempt := 1; ; attempt++ {
		dctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := d.DescribeStreamSummary(dctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(c.cfg.Stream)})
		cancel()
		if err == nil && out.StreamDescriptionSummary != nil && aws.ToString(out.StreamDescriptionSummary.StreamARN) != "" {
			c.arn = aws.ToString(out.StreamDescriptionSummary.StreamARN)
			return
		}
		var missing *kinesistypes.ResourceNotFoundException
		if errors.As(err, &missing) {
			return // discover reports the missing stream
		}
		if err == nil {
			err = errors.New("no StreamARN in the answer")
		}
		if attempt == 3 || ctx.Err() != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: cannot learn the stream's ARN (DescribeStreamSummary); messages and copies name the stream by its name",
				slog.String(attrError, err.Error()))
			return
		}
		if !sleep(ctx, time.Duration(attempt)*200*time.Millisecond) {
			return
		}
	}
}

// streamRef is the stream as messages, copies and delay messages name it:
// its ARN when known, else its name.
func (c *Consumer) streamRef() string {
	switch {
	case c.cfg.StreamARN != "":
		return c.cfg.StreamARN
	case c.arn != "":
		return c.arn
	}
	return c.cfg.Stream
}

func (c *Consumer) streamInput(name, arn **string) {
	if c.cfg.StreamARN != "" {
		*arn = aws.String(c.cfg.StreamARN)
	} else {
		*name = aws.String(c.cfg.Stream)
	}
}

func shardParents(s kinesistypes.Shard) []string {
	var parents []string
	if p := aws.ToString(s.ParentShardId); p != "" {
		parents = append(parents, p)
	}
	if p := aws.ToString(s.AdjacentParentShardId); p != "" {
		parents = append(parents, p)
	}
	return parents
}

// storeParallelism bounds the lease-store calls a worker makes at once when
// it writes many rows or takes many leases (start-up of a large stream).
const storeParallelism = 8

// concurrently calls fn for every item, at most storeParallelism at a time,
// and returns the first error after every call returned.
func concurrently[T any](items []T, fn func(T) error) error {
	var g errgroup.Group
	g.SetLimit(storeParallelism)
	for _, it := range items {
		g.Go(func() error { return fn(it) })
	}
	return g.Wait()
}

// streamNotFound is the error of a stream that does not exist: its
// message, which names the stream, matching ErrStreamNotFound.
type streamNotFound struct{ msg string }

func (e *streamNotFound) Error() string { return e.msg }
func (e *streamNotFound) Unwrap() error { return ErrStreamNotFound }
