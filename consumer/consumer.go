package consumer

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/getrecords"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
)

// Log attribute keys, shared with the engine (and so with Lambda mode).
const (
	attrShardID = engine.AttrShardID
	attrError   = engine.AttrError
	attrOwner   = "owner"
)

// ErrStreamNotFound is matched by the error Run returns when the stream
// does not exist when it starts (Kinesis answers ResourceNotFoundException).
// Later, a stream that disappears is logged at every listing and retried.
var ErrStreamNotFound = errors.New("stream not found")

// Consumer reads a stream's shards through leases and runs the engine's
// handler over their records with exact per-record settlement. Create it
// with New; run it with Run (once). Its methods are safe for concurrent use.
type Consumer struct {
	cfg  Config
	log  *slog.Logger
	obs  observe.Set            // the engine's hooks
	ch   chan []engine.Delivery // runs of one shard's registered deliveries, at most chunkSize each
	sess *engine.Session
	arn  string  // the stream's ARN learnt at start, when not configured; set before any reader starts
	fan  *fanOut // enhanced fan-out (efo.go); nil: GetRecords
	// getRecordsOpts are the per-call options of every GetRecords call:
	// getrecords.Fast, which decodes the answers in one pass into what the
	// SDK's own deserializer returns. Tests set nil to compare with the SDK.
	getRecordsOpts []func(*kinesis.Options)

	mu        sync.Mutex
	shards    map[string]*shard // held shards, by shard id
	tracker   *lease.Tracker
	listed    map[string]kinesistypes.Shard // last complete ListShards answer, by shard id
	maxListed string                        // the highest shard id listed
	requested map[string]bool               // shards this worker asked another to hand over
	// lettingGo holds the shards this worker is handing over or giving up:
	// no longer in shards, while their rows may still name this worker,
	// which must not take them up again as handed to it (see balance).
	lettingGo map[string]bool
	stopped   bool
	readCtx   context.Context // readers' parent; cancelled at shutdown
	// self is this worker's row as the last heartbeat returned it, so that
	// unregister need not read the table; zero (unknown) after a heartbeat
	// failed, which may have been applied all the same.
	self lease.Worker
	// ended is kicked when a shard ended or disappeared: Run then lists the
	// shards and balances at once, so its children start without waiting
	// for the next listing or balancing.
	ended chan struct{}

	started atomic.Bool
	readers sync.WaitGroup // every reader
	tasks   sync.WaitGroup // every other goroutine the consumer starts
}

// New validates cfg and returns a Consumer.
func New(cfg Config) (*Consumer, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		task := ""
		if uri := os.Getenv("ECS_CONTAINER_METADATA_URI_V4"); uri != "" {
			task = path.Base(uri) // on ECS: the task's container id
		}
		cfg.Owner = lease.NewOwnerID(host, task)
	}
	return &Consumer{
		cfg:       cfg,
		obs:       cfg.Engine.Config().Hooks,
		log:       cfg.Logger.With(slog.String(attrOwner, cfg.Owner), slog.String("stream", cfg.Stream)),
		ch:        make(chan []engine.Delivery, ChannelSize/chunkSize),
		shards:    map[string]*shard{},
		tracker:   lease.NewTracker(cfg.LeaseDuration),
		requested: map[string]bool{},
		ended:     make(chan struct{}, 1),
		lettingGo: map[string]bool{},
		fan:       newFanOut(&cfg),

		getRecordsOpts: []func(*kinesis.Options){getrecords.Fast},
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

// spawn runs f in a goroutine the consumer owns: Run waits for it before
// it returns.
func (c *Consumer) spawn(f func()) {
	c.tasks.Add(1)
	go func() {
		defer c.tasks.Done()
		f()
	}()
}

// storeContext bounds one lease-store call: a hung call must not hold a
// shard's lease writes (renewals included) for long.
func (c *Consumer) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.storeTimeout())
}

