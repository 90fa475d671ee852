// Command charts draws the charts of BENCHMARKS.md from the raw benchmark
// output in benchmarks/ and writes them as PNG images:
//
//	lambda.png  Lambda mode: time per invocation against records per
//	            invocation, the adapter (default and WithRecycledMessages),
//	            the hand-rolled aws-lambda-go loop and the floor
//	e2e.png     long-running mode: CPU per record and records per second of
//	            the consumer, the plain SDK GetRecords loop and
//	            harlow/kinesis-consumer v0.5.0
//	scale.png   the scale simulation: convergence time and lease moves per
//	            phase
//
// Every figure is parsed from the files named below; a file that does not
// parse stops the command with an error and writes no image. Run it with
// `make charts` from the repository's root, or:
//
//	cd bench/charts && go run . -in ../../benchmarks -out ../../benchmarks/charts
//
// To chart a newer run, save its raw output in benchmarks/ and change the
// file names here (and the figures and their commits in BENCHMARKS.md).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The raw files the charts are drawn from, in benchmarks/.
const (
	// invokeFile is the newest complete BenchmarkInvoke run with the
	// default path and WithRecycledMessages side by side, and
	// BenchmarkInvokeFloor (2026-12-06 20:20, 56364ab, `go test -run '^$'
	// -bench 'BenchmarkInvoke' -benchmem -count=8 .`, from the test binary).
	invokeFile = "invoke-final-2026-12-06b.txt"
	// invokeFloorFile is the run BenchmarkInvokeFloor is read from: the
	// same run.
	invokeFloorFile = invokeFile
	// scaleFile is the newest run of `make bench-scale`'s uniform
	// simulation, virtual and real time (2026-12-07, 960ed85: run N).
	scaleFile = "scale-2026-12-07n.txt"
	// scaleLoadFile is the newest skewed run of `make bench-scale`'s second
	// command, by load and by count (2026-12-06 20:23 UTC, 56364ab).
	scaleLoadFile = "scale-load-2026-12-06p.txt"
)

// e2eRuns are the bench/e2e runs charted, one group of bars each. The raw
// output does not say which consumer variant or commit ran; the labels do.
var e2eRuns = []e2eRunSpec{
	{File: "e2e-keep-2026-12-05.txt", Label: "default: messages yours to keep\n00bd81d, 2026-12-05"},
	{File: "e2e-recycled-2026-12-05.txt", Label: "WithRecycledMessages\n00bd81d, 2026-12-05"},
	{File: "e2e-peers-2026-12-04n.txt", Label: "messages recycled (the only way then)\na21c565, 2026-12-04"},
	{File: "e2e-wait1ms-2026-12-04.txt", Label: "messages recycled (the only way then)\n307d4cf, 2026-12-04"},
}

func main() {
	in := flag.String("in", "../../benchmarks", "the directory of the raw benchmark output")
	out := flag.String("out", "../../benchmarks/charts", "the directory the images are written to")
	flag.Parse()
	if err := run(*in, *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "charts:", err)
		os.Exit(1)
	}
}

// run parses the raw files in the directory in, draws the charts and
// writes them to the directory out, naming each image it wrote on log.
func run(in, out string, log io.Writer) error {
	// Parse everything first, so a bad file leaves the images as they were.
	invoke, err := parseFile(in, invokeFile, parseGoBench)
	if err != nil {
		return err
	}
	floorBench, err := parseFile(in, invokeFloorFile, parseGoBench)
	if err != nil {
		return err
	}
	floor, err := floorOf(floorBench)
	if err != nil {
		return fmt.Errorf("%s: %w", invokeFloorFile, err)
	}
	var reps []*e2eReport
	for _, r := range e2eRuns {
		rep, err := parseFile(in, r.File, parseE2E)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	scale, err := parseFile(in, scaleFile, parseScale)
	if err != nil {
		return err
	}
	scaleLoad, err := parseFile(in, scaleLoadFile, parseScaleLoad)
	if err != nil {
		return err
	}

	src := func(name string) string { return filepath.ToSlash(filepath.Join("benchmarks", name)) }
	lambda, err := lambdaChart(src(invokeFile), invoke, src(invokeFloorFile), floor)
	if err != nil {
		return err
	}
	var specs []e2eRunSpec
	for _, r := range e2eRuns {
		specs = append(specs, e2eRunSpec{File: src(r.File), Label: r.Label})
	}
	e2e, err := e2eChart(specs, reps)
	if err != nil {
		return err
	}
	sc, err := scaleChart(src(scaleFile), scale)
	if err != nil {
		return err
	}
	sl, err := scaleLoadChart(src(scaleLoadFile), scaleLoad)
	if err != nil {
		return err
	}

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, img := range []struct {
		name string
		fig  figure
	}{{"lambda.png", lambda}, {"e2e.png", e2e}, {"scale.png", sc}, {"scale-load.png", sl}} {
		path := filepath.Join(out, img.name)
		if err := img.fig.save(path); err != nil {
			return err
		}
		fmt.Fprintln(log, "charts: wrote", path)
	}
	return nil
}

// parseFile opens dir/name and parses it, naming the file in any error.
func parseFile[T any](dir, name string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return zero, err
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return v, nil
}
