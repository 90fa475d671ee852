package scalesim

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Format writes the report as plain-text tables: the settings, one row per
// phase, the steady state's lease-store calls by kind, and the records.
func (r *Report) Format(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "%d shards, %d workers at the start, %d records/s written round robin, start TRIM_HORIZON\n", c.Shards, c.Workers, c.WriteRate)
	fmt.Fprintf(&b, "lease duration %s (renewal every %s, balancing every %s, expiry after %s, store call deadline %s), list interval %s, checkpoint interval %s, shutdown timeout %s\n",
		c.LeaseDuration, c.LeaseDuration/3, c.LeaseDuration/2, c.LeaseDuration, max(c.LeaseDuration/3, time.Second), c.ListInterval, c.CheckpointInterval, c.ShutdownTimeout)
	fmt.Fprintf(&b, "converged: every shard owned by a live worker, each holding ceil(shards/workers) ± 1 (balanced), and every live worker reading exactly those (reading); sampled every %s\n\n", c.Sample)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tworkers\ttarget\tbalanced\treading\tmoves\tideal\ttransfers\tfree takes\texpired takes\theld min-max\tmost unowned\tflaps\tduplicates\t")
	for _, p := range r.Phases {
		bal, rd := "-", "NOT CONVERGED"
		if p.Balanced > 0 {
			bal = secs(p.Balanced)
		}
		if p.Converged {
			rd = secs(p.Reading)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d-%d\t%d\t%d\t%d\t\n",
			p.Name, p.Workers, p.Target, bal, rd, p.Moves, p.Ideal, p.Store.Transfers, p.Store.FreeTakes, p.Store.ExpiredTakes,
			p.MinHeld, p.MaxHeld, p.Unowned, p.Flaps, p.Duplicates)
	}
	if err := tw.Flush(); err != nil {
		return err
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
	writes := s.Store.Writes()
	fmt.Fprintf(tw, "all writes\t%d\t\t%.4f\t%.1f\t\n", writes, s.PerShardSecond(writes), perSecond(writes, s.Window))
	fmt.Fprintf(tw, "rows read (snapshot, list)\t%d\t\t%.4f\t%.1f\t\n", s.Store.RowsRead, s.PerShardSecond(s.Store.RowsRead), perSecond(s.Store.RowsRead, s.Window))
	fmt.Fprintf(tw, "GetRecords calls\t%d\t\t%.4f\t%.1f\t\n", s.GetRecords, s.PerShardSecond(s.GetRecords), perSecond(s.GetRecords, s.Window))
	if err := tw.Flush(); err != nil {
		return err
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
