// Command plot draws the reconnect storm measured by bench/storm as an SVG:
// Watch calls per bin over time (log scale) above the number of watchers
// connected, one curve per variant, the outage shaded.
//
//	go run ./bench/storm/plot -csv docs/storm.csv -summary docs/storm-summary.csv -o docs/storm.svg
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// errInput is matched by the error for a bad flag or CSV file.
var errInput = errors.New("plot: bad input")

func run(args []string) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	seriesPath := fs.String("csv", "docs/storm.csv", "time series written by bench/storm")
	summaryPath := fs.String("summary", "docs/storm-summary.csv", "summary written by bench/storm")
	outPath := fs.String("o", "docs/storm.svg", "file to write: .svg or .png")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sum, err := readSummary(*summaryPath)
	if err != nil {
		return err
	}
	series, err := readSeries(*seriesPath)
	if err != nil {
		return err
	}
	var c vg.CanvasWriterTo
	switch ext := filepath.Ext(*outPath); ext {
	case ".svg":
		c = vgsvg.New(width, height)
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(120))}
	default:
		return fmt.Errorf("%w: -o %s: not .svg or .png", errInput, *outPath)
	}
	if err := draw2(c, sum, series); err != nil {
		return err
	}
	f, err := os.Create(*outPath)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	_, err = c.WriteTo(f)
	if err := errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("plot: writing %s: %w", *outPath, err)
	}
	return nil
}

// variant is one row of the summary.
type variant struct {
	key, label          string
	n                   int
	outage, bin         float64 // seconds
	limit               float64
	burst               int
	peakPerS            int
	reconnected, afterS float64
}

// point is one row of the time series.
type point struct {
	t                float64
	calls, connected float64
}

func readCSV(path string, header int) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = header
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errInput, path, err)
	}
	if len(recs) < 2 {
		return nil, fmt.Errorf("%w: %s: no data", errInput, path)
	}
	return recs[1:], nil
}

func readSummary(path string) ([]variant, error) {
	recs, err := readCSV(path, 14)
	if err != nil {
		return nil, err
	}
	var vs []variant
	for _, r := range recs {
		var p parser
		v := variant{key: r[0], label: r[1], n: p.int(r[2]), outage: p.float(r[3]), limit: p.float(r[4]),
			burst: p.int(r[5]), bin: p.float(r[7]), peakPerS: p.int(r[8]), reconnected: p.float(r[9]), afterS: p.float(r[10])}
		if p.err != nil {
			return nil, fmt.Errorf("%w: %s: %w", errInput, path, p.err)
		}
		vs = append(vs, v)
	}
	return vs, nil
}

func readSeries(path string) (map[string][]point, error) {
	recs, err := readCSV(path, 5)
	if err != nil {
		return nil, err
	}
	series := make(map[string][]point)
	for _, r := range recs {
		var p parser
		series[r[0]] = append(series[r[0]], point{t: p.float(r[1]), calls: p.float(r[2]), connected: p.float(r[4])})
		if p.err != nil {
			return nil, fmt.Errorf("%w: %s: %w", errInput, path, p.err)
		}
	}
	return series, nil
}

// parser parses numbers, keeping the first error.
type parser struct{ err error }

func (p *parser) float(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if p.err == nil {
		p.err = err
	}
	return v
}

func (p *parser) int(s string) int {
	v, err := strconv.Atoi(s)
	if p.err == nil {
		p.err = err
	}
	return v
}

// style is how a variant's curves are drawn.
type style struct {
	color  color.Color
	width  vg.Length
	dashes []vg.Length
}

var styles = map[string]style{
	"client-go":    {color: color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}, width: 1.5},
	"ours-default": {color: color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, width: 1.5, dashes: []vg.Length{4, 3}},
	"ours-backoff": {color: color.RGBA{R: 0xe6, G: 0x7e, B: 0x22, A: 0xff}, width: 1.5, dashes: []vg.Length{1.5, 2}},
	"ours-limiter": {color: color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, width: 2.2},
}

// floor is where a bin with no Watch call is drawn on the log scale.
const floor = 0.35

// The size of the figure.
const width, height = 8 * vg.Inch, 6 * vg.Inch

