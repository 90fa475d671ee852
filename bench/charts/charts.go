package main

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// lambdaTargets are the speed targets the issues set for Lambda mode, as
// BENCHMARKS.md states them: the adapter's time per invocation divided by
// the hand-rolled loop's, at most.
var lambdaTargets = []struct {
	Records int
	Ratio   float64
}{
	{1, 1.0},      // issue 10
	{100, 0.4},    // issue 8
	{10000, 0.15}, // issues 10 and 29
}

// lambdaVariants are BenchmarkInvoke's variants, as the chart names them.
// "recycled" is optional: files from before WithRecycledMessages lack it.
var lambdaVariants = []struct {
	Name, Title string
	Color       color.Color
	Dashed      bool
	Required    bool
}{
	{"adapter", "lambdaadapter, default (messages yours to keep)", colOurs, false, true},
	{"recycled", "lambdaadapter, WithRecycledMessages", colOursAlt, true, false},
	{"handrolled", "hand-rolled aws-lambda-go loop", colPlain, false, true},
}

// errPoints are points with a range around each.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// lambdaChart draws the invocation time against records per invocation
// (log–log, medians with their min–max range) and the adapter's time as a
// fraction of the hand-rolled loop's, with the targets.
func lambdaChart(benchFile string, gb *goBench, floorFile string, floor stats) (figure, error) {
	var series []invokeSeries
	var titles []string
	var colors []color.Color
	var dashed []bool
	var hand invokeSeries
	for _, v := range lambdaVariants {
		s, err := invokeSeriesOf(gb, v.Name)
		if err != nil {
			if v.Required {
				return figure{}, fmt.Errorf("%s: %w", benchFile, err)
			}
			continue
		}
		if len(series) > 0 && !slices.Equal(s.Sizes, series[0].Sizes) {
			return figure{}, fmt.Errorf("%s: %s has sizes %v, %s has %v", benchFile, v.Name, s.Sizes, series[0].Variant, series[0].Sizes)
		}
		series = append(series, s)
		titles = append(titles, v.Title)
		colors = append(colors, v.Color)
		dashed = append(dashed, v.Dashed)
		if v.Name == "handrolled" {
			hand = s
		}
	}
	sizes := series[0].Sizes
	// BenchmarkInvokeFloor measures the largest invocation (bench_test.go).
	floorX := float64(sizes[len(sizes)-1].Records)

	// (a) time per invocation.
	pa := newPlot("Lambda mode: time per invocation (no-op handler)",
		"records per invocation (log scale)", "time per invocation (log scale)")
	pa.X.Scale, pa.Y.Scale = plot.LogScale{}, plot.LogScale{}
	lo, hi := floor.Min, floor.Max
	for _, s := range series {
		for _, t := range s.Time {
			lo, hi = min(lo, t.Min), max(hi, t.Max)
		}
	}
	pa.Y.Min, pa.Y.Max = lo/2, hi*2
	pa.X.Min, pa.X.Max = float64(sizes[0].Records)/3, floorX*3
	pa.Y.Tick.Marker = logTicks(pa.Y.Min, pa.Y.Max, duration)
	pa.X.Tick.Marker = logTicks(pa.X.Min, pa.X.Max, func(v float64) string { return thousands(int(v)) })
	for i, s := range series {
		pts := errPoints{}
		for j, t := range s.Time {
			pts.XYs = append(pts.XYs, plotter.XY{X: float64(sizes[j].Records), Y: t.Median})
			pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{t.Median - t.Min, t.Max - t.Median})
		}
		l, sc, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return figure{}, err
		}
		l.LineStyle = lineStyle(colors[i], dashed[i])
		sc.GlyphStyle = draw.GlyphStyle{Color: colors[i], Radius: vg.Points(3.2), Shape: draw.CircleGlyph{}}
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return figure{}, err
		}
		eb.LineStyle = draw.LineStyle{Color: colors[i], Width: vg.Points(1.2)}
		eb.CapWidth = vg.Points(7)
		pa.Add(l, sc, eb)
		pa.Legend.Add(titles[i], l, sc)
	}
	fp := errPoints{XYs: plotter.XYs{{X: floorX, Y: floor.Median}}, YErrors: plotter.YErrors{{Low: floor.Median - floor.Min, High: floor.Max - floor.Median}}}
	fs, err := plotter.NewScatter(fp.XYs)
	if err != nil {
		return figure{}, err
	}
	fs.GlyphStyle = draw.GlyphStyle{Color: colFloor, Radius: vg.Points(5), Shape: draw.PyramidGlyph{}}
	feb, err := plotter.NewYErrorBars(fp)
	if err != nil {
		return figure{}, err
	}
	feb.LineStyle = draw.LineStyle{Color: colFloor, Width: vg.Points(1.2)}
	feb.CapWidth = vg.Points(7)
	pa.Add(fs, feb)
	pa.Legend.Add(fmt.Sprintf("floor: one pass + base64 (%s records only)", thousands(int(floorX))), fs)
	fl, err := valueLabels(fp.XYs, []string{"floor " + duration(floor.Median)}, vg.Points(-34), 9)
	if err != nil {
		return figure{}, err
	}
	fl.Offset.Y = vg.Points(-4)
	pa.Add(fl)

	// (b) the same ÷ the hand-rolled loop, with the targets.
	pb := newPlot("Lambda mode: time ÷ the hand-rolled loop's (medians)", "records per invocation (log scale)", "adapter's time ÷ hand-rolled loop's time")
	pb.X.Scale = plot.LogScale{}
	pb.X.Min, pb.X.Max = pa.X.Min, pa.X.Max
	pb.X.Tick.Marker = pa.X.Tick.Marker
	pb.Legend.Left = false
	pb.Legend.XOffs = vg.Points(-6)
	top := 1.0
	for i, s := range series {
		if s.Variant == "handrolled" {
			continue
		}
		var pts plotter.XYs
		var texts []string
		for j, t := range s.Time {
			r := t.Median / hand.Time[j].Median
			top = max(top, r)
			pts = append(pts, plotter.XY{X: float64(sizes[j].Records), Y: r})
			texts = append(texts, strconv.FormatFloat(r, 'f', 3, 64))
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return figure{}, err
		}
		l.LineStyle = lineStyle(colors[i], dashed[i])
		sc.GlyphStyle = draw.GlyphStyle{Color: colors[i], Radius: vg.Points(3.2), Shape: draw.CircleGlyph{}}
		// The first variant's values above and right of its points, the
		// next's below and left, clear of the lines (the last point's right:
		// a target mark is below it).
		var labs []plot.Plotter
		for j, pt := range pts {
			place := labelPlace{draw.XLeft, draw.YBottom, 4, 4}
			if i > 0 {
				place = labelPlace{draw.XRight, draw.YTop, -4, -4}
				if j == len(pts)-1 {
					place = labelPlace{draw.XLeft, draw.YCenter, 7, 0}
				}
			}
			lab, err := pointLabel(pt, texts[j], colors[i], 8.5, place)
			if err != nil {
				return figure{}, err
			}
			labs = append(labs, lab)
		}
		pb.Add(l, sc)
		pb.Add(labs...)
		pb.Legend.Add(titles[i], l, sc)
	}
	parity, err := plotter.NewLine(plotter.XYs{{X: pb.X.Min, Y: 1}, {X: pb.X.Max, Y: 1}})
	if err != nil {
		return figure{}, err
	}
	parity.LineStyle = draw.LineStyle{Color: colPlain, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
	pb.Add(parity)
	pb.Legend.Add("parity with the hand-rolled loop", parity)
	for i, t := range lambdaTargets {
		x := float64(t.Records)
		seg, err := plotter.NewLine(plotter.XYs{{X: x / 1.45, Y: t.Ratio}, {X: x * 1.45, Y: t.Ratio}})
		if err != nil {
			return figure{}, err
		}
		seg.LineStyle = draw.LineStyle{Color: colTarget, Width: vg.Points(2.5)}
		lab, err := valueLabels(plotter.XYs{{X: x, Y: t.Ratio}}, []string{"target ≤ " + strconv.FormatFloat(t.Ratio, 'f', -1, 64)}, 0, 8.5)
		if err != nil {
			return figure{}, err
		}
		lab.TextStyle[0].Color = colTarget
		lab.TextStyle[0].YAlign = draw.YTop
		lab.Offset.Y = vg.Points(-4)
		if i > 0 && i < len(lambdaTargets)-1 {
			// Right of its mark: the points run below it there.
			lab.XYs[0].X = x * 1.5
			lab.TextStyle[0].XAlign = draw.XLeft
			lab.TextStyle[0].YAlign = draw.YCenter
			lab.Offset = vg.Point{X: vg.Points(3)}
		}
		pb.Add(seg, lab)
		if i == 0 {
			pb.Legend.Add("target (at most)", seg)
		}
	}
	pb.Y.Min, pb.Y.Max = 0, math.Ceil(top*1.25*10)/10
	pb.Y.Tick.Marker = linearTicks(pb.Y.Max, niceStep(pb.Y.Max, 6), func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) })

	var shapes []string
	for _, s := range sizes {
		shapes = append(shapes, fmt.Sprintf("%s × %d B", thousands(s.Records), s.Bytes))
	}
	floorNote := floorFile
	if floorFile == benchFile {
		floorNote = "the same file"
	}
	n := series[0].Time[0].N
	return figure{
		W: 13 * vg.Inch, H: 5.6 * vg.Inch,
		Plots: [][]*plot.Plot{{pa, pb}},
		Caption: []string{
			fmt.Sprintf("Raw invocation bytes to response bytes, BenchmarkInvoke (bench_test.go); invocations of %s; half the records carry RSK1 headers.", strings.Join(shapes, ", ")),
			fmt.Sprintf("Points: medians of %d runs; whiskers: min–max. Source: %s; the floor (BenchmarkInvokeFloor): %s. CPU: %s, GOMAXPROCS 2.", n, benchFile, floorNote, gb.CPU),
		},
	}, nil
}

