package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/lease"
)

// Log attribute keys, shared with Lambda mode.
const (
	attrShardID        = "shard_id"
	attrSequenceNumber = "sequence_number"
	attrPartitionKey   = "partition_key"
	attrOutcome        = "outcome"
	attrAttempt        = "attempt"
	attrError          = "error"
	attrOwner          = "owner"
)

// ErrStreamNotFound is matched by the error Run returns when the stream
// does not exist when it starts (Kinesis answers ResourceNotFoundException).
// Later, a stream that disappears is logged at every listing and retried.
var ErrStreamNotFound = errors.New("stream not found")

// Consumer reads a stream's shards through leases and runs the handler over
// their records with exact per-record settlement. Create it with New; run it
// with Run. Its methods are safe for concurrent use.
type Consumer struct {
	cfg      Config
	log      *slog.Logger
	ch       chan *delivery
	inflight atomic.Int64
	lost     chan *shard // shards whose checkpoint was refused: lease lost
	writer   *writer     // batches Kinesis writes; nil without a Publisher
	arn      string      // the stream's ARN learnt at start, when not configured; set before any reader starts

	mu      sync.Mutex
	shards  map[string]*shard // owned shards, by shard id
	tracker *lease.Tracker
	listed  map[string]kinesistypes.Shard // last ListShards answer, by shard id
	readers sync.WaitGroup
	readCtx context.Context // readers' parent; cancelled at shutdown
	stopped bool
}

// New validates cfg and returns a Consumer.
func New(cfg Config) (*Consumer, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = lease.NewOwnerID(host, "")
	}
	return &Consumer{
		cfg:     cfg,
		log:     cfg.Logger.With(slog.String(attrOwner, cfg.Owner), slog.String("stream", cfg.Stream)),
		ch:      make(chan *delivery, ChannelSize),
		lost:    make(chan *shard, 64),
		shards:  map[string]*shard{},
		tracker: lease.NewTracker(cfg.LeaseDuration),
	}, nil
}

// Owner returns this worker's owner id.
func (c *Consumer) Owner() string { return c.cfg.Owner }

// Owned returns the ids of the shards this worker holds, sorted.
func (c *Consumer) Owned() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.shards))
	for id := range c.shards {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Run consumes until ctx is cancelled, then stops gracefully: it stops
// reading, lets the records in flight settle (at most ShutdownTimeout),
// writes every shard's checkpoint and releases its leases so other workers
// take them at once. It returns nil after a graceful stop, or at once an
// error when it cannot start: a missing lease table (lease.ErrTableNotFound)
// or a missing stream (ErrStreamNotFound).
func (c *Consumer) Run(ctx context.Context) error {
	readCtx, stopReaders := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReaders()
	handlerCtx, stopHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHandlers()
	c.mu.Lock()
	c.readCtx = readCtx
	c.mu.Unlock()

	// The stream's ARN (for messages and copies) is looked up while the
	// shards are listed; readers start only after both.
	resolved := make(chan struct{})
	go func() {
		defer close(resolved)
		c.resolveStreamARN(ctx)
	}()
	if c.cfg.Publisher != nil {
		c.writer = newWriter(c)
	}
	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		c.dispatch(handlerCtx)
	}()

	known, err := c.discover(ctx)
	<-resolved
	if err != nil && !errors.Is(err, context.Canceled) {
		if errors.Is(err, lease.ErrTableNotFound) || errors.Is(err, ErrStreamNotFound) {
			stopReaders()
			close(c.ch)
			<-dispatched
			if c.writer != nil {
				c.writer.close(c.cfg.ShutdownTimeout)
			}
			return err
		}
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: listing shards failed; will retry", slog.String(attrError, err.Error()))
	}
	if err == nil {
		// The rows discover just read and wrote: no second listing.
		c.balanceWith(ctx, known)
	} else {
		c.balance(ctx)
	}

	// Renewal has a goroutine and a timer of its own, so slow listing or
	// balancing never delays it past the lease duration.
	renewCtx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		renew := time.NewTicker(c.cfg.LeaseDuration / 3)
		defer renew.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-renew.C:
				c.renew(renewCtx)
			}
		}
	}()
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		if c.cfg.DelayQueue == "" {
			return
		}
		if c.cfg.DelayReceiver == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: this process does not forward the delay queue (no DelayReceiver); subscribe a function running this adapter to it, or its delayed records stay there",
				slog.String("queue", c.cfg.DelayQueue))
			return
		}
		// Receiving stops with ctx; a forward under way then gets at most
		// ShutdownTimeout to finish (what it did not delete comes again).
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stopAfter := context.AfterFunc(ctx, func() { time.AfterFunc(c.cfg.ShutdownTimeout, cancel) })
		defer stopAfter()
		c.forwardDelays(ctx, fctx)
	}()
	take := time.NewTicker(c.cfg.LeaseDuration / 2)
	defer take.Stop()
	list := time.NewTicker(c.cfg.ListInterval)
	defer list.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case s := <-c.lost:
			c.drop(s, "checkpoint refused: lease lost")
		case <-take.C:
			c.balance(ctx)
		case <-list.C:
			if _, err := c.discover(ctx); err != nil && ctx.Err() == nil {
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: listing shards failed; will retry", slog.String(attrError, err.Error()))
			}
		}
	}
	// Leases stay renewed while records in flight settle.
	c.shutdown(stopReaders, stopHandlers, dispatched)
	stopRenewing()
	<-renewed
	<-forwarded
	return nil
}

