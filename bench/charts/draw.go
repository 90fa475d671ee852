package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// One colour per contender, the same in every chart.
var (
	colOurs     = color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff} // lambdaadapter, default path
	colOursAlt  = color.RGBA{R: 0x6f, G: 0xb0, B: 0xf0, A: 0xff} // lambdaadapter, WithRecycledMessages / second variant
	colPlain    = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff} // hand-rolled / plain SDK loop
	colHarlow   = color.RGBA{R: 0xd6, G: 0x5f, B: 0x1f, A: 0xff} // harlow/kinesis-consumer
	colHarlowLt = color.RGBA{R: 0xf0, G: 0xa8, B: 0x70, A: 0xff}
	colFloor    = color.RGBA{R: 0x2a, G: 0x8a, B: 0x3a, A: 0xff} // the physical floor
	colTarget   = color.RGBA{R: 0xc0, G: 0x10, B: 0x10, A: 0xff}
)

const dpi = 150

// newPlot is a plot with the sizes used throughout: readable at the width
// GitHub shows an image in a Markdown page.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 13
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Label.TextStyle.Font.Size = 11
	p.Y.Label.TextStyle.Font.Size = 11
	p.X.Tick.Label.Font.Size = 10
	p.Y.Tick.Label.Font.Size = 10
	p.Legend.TextStyle.Font.Size = 10
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(6)
	p.Legend.YOffs = vg.Points(-4)
	if xLabel != "" {
		p.Add(plotter.NewGrid())
	} else {
		g := plotter.NewGrid()
		g.Vertical.Color = nil
		p.Add(g)
	}
	return p
}

// newNominalPlot is newPlot with names on the X axis (at 0, 1, …) and
// no vertical grid lines.
func newNominalPlot(title, yLabel string, names []string) *plot.Plot {
	p := newPlot(title, "", yLabel)
	p.X.Tick.Label.Font.Size = 9.5
	p.NominalX(names...)
	// plot.NominalX pads the data away from the Y axis by half the first
	// name; the charts set the X range so that it fits instead.
	p.Y.Padding = vg.Points(2)
	p.X.Padding = 0
	return p
}

