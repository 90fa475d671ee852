// Package settle tracks, per Kinesis shard, which delivered records have been
// handled and how far it is safe to checkpoint.
//
// A Watermark receives deliveries in arrival order (Deliver) and settlements
// in any order, from any goroutine (Settle). Its checkpoint is the sequence
// number of the last delivery in the run of settled deliveries that starts at
// the oldest one; FirstUnsettled is the oldest delivery that is not settled,
// which is where a retry must start (the itemIdentifier of a Lambda partial
// batch response).
//
// Guarantees:
//
//   - The checkpoint never passes a delivery that is not settled, including one
//     that is still being handled.
//   - Within an epoch the checkpoint never moves back, and Settle reports
//     moved=true exactly when it changed.
//   - Settling the same part twice returns ErrAlreadySettled and moves nothing.
//   - Reset (a seek, a restart from a stored checkpoint) starts a new epoch;
//     settlements of tickets from earlier epochs return ErrStale and change
//     nothing.
//   - End (shard end) succeeds only when nothing is pending; Deliver then
//     returns ErrEnded.
//   - A delivery may have several parts (the sub-records of a KPL aggregated
//     record); it is settled when every part is settled.
//   - Memory is bounded by the deliveries from the oldest unsettled one to the
//     newest: the settled prefix is dropped as the checkpoint advances, so a
//     Watermark can live for the lifetime of a shard lease.
//
// Sequence numbers are decimal integers of up to 129 digits. Compare them
// with CompareSequence, never as plain strings.
//
// Usage:
//
//	w := settle.NewWatermark(shardID)
//	t, err := w.Deliver(record.SequenceNumber, 1)
//	// ... hand t to the goroutine handling the record; when it is done:
//	if cp, moved, err := w.Settle(t); err == nil && moved {
//		// cp may be written as the shard's checkpoint.
//	}
//	// Lambda mode, at the end of the invocation:
//	if seq, ok := w.FirstUnsettled(); ok {
//		// report seq as the batch item failure
//	}
//
// The package is pure: it starts no goroutines, does no I/O and imports no
// AWS SDK.
package settle
