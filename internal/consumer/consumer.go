package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/getrecords"
	"github.com/shardsettle/lambdaadapter/internal/hooks"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/internal/settle"
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
// Later, a stream that disappears is logged at every listing and retried,
// and its leases are not taken until a listing finds it again.
// It is publish.ErrStreamNotFound, the error of a write to a missing
// stream, so that errors.Is matches either with either.
var ErrStreamNotFound = publish.ErrStreamNotFound

// Consumer reads a stream's shards through leases and runs the engine's
// handler over their records with exact per-record settlement. Create it
// with New; run it with Run (once), stop it by cancelling Run's context or
// with Shutdown. Its methods are safe for concurrent use.
type Consumer struct {
	cfg  Config
	log  *slog.Logger
	obs  hooks.Set              // the engine's hooks
	ch   chan []engine.Delivery // runs of one shard's registered deliveries, at most chunkSize each
	sess *engine.Session
	arn  string  // the stream's ARN learnt at start, when not configured; set before any reader starts
	fan  *fanOut // enhanced fan-out (efo.go); nil: GetRecords
	// getRecordsOpts are the per-call options of every GetRecords call:
	// getrecords.Fast, which decodes the answers in one pass into what the
	// SDK's own deserializer returns. Tests set nil to compare with the SDK.
	getRecordsOpts []func(*kinesis.Options)

	mu        sync.Mutex
	shards    map[string]*shard // held shards (reading or stopping), by shard id
	tracker   *lease.Tracker
	listed    map[string]kinesistypes.Shard // last complete ListShards answer, by shard id
	maxListed string                        // the highest shard id listed
	stopped   bool                          // Run is stopping: no shard is started any more
	// leaving is closed when Run's graceful stop begins (stopShards): a
	// planned hand-over still waiting for its records then stops waiting
	// longer than a stop would.
	leaving chan struct{}
	// self is this worker's row as the last heartbeat returned it, so that
	// unregister need not read the table; zero (unknown) after a heartbeat
	// failed, which may have been applied all the same.
	self lease.Worker
	// unregistered: the graceful stop removed this worker's row, and no
	// heartbeat wrote it since.
	unregistered bool
	// hbTurn serialises heartbeat and unregister (taken before mu; a
	// channel, as a wait for it is a durable block in a synctest bubble).
	hbTurn chan struct{}
	// meter measures the load each heartbeat publishes (used by one
	// heartbeat at a time); lastLoad is the last it measured.
	meter    *loadMeter
	lastLoad *lease.Load
	// leader is this worker's part in leading the stream's balancing
	// (lead.go); lastSeen is the throughput of each lease its last plan
	// knew (assignment.seen), for the leases nobody reports in the next
	// and averaged with the figures reported then; lastScales the
	// workers' smoothing factors (assignment.scales), averaged likewise;
	// lastModel the cost model of its last plan (assignment.model).
	leader     leadership
	lastSeen   map[lease.Key]throughput
	lastScales map[string]averaged
	lastModel  costModel
	// grp is the group this consumer belongs to (group.go): itself alone,
	// or the consumers of the other streams of its service.
	grp *Group
	// gifts are leases of this consumer's stream that the group's primary,
	// leading, took in this worker's name; the next balancing round
	// (kicked by balanceNow) starts them.
	gifts      []lease.Lease
	balanceNow chan struct{}
	// malformed are the stream's rows the last read could not decode (by
	// key, their error), each logged once (noteMalformed).
	malformed map[string]string
	// directed are the leases of the stream the group's leader gave
	// another worker (a take in its name), by shard id, until that worker
	// starts it: such a lease whose worker's row is gone (it stopped in
	// between) is free to plan at once (planInput), not at its expiry.
	directed map[string]direction
	// ended is kicked when a shard ended or disappeared: Run then lists the
	// shards and balances at once, so its children start without waiting
	// for the next listing or balancing.
	ended chan struct{}

	started atomic.Bool
	// group holds every goroutine Run starts (the shards', the renewer,
	// the dispatcher, the forwarder, the reporter, ...): Run returns only
	// after each has ended.
	group sync.WaitGroup
	// shutdown is closed by Shutdown (once); shutdownCtx, set before, then
	// bounds the graceful stop.
	shutdown     chan struct{}
	shutdownOnce sync.Once
	shutdownCtx  context.Context
	ran          chan struct{} // closed when Run returns
}