// logTicks labels the powers of ten between lo and hi with label(v), and
// marks 2–9 times each; when the range spans less than three decades, 2 and
// 5 times each power are labelled too.
func logTicks(lo, hi float64, label func(float64) string) plot.ConstantTicks {
	var ts plot.ConstantTicks
	dense := math.Log10(hi/lo) < 3
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for i := 1; i <= 9; i++ {
			v := base * float64(i)
			if v < lo*0.999 || v > hi*1.001 {
				continue
			}
			t := plot.Tick{Value: v}
			if i == 1 || dense && (i == 2 || i == 5) {
				t.Label = label(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// linearTicks labels multiples of step from 0 to hi.
func linearTicks(hi, step float64, label func(float64) string) plot.ConstantTicks {
	var ts plot.ConstantTicks
	for v := 0.0; v <= hi*1.0001; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: label(v)})
	}
	return ts
}

// niceStep is a step of 1, 2 or 5 × 10^k that cuts hi into about n parts.
func niceStep(hi float64, n int) float64 {
	raw := hi / float64(n)
	base := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*base >= raw {
			return m * base
		}
	}
	return 10 * base
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// duration writes ns as the unit that suits it.
func duration(ns float64) string {
	switch {
	case ns >= 1e9:
		return strconv.FormatFloat(ns/1e9, 'g', 3, 64) + " s"
	case ns >= 1e6:
		return strconv.FormatFloat(ns/1e6, 'g', 3, 64) + " ms"
	case ns >= 1e3:
		return strconv.FormatFloat(ns/1e3, 'g', 3, 64) + " µs"
	}
	return strconv.FormatFloat(ns, 'g', 3, 64) + " ns"
}

// figure is a grid of plots with caption lines under it.
type figure struct {
	W, H    vg.Length
	Plots   [][]*plot.Plot
	Caption []string

	// Legend, when set, is drawn in a strip LegendW wide right of the
	// plots (for plots whose data leave no room for one).
	Legend  *plot.Legend
	LegendW vg.Length
}

// save draws f as a PNG at path.
func (f figure) save(path string) error {
	img := vgimg.NewWith(vgimg.UseWH(f.W, f.H), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	capStyle := text.Style{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, 9.5),
		XAlign:  draw.XLeft,
		YAlign:  draw.YBottom,
		Handler: plot.DefaultTextHandler,
	}
	lineH := capStyle.Height("Mg") * 1.3
	capH := lineH*vg.Length(len(f.Caption)) + vg.Points(8)
	for i, line := range f.Caption {
		y := dc.Min.Y + vg.Points(6) + lineH*vg.Length(len(f.Caption)-1-i)
		dc.FillText(capStyle, vg.Point{X: dc.Min.X + vg.Points(10), Y: y}, line)
	}

	area := draw.Crop(dc, 0, 0, capH, 0)
	if f.Legend != nil {
		strip := draw.Crop(area, area.Max.X-area.Min.X-f.LegendW, 0, 0, -vg.Points(36))
		f.Legend.Draw(strip)
		area = draw.Crop(area, 0, -f.LegendW, 0, 0)
	}
	rows, cols := len(f.Plots), len(f.Plots[0])
	tiles := draw.Tiles{
		Rows: rows, Cols: cols,
		PadX: vg.Points(18), PadY: vg.Points(14),
		PadTop: vg.Points(8), PadBottom: vg.Points(4), PadLeft: vg.Points(8), PadRight: vg.Points(14),
	}
	for r := range rows {
		for c := range cols {
			if f.Plots[r][c] != nil {
				f.Plots[r][c].Draw(tiles.At(area, c, r))
			}
		}
	}

	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(out); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return out.Close()
}

// lineStyle is a solid or dashed line of the given colour.
func lineStyle(c color.Color, dashed bool) draw.LineStyle {
	ls := draw.LineStyle{Color: c, Width: vg.Points(1.8)}
	if dashed {
		ls.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	return ls
}

// valueLabels writes each value's text above its point, shifted by dx.
func valueLabels(xys plotter.XYs, texts []string, dx vg.Length, size vg.Length) (*plotter.Labels, error) {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font.Size = size
		l.TextStyle[i].XAlign = draw.XCenter
		l.TextStyle[i].YAlign = draw.YBottom
	}
	l.Offset = vg.Point{X: dx, Y: vg.Points(2)}
	return l, nil
}

// dashGlyph is a horizontal stroke as wide as twice the glyph's radius:
// a level to compare a point with.
type dashGlyph struct{}

func (dashGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.StrokeLine2(draw.LineStyle{Color: sty.Color, Width: vg.Points(2.5)}, pt.X-sty.Radius, pt.Y, pt.X+sty.Radius, pt.Y)
}

// labelPlace puts a label's text relative to its point.
type labelPlace struct {
	X      draw.XAlignment
	Y      draw.YAlignment
	DX, DY float64 // points
}

// pointLabel writes text at pt, placed as place says.
func pointLabel(pt plotter.XY, txt string, c color.Color, size vg.Length, place labelPlace) (*plotter.Labels, error) {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{pt}, Labels: []string{txt}})
	if err != nil {
		return nil, err
	}
	l.TextStyle[0].Font.Size = size
	l.TextStyle[0].Color = c
	l.TextStyle[0].XAlign = place.X
	l.TextStyle[0].YAlign = place.Y
	l.Offset = vg.Point{X: vg.Points(place.DX), Y: vg.Points(place.DY)}
	return l, nil
}

// spacedDuration writes a Go duration such as "1ms" as "1 ms".
func spacedDuration(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return s
	}
	return s[:i] + " " + s[i:]
}