// shutdown is the graceful stop.
func (c *Consumer) shutdown(stopReaders, stopHandlers context.CancelFunc, dispatched <-chan struct{}) {
	bg := context.Background()
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	stopReaders()
	c.readers.Wait()
	// Every delivery in flight gets ShutdownTimeout to settle.
	deadline := time.Now().Add(c.cfg.ShutdownTimeout)
	for c.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := c.inflight.Load(); n > 0 {
		c.log.LogAttrs(bg, slog.LevelWarn, "consumer: shutdown timeout with records in flight; they come again from the checkpoint", slog.Int64("in_flight", n))
	}
	stopHandlers()
	close(c.ch)
	select {
	case <-dispatched:
	case <-time.After(c.cfg.ShutdownTimeout):
		c.log.LogAttrs(bg, slog.LevelWarn, "consumer: handlers still running after the shutdown timeout")
	}
	if c.writer != nil && !c.writer.close(c.cfg.ShutdownTimeout) {
		c.log.LogAttrs(bg, slog.LevelWarn, "consumer: retry copies still being written after the shutdown timeout; their records come again from the checkpoint")
	}
	c.mu.Lock()
	owned := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		owned = append(owned, s)
	}
	c.shards = map[string]*shard{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range owned {
		wg.Go(func() {
			s.ck.stop()
			s.release(bg)
		})
	}
	wg.Wait()
}

// discover lists the shards (paginated) and makes sure each has a lease
// row, with its parents.
//
// It returns the stream's lease rows as it left them: those it read and
// those it wrote.
func (c *Consumer) discover(ctx context.Context) ([]lease.Lease, error) {
	// The lease rows are read while the shards are listed.
	var (
		existing []lease.Lease
		listErr  error
		listDone = make(chan struct{})
	)
	go func() {
		defer close(listDone)
		existing, listErr = c.cfg.Store.List(ctx, c.cfg.Stream)
	}()
	defer func() { <-listDone }()
	listed := map[string]kinesistypes.Shard{}
	var next *string
	for {
		in := &kinesis.ListShardsInput{}
		if next != nil {
			in.NextToken = next
		} else {
			c.streamInput(&in.StreamName, &in.StreamARN)
		}
		out, err := c.cfg.Kinesis.ListShards(ctx, in)
		var missing *kinesistypes.ResourceNotFoundException
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("consumer: %w: %s (ListShards: %s)", ErrStreamNotFound, c.streamRef(), aws.ToString(missing.Message))
		}
		if err != nil {
			return nil, fmt.Errorf("consumer: list shards of %s: %w", c.cfg.Stream, err)
		}
		for _, s := range out.Shards {
			listed[aws.ToString(s.ShardId)] = s
		}
		if out.NextToken == nil {
			break
		}
		next = out.NextToken
	}
	<-listDone
	if listErr != nil {
		return nil, listErr
	}
	known := slices.Clone(existing)
	hasRow := make(map[string]bool, len(existing))
	for _, l := range existing {
		hasRow[l.Key.ShardID] = true
	}
	// Parents first: Kinesis numbers children after their parents, so a
	// child's row never exists without its parent's.
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
		if closed && c.cfg.Start.kind != posHorizon && !slices.ContainsFunc(parents, func(p string) bool { return hasRow[p] }) {
			// A shard closed before this consumer's time (no lineage in the
			// table): reading it from LATEST or a timestamp would find
			// nothing, and its children must not wait for it.
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
	var knownMu sync.Mutex
	for _, keys := range gens {
		err := concurrently(keys, func(k lease.Key) error {
			l, err := c.cfg.Store.Ensure(ctx, k, shardParents(listed[k.ShardID]))
			if err == nil {
				knownMu.Lock()
				known = append(known, l)
				knownMu.Unlock()
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(known, func(a, b lease.Lease) int { return strings.Compare(a.Key.ShardID, b.Key.ShardID) })
	c.mu.Lock()
	c.listed = listed
	c.mu.Unlock()
	return known, nil
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
		out, err := d.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(c.cfg.Stream)})
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

// renew renews every owned lease; a lease that cannot be renewed because it
// was lost stops its shard.
func (c *Consumer) renew(ctx context.Context) {
	c.mu.Lock()
	owned := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		owned = append(owned, s)
	}
	c.mu.Unlock()
	for _, s := range owned {
		if err := s.renew(ctx); errors.Is(err, lease.ErrLeaseLost) {
			c.drop(s, "lease lost at renewal")
		} else if err != nil && ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: renewing a lease failed; will retry", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
		}
	}
}

// drop stops a shard this worker no longer holds.
func (c *Consumer) drop(s *shard, why string) {
	c.mu.Lock()
	if c.shards[s.id] == s {
		delete(c.shards, s.id)
	}
	c.mu.Unlock()
	c.log.LogAttrs(context.Background(), slog.LevelWarn, "consumer: shard dropped: "+why, slog.String(attrShardID, s.id))
	s.stopReading()
	s.ck.abandon()
}

// balance takes free and expired leases up to this worker's share,
// ceil(shards / workers), and when none is free steals one lease from the
// most-loaded worker above that share.
func (c *Consumer) balance(ctx context.Context) {
	leases, err := c.cfg.Store.List(ctx, c.cfg.Stream)
	if err != nil {
		if ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: listing leases failed; will retry", slog.String(attrError, err.Error()))
		}
		return
	}
	c.balanceWith(ctx, leases)
}