// New validates cfg and returns a Consumer.
func New(cfg Config) (*Consumer, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Owner == "" {
		cfg.Owner = lease.NewOwnerID("", "")
	}
	c := &Consumer{
		cfg:      cfg,
		obs:      cfg.Engine.Config().Hooks,
		log:      cfg.Logger.With(slog.String(attrOwner, cfg.Owner), slog.String("stream", cfg.Stream)),
		ch:       make(chan []engine.Delivery, ChannelSize/chunkSize),
		shards:   map[string]*shard{},
		tracker:  lease.NewTracker(cfg.LeaseDuration),
		ended:    make(chan struct{}, 1),
		fan:      newFanOut(&cfg),
		shutdown: make(chan struct{}),
		leaving:  make(chan struct{}),
		ran:      make(chan struct{}),
		meter:    newLoadMeter(cfg),

		balanceNow: make(chan struct{}, 1),
		hbTurn:     make(chan struct{}, 1),

		getRecordsOpts: []func(*kinesis.Options){getrecords.Fast},
	}
	c.grp = soloGroup(c)
	return c, nil
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

// heldShards returns the shards held now.
func (c *Consumer) heldShards() []*shard {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		held = append(held, s)
	}
	return held
}

// goGroup runs f in a goroutine of Run's group; it returns a channel closed
// when f returned, for the steps of the stop that wait for one goroutine.
func (c *Consumer) goGroup(f func()) <-chan struct{} {
	done := make(chan struct{})
	c.group.Go(func() {
		defer close(done)
		f()
	})
	return done
}

// storeContext bounds one lease-store call: a hung call must not hold a
// shard's lease writes (renewals included) for long.
func (c *Consumer) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.storeTimeout())
}

func (c *Consumer) storeTimeout() time.Duration { return max(c.cfg.LeaseDuration/3, time.Second) }

// Run consumes until ctx is cancelled or Shutdown is called, then stops
// gracefully: it stops reading, lets the records in flight settle (at most
// ShutdownTimeout, or until Shutdown's context ends), writes every shard's
// checkpoint and releases its leases so other workers take them at once.
// It returns nil after a graceful stop, or at once an error when it cannot
// start: a missing lease table (lease.ErrTableNotFound), a table that is not
// a lease table (lease.ErrNotLeaseTable) or a missing stream
// (ErrStreamNotFound). Every goroutine Run starts has ended when it
// returns, except a handler that ignores its cancelled context past the
// shutdown timeout (logged).
func (c *Consumer) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("consumer: Run called twice")
	}
	defer close(c.ran)
	defer c.group.Wait()
	c.sess = c.cfg.Engine.Start(context.WithoutCancel(ctx), engine.SessionConfig{
		Mode:         engine.ModeLongRunning,
		Lanes:        c.cfg.Concurrency,
		MaxQueued:    c.cfg.MaxWaiting,
		Backoff:      engine.ExponentialBackoff(c.cfg.RetryBackoff, c.cfg.MaxRetryBackoff),
		BatchSize:    c.cfg.BatchSize,
		BatchWindow:  c.cfg.BatchWindow,
		WriteTimeout: writeTimeout,
	})
	dispatchCtx, stopDispatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopDispatch()
	dispatched := c.goGroup(func() { c.dispatch(dispatchCtx) })

	// Make this worker known first, so others count it when they balance.
	if err := c.heartbeat(ctx); err != nil && unusableTable(err) {
		c.abandon(dispatched)
		return err
	}
	// The stream's ARN (for messages and copies) is looked up while the
	// shards are listed; readers start only after both.
	resolved := c.goGroup(func() { c.resolveStreamARN(ctx) })
	snap, err := c.discover(ctx)
	<-resolved
	if err != nil && !errors.Is(err, context.Canceled) {
		if unusableTable(err) || errors.Is(err, ErrStreamNotFound) {
			c.abandon(dispatched)
			c.unregister() // the heartbeat above made it known
			return err
		}
		c.listFailed(ctx, err)
	}
	// Enhanced fan-out: the stream consumer is ACTIVE before any reader
	// subscribes.
	if err := c.startFanOut(ctx); err != nil {
		c.abandon(dispatched)
		c.unregister()
		if ctx.Err() != nil {
			return nil // stopped while waiting: nothing was read
		}
		return err
	}
	if err == nil {
		// The first round decides its role as every round does: a worker
		// joining a fleet that a leader plans follows it (it waits to be
		// given its share), instead of asking the busiest for leases by
		// count. Leading or balancing for itself, it plans on the rows
		// discover just read and wrote: no second scan.
		r := c.roleFor(ctx)
		c.mu.Lock()
		c.setRole(r)
		c.mu.Unlock()
		if r == roleFollowing {
			c.follow(ctx)
		} else {
			c.balanceWith(ctx, snap)
		}
	} else {
		c.balance(ctx)
	}

	// Renewal has a goroutine and a timer of its own, so slow listing or
	// balancing never delays it past the lease duration.
	renewCtx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRenewing()
	renewed := c.goGroup(func() { c.renewer(renewCtx) })
	c.goGroup(func() { c.forwarder(ctx) })
	reportCtx, stopReporting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReporting()
	c.goGroup(func() { c.reporter(reportCtx) })
	c.loop(ctx)

	// The graceful stop: leases stay renewed while the records in flight
	// settle and each shard writes its last checkpoint with its release.
	c.stopShards()
	stopRenewing()
	<-renewed
	close(c.ch)
	<-dispatched
	c.stopSession(stopDispatch)
	// After the last heartbeat: a heartbeat in flight at the start of the
	// stop may have brought the worker row back.
	c.unregister()
	stopReporting()
	c.group.Wait()
	c.report(context.Background()) // the last flush, before Run returns
	return nil
}