// e2eRunSpec names one bench/e2e output and says what the file itself does
// not: which variant of the consumer ran, from which commit, when.
type e2eRunSpec struct {
	File  string
	Label string // lines under the group; the records and handler come from the file
}

// e2eBars are the bars of each run's group, in order.
var e2eBars = []struct {
	Worker string // a column of the side-by-side table, or "floor"
	Title  string
	Color  color.Color
}{
	{"plain loop", "plain SDK GetRecords loop", colPlain},
	{"harlow in-memory", "harlow v0.5.0, in-memory store", colHarlow},
	{"harlow DynamoDB", "harlow v0.5.0, DynamoDB store", colHarlowLt},
	{"consumer in-memory", "lambdaadapter, in-memory leases", colOurs},
	{"consumer DynamoDB", "lambdaadapter, DynamoDB leases", colOursAlt},
	{"floor", "floor: plain loop + our decoder", colFloor},
}

// e2eChart draws, per run, the CPU per record and the records per second
// of every worker (sequential medians), as grouped bars.
func e2eChart(specs []e2eRunSpec, reps []*e2eReport) (figure, error) {
	groups := make([]string, len(specs))
	for i, s := range specs {
		r := reps[i]
		handler := "no-op handler"
		if r.HandlerWait != "" {
			handler = spacedDuration(r.HandlerWait) + " handler"
		}
		groups[i] = fmt.Sprintf("%s\n%s records, %s", s.Label, thousands(r.Records), handler)
	}
	const barW = 17
	legend := plot.NewLegend()
	legend.TextStyle.Font.Size = 10
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = vg.Points(16)
	legend.Padding = vg.Points(4)

	inLegend := make([]bool, len(e2eBars))
	thumbs := make([]plot.Thumbnailer, len(e2eBars))
	panel := func(title, yLabel, row string, decimals int, withFloor, addLegend bool) (*plot.Plot, error) {
		p := newNominalPlot(title, yLabel, groups)
		top := 0.0
		for g, r := range reps {
			// The bars this run has, centred on its name.
			type bar struct {
				v   float64
				idx int
			}
			var bars []bar
			for i, b := range e2eBars {
				v, ok := r.Table[row][b.Worker]
				if b.Worker == "floor" {
					v, ok = r.FloorCPU, withFloor && r.FloorCPU > 0
				}
				if ok {
					bars = append(bars, bar{v, i})
				}
			}
			for k, b := range bars {
				dx := vg.Points(barW) * vg.Length(float64(k)-float64(len(bars)-1)/2)
				bc, err := plotter.NewBarChart(plotter.Values{b.v}, vg.Points(barW-2))
				if err != nil {
					return nil, err
				}
				bc.XMin = float64(g)
				bc.Offset = dx
				bc.Color = e2eBars[b.idx].Color
				bc.LineStyle.Width = 0
				lab, err := valueLabels(plotter.XYs{{X: float64(g), Y: b.v}}, []string{strconv.FormatFloat(b.v, 'f', decimals, 64)}, dx, 7.5)
				if err != nil {
					return nil, err
				}
				p.Add(bc, lab)
				top = max(top, b.v)
				if addLegend && !inLegend[b.idx] {
					inLegend[b.idx] = true
					thumbs[b.idx] = bc
				}
			}
		}
		p.Y.Min, p.Y.Max = 0, top*1.12
		p.Y.Tick.Marker = linearTicks(p.Y.Max, niceStep(p.Y.Max, 5), func(v float64) string { return thousands(int(v)) })
		p.X.Min, p.X.Max = -0.55, float64(len(groups))-0.45
		return p, nil
	}
	cpu, err := panel("Long-running mode: CPU per record (user + system time of the worker process)", "CPU per record (µs)", rowCPUPerRecord, 1, true, true)
	if err != nil {
		return figure{}, err
	}
	rate, err := panel("Long-running mode: records per second (each worker alone on the stream)", "records/s", rowRecordsPerSec, 0, false, false)
	if err != nil {
		return figure{}, err
	}
	for i, b := range e2eBars {
		if thumbs[i] != nil {
			legend.Add(b.Title, thumbs[i])
		}
	}
	var files []string
	for _, s := range specs {
		files = append(files, s.File)
	}
	shape := fmt.Sprintf("%d shards, records of %d B, Limit %d per GetRecords", reps[0].Shards, reps[0].RecordBytes, reps[0].Limit)
	return figure{
		W: 13 * vg.Inch, H: 9.5 * vg.Inch,
		Plots:  [][]*plot.Plot{{cpu}, {rate}},
		Legend: &legend, LegendW: 2.5 * vg.Inch,
		Caption: []string{
			"bench/e2e (scripts/bench-e2e.sh) against kinesis-local and dynalite on a 2-vCPU VM, " + shape + "; medians of the sequential rounds (each worker alone, start-up and stop included).",
			"With a no-op handler every reader waits for kinesis-local (one Node.js process), so records/s is the stand-in's, level for all;",
			"with a handler that waits, the adapter's lanes (records of different partition keys in parallel) outpace harlow's one record after another.",
			"Sources: " + strings.Join(files, ", ") + ".",
		},
	}, nil
}

