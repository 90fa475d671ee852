package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The testdata snippets are cut from the raw files in benchmarks/, as the
// benchmarks printed them.

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestParseGoBench(t *testing.T) {
	gb, err := parseGoBench(open(t, "invoke-keep-snippet.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if gb.CPU != "Oxide Virtual Turin-like Processor" {
		t.Errorf("CPU = %q", gb.CPU)
	}
	tests := []struct {
		variant          string
		wantSizes        []invokeSize
		wantFirst        stats   // ns per invocation at 1 × 512 B
		wantLastMedianNs float64 // at 10,000 × 100 B
		wantLastBytes    float64 // median B/op at 10,000 × 100 B
	}{
		{"adapter", []invokeSize{{"1x512B", 1, 512}, {"10000x100B", 10000, 100}},
			stats{Median: 11422, Min: 11059, Max: 11760, N: 3}, 11200163, 8747783},
		{"recycled", []invokeSize{{"1x512B", 1, 512}, {"10000x100B", 10000, 100}},
			stats{Median: 17024, Min: 16624, Max: 17504, N: 3}, 14478459, 2181552},
		{"handrolled", []invokeSize{{"1x512B", 1, 512}, {"10000x100B", 10000, 100}},
			stats{Median: 13856, Min: 13020, Max: 15276, N: 3}, 68648783, 17881331},
	}
	for _, tt := range tests {
		t.Run(tt.variant, func(t *testing.T) {
			s, err := invokeSeriesOf(gb, tt.variant)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Sizes) != len(tt.wantSizes) {
				t.Fatalf("sizes %v, want %v", s.Sizes, tt.wantSizes)
			}
			for i := range s.Sizes {
				if s.Sizes[i] != tt.wantSizes[i] {
					t.Errorf("size %d = %v, want %v", i, s.Sizes[i], tt.wantSizes[i])
				}
			}
			if s.Time[0] != tt.wantFirst {
				t.Errorf("1 record: %+v, want %+v", s.Time[0], tt.wantFirst)
			}
			if got := s.Time[1].Median; got != tt.wantLastMedianNs {
				t.Errorf("10,000 records: median %v ns, want %v", got, tt.wantLastMedianNs)
			}
			if got := s.Bytes[1].Median; got != tt.wantLastBytes {
				t.Errorf("10,000 records: median %v B/op, want %v", got, tt.wantLastBytes)
			}
		})
	}
	if _, err := floorOf(gb); err == nil {
		t.Error("floorOf found a floor in a run without BenchmarkInvokeFloor")
	}
}

func TestParseGoBenchFloor(t *testing.T) {
	gb, err := parseGoBench(open(t, "invoke-floor-snippet.txt"))
	if err != nil {
		t.Fatal(err)
	}
	floor, err := floorOf(gb)
	if err != nil {
		t.Fatal(err)
	}
	// The even count's median is the mean of the middle two.
	if want := (stats{Median: (585530 + 586943) / 2.0, Min: 569284, Max: 601457, N: 4}); floor != want {
		t.Errorf("floor = %+v, want %+v", floor, want)
	}
	if _, err := invokeSeriesOf(gb, "adapter"); err == nil {
		t.Error("invokeSeriesOf found adapter results in a floor-only run")
	}
}