// loop lists the shards and balances until ctx is cancelled or Shutdown is
// called.
func (c *Consumer) loop(ctx context.Context) {
	take := time.NewTicker(c.cfg.LeaseDuration / 2)
	defer take.Stop()
	list := time.NewTicker(c.cfg.ListInterval)
	defer list.Stop()
	endedTimer := time.NewTimer(endedGap)
	endedTimer.Stop()
	defer endedTimer.Stop()
	var lastEnded time.Time
	again := time.NewTimer(formingWait)
	again.Stop()
	defer again.Stop()
	for {
		if c.balanceAgain() {
			again.Reset(formingWait)
		}
		select {
		case <-again.C:
			c.balance(ctx)
		case <-ctx.Done():
			return
		case <-c.shutdown:
			return
		case <-take.C:
			if !c.listedOnce() && !c.following() {
				// The first listing failed: balancing (the group's leader's
				// planning of this stream, or of every stream for its
				// primary) waits for one, so it is tried again at every
				// round, not a listing interval later.
				if _, err := c.discover(ctx); err != nil && ctx.Err() == nil {
					c.listFailed(ctx, err)
				}
			}
			c.balance(ctx)
		case <-c.balanceNow:
			c.balance(ctx)
		case <-c.ended:
			if c.following() {
				continue // the leader lists the shards when it reads the ended one
			}
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
			if c.following() {
				continue
			}
			if _, err := c.discover(ctx); err != nil && ctx.Err() == nil {
				c.listFailed(ctx, err)
			}
		}
	}
}

// formingWait is how soon a leader that waited for a starting fleet's
// workers (assignInput.forming) plans again.
const formingWait = time.Second

// balanceAgain reports, once, whether the last balancing round asked for
// another one soon (leadership.again).
func (c *Consumer) balanceAgain() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	again := c.leader.again
	c.leader.again = false
	return again
}

// listedOnce reports whether a listing of the shards succeeded since Run
// started.
func (c *Consumer) listedOnce() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listed != nil
}