// draw2 draws the two panels on c: Watch calls per bin, watchers connected.
func draw2(c vg.CanvasSizer, vs []variant, series map[string][]point) error {
	first := vs[0]
	top, bottom := plot.New(), plot.New()
	top.Title.Text = fmt.Sprintf("Reconnect storm: %d watchers, every watch dropped at t = 0, Watch refused for %gs (shaded)", first.n, first.outage)
	top.Title.TextStyle.Font.Size = vg.Points(12)
	// A y label longer than the panel is tall would shrink the panel.
	top.Y.Label.Text = fmt.Sprintf("Watch calls per %gms", first.bin*1000)
	top.Y.Label.TextStyle.Font.Size = vg.Points(11)
	bottom.Y.Label.TextStyle.Font.Size = vg.Points(11)
	top.Y.Scale = plot.LogScale{}
	top.Y.Tick.Marker = logTicks{}
	top.Legend.Top = true
	top.Legend.YOffs = -vg.Points(4)
	top.Legend.TextStyle.Font.Size = vg.Points(9)
	bottom.Y.Label.Text = "watchers connected"
	bottom.X.Label.Text = "seconds since every watch was dropped"

	// The curves, and the extent of the axes.
	type curves struct{ calls, conn plotter.XYs }
	cs := make([]curves, len(vs))
	var xmin, xmax, ymax float64
	for i, v := range vs {
		pts := series[v.key]
		if len(pts) == 0 {
			return fmt.Errorf("%w: the time series has no rows for %s", errInput, v.key)
		}
		cs[i] = curves{calls: make(plotter.XYs, len(pts)), conn: make(plotter.XYs, len(pts))}
		for j, p := range pts {
			cs[i].calls[j] = plotter.XY{X: p.t, Y: max(p.calls, floor)}
			cs[i].conn[j] = plotter.XY{X: p.t, Y: p.connected}
			ymax = max(ymax, p.calls)
		}
		xmin, xmax = min(xmin, pts[0].t), max(xmax, pts[len(pts)-1].t+v.bin)
	}
	top.Y.Min, top.Y.Max = floor, max(ymax, 1)*4
	bottom.Y.Min, bottom.Y.Max = 0, float64(first.n)*1.05

	// The outage shaded and a grid under the curves.
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Min, p.X.Max = xmin, xmax
		p.X.Tick.Marker = secondTicks{}
		band, err := plotter.NewPolygon(plotter.XYs{
			{X: 0, Y: p.Y.Min}, {X: first.outage, Y: p.Y.Min}, {X: first.outage, Y: p.Y.Max}, {X: 0, Y: p.Y.Max},
		})
		if err != nil {
			return fmt.Errorf("%w: %w", errInput, err)
		}
		band.Color = color.RGBA{R: 0xee, G: 0xee, B: 0xee, A: 0xff}
		band.LineStyle.Width = 0
		p.Add(band, plotter.NewGrid())
	}

	for i, v := range vs {
		st, ok := styles[v.key]
		if !ok {
			st = style{color: color.Black, width: 1}
		}
		for _, panel := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{top, cs[i].calls}, {bottom, cs[i].conn}} {
			l, err := plotter.NewLine(panel.xys)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", errInput, v.key, err)
			}
			l.StepStyle = plotter.PostStep
			l.Color, l.Width, l.Dashes = st.color, st.width, st.dashes
			panel.p.Add(l)
			if panel.p == top {
				top.Legend.Add(legend(v), l)
			}
		}
	}

	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(10)}
	dc := draw.New(c)
	top.Draw(tiles.At(dc, 0, 0))
	bottom.Draw(tiles.At(dc, 0, 1))
	return nil
}

// logTicks marks the powers of ten, and the floor as 0.
type logTicks struct{}

// Ticks returns the ticks between lo and hi.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := []plot.Tick{{Value: floor, Label: "0"}}
	for v := 1.0; v <= hi; v *= 10 {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		for m := 2.0; m < 10 && v*m <= hi; m++ {
			ticks = append(ticks, plot.Tick{Value: v * m})
		}
	}
	return ticks
}

// secondTicks marks every second, labelling every other one.
type secondTicks struct{}

// Ticks returns the ticks between lo and hi.
func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for s := math.Ceil(lo); s <= hi; s++ {
		t := plot.Tick{Value: s}
		if int(s)%2 == 0 {
			t.Label = strconv.Itoa(int(s))
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// legend is a variant's legend entry: its label and its figures.
func legend(v variant) string {
	s := fmt.Sprintf("%s: all back at %.1fs, peak %d calls/s", v.label, v.reconnected, v.peakPerS)
	if v.key == "ours-limiter" {
		s = fmt.Sprintf("%s (%g/s, burst %d): all back at %.1fs, peak %d calls/s", v.label, v.limit, v.burst, v.reconnected, v.peakPerS)
	}
	return s
}