// scaleChart draws, per phase of the scale simulation, the time to
// converge and the lease moves against the fewest needed, for each run
// (virtual time and real time).
func scaleChart(file string, runs []scaleRun) (figure, error) {
	if len(runs) > 2 {
		return figure{}, fmt.Errorf("%s: %d runs, the chart draws at most 2", file, len(runs))
	}
	var phases []string
	for _, p := range runs[0].Phases {
		phases = append(phases, p.Phase)
	}
	for _, r := range runs[1:] {
		var ps []string
		for _, p := range r.Phases {
			ps = append(ps, p.Phase)
		}
		if !slices.Equal(ps, phases) {
			return figure{}, fmt.Errorf("%s: runs have different phases: %v and %v", file, phases, ps)
		}
	}
	names := make([]string, len(phases))
	for i, p := range runs[0].Phases {
		names[i] = fmt.Sprintf("%s\n(%d workers)", p.Phase, p.Workers)
	}
	runColors := []color.Color{colOurs, colOursAlt}
	runTitle := func(r scaleRun) string {
		kind := "virtual time"
		if strings.HasPrefix(r.Title, "real time") {
			kind = "real time"
		}
		return fmt.Sprintf("%s, %s s leases", kind, strconv.FormatFloat(r.LeaseDuration.Seconds(), 'f', -1, 64))
	}
	legend := plot.NewLegend()
	legend.TextStyle.Font.Size = 10
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = vg.Points(16)
	legend.Padding = vg.Points(4)

	// (a) time to converge.
	pa := newNominalPlot("Scale simulation: time until every shard is read by its balanced owner", "time to converge (s)", names)
	const barW = 20
	top := 0.0
	for i, r := range runs {
		var vs plotter.Values
		var xys plotter.XYs
		var texts []string
		for j, p := range r.Phases {
			s := p.Converged.Seconds()
			vs = append(vs, s)
			xys = append(xys, plotter.XY{X: float64(j), Y: s})
			texts = append(texts, strconv.FormatFloat(s, 'f', 1, 64))
			top = max(top, s)
		}
		bc, err := plotter.NewBarChart(vs, vg.Points(barW-2))
		if err != nil {
			return figure{}, err
		}
		dx := vg.Points(barW) * vg.Length(float64(i)-float64(len(runs)-1)/2)
		bc.Offset = dx
		bc.Color = runColors[i]
		bc.LineStyle.Width = 0
		lab, err := valueLabels(xys, texts, dx, 7.5)
		if err != nil {
			return figure{}, err
		}
		pa.Add(bc, lab)
		legend.Add(runTitle(r)+": converged", bc)
	}
	pa.Y.Min, pa.Y.Max = 0, top*1.12
	pa.Y.Tick.Marker = linearTicks(pa.Y.Max, niceStep(pa.Y.Max, 6), func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) })
	pa.X.Min, pa.X.Max = -0.5, float64(len(phases))-0.5

	// (b) lease moves against the fewest needed.
	pb := newNominalPlot("Scale simulation: lease moves per phase against the fewest the change needs", "lease moves (log scale)", names)
	pb.Y.Scale = plot.LogScale{}
	lo, hi := math.Inf(1), 0.0
	var thumbIdeal plot.Thumbnailer
	for i, r := range runs {
		var xys plotter.XYs
		var texts []string
		off := 0.2 * (float64(i) - float64(len(runs)-1)/2)
		var ideal plotter.XYs
		for j, p := range r.Phases {
			ideal = append(ideal, plotter.XY{X: float64(j) + off, Y: float64(p.Ideal)})
			lo, hi = min(lo, float64(p.Ideal)), max(hi, float64(p.Ideal))
			xys = append(xys, plotter.XY{X: float64(j) + off, Y: float64(p.Moves)})
			texts = append(texts, thousands(p.Moves))
			lo, hi = min(lo, float64(p.Moves)), max(hi, float64(p.Moves))
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return figure{}, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: runColors[i], Radius: vg.Points(4.5), Shape: draw.CircleGlyph{}}
		lab, err := valueLabels(xys, texts, vg.Points(0), 8)
		if err != nil {
			return figure{}, err
		}
		// The first run's counts left of its points, the second's right.
		lab.Offset = vg.Point{X: vg.Points(-7)}
		for k := range lab.TextStyle {
			lab.TextStyle[k].XAlign = draw.XRight
			lab.TextStyle[k].YAlign = draw.YCenter
			if i > 0 {
				lab.TextStyle[k].XAlign = draw.XLeft
			}
		}
		if i > 0 {
			lab.Offset.X = vg.Points(7)
		}
		is, err := plotter.NewScatter(ideal)
		if err != nil {
			return figure{}, err
		}
		is.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(8), Shape: dashGlyph{}}
		pb.Add(is, sc, lab)
		legend.Add(runTitle(r)+": lease moves", sc)
		thumbIdeal = is
	}
	legend.Add("fewest moves the change needs (per run)", thumbIdeal)
	pb.Y.Min, pb.Y.Max = lo/1.6, hi*2
	pb.Y.Tick.Marker = logTicks(pb.Y.Min, pb.Y.Max, func(v float64) string { return thousands(int(v)) })
	pb.X.Min, pb.X.Max = -0.5, float64(len(phases))-0.5

	var lost []string
	for _, r := range runs {
		lost = append(lost, fmt.Sprintf("%s: %s of %s records lost, %.3f lease-store writes per shard per second in the steady state", runTitle(r), thousands(r.Lost), thousands(r.Written), r.WritesPerShardSecond))
	}
	r0 := runs[0]
	return figure{
		W: 13 * vg.Inch, H: 9 * vg.Inch,
		Plots:  [][]*plot.Plot{{pa}, {pb}},
		Legend: &legend, LegendW: 2.9 * vg.Inch,
		Caption: []string{
			fmt.Sprintf("bench/scalesim: the real consumer and lease code, %s shards, %d workers at the start, %s records/s written (every shard alike), by load; workers join, leave (graceful) and die (kill), one change per phase.",
				thousands(r0.Shards), r0.StartWorkers, thousands(r0.WrittenPerSecond)),
			strings.Join(lost, "; ") + ".",
			"Source: " + file + ".",
		},
	}, nil
}
