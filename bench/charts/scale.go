package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// scalePhase is one row of the scale simulation's phase table
// (bench/scalesim): a change of the fleet and how it converged.
type scalePhase struct {
	Phase      string // "start 50", "join 1", "kill 5", ...
	Workers    int
	Balanced   time.Duration // until every worker held its share ± 1
	Converged  time.Duration // until every worker read exactly its shards ("reading")
	Moves      int
	Ideal      int // the fewest moves the change needs (by load: "fewest (load)")
	Duplicates int // records handled more than once
}

// scaleRun is one section of the scale simulation's output: virtual or
// real time.
type scaleRun struct {
	Title                string // after "== scale simulation, "
	Shards, StartWorkers int
	WrittenPerSecond     int
	LeaseDuration        time.Duration
	Phases               []scalePhase
	Written, Lost        int
	WritesPerShardSecond float64 // steady state, all lease-store writes
}

var (
	scaleSection = regexp.MustCompile(`^== scale simulation, (.+)$`)
	scaleLease   = regexp.MustCompile(`^lease duration (\S+) \(`)
	scaleFleet   = regexp.MustCompile(`^(\d+) shards, (\d+) workers at the start, (\d+) records/s written`)
	scaleRecords = regexp.MustCompile(`^records: (\d+) written, (\d+) lost \(never handled\)`)
	scaleWrites  = regexp.MustCompile(`^\s*all writes\s+\d+\s+([0-9.]+)\s+[0-9.]+$`)
)

// parseScale reads the output of `make bench-scale`: one section per run.
// It fails when a section lacks its phase table, its lease duration or its
// records line, or when a row of the table does not parse.
func parseScale(r io.Reader) ([]scaleRun, error) {
	var runs []scaleRun
	cur := func() *scaleRun { return &runs[len(runs)-1] }
	err := phaseTables(r, scaleSection, loadColumns, // the same table as the skewed simulation's since issue 30
		func(m []string) { runs = append(runs, scaleRun{Title: m[1]}) },
		func(line string) error {
			p, err := parseScaleRow(line)
			cur().Phases = append(cur().Phases, p)
			return err
		},
		func(line string) error {
			if m := scaleLease.FindStringSubmatch(line); m != nil {
				d, err := time.ParseDuration(m[1])
				if err != nil {
					return fmt.Errorf("lease duration: %w", err)
				}
				cur().LeaseDuration = d
			} else if m := scaleFleet.FindStringSubmatch(line); m != nil {
				cur().Shards, _ = strconv.Atoi(m[1])
				cur().StartWorkers, _ = strconv.Atoi(m[2])
				cur().WrittenPerSecond, _ = strconv.Atoi(m[3])
			} else if m := scaleRecords.FindStringSubmatch(line); m != nil {
				cur().Written, _ = strconv.Atoi(m[1])
				cur().Lost, _ = strconv.Atoi(m[2])
			} else if m := scaleWrites.FindStringSubmatch(line); m != nil {
				cur().WritesPerShardSecond, _ = strconv.ParseFloat(m[1], 64)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no \"== scale simulation, …\" section")
	}
	for _, run := range runs {
		switch {
		case len(run.Phases) == 0:
			return nil, fmt.Errorf("%s: no phase table", run.Title)
		case run.Shards == 0:
			return nil, fmt.Errorf("%s: no \"N shards, M workers at the start\" line", run.Title)
		case run.LeaseDuration == 0:
			return nil, fmt.Errorf("%s: no lease duration line", run.Title)
		case run.Written == 0:
			return nil, fmt.Errorf("%s: no \"records: N written, M lost\" line", run.Title)
		case run.WritesPerShardSecond == 0:
			return nil, fmt.Errorf("%s: no steady-state \"all writes\" line", run.Title)
		}
	}
	return runs, nil
}

// parseScaleRow parses a row such as
//
//	start 50       50      20     10.0s    10.0s           1.08          1.01          1.00      0.51   1000           1000           1000          1.00             1000          0        1001              0         20-20          1000      0           0
//
// Ideal is the fewest moves by load (the planner's), "fewest (load)".
func parseScaleRow(line string) (scalePhase, error) {
	f, err := phaseFields(line)
	if err != nil {
		return scalePhase{}, err
	}
	p := scalePhase{Phase: f[0] + " " + f[1]}
	ints := []struct {
		dst *int
		s   string
	}{{&p.Workers, f[2]}, {&p.Moves, f[10]}, {&p.Ideal, f[12]}, {&p.Duplicates, f[21]}}
	for _, x := range ints {
		v, err := strconv.Atoi(x.s)
		if err != nil {
			return p, fmt.Errorf("phase row %q: %q is not a count", line, x.s)
		}
		*x.dst = v
	}
	if p.Balanced, err = time.ParseDuration(f[4]); err != nil {
		return p, fmt.Errorf("phase row %q: balanced: %w", line, err)
	}
	if p.Converged, err = time.ParseDuration(f[5]); err != nil {
		return p, fmt.Errorf("phase row %q: reading: %w", line, err)
	}
	return p, nil
}

// phaseTables reads output made of sections, each opening with a line that
// section matches and holding a phase table whose header line names
// columns (two spaces or more apart): it calls begin with the opening
// line's submatches, row with each row of the table (up to a blank line),
// and other with every other line of a section. Lines before the first
// section are skipped. An error names its line.
func phaseTables(r io.Reader, section *regexp.Regexp, columns []string, begin func([]string), row, other func(string) error) error {
	sc := bufio.NewScanner(r)
	in, inTable := false, false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := section.FindStringSubmatch(line); m != nil {
			begin(m)
			in, inTable = true, false
			continue
		}
		var err error
		switch {
		case !in:
		case inTable && strings.TrimSpace(line) == "":
			inTable = false
		case inTable:
			err = row(line)
		default:
			if cols := spaces2.Split(strings.TrimSpace(line), -1); cols[0] == "phase" {
				if strings.Join(cols, "|") != strings.Join(columns, "|") {
					err = fmt.Errorf("phase table columns %q, want %q", cols, columns)
				}
				inTable = true
			} else {
				err = other(line)
			}
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}
