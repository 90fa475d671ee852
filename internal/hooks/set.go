// Package hooks fans the events of one adapter out to its observe hooks.
package hooks

import (
	"context"

	"github.com/shardsettle/lambdaadapter/observe"
)

// Set is the hooks of one adapter, sorted by the interfaces they implement,
// so that an event nobody asked for costs one length check. The zero Set
// has no hooks. A Set is read-only once built and safe for concurrent use.
type Set struct {
	records     []observe.RecordHook
	writes      []observe.WriteHook
	invocations []observe.InvocationHook
	reads       []observe.ReadHook
	leases      []observe.LeaseHook
	checkpoints []observe.CheckpointHook
	inflight    []observe.InFlightHook
	flushers    []observe.Flusher
	tracer      observe.TraceHook
}

// New sorts hooks by the interfaces they implement. A nil hook is
// skipped; of several TraceHooks only the first is used.
func New(hooks ...observe.Hook) Set {
	var s Set
	for _, h := range hooks {
		if h == nil {
			continue
		}
		if x, ok := h.(observe.RecordHook); ok {
			s.records = append(s.records, x)
		}
		if x, ok := h.(observe.WriteHook); ok {
			s.writes = append(s.writes, x)
		}
		if x, ok := h.(observe.InvocationHook); ok {
			s.invocations = append(s.invocations, x)
		}
		if x, ok := h.(observe.ReadHook); ok {
			s.reads = append(s.reads, x)
		}
		if x, ok := h.(observe.LeaseHook); ok {
			s.leases = append(s.leases, x)
		}
		if x, ok := h.(observe.CheckpointHook); ok {
			s.checkpoints = append(s.checkpoints, x)
		}
		if x, ok := h.(observe.InFlightHook); ok {
			s.inflight = append(s.inflight, x)
		}
		if x, ok := h.(observe.Flusher); ok {
			s.flushers = append(s.flushers, x)
		}
		if x, ok := h.(observe.TraceHook); ok && s.tracer == nil {
			s.tracer = x
		}
	}
	return s
}

// Empty reports whether the set has no hook at all.
func (s *Set) Empty() bool {
	return len(s.records)+len(s.writes)+len(s.invocations)+len(s.reads)+len(s.leases)+
		len(s.checkpoints)+len(s.inflight)+len(s.flushers) == 0 && s.tracer == nil
}

// Tracer returns the first observe.TraceHook of the set (one tracer: spans nest),
// or nil.
func (s *Set) Tracer() observe.TraceHook { return s.tracer }

// WantsRecords reports whether a hook receives Records (so the caller
// measures what they carry only then).
func (s *Set) WantsRecords() bool { return len(s.records) > 0 }

// WantsInFlight reports whether a hook receives observe.InFlight snapshots.
func (s *Set) WantsInFlight() bool { return len(s.inflight) > 0 }

// Record calls every RecordHook.
func (s *Set) Record(r observe.Record) {
	for _, h := range s.records {
		h.OnRecord(r)
	}
}

// Write calls every WriteHook.
func (s *Set) Write(w observe.Write) {
	for _, h := range s.writes {
		h.OnWrite(w)
	}
}

// Invocation calls every InvocationHook.
func (s *Set) Invocation(i observe.Invocation) {
	for _, h := range s.invocations {
		h.OnInvocation(i)
	}
}

// Read calls every ReadHook.
func (s *Set) Read(r observe.Read) {
	for _, h := range s.reads {
		h.OnRead(r)
	}
}

// Lease calls every LeaseHook.
func (s *Set) Lease(l observe.Lease) {
	for _, h := range s.leases {
		h.OnLease(l)
	}
}

// Checkpoint calls every CheckpointHook.
func (s *Set) Checkpoint(c observe.Checkpoint) {
	for _, h := range s.checkpoints {
		h.OnCheckpoint(c)
	}
}

// InFlight calls every InFlightHook.
func (s *Set) InFlight(f observe.InFlight) {
	for _, h := range s.inflight {
		h.OnInFlight(f)
	}
}

// Flush calls every Flusher.
func (s *Set) Flush(ctx context.Context) {
	for _, h := range s.flushers {
		h.Flush(ctx)
	}
}

// Flushes reports whether a hook buffers.
func (s *Set) Flushes() bool { return len(s.flushers) > 0 }