// TestParseGoBenchNotes reads a file that opens with notes, as
// benchmarks/invoke-2026-12-04e.txt does.
func TestParseGoBenchNotes(t *testing.T) {
	const in = "# 2026-12-04 08:34 UTC, commit 2b42339: go test -run '^$' -bench 'BenchmarkCoreToCore|BenchmarkInvoke' -benchmem -count=5 .\n" +
		"goos: linux\n" +
		"BenchmarkInvokeFloor-2                   \t    2033\t    585047 ns/op\t12201.95 MB/s\n" +
		"PASS\n"
	gb, err := parseGoBench(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if floor, err := floorOf(gb); err != nil || floor.Median != 585047 {
		t.Errorf("floor = %+v, %v", floor, err)
	}
}

func TestParseGoBenchRefuses(t *testing.T) {
	const head = "goos: linux\ngoarch: amd64\n"
	const good = "BenchmarkInvoke/adapter/1x512B-2         \t  116767\t     11059 ns/op\t 111.94 MB/s\t    3841 B/op\t      24 allocs/op\n"
	tests := []struct{ name, in, want string }{
		{"empty", "", "no benchmark results"},
		{"cut off", head + good, "no PASS line"},
		{"failed", head + good + "--- FAIL: BenchmarkInvoke\nFAIL\n", "not go test -bench output"},
		{"bad number", head + strings.Replace(good, "11059", "11O59", 1) + "PASS\n", "line 3"},
		{"no ns/op", head + "BenchmarkInvoke/adapter/1x512B-2 \t 116767\t 3841 B/op\nPASS\n", "no ns/op"},
		{"stray text", head + good + "some log line\nPASS\n", "not go test -bench output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseGoBench(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseE2E(t *testing.T) {
	rep, err := parseE2E(open(t, "e2e-peers-snippet.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 60000 || rep.RecordBytes != 512 || rep.Shards != 4 || rep.Limit != 500 || rep.Rounds != 10 || rep.HandlerWait != "" {
		t.Errorf("header: %+v", rep)
	}
	if rep.FloorCPU != 3.4 {
		t.Errorf("floor CPU = %v, want 3.4", rep.FloorCPU)
	}
	if rep.MaxOtherCPU != 5 {
		t.Errorf("other CPU = %v, want 5", rep.MaxOtherCPU)
	}
	want := map[string]map[string]float64{
		rowRecordsPerSec: {"plain loop": 8589, "consumer in-memory": 8700, "consumer DynamoDB": 8168, "harlow in-memory": 8101, "harlow DynamoDB": 8646},
		rowCPUPerRecord:  {"plain loop": 10.2, "consumer in-memory": 4.2, "consumer DynamoDB": 4.8, "harlow in-memory": 10.9, "harlow DynamoDB": 10.8},
		// "-" cells are left out.
		"DynamoDB writes/record": {"consumer DynamoDB": 0.00087, "harlow DynamoDB": 0.00049},
	}
	for row, cells := range want {
		got := rep.Table[row]
		if len(got) != len(cells) {
			t.Errorf("row %q = %v, want %v", row, got, cells)
			continue
		}
		for w, v := range cells {
			if got[w] != v {
				t.Errorf("row %q, %s = %v, want %v", row, w, got[w], v)
			}
		}
	}
}

func TestParseE2EHandlerWait(t *testing.T) {
	// The head of benchmarks/e2e-wait1ms-2026-12-04.txt's report, and its table.
	const in = `
lambdaadapter long-running mode, end to end against kinesis-local and dynalite
20000 records × 512 B over 4 shards, Limit 500, CheckpointInterval 1s, 5 round(s); go1.26.8 linux/amd64, 2 CPUs
every record's handling waits 1ms first (-handler-wait)

side by side with github.com/harlow/kinesis-consumer v0.5.0 (medians; "-" where a phase has no such figure)
                                           plain loop  consumer in-memory  consumer DynamoDB  harlow in-memory  harlow DynamoDB
                    records/s, sequential        2925                7113               6755              2853             2944
                CPU µs/record, sequential        27.6                11.4               12.1              30.9             31.4

`
	rep, err := parseE2E(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if rep.HandlerWait != "1ms" || rep.Rounds != 5 || rep.FloorCPU != 0 {
		t.Errorf("got %+v", rep)
	}
	if got := rep.Table[rowRecordsPerSec]["consumer in-memory"]; got != 7113 {
		t.Errorf("consumer in-memory records/s = %v, want 7113", got)
	}
	if got := spacedDuration(rep.HandlerWait); got != "1 ms" {
		t.Errorf("spacedDuration = %q", got)
	}
}

func TestParseE2ERefuses(t *testing.T) {
	const header = "20000 records × 512 B over 4 shards, Limit 500, CheckpointInterval 1s, 10 round(s); go1.26.8 linux/amd64, 2 CPUs\n"
	const side = "side by side with github.com/harlow/kinesis-consumer v0.5.0 (medians)\n"
	const cols = "      plain loop  consumer in-memory  consumer DynamoDB  harlow in-memory  harlow DynamoDB\n"
	const rate = "  records/s, sequential  7365  8344  7609  7454  7636\n"
	const cpu = "  CPU µs/record, sequential  14.3  8.5  10.0  14.8  14.9\n"
	tests := []struct{ name, in, want string }{
		{"no header", side + cols + rate + cpu, "header"},
		{"no table (a run without -peers)", header + "total 349.3s\n", "no side-by-side table"},
		{"other columns", header + side + "  plain loop  consumer in-memory  consumer DynamoDB\n" + rate, "columns"},
		{"bad cell", header + side + cols + strings.Replace(rate, "8344", "83,44", 1) + cpu, "not a number"},
		{"short row", header + side + cols + "  records/s, sequential  7365  8344\n", "fewer than 5 cells"},
		{"no CPU row", header + side + cols + rate, "CPU µs/record, sequential"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseE2E(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseScale(t *testing.T) {
	runs, err := parseScale(open(t, "scale-virtual-snippet.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	r := runs[0]
	if r.Title != "virtual time (testing/synctest): default durations" || r.LeaseDuration != 10*time.Second ||
		r.Shards != 1000 || r.StartWorkers != 50 || r.WrittenPerSecond != 2000 ||
		r.Written != 410200 || r.Lost != 0 || r.WritesPerShardSecond != 1.3123 {
		t.Errorf("run: %+v", r)
	}
	want := []scalePhase{
		{"start 50", 50, 10 * time.Second, 10 * time.Second, 1000, 1000, 0},
		{"join 1", 51, 6700 * time.Millisecond, 10 * time.Second, 5, 1, 0},
		{"leave 1", 50, 5100 * time.Millisecond, 10100 * time.Millisecond, 20, 20, 0},
		{"kill 1", 49, 14900 * time.Millisecond, 15 * time.Second, 20, 20, 8},
		{"join 1", 50, 8300 * time.Millisecond, 10 * time.Second, 5, 1, 0},
		{"kill 5", 45, 20100 * time.Millisecond, 20100 * time.Millisecond, 102, 101, 48},
		{"join 5", 50, 8200 * time.Millisecond, 10 * time.Second, 16, 5, 0},
		{"leave 5", 45, 4900 * time.Millisecond, 9900 * time.Millisecond, 90, 90, 0},
	}
	if len(r.Phases) != len(want) {
		t.Fatalf("%d phases, want %d", len(r.Phases), len(want))
	}
	for i, p := range r.Phases {
		if p != want[i] {
			t.Errorf("phase %d = %+v, want %+v", i, p, want[i])
		}
	}
}

func TestParseScaleRefuses(t *testing.T) {
	snippet, err := os.ReadFile(filepath.Join("testdata", "scale-virtual-snippet.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(snippet)
	tests := []struct{ name, in, want string }{
		{"no section", "PASS\n", "no \"== scale simulation"},
		{"row cut short", strings.Replace(s, "0        1001", "1001", 1), "phase row"},
		{"bad duration", strings.Replace(s, "10.0s    10.0s           1.08", "10.0     10.0s           1.08", 1), "balanced"},
		{"no records line", strings.Replace(s, "records: 410200 written", "records 410200 written", 1), "records: N written"},
		{"other columns", strings.Replace(s, "  flaps  ", "  flips  ", 1), "columns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseScale(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseScaleLoad(t *testing.T) {
	runs, err := parseScaleLoad(open(t, "scale-load-snippet.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].ByCount || !runs[1].ByCount {
		t.Fatalf("runs %+v, want by load then by count", runs)
	}
	if got, want := runs[0].Phases[5], (loadPhase{"kill 5", 1.25, 1.25, 130, 110}); got != want {
		t.Errorf("by load, phase 5 = %+v, want %+v", got, want)
	}
	if got, want := runs[1].Phases[6], (loadPhase{"join 5", 2.23, 2.24, 100, 20}); got != want {
		t.Errorf("by count, phase 6 = %+v, want %+v", got, want)
	}
}

func TestParseScaleLoadRefuses(t *testing.T) {
	snippet, err := os.ReadFile(filepath.Join("testdata", "scale-load-snippet.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(snippet)
	tests := []struct{ name, in, want string }{
		{"no section", "PASS\n", "no \"== scale simulation, skewed"},
		{"row cut short", strings.Replace(s, "1053           1000", "1053", 1), "phase row"},
		{"not a ratio", strings.Replace(s, "1.25          1.25", "1.25          x", 1), "expected end"},
		{"other columns", strings.Replace(s, "  flaps  ", "  flips  ", 1), "columns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseScaleLoad(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestRun draws the charts from the raw files the repository holds, so a
// file renamed or changed in a way the parsers refuse fails here too.
func TestRun(t *testing.T) {
	out := t.TempDir()
	var log bytes.Buffer
	if err := run(filepath.Join("..", "..", "benchmarks"), out, &log); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lambda.png", "e2e.png", "scale.png", "scale-load.png"} {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.Width < 1500 || cfg.Height < 700 {
			t.Errorf("%s is %d×%d pixels", name, cfg.Width, cfg.Height)
		}
	}
}

func TestRunRefusesAMissingFile(t *testing.T) {
	out := t.TempDir()
	err := run(t.TempDir(), out, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), invokeFile) {
		t.Fatalf("err = %v, want one naming %s", err, invokeFile)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("wrote %d files", len(entries))
	}
}
