package observe

import "context"

// Set is the hooks of one adapter, sorted by the interfaces they implement,
// so that an event nobody asked for costs one length check. The zero Set
// has no hooks. A Set is read-only once built and safe for concurrent use.
type Set struct {
	records     []RecordHook
	writes      []WriteHook
	invocations []InvocationHook
	reads       []ReadHook
	leases      []LeaseHook
	checkpoints []CheckpointHook
	inflight    []InFlightHook
	flushers    []Flusher
	tracer      TraceHook
}

// NewSet sorts hooks by the interfaces they implement. A nil hook is
// skipped; of several TraceHooks only the first is used.
func NewSet(hooks ...Hook) Set {
	var s Set
	for _, h := range hooks {
		if h == nil {
			continue
		}
		if x, ok := h.(RecordHook); ok {
			s.records = append(s.records, x)
		}
		if x, ok := h.(WriteHook); ok {
			s.writes = append(s.writes, x)
		}
		if x, ok := h.(InvocationHook); ok {
			s.invocations = append(s.invocations, x)
		}
		if x, ok := h.(ReadHook); ok {
			s.reads = append(s.reads, x)
		}
		if x, ok := h.(LeaseHook); ok {
			s.leases = append(s.leases, x)
		}
		if x, ok := h.(CheckpointHook); ok {
			s.checkpoints = append(s.checkpoints, x)
		}
		if x, ok := h.(InFlightHook); ok {
			s.inflight = append(s.inflight, x)
		}
		if x, ok := h.(Flusher); ok {
			s.flushers = append(s.flushers, x)
		}
		if x, ok := h.(TraceHook); ok && s.tracer == nil {
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

// Tracer returns the first TraceHook of the set (one tracer: spans nest),
// or nil.
func (s *Set) Tracer() TraceHook { return s.tracer }

// WantsRecords reports whether a hook receives Records (so the caller
// measures what they carry only then).
func (s *Set) WantsRecords() bool { return len(s.records) > 0 }

// WantsInFlight reports whether a hook receives InFlight snapshots.
func (s *Set) WantsInFlight() bool { return len(s.inflight) > 0 }

// Record calls every RecordHook.
func (s *Set) Record(r Record) {
	for _, h := range s.records {
		h.OnRecord(r)
	}
}

// Write calls every WriteHook.
func (s *Set) Write(w Write) {
	for _, h := range s.writes {
		h.OnWrite(w)
	}
}

// Invocation calls every InvocationHook.
func (s *Set) Invocation(i Invocation) {
	for _, h := range s.invocations {
		h.OnInvocation(i)
	}
}

// Read calls every ReadHook.
func (s *Set) Read(r Read) {
	for _, h := range s.reads {
		h.OnRead(r)
	}
}

// Lease calls every LeaseHook.
func (s *Set) Lease(l Lease) {
	for _, h := range s.leases {
		h.OnLease(l)
	}
}

// Checkpoint calls every CheckpointHook.
func (s *Set) Checkpoint(c Checkpoint) {
	for _, h := range s.checkpoints {
		h.OnCheckpoint(c)
	}
}

// InFlight calls every InFlightHook.
func (s *Set) InFlight(f InFlight) {
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
