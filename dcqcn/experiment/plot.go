package experiment

import (
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WritePNG draws the run as a PNG: on top each flow's delivered throughput
// over time, in the middle each flow's DCQCN rate, at the bottom the
// bottleneck queue depth with the RED thresholds and the buffer size.
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

	throughput := rateplot(r, title, "delivered throughput (Gb/s)", func(s *Sample, i int) float64 { return float64(s.Throughput[i]) })
	rates := rateplot(r, "", "DCQCN rate (Gb/s)", func(s *Sample, i int) float64 { return float64(s.Rate[i]) })

	queue := plot.New()
	queue.X.Label.Text = "time (ms)"
	queue.Y.Label.Text = "queue (kB)"
	depth := make(plotter.XYs, len(r.Samples))
	for k, s := range r.Samples {
		depth[k] = plotter.XY{X: s.At.Seconds() * 1e3, Y: float64(s.QueueMax) / 1e3}
	}
	var lines []any
	lines = append(lines, "queue (max per interval)", depth)
	level := func(name string, bytes int) {
		if len(r.Samples) > 0 && bytes > 0 {
			end := r.Samples[len(r.Samples)-1].At.Seconds() * 1e3
			lines = append(lines, name, plotter.XYs{{X: 0, Y: float64(bytes) / 1e3}, {X: end, Y: float64(bytes) / 1e3}})
		}
	}
	level("Kmin", sc.RED.Kmin)
	level("Kmax", sc.RED.Kmax)
	level("buffer", sc.Buffer)
	if err := plotutil.AddLines(queue, lines...); err != nil {
		return err
	}

	plots := [][]*plot.Plot{{throughput}, {rates}, {queue}}
	img := vgimg.New(10*vg.Inch, 10*vg.Inch)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, draw.New(img))
	for j := range plots {
		plots[j][0].Draw(canvases[j][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// rateplot plots one value per flow over time, in Gb/s.
func rateplot(r *Result, title, ylabel string, value func(s *Sample, flow int) float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (ms)"
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Legend.Top = true
	for i := range r.Scenario.Flows {
		pts := make(plotter.XYs, len(r.Samples))
		for k := range r.Samples {
			pts[k] = plotter.XY{X: r.Samples[k].At.Seconds() * 1e3, Y: value(&r.Samples[k], i) / 1e9}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		l.Color = plotutil.Color(i)
		p.Add(l)
		if r.Scenario.Flows <= 8 {
			p.Legend.Add(fmt.Sprintf("flow %d", i), l)
		}
	}
	return p
}