// Shutdown stops Run gracefully, as cancelling Run's context does, and
// waits until Run returned or ctx ended. ctx bounds the wait for the
// records in flight too (besides ShutdownTimeout): when it ends, each
// shard's last checkpoint is written with its release at once, and what
// was still in flight comes again from there. It returns ctx's error when
// ctx ended first; calling it before Run, or more than once, is allowed
// (the first context bounds the stop).
func (c *Consumer) Shutdown(ctx context.Context) error {
	c.shutdownOnce.Do(func() {
		c.shutdownCtx = ctx
		close(c.shutdown)
	})
	if !c.started.Load() {
		return nil
	}
	select {
	case <-c.ran:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopContext is the context that bounds the graceful stop besides
// ShutdownTimeout: Shutdown's, else none.
func (c *Consumer) stopContext() context.Context {
	select {
	case <-c.shutdown:
		return c.shutdownCtx
	default:
		return nil
	}
}

// stopShards stops every held shard gracefully, all at once, and waits
// until each stopped; no shard is started any more.
func (c *Consumer) stopShards() {
	c.mu.Lock()
	c.stopped = true
	gifts := c.gifts // given by the group's primary, not started: given back
	c.gifts = nil
	c.mu.Unlock()
	close(c.leaving)
	// Out of the fleet's plans first: a leader that still counted this
	// worker would give it leases it never starts (they would wait for
	// their expiry).
	c.resign()
	c.unregister()
	c.giveBack(gifts)
	req := stopRequest{reason: stopShutdown, ctx: c.stopContext()}
	held := c.heldShards()
	for _, s := range held {
		s.stopGracefully(req)
	}
	for _, s := range held {
		<-s.done
	}
	c.giveBackStrays()
}

// giveBackStrays releases the leases of the stream that the table says
// this worker owns once its shards stopped: leases a leader of another
// process gave it (or had handed over to it) in a round that still counted
// it (it read the table before this worker's row was removed at the start
// of the stop), which it will never start. Without this they would wait
// for their expiry, their shards unread for a lease duration and more.
// (Leases the group's own primary gives are given back by give.) It reads
// the owner index (cheap, but eventually consistent) and each lease found
// again; one it misses, or given after it, the leader plans again in its
// next round, as this worker's row is gone (planInput). Nothing is read
// when nothing was given.
func (c *Consumer) giveBackStrays() {
	ctx, cancel := c.storeContext(context.Background())
	keys, err := c.cfg.Store.Owned(ctx, c.cfg.Owner)
	cancel()
	if err != nil {
		return // no owner index: the leader plans such a lease again (planInput)
	}
	var strays []lease.Lease
	for _, k := range keys {
		c.mu.Lock()
		_, held := c.shards[k.ShardID]
		c.mu.Unlock()
		if k.Stream != c.cfg.Stream || held {
			continue
		}
		ctx, cancel := c.storeContext(context.Background())
		l, err := c.cfg.Store.Get(ctx, k)
		cancel()
		if err == nil && l.Owner == c.cfg.Owner {
			c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: giving back a lease given while stopping", slog.String(attrShardID, k.ShardID))
			strays = append(strays, l)
		}
	}
	c.giveBack(strays)
}

// stopSession ends the engine's session once every shard stopped: the
// records of no shard are in flight any more, but for handlers that ignored
// their cancelled context through their shard's stop (logged there), which
// get one second more.
func (c *Consumer) stopSession(stopDispatch context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	stopDispatch()
	if !c.sess.Stop(ctx, time.Second) {
		c.log.LogAttrs(ctx, slog.LevelError, "consumer: a handler did not return after its context was cancelled; Run returns without it (what it returns changes nothing)")
	}
}

// renewer heartbeats and renews every held lease every third of the lease
// duration until ctx ends; after a round in which a renewal failed (the
// store throttled, failed or did not answer) the next round comes a tenth
// of the lease duration after it, so that a fault that ends leaves the
// fence (0.9 × D after the last successful write started) enough time for
// a renewal that works: with rounds D/3 apart only, a fault of little more
// than D/4 could use up the fence.
func (c *Consumer) renewer(ctx context.Context) {
	period, soon := c.cfg.LeaseDuration/3, c.cfg.LeaseDuration/10
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		next := soon
		if !c.renew(ctx) {
			next = period - time.Since(start)
		}
		t.Reset(max(next, 0))
	}
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
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
	every(ctx, c.cfg.MetricsInterval, c.report)
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
		shards := c.heldShards()
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

// abandon undoes a start that failed: nothing was read yet.
func (c *Consumer) abandon(dispatched <-chan struct{}) {
	c.mu.Lock()
	c.stopped = true
	gifts := c.gifts
	c.gifts = nil
	c.mu.Unlock()
	c.giveBack(gifts)
	close(c.ch)
	<-dispatched
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ShutdownTimeout)
	defer cancel()
	c.sess.Stop(ctx, c.cfg.ShutdownTimeout)
}

// dispatch hands the records the readers read to the engine until the
// channel is closed. A record of a shard sought or lost since it was read is
// dropped on its way out of the channel.
func (c *Consumer) dispatch(ctx context.Context) {
	for ds := range c.ch {
		// A stale delivery is dropped by Submit.
		if n, err := c.sess.Submit(ctx, ds); err != nil {
			for i := range ds[n:] {
				ds[n+i].Drop() // shutting down past the timeout: it comes again
			}
		}
	}
}

// shardStopped is a shard's report that it stopped for r (to: the worker a
// hand-over went to; err: the error of its last lease write, if any): the
// consumer forgets it, says so, and lists the shards at once for an ended
// or vanished one, whose children may start now.
func (c *Consumer) shardStopped(s *shard, r stopReason, to string, err error) {
	c.mu.Lock()
	if c.shards[s.id] == s {
		delete(c.shards, s.id)
	}
	held := len(c.shards)
	c.mu.Unlock()
	ctx := context.Background()
	attrs := []slog.Attr{slog.String(attrShardID, s.id), slog.String("stop", r.String())}
	if err != nil {
		attrs = append(attrs, slog.String(attrError, err.Error()))
	}
	event := func(kind observe.LeaseEventKind) {
		c.obs.Lease(observe.Lease{Stream: c.cfg.Stream, ShardID: s.id, Kind: kind, Held: held})
	}
	switch {
	case r == stopLost:
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: shard dropped: lease taken by another worker", attrs...)
		event(observe.LeaseLost)
	case r == stopFenced:
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: shard dropped: lease not renewed in time (fenced); another worker may take it", attrs...)
		event(observe.LeaseLost)
	case lost(err):
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: shard dropped: lease taken by another worker before its last write", attrs...)
		event(observe.LeaseLost)
	case err != nil && r == stopEnded:
		// Whoever holds the lease next reads the shard to its end again.
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: shard end not checkpointed", attrs...)
	case err != nil:
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: releasing a lease failed; it expires instead", attrs...)
	case r == stopHandedOver:
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease handed over", append(attrs, slog.String("to", to), slog.String("checkpoint", s.held().Checkpoint))...)
		event(observe.LeaseHandedOn)
	default:
		if r == stopEnded {
			c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: shard ended", attrs...)
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease released", attrs...)
		event(observe.LeaseReleased)
	}
	if r == stopEnded || r == stopGone {
		c.kickEnded()
	}
}

// Seek moves running readers: every held shard to pos, or, for an
// AtSequence position, that one shard. Each moved shard's watermark starts
// a new epoch; records read before the seek are dropped on their way to a
// lane, and their late settlements change nothing. Seeks of one shard are
// serialised: a shard has one reader at a time, always. An AtSequence
// position Kinesis refuses for the shard (another shard's sequence number)
// is an error, and the shard's reader reads on where it was.
func (c *Consumer) Seek(ctx context.Context, pos Position) error {
	if err := pos.checkSeek(); err != nil {
		return err
	}
	c.mu.Lock()
	var targets []*shard
	for id, s := range c.shards {
		if pos.kind != posSequence || id == pos.shard || c.cfg.Stream+":"+id == pos.shard {
			targets = append(targets, s)
		}
	}
	c.mu.Unlock()
	if pos.kind == posSequence && len(targets) == 0 {
		return notHeldError(pos.shard)
	}
	for _, s := range targets {
		p := pos
		if p.kind == posSequence {
			p.kind = posAtSequence
			// A sequence number Kinesis refuses for the shard (another
			// shard's or stream's) would leave the shard unread: the seek
			// is refused instead, and the reader reads on where it was.
			// Any other failure is the new reader's to retry.
			if _, err := s.iterator(ctx, p); refusedPosition(err, p) {
				return fmt.Errorf("consumer: seek: sequence number %s is not of shard %s: %w", p.seq, s.id, err)
			}
		}
		s.rmu.Lock()
		if s.noReader {
			s.rmu.Unlock()
			continue // stopping: its next holder reads on from its checkpoint
		}
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

// notHeldError is the error of a seek that named a shard this worker does
// not hold.
type notHeldError string

func (e notHeldError) Error() string {
	return "consumer: seek: shard " + string(e) + " is not held by this worker"
}

// checkSeek refuses a seek to a sequence number that is not one (a lease's
// LATEST@ checkpoint, say): its reader would ask Kinesis for an iterator in
// vain, and read the shard no more.
func (p Position) checkSeek() error {
	if p.kind == posSequence && !settle.ValidSequence(p.seq) {
		return fmt.Errorf("consumer: seek: %q is not a sequence number (shard %s)", p.seq, p.shard)
	}
	return nil
}

// posAtSequence is AT_SEQUENCE_NUMBER (a seek); posSequence read from a
// checkpoint is AFTER_SEQUENCE_NUMBER.
const posAtSequence posKind = 100
