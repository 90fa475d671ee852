package scalesim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/consumer"
)

// Reads is a lease-table read rate: rows per second a Scan reads, and the
// DynamoDB read units per second they cost.
type Reads struct{ Rows, RCU float64 }

// scanUnits is lease/doc.go's cost of one strongly consistent Scan of a
// table of s held leases and w workers publishing their load, and the
// leader row: ceil((317·s + 220·w + 175) / 4096).
func scanUnits(s, w int) float64 {
	return math.Ceil(float64(317*s+220*w+175) / readUnitBytes)
}

// OldReads is the read cost before the leader (lease/doc.go's formula):
// each of w workers Scans the table (s leases, w worker rows, the leader
// row) every balancing round (lease/2) and every list interval.
func OldReads(s, w int, lease, list time.Duration) Reads {
	return OldReadsStreams(s, w, 1, lease, list)
}

// OldReadsStreams is OldReads for a service of n streams on one table (s
// leases in all, a worker row per worker and stream): each of the n
// consumers of each of w workers Scans the whole table (a Scan reads every
// row, whatever stream its filter matches) every balancing round and
// every list interval.
func OldReadsStreams(s, w, n int, lease, list time.Duration) Reads {
	scans := float64(w*n) * (2/lease.Seconds() + 1/list.Seconds())
	return Reads{Rows: scans * float64(s+n*w+1), RCU: scans * scanUnits(s, n*w)}
}

// LedReads is the read cost with a leader: the leader Scans every
// balancing round (lease/2) and every list interval; every worker reads
// the leader row (GetItem, 1 unit) and, but the leader, its leases
// through the owner index (Query, 0.5 units) every balancing round.
// Gets of leases adopted after a move are left out (they come with moves).
func LedReads(s, w int, lease, list time.Duration) Reads {
	return LedReadsStreams(s, w, 1, lease, list)
}

// LedReadsStreams is LedReads for a service of n streams on one table
// (internal/consumer/doc.go, "Several streams"): the group's leader Scans
// the whole table once a balancing round for every stream
// (SnapshotStreams) and once a list interval for each stream's listing;
// every worker reads the leader row once a round, and every follower
// queries the owner index once a round, for all its streams (its members
// use its primary's reads); the leader's other n-1 consumers query the
// index each round.
func LedReadsStreams(s, w, n int, lease, list time.Duration) Reads {
	round := 2 / lease.Seconds()
	scans := round + float64(n)/list.Seconds()
	gets := float64(w) * round
	queries := float64(w-1+n-1) * round
	return Reads{Rows: scans * float64(s+n*w+1), RCU: scans*scanUnits(s, n*w) + gets*1 + queries*0.5}
}