// balanceWith is balance on the stream's lease rows as just read.
func (c *Consumer) balanceWith(ctx context.Context, leases []lease.Lease) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.tracker.Observe(leases)
	listed := c.listed
	byID := map[string]lease.Lease{}
	for _, l := range leases {
		byID[l.Key.ShardID] = l
	}
	// Shards this worker believes it owns but the table gives to another
	// owner were stolen: stop them.
	var lost []*shard
	for id, s := range c.shards {
		if l, ok := byID[id]; !ok || l.Owner != c.cfg.Owner {
			lost = append(lost, s)
		}
	}
	workers := map[string]int{c.cfg.Owner: 0}
	var eligible, available []lease.Lease
	for _, l := range leases {
		if l.Checkpoint == lease.ShardEnd || !parentsDone(l, byID, listed) {
			continue
		}
		eligible = append(eligible, l)
		switch {
		case l.Owner == "" || c.tracker.Expired(l):
			if l.Owner != c.cfg.Owner || c.shards[l.Key.ShardID] == nil {
				available = append(available, l)
			}
		default:
			workers[l.Owner]++
		}
	}
	mine := 0
	for id := range c.shards {
		if l, ok := byID[id]; ok && l.Owner == c.cfg.Owner {
			mine++
		}
	}
	c.mu.Unlock()
	for _, s := range lost {
		c.drop(s, "lease taken by another worker")
	}
	if len(eligible) == 0 {
		return
	}
	target := (len(eligible) + len(workers) - 1) / len(workers)
	// Free and expired leases up to the share, taken concurrently; a lease
	// another worker took first is replaced by the next one.
	for len(available) > 0 && mine < target {
		n := min(target-mine, len(available))
		var took atomic.Int64
		_ = concurrently(available[:n], func(l lease.Lease) error {
			if c.take(ctx, l, byID) {
				took.Add(1)
			}
			return nil
		})
		mine += int(took.Load())
		available = available[n:]
	}
	if mine >= target {
		return
	}
	// Steal one lease from the most-loaded worker above the target.
	busiest, most := "", 0
	for w, n := range workers {
		if w != c.cfg.Owner && n > most {
			busiest, most = w, n
		}
	}
	// Steal from a worker above the share, or from one at the share while
	// this worker is at least two below it (6 shards, 4 workers: 2,2,1,1).
	if busiest == "" || !(most > target || (most == target && mine < target-1)) {
		return
	}
	for _, l := range eligible {
		if l.Owner == busiest {
			c.take(ctx, l, byID)
			return
		}
	}
}

