package engine

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/shardsettle/lambdaadapter/internal/message"
)

// writtenMax is the most records the written memo keeps: more than one
// invocation's worth (Lambda sends at most 10,000 records), about 2 MiB.
const writtenMax = 20000

// written (Lambda mode) remembers the records whose write (copy, delay
// message or dead letter) was made while an earlier record of their shard
// stayed unsettled. Lambda delivers such a record again with the unsettled
// one before it; when that delivery comes to this execution environment,
// the engine recognises the record and settles it without running its
// handler again, so its write is not made twice (one record never has two
// copy chains). The memo lives as long as the Engine, which a Lambda
// execution environment keeps across invocations; a delivery to another
// environment, or after the environment was replaced, does not find it (the
// documented bound: see the package documentation). It keeps at most
// writtenMax records, forgetting the oldest first.
type written struct {
	n     atomic.Int64 // entries in m, read without mu
	mu    sync.Mutex
	m     map[string]struct{}
	order []string // keys of m, oldest first (some may have been taken)
}

// key identifies a record of a shard: stream, shard, sequence number and
// (for a user record of a KPL aggregate) sub-sequence number.
func writtenKey(m *message.Message) string {
	return m.StreamARN + "\x00" + m.ShardID + "\x00" + m.SequenceNumber + "\x00" + strconv.Itoa(m.SubSequenceNumber)
}

// noteBeyond remembers d's record if a record before it in its shard is
// unsettled now. Call it when d's write was made, before d settles.
func (w *written) noteBeyond(d *Delivery) {
	first, ok := d.shard.wm.FirstUnsettledTicket()
	if !ok || !first.Before(d.ticket) {
		return
	}
	w.put(d.msg())
}

// put remembers m's record.
func (w *written) put(m *message.Message) {
	k := writtenKey(m)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]struct{}{}
	}
	if _, dup := w.m[k]; dup {
		return
	}
	w.m[k] = struct{}{}
	w.order = append(w.order, k)
	for len(w.m) > writtenMax {
		delete(w.m, w.order[0])
		w.order[0] = ""
		w.order = w.order[1:]
	}
	if len(w.order) > 2*writtenMax { // taken keys pile up at the front
		kept := w.order[:0:0]
		for _, k := range w.order {
			if _, ok := w.m[k]; ok {
				kept = append(kept, k)
			}
		}
		w.order = kept
	}
	w.n.Store(int64(len(w.m)))
}

// take reports whether m's record is remembered, and forgets it.
func (w *written) take(m *message.Message) bool {
	if w.n.Load() == 0 {
		return false
	}
	k := writtenKey(m)
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.m[k]; !ok {
		return false
	}
	delete(w.m, k)
	w.n.Store(int64(len(w.m)))
	return true
}
