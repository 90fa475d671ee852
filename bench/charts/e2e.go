package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// The workers of bench/e2e's side-by-side table (report_peers.go), in its
// column order.
var e2eWorkers = []string{"plain loop", "consumer in-memory", "consumer DynamoDB", "harlow in-memory", "harlow DynamoDB"}

// e2eReport is what the charts take from one output of bench/e2e
// (scripts/bench-e2e.sh): the run's shape from its header, the medians of
// the side-by-side table with harlow/kinesis-consumer, and the floor phase's
// CPU when the run had one.
type e2eReport struct {
	Records, RecordBytes, Shards, Limit, Rounds int
	HandlerWait                                 string // "" unless -handler-wait was set, e.g. "1ms"

	// Table holds the side-by-side table: row title → worker → median.
	// A "-" cell is absent.
	Table map[string]map[string]float64

	// FloorCPU is the CPU µs per record of the plain loop with the
	// consumer's decoder (-floor); 0 when the run had no floor phase.
	FloorCPU float64

	// MaxOtherCPU is the most CPU other processes used during a phase, in
	// per cent of one CPU.
	MaxOtherCPU float64
}

const (
	rowRecordsPerSec = "records/s, sequential"
	rowCPUPerRecord  = "CPU µs/record, sequential"
)

var (
	e2eHeader   = regexp.MustCompile(`^(\d+) records × (\d+) B over (\d+) shards, Limit (\d+), CheckpointInterval \S+, (\d+) round\(s\);`)
	e2eWait     = regexp.MustCompile(`^every record's handling waits (\S+) first \(-handler-wait\)$`)
	e2eFloor    = regexp.MustCompile(`^CPU µs/record: plain loop with the consumer's decoder \(the floor\)\s+([0-9.]+)(\s|$)`)
	e2eOtherCPU = regexp.MustCompile(`^other processes' CPU during a phase, at most\s+([0-9.]+)%`)
	spaces2     = regexp.MustCompile(`\s{2,}`)
)

// parseE2E reads the text report of bench/e2e. It fails when the header,
// the side-by-side table or its sequential records/s and CPU rows are
// missing, or when a cell of the table is neither a number nor "-".
func parseE2E(r io.Reader) (*e2eReport, error) {
	rep := &e2eReport{Table: map[string]map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024) // the JSON line is long
	haveHeader, inTable, haveTable := false, false, false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if inTable {
			if trimmed == "" {
				inTable = false
				continue
			}
			if err := rep.tableRow(trimmed); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			continue
		}
		if m := e2eHeader.FindStringSubmatch(line); m != nil {
			rep.Records, _ = strconv.Atoi(m[1])
			rep.RecordBytes, _ = strconv.Atoi(m[2])
			rep.Shards, _ = strconv.Atoi(m[3])
			rep.Limit, _ = strconv.Atoi(m[4])
			rep.Rounds, _ = strconv.Atoi(m[5])
			haveHeader = true
			continue
		}
		if m := e2eWait.FindStringSubmatch(line); m != nil {
			rep.HandlerWait = m[1]
			continue
		}
		if m := e2eFloor.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: floor: %w", n, err)
			}
			rep.FloorCPU = v
			continue
		}
		if m := e2eOtherCPU.FindStringSubmatch(line); m != nil {
			rep.MaxOtherCPU, _ = strconv.ParseFloat(m[1], 64)
			continue
		}
		if strings.HasPrefix(line, "side by side with ") {
			if haveTable {
				return nil, fmt.Errorf("line %d: a second side-by-side table (one run per file)", n)
			}
			if !sc.Scan() {
				return nil, fmt.Errorf("line %d: side-by-side table without its header", n)
			}
			n++
			cols := spaces2.Split(strings.TrimSpace(sc.Text()), -1)
			if strings.Join(cols, "|") != strings.Join(e2eWorkers, "|") {
				return nil, fmt.Errorf("line %d: side-by-side columns %q, want %q", n, cols, e2eWorkers)
			}
			inTable, haveTable = true, true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case !haveHeader:
		return nil, fmt.Errorf("no \"N records × S B over K shards\" header line")
	case !haveTable:
		return nil, fmt.Errorf("no side-by-side table with harlow/kinesis-consumer (a run with -peers)")
	}
	for _, row := range []string{rowRecordsPerSec, rowCPUPerRecord} {
		if len(rep.Table[row]) != len(e2eWorkers) {
			return nil, fmt.Errorf("side-by-side row %q missing or incomplete", row)
		}
	}
	return rep, nil
}

// tableRow parses one row of the side-by-side table: a title, then one
// cell per worker.
func (rep *e2eReport) tableRow(line string) error {
	fields := strings.Fields(line)
	if len(fields) <= len(e2eWorkers) {
		return fmt.Errorf("side-by-side row %q: fewer than %d cells", line, len(e2eWorkers))
	}
	cells := fields[len(fields)-len(e2eWorkers):]
	title := strings.Join(fields[:len(fields)-len(e2eWorkers)], " ")
	row := map[string]float64{}
	for i, c := range cells {
		if c == "-" {
			continue
		}
		v, err := strconv.ParseFloat(c, 64)
		if err != nil {
			return fmt.Errorf("side-by-side row %q: cell %q is not a number", title, c)
		}
		row[e2eWorkers[i]] = v
	}
	if _, dup := rep.Table[title]; dup {
		return fmt.Errorf("side-by-side row %q twice", title)
	}
	rep.Table[title] = row
	return nil
}
