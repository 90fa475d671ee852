package main

import (
	"fmt"
	"image/color"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// loadPhase is one row of the skewed scale simulation's phase table
// (bench/scalesim, TestSkewedFullFleetVirtual).
type loadPhase struct {
	Phase         string  // "start 50", "join 1", "kill 5", ...
	MaxMeanEnd    float64 // highest worker CPU ÷ mean at the phase's end, measured
	ExpectedEnd   float64 // the same by the CPU model
	Moves, Fewest int
}

// loadRun is one section of that output: one run of one assignment.
type loadRun struct {
	ByCount bool
	Phases  []loadPhase
}

var loadSection = regexp.MustCompile(`^== scale simulation, skewed, .*assignment (\d) \(0 load, 1 count\)$`)

// The skewed phase table's columns, as bench/scalesim prints them.
var loadColumns = []string{"phase", "workers", "target", "balanced", "reading", "max/mean conv", "max/mean end", "expected end", "mean CPU", "moves", "ideal (count)", "fewest (load)", "moves/fewest", "joiners' leases", "transfers", "free takes", "expired takes", "held min-max", "most unowned", "flaps", "duplicates"}

// parseScaleLoad reads the output of the skewed scale simulation (several
// runs, each by load and by count). It fails when a section lacks its
// phase table or a row does not parse.
func parseScaleLoad(r io.Reader) ([]loadRun, error) {
	var runs []loadRun
	err := phaseTables(r, loadSection, loadColumns,
		func(m []string) { runs = append(runs, loadRun{ByCount: m[1] == "1"}) },
		func(line string) error {
			p, err := parseLoadRow(line)
			runs[len(runs)-1].Phases = append(runs[len(runs)-1].Phases, p)
			return err
		},
		func(string) error { return nil })
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no \"== scale simulation, skewed, …\" section")
	}
	for i, run := range runs {
		if len(run.Phases) == 0 {
			return nil, fmt.Errorf("section %d: no phase table", i+1)
		}
		if len(run.Phases) != len(runs[0].Phases) {
			return nil, fmt.Errorf("section %d: %d phases, the first has %d", i+1, len(run.Phases), len(runs[0].Phases))
		}
	}
	return runs, nil
}

// parseLoadRow parses a row such as
//
//	join 1       51      20     10.1s    10.1s           1.14          1.12          1.11      0.46      1             19              1          1.00                1          1           0              0          1-22             0      2           0
//
// (a phase that did not converge reads "-  NOT CONVERGED" in its two time
// columns).
func parseLoadRow(line string) (loadPhase, error) {
	f, err := phaseFields(line)
	if err != nil {
		return loadPhase{}, err
	}
	p := loadPhase{Phase: f[0] + " " + f[1]}
	if p.MaxMeanEnd, err = strconv.ParseFloat(f[7], 64); err != nil {
		return p, fmt.Errorf("phase row %q: max/mean end: %w", line, err)
	}
	if p.ExpectedEnd, err = strconv.ParseFloat(f[8], 64); err != nil {
		return p, fmt.Errorf("phase row %q: expected end: %w", line, err)
	}
	if p.Moves, err = strconv.Atoi(f[10]); err != nil {
		return p, fmt.Errorf("phase row %q: moves: %w", line, err)
	}
	if p.Fewest, err = strconv.Atoi(f[12]); err != nil {
		return p, fmt.Errorf("phase row %q: fewest: %w", line, err)
	}
	return p, nil
}

// phaseFields splits a row of the phase table bench/scalesim prints
// (loadColumns; both simulations since issue 30) into its fields, the
// phase's name two of them, a phase that did not converge reading "-" in
// its two time columns.
func phaseFields(line string) ([]string, error) {
	f := strings.Fields(strings.Replace(line, "NOT CONVERGED", "-", 1))
	if len(f) != len(loadColumns)+1 { // the phase's name is two words
		return nil, fmt.Errorf("phase row %q: %d fields, want %d", line, len(f), len(loadColumns)+1)
	}
	return f, nil
}

