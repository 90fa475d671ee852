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
// (internal/scalesim): a change of the fleet and how it converged.
type scalePhase struct {
	Phase      string // "start 50", "join 1", "kill 5", ...
	Workers    int
	Balanced   time.Duration // until every worker held its share ± 1
	Converged  time.Duration // until every worker read exactly its shards ("reading")
	Moves      int
	Ideal      int // the fewest moves the change needs
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

// The phase table's columns, as internal/scalesim prints them.
var scaleColumns = []string{"phase", "workers", "target", "balanced", "reading", "moves", "ideal", "transfers", "free takes", "expired takes", "held min-max", "most unowned", "flaps", "duplicates"}

// parseScale reads the output of `make bench-scale`: one section per run.
// It fails when a section lacks its phase table, its lease duration or its
// records line, or when a row of the table does not parse.
func parseScale(r io.Reader) ([]scaleRun, error) {
	var runs []scaleRun
	var cur *scaleRun
	sc := bufio.NewScanner(r)
	inTable := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := scaleSection.FindStringSubmatch(line); m != nil {
			runs = append(runs, scaleRun{Title: m[1]})
			cur = &runs[len(runs)-1]
			inTable = false
			continue
		}
		if cur == nil {
			continue
		}
		if inTable {
			if strings.TrimSpace(line) == "" {
				inTable = false
				continue
			}
			p, err := parseScaleRow(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			cur.Phases = append(cur.Phases, p)
			continue
		}
		if cols := spaces2.Split(strings.TrimSpace(line), -1); cols[0] == "phase" {
			if strings.Join(cols, "|") != strings.Join(scaleColumns, "|") {
				return nil, fmt.Errorf("line %d: phase table columns %q, want %q", n, cols, scaleColumns)
			}
			inTable = true
			continue
		}
		if m := scaleLease.FindStringSubmatch(line); m != nil {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: lease duration: %w", n, err)
			}
			cur.LeaseDuration = d
			continue
		}
		if m := scaleFleet.FindStringSubmatch(line); m != nil {
			cur.Shards, _ = strconv.Atoi(m[1])
			cur.StartWorkers, _ = strconv.Atoi(m[2])
			cur.WrittenPerSecond, _ = strconv.Atoi(m[3])
			continue
		}
		if m := scaleRecords.FindStringSubmatch(line); m != nil {
			cur.Written, _ = strconv.Atoi(m[1])
			cur.Lost, _ = strconv.Atoi(m[2])
			continue
		}
		if m := scaleWrites.FindStringSubmatch(line); m != nil {
			cur.WritesPerShardSecond, _ = strconv.ParseFloat(m[1], 64)
		}
	}
	if err := sc.Err(); err != nil {
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
//	start 50       50      20     15.1s    20.0s   1874   1000        874        1000              0         20-20             0      1           0
func parseScaleRow(line string) (scalePhase, error) {
	f := strings.Fields(line)
	if len(f) != len(scaleColumns)+1 { // the phase's name is two words
		return scalePhase{}, fmt.Errorf("phase row %q: %d fields, want %d", line, len(f), len(scaleColumns)+1)
	}
	p := scalePhase{Phase: f[0] + " " + f[1]}
	ints := []struct {
		dst *int
		s   string
	}{{&p.Workers, f[2]}, {&p.Moves, f[6]}, {&p.Ideal, f[7]}, {&p.Duplicates, f[14]}}
	for _, x := range ints {
		v, err := strconv.Atoi(x.s)
		if err != nil {
			return p, fmt.Errorf("phase row %q: %q is not a count", line, x.s)
		}
		*x.dst = v
	}
	var err error
	if p.Balanced, err = time.ParseDuration(f[4]); err != nil {
		return p, fmt.Errorf("phase row %q: balanced: %w", line, err)
	}
	if p.Converged, err = time.ParseDuration(f[5]); err != nil {
		return p, fmt.Errorf("phase row %q: reading: %w", line, err)
	}
	return p, nil
}