func (c *Consumer) storeTimeout() time.Duration { return max(c.cfg.LeaseDuration/3, time.Second) }

// Run consumes until ctx is cancelled, then stops gracefully: it stops
// reading, lets the records in flight settle (at most ShutdownTimeout),
// writes every shard's checkpoint and releases its leases so other workers
// take them at once. It returns nil after a graceful stop, or at once an
// error when it cannot start: a missing lease table (lease.ErrTableNotFound),
// a table that is not a lease table (lease.ErrNotLeaseTable) or a missing
// stream (ErrStreamNotFound). Every goroutine Run starts has
// ended when it returns, except a handler that ignores its cancelled
// context past the shutdown timeout (logged).
func (c *Consumer) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("consumer: Run called twice")
	}
	readCtx, stopReaders := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReaders()
	c.mu.Lock()
	c.readCtx = readCtx
	c.mu.Unlock()
	c.sess = c.cfg.Engine.Start(context.WithoutCancel(ctx), engine.SessionConfig{
		Mode:        engine.ModeLongRunning,
		Lanes:       c.cfg.Concurrency,
		MaxQueued:   c.cfg.MaxWaiting,
		Backoff:     engine.ExponentialBackoff(c.cfg.RetryBackoff, c.cfg.MaxRetryBackoff),
		BatchSize:   c.cfg.BatchSize,
		BatchWindow: c.cfg.BatchWindow,
	})
	dispatchCtx, stopDispatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopDispatch()
	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		c.dispatch(dispatchCtx)
	}()

	// Make this worker known first, so others count it when they balance.
	if err := c.heartbeat(ctx); err != nil && unusableTable(err) {
		c.abort(stopReaders, dispatched)
		return err
	}
	// The stream's ARN (for messages and copies) is looked up while the
	// shards are listed; readers start only after both.
	resolved := make(chan struct{})
	go func() {
		defer close(resolved)
		c.resolveStreamARN(ctx)
	}()
	snap, err := c.discover(ctx)
	<-resolved
	if err != nil && !errors.Is(err, context.Canceled) {
		if unusableTable(err) || errors.Is(err, ErrStreamNotFound) {
			c.abort(stopReaders, dispatched)
			c.unregister() // the heartbeat above made it known
			return err
		}
		c.listFailed(ctx, err)
	}
	// Enhanced fan-out: the stream consumer is ACTIVE before any reader
	// subscribes.
	if err := c.startFanOut(ctx); err != nil {
		c.abort(stopReaders, dispatched)
		c.unregister()
		if ctx.Err() != nil {
			return nil // stopped while waiting: nothing was read
		}
		return err
	}
	if err == nil {
		// The rows discover just read and wrote: no second scan.
		c.balanceWith(ctx, snap)
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
		c.forwarder(ctx)
	}()
	reportCtx, stopReporting := context.WithCancel(context.WithoutCancel(ctx))
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		c.reporter(reportCtx)
	}()
	take := time.NewTicker(c.cfg.LeaseDuration / 2)
	defer take.Stop()
	list := time.NewTicker(c.cfg.ListInterval)
	defer list.Stop()
	endedTimer := time.NewTimer(endedGap)
	endedTimer.Stop()
	defer endedTimer.Stop()
	var lastEnded time.Time
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-take.C:
			c.balance(ctx)
		case <-c.ended:
			// A parent ended: its children may start now. Shards that end
			// together (a resharding of the whole stream) are taken
			// together: at most one such listing per endedGap.
			if wait := endedGap - time.Since(lastEnded); wait > 0 {
				endedTimer.Reset(wait)
				continue
			}
			lastEnded = c.afterEnded(ctx)
		case <-endedTimer.C:
			lastEnded = c.afterEnded(ctx)
		case <-list.C:
			if _, err := c.discover(ctx); err != nil && ctx.Err() == nil {
				c.listFailed(ctx, err)
			}
		}
	}
	// Leases stay renewed while records in flight settle.
	c.shutdown(stopReaders, stopDispatch, dispatched)
	stopRenewing()
	<-renewed
	// After the last heartbeat: a heartbeat in flight cannot bring the
	// worker row back.
	c.unregister()
	<-forwarded
	c.tasks.Wait()
	stopReporting()
	<-reported
	c.report(context.Background()) // the last flush, before Run returns
	return nil
}