// parentsDone reports whether every parent of l is SHARD_END, gone from
// the stream (trimmed away), or an ancestor from before this consumer's time
// (listed, but given no lease row).
func parentsDone(l lease.Lease, byID map[string]lease.Lease, listed map[string]kinesistypes.Shard) bool {
	if listed == nil {
		return false // shards not listed yet
	}
	for _, p := range l.ParentShardIDs {
		pl, hasLease := byID[p]
		if hasLease && pl.Checkpoint == lease.ShardEnd {
			continue
		}
		if !hasLease {
			continue // trimmed away, or skipped as an old ancestor
		}
		return false
	}
	return true
}

// take takes the lease l and starts its shard.
func (c *Consumer) take(ctx context.Context, l lease.Lease, byID map[string]lease.Lease) bool {
	held, err := c.cfg.Store.Take(ctx, l, c.cfg.Owner)
	if err != nil {
		if !errors.Is(err, lease.ErrLeaseLost) && ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: taking a lease failed", slog.String(attrShardID, l.Key.ShardID), slog.String(attrError, err.Error()))
		}
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	if old := c.shards[l.Key.ShardID]; old != nil {
		old.mu.Lock()
		old.lease = held
		old.mu.Unlock()
		return true
	}
	prev := "another worker"
	if l.Owner == "" {
		prev = "free"
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease taken", slog.String(attrShardID, l.Key.ShardID),
		slog.String("from", prev), slog.String("checkpoint", held.Checkpoint), slog.Int64("counter", held.Counter))
	s := c.newShard(held)
	c.shards[s.id] = s
	c.startReader(s, c.startFor(held, byID))
	return true
}

// startFor is where a newly taken shard starts: after its checkpoint, or at
// Config.Start.
func (c *Consumer) startFor(l lease.Lease, byID map[string]lease.Lease) Position {
	if l.Checkpoint != "" && l.Checkpoint != lease.ShardEnd {
		return Position{kind: posSequence, shard: l.Key.ShardID, seq: l.Checkpoint}
	}
	for _, p := range l.ParentShardIDs {
		if _, tracked := byID[p]; tracked {
			// A child of a split or merge whose parents were read to their
			// end: it continues from its first record.
			return TrimHorizon()
		}
	}
	return c.cfg.Start
}

// startReader starts the reader of s at pos; c.mu must be held.
func (c *Consumer) startReader(s *shard, pos Position) {
	ctx, cancel := context.WithCancel(c.readCtx)
	done := make(chan struct{})
	s.mu.Lock()
	s.cancel, s.done = cancel, done
	s.mu.Unlock()
	c.readers.Add(1)
	go func() {
		defer c.readers.Done()
		defer close(done)
		s.read(ctx, pos)
	}()
}

// Seek moves running readers: every owned shard to pos, or, for an
// AtSequence position, that one shard. Each moved shard's watermark starts
// afresh; records read before the seek are dropped on their way out of the
// channel, and their late settlements change nothing.
func (c *Consumer) Seek(ctx context.Context, pos Position) error {
	c.mu.Lock()
	var targets []*shard
	for id, s := range c.shards {
		if pos.kind != posSequence || id == pos.shard {
			targets = append(targets, s)
		}
	}
	c.mu.Unlock()
	if pos.kind == posSequence && len(targets) == 0 {
		return fmt.Errorf("consumer: seek: shard %s is not owned by this worker", pos.shard)
	}
	for _, s := range targets {
		s.stopReading()
		s.wm.Reset("")
		s.ended.Store(false)
		c.mu.Lock()
		if c.shards[s.id] == s && !c.stopped {
			p := pos
			if p.kind == posSequence {
				p.kind = posAtSequence
			}
			c.startReader(s, p)
		}
		c.mu.Unlock()
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: seek", slog.String(attrShardID, s.id), slog.String("position", pos.String()))
	}
	return nil
}

// posAtSequence is AT_SEQUENCE_NUMBER (a seek); posSequence read from a
// checkpoint is AFTER_SEQUENCE_NUMBER.
const posAtSequence posKind = 100

// storeParallelism bounds the lease-store calls a worker makes at once when
// it writes many rows or takes many leases (start-up of a large stream).
const storeParallelism = 8

// concurrently calls fn for every item, at most storeParallelism at a time,
// and returns the first error after every call returned.
func concurrently[T any](items []T, fn func(T) error) error {
	if len(items) == 1 {
		return fn(items[0])
	}
	sem := make(chan struct{}, storeParallelism)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, it := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(it); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}