// scaleLoadChart draws, per phase of the skewed scale simulation, the
// busiest worker's CPU over the mean at the phase's end and the lease
// moves over the fewest the change needs, each run a point, by load and by
// count, with the targets (1.2 both).
func scaleLoadChart(file string, runs []loadRun) (figure, error) {
	names := make([]string, len(runs[0].Phases))
	for i, p := range runs[0].Phases {
		names[i] = p.Phase
	}
	legend := plot.NewLegend()
	legend.TextStyle.Font.Size = 10
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = vg.Points(16)
	legend.Padding = vg.Points(4)

	type series struct {
		label string
		col   color.Color
		glyph draw.GlyphDrawer
		count bool
		value func(loadPhase) float64
		off   float64
	}
	panel := func(title, yLabel string, ss []series, hi float64) (*plot.Plot, error) {
		p := newNominalPlot(title, yLabel, names)
		top := hi
		for _, s := range ss {
			var xys plotter.XYs
			k := 0
			for _, r := range runs {
				if r.ByCount != s.count {
					continue
				}
				for j, ph := range r.Phases {
					v := s.value(ph)
					xys = append(xys, plotter.XY{X: float64(j) + s.off + 0.06*float64(k-1), Y: v})
					top = max(top, v)
				}
				k++
			}
			if len(xys) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: s.col, Radius: vg.Points(4), Shape: s.glyph}
			p.Add(sc)
			if s.label != "" {
				legend.Add(s.label, sc)
			}
		}
		target, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1.2}, {X: float64(len(names)) - 0.5, Y: 1.2}})
		if err != nil {
			return nil, err
		}
		target.LineStyle = lineStyle(colTarget, true)
		p.Add(target)
		p.Y.Min, p.Y.Max = 0, top*1.08
		p.Y.Tick.Marker = linearTicks(p.Y.Max, niceStep(p.Y.Max, 6), func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) })
		p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
		return p, nil
	}
	byLoad, byCount := 0, 0
	for _, r := range runs {
		if r.ByCount {
			byCount++
		} else {
			byLoad++
		}
	}
	pa, err := panel("Busiest worker's CPU ÷ the mean at each phase's end (target ≤ 1.2, dashed)", "CPU ÷ mean", []series{
		{fmt.Sprintf("by load, measured over the last minute (%d runs)", byLoad), colOurs, draw.CircleGlyph{}, false, func(p loadPhase) float64 { return p.MaxMeanEnd }, -0.12},
		{"by load, by the CPU model (no noise)", colOursAlt, draw.TriangleGlyph{}, false, func(p loadPhase) float64 { return p.ExpectedEnd }, 0.12},
		{fmt.Sprintf("by count, measured (%d runs)", byCount), colPlain, draw.SquareGlyph{}, true, func(p loadPhase) float64 { return p.MaxMeanEnd }, 0},
	}, 1.2)
	if err != nil {
		return figure{}, err
	}
	pb, err := panel("Lease moves ÷ the fewest the change needs (target ≤ 1.2, dashed)", "moves ÷ fewest", []series{
		{"", colOurs, draw.CircleGlyph{}, false, func(p loadPhase) float64 { return float64(p.Moves) / float64(max(p.Fewest, 1)) }, -0.12},
		{"", colPlain, draw.SquareGlyph{}, true, func(p loadPhase) float64 { return float64(p.Moves) / float64(max(p.Fewest, 1)) }, 0.12},
	}, 1.2)
	if err != nil {
		return figure{}, err
	}
	return figure{
		W: 13 * vg.Inch, H: 9 * vg.Inch,
		Plots:  [][]*plot.Plot{{pa}, {pb}},
		Legend: &legend, LegendW: 3.3 * vg.Inch,
		Caption: []string{
			"bench/scalesim, skewed: 1,000 shards (the top 5 % carry half the records), 50 workers at the start, 2,000 records/s; one change per phase; each run a point.",
			"The fewest moves are a lower bound: the leases of the workers that left or died, the costliest leases off the workers above 1.2 × the mean (and off the one that takes a dead worker's costliest), at least one per joiner.",
			"Source: " + file + ".",
		},
	}, nil
}