// unusableTable reports whether err says the lease table is missing or is
// not a lease table: Run cannot start.
func unusableTable(err error) bool {
	return errors.Is(err, lease.ErrTableNotFound) || errors.Is(err, lease.ErrNotLeaseTable)
}

// listFailed logs a failed listing of the shards; the next listing or
// balancing tries again.
func (c *Consumer) listFailed(ctx context.Context, err error) {
	c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: listing shards failed; will retry", slog.String(attrError, err.Error()))
}

// reporter flushes the hooks every MetricsInterval until ctx ends.
func (c *Consumer) reporter(ctx context.Context) {
	if c.obs.Empty() {
		return
	}
	t := time.NewTicker(c.cfg.MetricsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.report(ctx)
		}
	}
}

// reportTimeout bounds one flush of the hooks.
const reportTimeout = 10 * time.Second

// report gives the in-flight hooks a snapshot of the unsettled records and
// flushes the hooks.
func (c *Consumer) report(ctx context.Context) {
	if c.obs.Empty() {
		return
	}
	if c.obs.WantsInFlight() {
		c.mu.Lock()
		shards := make([]*shard, 0, len(c.shards))
		for _, s := range c.shards {
			shards = append(shards, s)
		}
		c.mu.Unlock()
		f := observe.InFlight{Stream: c.streamRef(), LeasesHeld: len(shards)}
		var oldest time.Time
		for _, s := range shards {
			f.Records += s.es.Inflight()
			if at, ok := s.es.OldestUnsettled(); ok && (oldest.IsZero() || at.Before(oldest)) {
				oldest = at
			}
		}
		if !oldest.IsZero() {
			f.OldestAge = max(time.Since(oldest), 0) // a clock behind the stream's reads 0
		}
		c.obs.InFlight(f)
	}
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	c.obs.Flush(ctx)
}

// abort undoes a start that failed: nothing was read yet.
func (c *Consumer) abort(stopReaders context.CancelFunc, dispatched <-chan struct{}) {
	stopReaders()
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	close(c.ch)
	<-dispatched
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ShutdownTimeout)
	defer cancel()
	c.sess.Stop(ctx, c.cfg.ShutdownTimeout)
	c.tasks.Wait()
}

// dispatch hands the records the readers read to the engine until the
// channel is closed. A record of a shard sought or lost since it was read is
// dropped on its way out of the channel.
func (c *Consumer) dispatch(ctx context.Context) {
	for ds := range c.ch {
		// A stale delivery is dropped by SubmitEach.
		if n, err := c.sess.SubmitEach(ctx, ds); err != nil {
			for i := range ds[n:] {
				ds[n+i].Drop() // shutting down past the timeout: it comes again
			}
		}
	}
}

