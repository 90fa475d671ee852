package standin

import (
	"context"
	"errors"
	"time"
)

// errReadCap is the cause of the context that ReadAll and ReceiveAll cancel
// when they hit their overall cap (quiet window + readCap).
var errReadCap = errors.New("standin: read cap reached")

// quietWindow decides when a reader that polls a source (every shard of a
// stream, or a queue) may conclude that nothing more is coming. The window
// starts only once a poll found the source drained (every shard at its tip,
// or the queue empty), so reading what is already there never counts against
// it however slow the machine is. Anything that arrives restarts it. It is
// over once a drained poll that started after the window ended still found
// nothing, so every item that arrived before the window ended was seen.
type quietWindow struct {
	window time.Duration
	// since is when the first drained poll of the current quiet spell
	// ended; zero while items keep arriving.
	since time.Time
}

// polled records a poll that started at start and ended now; drained tells
// whether it found the source drained. It reports whether the window is over.
func (q *quietWindow) polled(start time.Time, drained bool) bool {
	switch {
	case !drained:
		q.since = time.Time{}
		return false
	case q.since.IsZero():
		q.since = time.Now()
		return false
	default:
		return start.Sub(q.since) >= q.window
	}
}

// started reports whether the window has started, that is whether the last
// poll found the source drained.
func (q *quietWindow) started() bool { return !q.since.IsZero() }

// left returns how much of the window is left (0 once it has passed, and
// the whole window while it has not started).
func (q *quietWindow) left() time.Duration {
	if q.since.IsZero() {
		return q.window
	}
	return max(time.Until(q.since.Add(q.window)), 0)
}

// pause returns how long to wait before the next poll after one that found
// nothing new: pollInterval, or less when the window ends sooner. A reader
// polls again at once after a poll that found something.
func (q *quietWindow) pause() time.Duration {
	if q.since.IsZero() {
		return pollInterval
	}
	return min(pollInterval, q.left())
}

// withReadCap returns ctx bounded by the overall cap of a read with the given
// quiet window: window + readCap, canceled with cause errReadCap.
func withReadCap(ctx context.Context, window time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, max(window, 0)+readCap, errReadCap)
}

// capped reports whether ctx, from withReadCap, has ended because the cap was
// reached (and not because the caller's context ended).
func capped(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errReadCap)
}
