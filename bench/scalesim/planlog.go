package scalesim

import (
	"context"
	"log/slog"
	"sync"
)

// planLog is a slog.Handler that keeps the loads of the last balancing
// plan a leader logged (consumer's "balancing plan", at debug level), for
// Config.Trace, and passes every other record to next (nil: none).
type planLog struct {
	next slog.Handler
	mu   *sync.Mutex
	last *map[string]float64
}

func newPlanLog(next slog.Handler) planLog {
	return planLog{next: next, mu: &sync.Mutex{}, last: new(map[string]float64)}
}

func (h planLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l == slog.LevelDebug || (h.next != nil && h.next.Enabled(ctx, l))
}

func (h planLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "consumer: balancing plan" {
		loads := map[string]float64{}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "load" {
				for _, w := range a.Value.Group() {
					loads[w.Key] = w.Value.Float64()
				}
			}
			return true
		})
		if len(loads) > 0 {
			h.mu.Lock()
			*h.last = loads
			h.mu.Unlock()
		}
		return nil
	}
	if h.next == nil || !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h planLog) WithAttrs(as []slog.Attr) slog.Handler {
	if h.next != nil {
		h.next = h.next.WithAttrs(as)
	}
	return h
}

func (h planLog) WithGroup(name string) slog.Handler {
	if h.next != nil {
		h.next = h.next.WithGroup(name)
	}
	return h
}

// loads returns the last plan's loads (nil: none yet).
func (h planLog) loads() map[string]float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return *h.last
}
