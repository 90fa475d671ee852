package soak

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is the checker's verdict on a run.
type Report struct {
	Run      *Run
	Findings []Finding
	Stats    map[Mode]Stats
}

// Stats are a mode's totals.
type Stats struct {
	Produced     int
	Handled      int // distinct ids whose handler started
	Starts       int // handler starts (every delivery)
	Done         int // ids acked, dropped or dead-lettered
	DeadLettered int // ids dead-lettered
	Copies       int // counted copies in the source stream
	// Invocations and InvocationErrors count the Lambda invocations with a
	// Kinesis batch and those that failed (the batch came again whole).
	Invocations, InvocationErrors int
}

func (c *checker) stats() map[Mode]Stats {
	st := map[Mode]Stats{}
	handled := map[string]bool{}
	for d, ss := range c.starts {
		s := st[d.mode]
		s.Starts += len(ss)
		for _, x := range ss {
			if !handled[x.id] {
				handled[x.id] = true
				s.Handled++
			}
		}
		st[d.mode] = s
	}
	for _, p := range c.r.Produced {
		s := st[p.Mode]
		s.Produced++
		if c.done(p.ID) {
			s.Done++
		}
		if c.dead[p.ID] > 0 {
			s.DeadLettered++
		}
		st[p.Mode] = s
	}
	for _, inv := range c.r.Invocations {
		s := st[ModeLambda]
		s.Invocations++
		if inv.Err != "" {
			s.InvocationErrors++
		}
		st[ModeLambda] = s
	}
	for _, r := range c.r.Stream {
		if r.RetryCount > 0 {
			s := st[r.Mode]
			s.Copies++
			st[r.Mode] = s
		}
	}
	return st
}

// Violations returns the findings that break a promise.
func (r *Report) Violations() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Violation {
			out = append(out, f)
		}
	}
	return out
}

// Failed reports whether any promise was broken.
func (r *Report) Failed() bool { return len(r.Violations()) > 0 }

// Count returns how many records the findings of check stand for, and how
// many of them are violations.
func (r *Report) Count(check Check) (all, violations int) {
	for _, f := range r.Findings {
		if f.Check == check {
			all += f.Count
			if f.Violation {
				violations += f.Count
			}
		}
	}
	return all, violations
}

// String is the report: totals per mode, a table by fault kind (a finding
// that falls in several fault windows counts in each of their rows; the
// total row counts it once), the duplicates by cause, the stall bound, and
// the violations (at most ten per check).
func (r *Report) String() string {
	var b strings.Builder
	verdict := "PASS"
	if r.Failed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "soak seed %d: %s (%d findings break a promise)\n\n", r.Run.Seed, verdict, len(r.Violations()))

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tproduced\thandled\thandler starts\tdone\tdead-lettered\tcopies\t")
	for _, m := range []Mode{ModeECS, ModeLambda} {
		s := r.Stats[m]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", m, s.Produced, s.Handled, s.Starts, s.Done, s.DeadLettered, s.Copies)
	}
	tw.Flush()
	if s := r.Stats[ModeLambda]; s.Invocations > 0 {
		fmt.Fprintf(&b, "Lambda: %d invocations with a Kinesis batch, %d of them failed (the batch came again whole)\n", s.Invocations, s.InvocationErrors)
	}
	b.WriteString("\n")

	cols := []Check{CheckLost, CheckOverlap, CheckFence, CheckOrder, CheckDuplicate, CheckCopy, CheckFlap, CheckExit}
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "fault kind\twindows\t")
	for _, c := range cols {
		if c == CheckDuplicate {
			fmt.Fprint(tw, "duplicates (documented)\tduplicates (not)\t")
			continue
		}
		fmt.Fprintf(tw, "%s\t", c)
	}
	fmt.Fprintln(tw)
	windows := map[Kind]int{}
	for _, w := range r.Run.Windows {
		windows[w.Kind]++
	}
	row := func(name string, n int, in func(Finding) bool) {
		fmt.Fprintf(tw, "%s\t%d\t", name, n)
		for _, c := range cols {
			ok, bad := 0, 0
			for _, f := range r.Findings {
				if f.Check != c || !in(f) {
					continue
				}
				if f.Violation {
					bad += f.Count
				} else {
					ok += f.Count
				}
			}
			switch c {
			case CheckDuplicate:
				fmt.Fprintf(tw, "%d\t%d\t", ok, bad)
			case CheckCopy:
				fmt.Fprintf(tw, "%s\t", pair(bad, ok))
			default:
				fmt.Fprintf(tw, "%d\t", bad)
			}
		}
		fmt.Fprintln(tw)
	}
	for _, k := range Kinds {
		row(string(k), windows[k], func(f Finding) bool { return slices.Contains(f.Kinds, k) })
	}
	row("total", len(r.Run.Windows), func(Finding) bool { return true })
	tw.Flush()
	b.WriteString("(a cell counts records; a finding in several fault windows counts in each of their rows;\n extra copy: \"n\" broken, \"n+m\" with m documented)\n\n")

	type causeKey struct {
		mode  Mode
		cause string
	}
	causes := map[causeKey][2]int{}
	for _, f := range r.Findings {
		if f.Check == CheckDuplicate || (f.Check == CheckCopy && f.Cause != "") {
			k := causeKey{f.Mode, string(f.Check) + ": " + f.Cause}
			v := causes[k]
			if f.Violation {
				v[1] += f.Count
			} else {
				v[0] += f.Count
			}
			causes[k] = v
		}
	}
	if len(causes) > 0 {
		b.WriteString("duplicates and extra copies by cause:\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  mode\tcause\tdocumented\tnot documented / beyond bound")
		for _, k := range sortedKeysFunc(causes, func(a, b causeKey) int { return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.cause, b.cause)) }) {
			v := causes[k]
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\n", k.mode, k.cause, v[0], v[1])
		}
		tw.Flush()
		b.WriteString("\n")
	}
	for _, f := range r.Findings {
		if f.Check == CheckStall {
			mark := "ok"
			if f.Violation {
				mark = "BROKEN"
			}
			fmt.Fprintf(&b, "stall (%s): %s\n", mark, f.Detail)
		}
	}
	shown := map[Check]int{}
	var more []string
	for _, f := range r.Violations() {
		if f.Check == CheckStall {
			continue
		}
		if shown[f.Check] == 0 && len(shown) == 0 {
			b.WriteString("\nbroken promises:\n")
		}
		shown[f.Check]++
		if shown[f.Check] > 10 {
			continue
		}
		kinds := make([]string, len(f.Kinds))
		for i, k := range f.Kinds {
			kinds[i] = string(k)
		}
		fmt.Fprintf(&b, "  %s [%s] (%s) x%d: %s\n", f.Check, f.Mode, strings.Join(kinds, ", "), f.Count, f.Detail)
	}
	for c, n := range shown {
		if n > 10 {
			more = append(more, fmt.Sprintf("%d more %s", n-10, c))
		}
	}
	if len(more) > 0 {
		slices.Sort(more)
		fmt.Fprintf(&b, "  (%s)\n", strings.Join(more, ", "))
	}
	return b.String()
}

func pair(bad, ok int) string {
	if ok == 0 {
		return fmt.Sprint(bad)
	}
	return fmt.Sprintf("%d+%d", bad, ok)
}
