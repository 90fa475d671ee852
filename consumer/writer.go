package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/shardsettle/lambdaadapter/message"
	"github.com/shardsettle/lambdaadapter/publish"
	"github.com/shardsettle/lambdaadapter/retry"
)

// Limits of the batching writer.
const (
	// writeQueue is the number of Kinesis writes (retry copies, dead
	// letters to a stream) that may wait for a PutRecords call; a lane
	// that finds the queue full waits, so writes set the pace like
	// handlers do.
	writeQueue = 1024
	// writeWorkers is the number of PutRecords calls in flight at once.
	writeWorkers = 4
	// writeTimeout bounds one batch of writes, retries included.
	writeTimeout = 30 * time.Second
)

// kinesisWrite is a record a lane wants written to Kinesis for a delivery:
// its retry copy or its dead letter. The delivery settles once it is
// written.
type kinesisWrite struct {
	d   *delivery
	rec publish.Record
	dec retry.Decision
	out message.Outcome
}

// writer batches the Kinesis writes of all lanes into PutRecords calls:
// each worker takes every write queued (up to publish.MaxBatchRecords) and
// writes them with one PutBatch, so a burst of retries costs a few calls
// instead of one PutRecord per record, and a lane does not wait for a write
// to reach Kinesis. A delivery whose write failed stays unsettled and holds
// the checkpoint, as with a synchronous write.
type writer struct {
	c      *Consumer
	queue  chan *kinesisWrite
	mu     sync.RWMutex // submit holds it shared; close exclusively
	closed bool
	done   chan struct{}
	ctx    context.Context // cancelled when close gives up waiting
	cancel context.CancelFunc
}

func newWriter(c *Consumer) *writer {
	w := &writer{c: c, queue: make(chan *kinesisWrite, writeQueue), done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range writeWorkers {
		wg.Go(w.work)
	}
	go func() {
		wg.Wait()
		close(w.done)
	}()
	return w
}

// submit queues kw, waiting while the queue is full. It counts kw in
// flight until it is written or failed. It reports false, queueing nothing,
// once the writer is closed.
func (w *writer) submit(kw *kinesisWrite) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return false
	}
	w.c.inflight.Add(1)
	w.queue <- kw
	return true
}

// close stops taking writes and waits (at most timeout) until every queued
// write was written or failed. After the timeout it cancels the writes
// still under way (their records stay unsettled and come again from the
// checkpoint) and reports false; either way no worker runs once it
// returns.
func (w *writer) close(timeout time.Duration) bool {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
		w.cancel()
		return true
	case <-t.C:
		w.cancel()
		<-w.done
		return false
	}
}

func (w *writer) work() {
	batch := make([]*kinesisWrite, 0, publish.MaxBatchRecords)
	for first := range w.queue {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < cap(batch) {
			select {
			case kw, ok := <-w.queue:
				if !ok {
					break drain
				}
				batch = append(batch, kw)
			default:
				break drain
			}
		}
		w.flush(batch)
		clear(batch)
	}
}

// flush writes batch and settles every delivery whose record was written.
func (w *writer) flush(batch []*kinesisWrite) {
	c := w.c
	live := batch[:0:0]
	for _, kw := range batch {
		if kw.d.stale() {
			c.inflight.Add(-1) // sought since it was read: nothing to write
			continue
		}
		live = append(live, kw)
	}
	if len(live) == 0 {
		return
	}
	recs := make([]publish.Record, len(live))
	for i, kw := range live {
		recs[i] = kw.rec
	}
	ctx, cancel := context.WithTimeout(w.ctx, writeTimeout)
	defer cancel()
	res := c.cfg.Publisher.PutBatch(ctx, recs)
	for i, kw := range live {
		if err := res[i].Err; err != nil {
			c.logRecord(ctx, slog.LevelError, "consumer: writing the "+kw.dec.Action.String()+" failed; record left unsettled, holding the checkpoint", &kw.d.m, kw.out, err)
		} else {
			kw.d.s.settle(kw.d)
		}
		c.inflight.Add(-1)
	}
}