// Format writes the report as plain-text tables: the settings, one row per
// phase, the steady state's lease-store calls by kind, and the records.
func (r *Report) Format(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	writes := "round robin"
	if c.SkewTop != 0 || c.SkewMax != 0 {
		k, _ := FitSkew(c.Shards, c.SkewTop, c.SkewMax)
		writes = fmt.Sprintf("skewed (top 5%% of shards %.0f%% of records, hottest %.1f%%: Q %.2f, S %.3f)", 100*c.SkewTop, 100*c.SkewMax, k.Q, k.S)
		if c.Grain > 1 {
			writes += fmt.Sprintf(", each record every %dth of a stream of %d records/s (Grain)", c.Grain, c.Grain*c.WriteRate)
		}
	}
	assign := "load (AssignByLoad)"
	if c.Assignment == consumer.AssignByCount {
		assign = "count (AssignByCount)"
	}
	shards := fmt.Sprintf("%d shards", c.Shards)
	if c.Streams > 1 {
		shards += fmt.Sprintf(" dealt over %d streams, each worker reading them all as one group (consumer.NewGroup)", c.Streams)
	}
	fmt.Fprintf(&b, "%s, %d workers at the start, %d records/s written %s, start TRIM_HORIZON, assignment by %s\n", shards, c.Workers, c.WriteRate, writes, assign)
	fmt.Fprintf(&b, "CPU model (per worker, 1 CPU): %s per record + %s per payload byte + %s per GetRecords call; max/mean CPU (measured) at convergence over the last lease duration, at the end over the last %s of the %s after it converged; expected end: max/mean of each worker's expected CPU at the phase's end, the CPU model's cost of each shard it owns at the shard's true write rate (and its polls), without the window's noise\n", c.CPUPerRecord, c.CPUPerByte, c.CPUPerPoll, c.EndWindow, c.Settle)
	fmt.Fprintf(&b, "lease duration %s (renewal every %s, balancing every %s, expiry after %s, store call deadline %s), list interval %s, checkpoint interval %s, shutdown timeout %s\n",
		c.LeaseDuration, c.LeaseDuration/3, c.LeaseDuration/2, c.LeaseDuration, max(c.LeaseDuration/3, time.Second), c.ListInterval, c.CheckpointInterval, c.ShutdownTimeout)
	if c.Assignment == consumer.AssignByCount {
		fmt.Fprintf(&b, "converged: every shard owned by a live worker, each holding ceil(shards/workers) ± 1 (balanced), and every live worker reading exactly those (reading); sampled every %s\n", c.Sample)
	} else {
		fmt.Fprintf(&b, "converged: every shard owned by a live worker, each holding at least one, the highest worker CPU ≤ %.1f × the mean over the last lease duration (balanced), and every live worker reading exactly what it owns (reading); sampled every %s\n", balanceRatio, c.Sample)
	}
	fmt.Fprintf(&b, "fewest: FewestMoves lower bound at the change for max/mean ≤ %.1f and a lease on every worker (a leaving worker's leases, plus the costliest leases off workers above the limit and off the worker that takes the costliest of the leaving one's, one more if none of those fits another worker's room; at least one per joining worker)\n\n", balanceRatio)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tworkers\ttarget\tbalanced\treading\tmax/mean conv\tmax/mean end\texpected end\tmean CPU\tmoves\tideal (count)\tfewest (load)\tmoves/fewest\tjoiners' leases\ttransfers\tfree takes\texpired takes\theld min-max\tmost unowned\tflaps\tduplicates\t")
	for _, p := range r.Phases {
		bal, rd := "-", "NOT CONVERGED"
		if p.Balanced > 0 {
			bal = secs(p.Balanced)
		}
		if p.Converged {
			rd = secs(p.Reading)
		}
		ratio := "-"
		if p.Fewest > 0 {
			ratio = fmt.Sprintf("%.2f", float64(p.Moves)/float64(p.Fewest))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d-%d\t%d\t%d\t%d\t\n",
			p.Name, p.Workers, p.Target, bal, rd, p.MaxMean, p.MaxMeanEnd, p.ExpectedEnd, p.MeanCPU, p.Moves, p.Ideal, p.Fewest, ratio, p.JoinHeld, p.Store.Transfers, p.Store.FreeTakes, p.Store.ExpiredTakes,
			p.MinHeld, p.MaxHeld, p.Unowned, p.Flaps, p.Duplicates)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	blank := false
	for _, p := range r.Phases {
		if p.Oracle == nil && p.Greedy == nil {
			continue
		}
		if !blank {
			b.WriteString("\n") // the table ends at a blank line (bench/charts reads it)
			blank = true
		}
		if p.Oracle != nil {
			f, a := p.Oracle.Ends[0], p.Oracle.Ends[1]
			fmt.Fprintf(&b, "oracle, %s (placed by the true costs): the fewest, %d moves, end at %.2f by the model, read within %.1f in %.0f%% of %s readings; the most allowed, %d moves, at %.2f, %.0f%%\n",
				p.Name, f.Moves, f.Expected, balanceRatio, 100*f.Within, c.EndWindow, a.Moves, a.Expected, 100*a.Within)
		}
		if g := p.Greedy; g != nil {
			fmt.Fprintf(&b, "greedy, %s (placed greedily by the true costs, an achievable count where fewest is a lower bound): %d moves (moves/greedy %.2f), end at %.2f by the model, read within %.1f in %.0f%% of %s readings\n",
				p.Name, g.Moves, float64(p.Moves)/float64(max(g.Moves, 1)), g.Expected, balanceRatio, 100*g.Within, c.EndWindow)
		}
		if u := p.Sure; u != nil && u.Limit > 0 {
			fmt.Fprintf(&b, "sure, %s (placed greedily to the highest limit whose readings show %.1f in %.0f%% or more): to %.2f, %d moves (moves/sure %.2f), end at %.2f by the model, read within %.1f in %.0f%%\n",
				p.Name, balanceRatio, 100*sureShare, u.Limit, u.Moves, float64(p.Moves)/float64(max(u.Moves, 1)), u.Expected, balanceRatio, 100*u.Within)
		} else if u != nil {
			fmt.Fprintf(&b, "sure, %s (the oracle's fewest moves whose readings show %.1f in %.0f%% or more): %d moves (moves/sure %.2f), end at %.2f by the model, read within %.1f in %.0f%%\n",
				p.Name, balanceRatio, 100*sureShare, u.Moves, float64(p.Moves)/float64(max(u.Moves, 1)), u.Expected, balanceRatio, 100*u.Within)
		}
	}

	s := r.Steady
	fmt.Fprintf(&b, "\nsteady state: %s window after the start converged, %d shards, %d workers, %d records handled (%.1f/s)\n",
		round(s.Window), s.Shards, s.Workers, s.Handled, float64(s.Handled)/max(s.Window.Seconds(), 1e-9))
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lease-store call\tcalls\trefused\tper shard per second\tper second\t")
	for k := range numCalls {
		if s.Store.Calls[k] == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%.1f\t\n", k, s.Store.Calls[k], s.Store.Refused[k], s.PerShardSecond(s.Store.Calls[k]), perSecond(s.Store.Calls[k], s.Window))
	}
	fmt.Fprintf(tw, "read units (RCU)\t%.1f\t\t%.4f\t%.1f\t\n", float64(s.Store.RCU)/1000, s.PerShardSecond(s.Store.RCU)/1000, perSecond(s.Store.RCU, s.Window)/1000)
	allWrites := s.Store.Writes()
	fmt.Fprintf(tw, "all writes\t%d\t\t%.4f\t%.1f\t\n", allWrites, s.PerShardSecond(allWrites), perSecond(allWrites, s.Window))
	fmt.Fprintf(tw, "rows read (snapshot, list)\t%d\t\t%.4f\t%.1f\t\n", s.Store.RowsRead, s.PerShardSecond(s.Store.RowsRead), perSecond(s.Store.RowsRead, s.Window))
	fmt.Fprintf(tw, "GetRecords calls\t%d\t\t%.4f\t%.1f\t\n", s.GetRecords, s.PerShardSecond(s.GetRecords), perSecond(s.GetRecords, s.Window))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "modelled worker CPU at the window's end: mean %.2f, max/mean %.2f\n", s.MeanCPU, s.MaxMean)
	old := OldReadsStreams(s.Shards, s.Workers, c.Streams, c.LeaseDuration, c.ListInterval)
	nw := LedReadsStreams(s.Shards, s.Workers, c.Streams, c.LeaseDuration, c.ListInterval)
	fmt.Fprintf(&b, "lease-table reads per second: measured %.1f rows, %.1f RCU; the leader's formula (LedReads) %.1f rows, %.1f RCU; before the leader (OldReads: every worker Scans every lease duration/2 and every list interval) %.1f rows, %.1f RCU: measured RCU = %.1f%% of the old\n",
		perSecond(s.Store.RowsRead, s.Window), perSecond(s.Store.RCU, s.Window)/1000, nw.Rows, nw.RCU, old.Rows, old.RCU, 100*perSecond(s.Store.RCU, s.Window)/1000/max(old.RCU, 1e-9))
	if c.Streams > 1 {
		fmt.Fprintf(&b, "  (with %d streams: LedReadsStreams and OldReadsStreams, each Scan reading the whole table)\n", c.Streams)
	}
	if s.CPU > 0 {
		fmt.Fprintf(&b, "process CPU in the window: %s (%.2f cores)\n", round(s.CPU), s.CPU.Seconds()/max(s.Window.Seconds(), 1e-9))
	}

	fmt.Fprintf(&b, "\nrecords: %d written, %d lost (never handled), %d handled more than once; every record handled %s after the writes stopped\n",
		r.Written, r.Lost, r.Duplicates, round(r.Drained))
	fmt.Fprintf(&b, "whole run: %s, %d lease-store writes (%d refused), %d GetRecords calls", round(r.Elapsed), r.Total.Writes(), refusedWrites(r.Total), r.GetRecords)
	if r.CPU > 0 {
		fmt.Fprintf(&b, ", process CPU %s (%.2f cores)", round(r.CPU), r.CPU.Seconds()/max(r.Elapsed.Seconds(), 1e-9))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func refusedWrites(c Counts) int64 {
	var n int64
	for i := range numWrites {
		n += c.Refused[i]
	}
	return n
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