// shutdown is the graceful stop, bounded by ShutdownTimeout for the records
// in flight (and once more for handlers that do not return when their
// context is cancelled), and by the store's call timeout for the final
// checkpoints and releases.
func (c *Consumer) shutdown(stopReaders, stopDispatch context.CancelFunc, dispatched <-chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ShutdownTimeout)
	defer cancel()
	stopAfter := context.AfterFunc(ctx, stopDispatch)
	defer stopAfter()
	c.mu.Lock()
	c.stopped = true
	owned := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		owned = append(owned, s)
	}
	c.mu.Unlock()
	for _, s := range owned {
		s.leaving.Store(true)
	}
	stopReaders()
	c.readers.Wait()
	close(c.ch)
	// No record is retried any more: those waiting for a retry are given
	// up now (they come again from the checkpoint), and the shards settle
	// what they can.
	for _, s := range owned {
		c.sess.Quiesce(s.es)
	}
	<-dispatched
	for _, s := range owned {
		s.es.WaitIdle(ctx)
	}
	n := 0
	for _, s := range owned {
		n += s.es.Inflight()
	}
	if n > 0 {
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: shutdown timeout with records in flight; they come again from the checkpoint", slog.Int("in_flight", n))
	}
	if !c.sess.Stop(ctx, c.cfg.ShutdownTimeout) {
		c.log.LogAttrs(ctx, slog.LevelError, "consumer: a handler did not return after its context was cancelled; Run returns without it (what it returns changes nothing)")
	}
	c.mu.Lock()
	c.shards = map[string]*shard{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range owned {
		wg.Go(func() {
			bg := context.Background()
			s.ck.halt()
			s.es.Reset("") // anything still running is stale now
			s.release(bg)  // with the final checkpoint
		})
	}
	wg.Wait()
}

// lose stops a shard whose lease another worker holds now: at once,
// without writing anything more.
func (c *Consumer) lose(s *shard, why string) {
	c.spawn(func() {
		if !c.forget(s) {
			return
		}
		s.es.Reset("") // records in flight settle stale
		s.stopReading()
		s.ck.abandon()
		c.log.LogAttrs(context.Background(), slog.LevelWarn, "consumer: shard dropped: "+why, slog.String(attrShardID, s.id))
		c.leaseEvent(s.id, observe.LeaseLost)
	})
}

// leaseEvent tells the lease hooks about a change of the leases held.
func (c *Consumer) leaseEvent(shardID string, kind observe.LeaseEventKind) {
	c.mu.Lock()
	held := len(c.shards)
	c.mu.Unlock()
	c.obs.Lease(observe.Lease{Stream: c.cfg.Stream, ShardID: shardID, Kind: kind, Held: held})
}

// forget removes s from the held shards; it reports whether s was held.
func (c *Consumer) forget(s *shard) bool { return c.forgetShard(s, false) }

// forgetLettingGo is forget for a shard whose lease this worker goes on to
// hand over or release: until letGo, balancing does not take the shard up
// again although its row still names this worker (the row changes only
// with the transfer or the release).
func (c *Consumer) forgetLettingGo(s *shard) bool { return c.forgetShard(s, true) }

func (c *Consumer) forgetShard(s *shard, lettingGo bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[s.id] != s {
		return false
	}
	delete(c.shards, s.id)
	if lettingGo {
		c.lettingGo[s.id] = true
	}
	return true
}

// letGo ends forgetLettingGo: the lease was handed over or released (or
// that failed, and the row says so).
func (c *Consumer) letGo(id string) {
	c.mu.Lock()
	delete(c.lettingGo, id)
	c.mu.Unlock()
}

// Seek moves running readers: every held shard to pos, or, for an
// AtSequence position, that one shard. Each moved shard's watermark starts
// a new epoch; records read before the seek are dropped on their way to a
// lane, and their late settlements change nothing. Seeks of one shard are
// serialised: a shard has one reader at a time, always.
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
		return errors.New("consumer: seek: shard " + pos.shard + " is not held by this worker")
	}
	for _, s := range targets {
		p := pos
		if p.kind == posSequence {
			p.kind = posAtSequence
		}
		s.rmu.Lock()
		s.stopReaderLocked()
		// The old reader has exited: nothing of its epoch is registered
		// any more. The new epoch starts with nothing ended.
		s.endEpoch.Store(0)
		e := s.es.Reset("")
		s.startReaderLocked(p, e)
		s.rmu.Unlock()
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: seek", slog.String(attrShardID, s.id), slog.String("position", pos.String()))
	}
	return nil
}

// posAtSequence is AT_SEQUENCE_NUMBER (a seek); posSequence read from a
// checkpoint is AFTER_SEQUENCE_NUMBER.
const posAtSequence posKind = 100
