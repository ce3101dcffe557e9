package experiment

import (
	"fmt"
	"image/color"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// GoodputColor is the colour of the goodput line in WritePNG's all-flows
// panel:
// a dark grey, darker than any flow's colour and lighter than the text.
var GoodputColor = color.RGBA{R: 0x50, G: 0x50, B: 0x50, A: 0xff}

// The PNG's geometry: the panels on the left, their legends in a column
// of their own on the right, so that no legend covers data.
const (
	plotWidth   = 10 * vg.Inch
	legendWidth = 2.5 * vg.Inch
	plotHeight  = 13 * vg.Inch
)

// aggregateWindow is how long the all-flows panel averages over: a flow's
// WRITEs complete a message at a time, too coarse for one interval.
const aggregateWindow = time.Millisecond

// meanOver returns value over time, each point the mean of the w samples
// ending there.
func meanOver(r *Result, w int, value func(*Sample) float64) plotter.XYs {
	pts := make(plotter.XYs, len(r.Samples))
	var sum float64
	for k := range r.Samples {
		sum += value(&r.Samples[k])
		if k >= w {
			sum -= value(&r.Samples[k-w])
		}
		pts[k] = plotter.XY{X: r.Samples[k].At.Seconds() * 1e3, Y: sum / float64(min(k+1, w)) / 1e9}
	}
	return pts
}

// WritePNG draws the run as a PNG, four panels over time: each flow's
// delivered throughput; each flow's DCQCN rate; all flows together, the
// datagrams delivered (retransmissions included, as Utilization counts
// them) and the goodput (the payload of the WRITEs that completed, as
// Summary.Goodput); the bottleneck queue depth with the RED thresholds and
// the buffer size. The three panels share one time axis
// (the same range and ticks); each flow has its own style, a colour and a
// dash pattern, named in the legend beside the top panel; the legends sit
// right of the panels, outside their data.
func WritePNG(w io.Writer, r *Result) error {
	sc := &r.Scenario
	mode := "DCQCN " + sc.Preset
	if sc.DisableDCQCN {
		mode = "DCQCN off"
	}
	clock := "virtual time"
	if !r.VirtualTime {
		clock = "real time"
	}
	title := fmt.Sprintf("%s, %d flows, %v, %s (%s)", sc.Name, sc.Flows, sc.LineRate, mode, clock)
	end := sc.Duration.Seconds() * 1e3
	if len(r.Samples) > 0 {
		end = max(end, r.Samples[len(r.Samples)-1].At.Seconds()*1e3)
	}

	throughput := rateplot(r, title, "delivered throughput (Gb/s)", end, func(s *Sample, i int) float64 { return float64(s.Throughput[i]) })
	rates := rateplot(r, "", "DCQCN rate (Gb/s)", end, func(s *Sample, i int) float64 { return float64(s.Rate[i]) })
	rates.Legend = plot.NewLegend() // the same flows and styles as above
	all := newPanel("", "all flows (Gb/s)", end)
	nw := max(1, int(aggregateWindow/sc.Interval))
	delivered := meanOver(r, nw, func(s *Sample) float64 {
		var sum float64
		for _, tp := range s.Throughput {
			sum += float64(tp)
		}
		return sum
	})
	good := meanOver(r, nw, func(s *Sample) float64 { return float64(s.Goodput) })
	window := fmt.Sprintf(" (%v mean)", time.Duration(nw)*sc.Interval)
	for _, l := range []struct {
		name string
		pts  plotter.XYs
		sty  draw.LineStyle
	}{
		{"delivered" + window, delivered, draw.LineStyle{Color: plotutil.Color(2), Width: vg.Points(1.5)}},
		{"goodput" + window, good, draw.LineStyle{Color: GoodputColor, Width: vg.Points(1.5)}},
	} {
		line, err := plotter.NewLine(l.pts)
		if err != nil {
			return err
		}
		line.LineStyle = l.sty
		all.Add(line)
		all.Legend.Add(l.name, line)
	}

	queue := newPanel("", "queue (kB)", end)
	depth := make(plotter.XYs, len(r.Samples))
	for k, s := range r.Samples {
		depth[k] = plotter.XY{X: s.At.Seconds() * 1e3, Y: float64(s.QueueMax) / 1e3}
	}
	var lines []any
	lines = append(lines, "queue (max per interval)", depth)
	level := func(name string, bytes int) {
		if bytes > 0 {
			lines = append(lines, name, plotter.XYs{{X: 0, Y: float64(bytes) / 1e3}, {X: end, Y: float64(bytes) / 1e3}})
		}
	}
	level("Kmin", sc.RED.Kmin)
	level("Kmax", sc.RED.Kmax)
	level("buffer", sc.Buffer)
	if err := plotutil.AddLines(queue, lines...); err != nil {
		return err
	}

	plots := [][]*plot.Plot{{throughput}, {rates}, {all}, {queue}}
	img := vgimg.New(plotWidth+legendWidth, plotHeight)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, draw.Crop(dc, 0, -legendWidth, 0, 0))
	for j := range plots {
		p := plots[j][0]
		legend := p.Legend
		p.Legend = plot.NewLegend() // Plot.Draw would draw it over the data
		p.Draw(canvases[j][0])
		// The legend beside the panel, level with its data's top.
		data := p.DataCanvas(canvases[j][0])
		legend.Draw(draw.Canvas{Canvas: img, Rectangle: vg.Rectangle{
			Min: vg.Point{X: plotWidth + 2*vg.Millimeter, Y: data.Min.Y},
			Max: vg.Point{X: plotWidth + legendWidth - 2*vg.Millimeter, Y: data.Max.Y}}})
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// newPanel returns a plot over time from 0 to end ms, its legend empty and
// placed for WritePNG to draw beside it (Plot.Draw does not draw it: see
// WritePNG).
func newPanel(title, ylabel string, end float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (ms)"
	p.Y.Label.Text = ylabel
	p.X.Min, p.X.Max = 0, end
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	return p
}

// rateplot plots one value per flow over time, in Gb/s, each flow in its
// own style (FlowStyle), each named in the legend.
func rateplot(r *Result, title, ylabel string, end float64, value func(s *Sample, flow int) float64) *plot.Plot {
	p := newPanel(title, ylabel, end)
	for i := range r.Scenario.Flows {
		pts := make(plotter.XYs, len(r.Samples))
		for k := range r.Samples {
			pts[k] = plotter.XY{X: r.Samples[k].At.Seconds() * 1e3, Y: value(&r.Samples[k], i) / 1e9}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		l.LineStyle = FlowStyle(i)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("flow %d", i), l)
	}
	return p
}

// FlowStyle is flow i's line in the plots: plotutil's seven colours, then
// the same colours dashed, and so on through plotutil's dash patterns, so
// that up to 49 flows each have a style of their own.
func FlowStyle(i int) draw.LineStyle {
	n := len(plotutil.DefaultColors)
	return draw.LineStyle{Color: plotutil.Color(i % n), Dashes: plotutil.Dashes(i / n),
		Width: vg.Points(1)}
}
