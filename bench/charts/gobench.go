package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// benchSample is one line of `go test -bench -benchmem` output.
type benchSample struct {
	NsPerOp     float64
	BytesPerOp  float64 // 0 when the line has no B/op
	AllocsPerOp float64 // 0 when the line has no allocs/op
}

// goBench is a whole `go test -bench` output: every sample of every
// benchmark, by name without the -GOMAXPROCS suffix.
type goBench struct {
	CPU     string
	Names   []string // in the order of their first line
	Samples map[string][]benchSample
}

var (
	benchLine  = regexp.MustCompile(`^(Benchmark\S*?)(?:-\d+)?\s+(\d+)\s+(.*)$`)
	okLine     = regexp.MustCompile(`^ok\s+\S+\s+[0-9.]+s$`)
	metricPair = regexp.MustCompile(`^([0-9.eE+-]+)\s+(\S+)$`)
)

// parseGoBench reads `go test -bench` output. Every line must be one it
// knows (the goos/goarch/pkg/cpu header, a benchmark result, PASS, the ok
// line, go's download notes, or a note starting with "#", as several raw
// files in benchmarks/ begin); a result line must have ns/op. The run must
// end with PASS, so a failed or cut-off run is refused.
func parseGoBench(r io.Reader) (*goBench, error) {
	gb := &goBench{Samples: map[string][]benchSample{}}
	sc := bufio.NewScanner(r)
	passed := false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \t")
		switch {
		case line == "",
			strings.HasPrefix(line, "#"),
			strings.HasPrefix(line, "goos: "),
			strings.HasPrefix(line, "goarch: "),
			strings.HasPrefix(line, "pkg: "),
			strings.HasPrefix(line, "go: downloading "):
		case strings.HasPrefix(line, "cpu: "):
			gb.CPU = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
		case line == "PASS":
			passed = true
		case okLine.MatchString(line):
		case strings.HasPrefix(line, "Benchmark"):
			name, s, err := parseBenchLine(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if _, ok := gb.Samples[name]; !ok {
				gb.Names = append(gb.Names, name)
			}
			gb.Samples[name] = append(gb.Samples[name], s)
		default:
			return nil, fmt.Errorf("line %d: not go test -bench output: %q", n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(gb.Names) == 0 {
		return nil, fmt.Errorf("no benchmark results")
	}
	if !passed {
		return nil, fmt.Errorf("no PASS line: the run failed or was cut off")
	}
	return gb, nil
}

func parseBenchLine(line string) (string, benchSample, error) {
	m := benchLine.FindStringSubmatch(line)
	if m == nil {
		return "", benchSample{}, fmt.Errorf("not a benchmark result: %q", line)
	}
	var s benchSample
	haveNs := false
	for _, field := range strings.Split(m[3], "\t") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		p := metricPair.FindStringSubmatch(field)
		if p == nil {
			return "", s, fmt.Errorf("bad metric %q in %q", field, line)
		}
		v, err := strconv.ParseFloat(p[1], 64)
		if err != nil {
			return "", s, fmt.Errorf("bad number %q in %q", p[1], line)
		}
		switch p[2] {
		case "ns/op":
			s.NsPerOp, haveNs = v, true
		case "B/op":
			s.BytesPerOp = v
		case "allocs/op":
			s.AllocsPerOp = v
		}
	}
	if !haveNs {
		return "", s, fmt.Errorf("no ns/op in %q", line)
	}
	return m[1], s, nil
}

// stats are the median and the range of a benchmark's samples.
type stats struct {
	Median, Min, Max float64
	N                int
}

func summarize(xs []float64) stats {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return stats{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// invokeSize is one invocation shape of BenchmarkInvoke, from its name:
// "1000x512B" is 1,000 records of 512 B.
type invokeSize struct {
	Name    string
	Records int
	Bytes   int
}

var sizeName = regexp.MustCompile(`^(\d+)x(\d+)B$`)

// invokeSeries is one variant of BenchmarkInvoke (adapter, recycled,
// handrolled) over the invocation shapes, in order of records.
type invokeSeries struct {
	Variant string
	Sizes   []invokeSize
	Time    []stats // ns per invocation
	Bytes   []stats // B/op
}

// invokeSeriesOf collects BenchmarkInvoke/<variant>/<size> from gb. It
// fails when the variant is missing.
func invokeSeriesOf(gb *goBench, variant string) (invokeSeries, error) {
	out := invokeSeries{Variant: variant}
	type row struct {
		size  invokeSize
		t, by stats
	}
	var rows []row
	prefix := "BenchmarkInvoke/" + variant + "/"
	for _, name := range gb.Names {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		m := sizeName.FindStringSubmatch(rest)
		if m == nil {
			return out, fmt.Errorf("%s: size %q is not <records>x<bytes>B", name, rest)
		}
		recs, _ := strconv.Atoi(m[1])
		size, _ := strconv.Atoi(m[2])
		var ts, bs []float64
		for _, s := range gb.Samples[name] {
			ts = append(ts, s.NsPerOp)
			bs = append(bs, s.BytesPerOp)
		}
		rows = append(rows, row{invokeSize{rest, recs, size}, summarize(ts), summarize(bs)})
	}
	if len(rows) == 0 {
		return out, fmt.Errorf("no BenchmarkInvoke/%s results", variant)
	}
	slices.SortFunc(rows, func(a, b row) int { return a.size.Records - b.size.Records })
	for _, r := range rows {
		out.Sizes = append(out.Sizes, r.size)
		out.Time = append(out.Time, r.t)
		out.Bytes = append(out.Bytes, r.by)
	}
	return out, nil
}

// floorOf is BenchmarkInvokeFloor's time per invocation of gb.
func floorOf(gb *goBench) (stats, error) {
	ss := gb.Samples["BenchmarkInvokeFloor"]
	if len(ss) == 0 {
		return stats{}, fmt.Errorf("no BenchmarkInvokeFloor results")
	}
	var ts []float64
	for _, s := range ss {
		ts = append(ts, s.NsPerOp)
	}
	return summarize(ts), nil
}
