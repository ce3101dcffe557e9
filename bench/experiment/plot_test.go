package experiment

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPNGLayout renders a 16:1 incast and checks facts of the decoded
// pixels, found from the picture alone: the panels' data areas (bounded by
// their axes, long runs of grey pixels) hold no text (no pixel as dark as a
// glyph's core), so no legend covers data; the legend beside the top panel
// shows 16 distinct flow styles (colour and dash pattern); the goodput
// line's colour is drawn in the data; every panel has its time ticks in the
// same columns.
func TestPNGLayout(t *testing.T) {
	sc := Incast(16)
	sc.Duration = 20 * time.Millisecond
	res, err := RunVirtual(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WritePNG(&buf, res); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	panels := dataAreas(img)
	if len(panels) < 3 {
		t.Fatalf("found %d panels' axes, want at least 3: %v", len(panels), panels)
	}
	for i, p := range panels {
		inner := image.Rect(p.Min.X+3, p.Min.Y+3, p.Max.X-2, p.Max.Y-3)
		if at, ok := find(img, inner, isGlyphCore); ok {
			t.Errorf("panel %d %v: a text pixel at %v: a legend covers the data", i, p, at)
		}
		if i > 0 && !slices.Equal(ticks(img, p), ticks(img, panels[0])) {
			t.Errorf("panel %d's time ticks at columns %v, the top panel's at %v", i, ticks(img, p), ticks(img, panels[0]))
		}
	}
	goodput := 0
	for _, p := range panels {
		forEach(img, image.Rect(p.Min.X+3, p.Min.Y+3, p.Max.X-2, p.Max.Y-3), func(c color.RGBA) {
			if c.R == c.G && c.G == c.B && near(c.R, GoodputColor.R) {
				goodput++
			}
		})
	}
	if goodput < panels[0].Dx() {
		t.Errorf("%d pixels of the goodput line's colour in the data, want a line across a panel (%d)", goodput, panels[0].Dx())
	}
	t.Logf("panels %v, %d goodput pixels", panels, goodput)
	top := panels[0]
	legend := image.Rect(top.Max.X+1, top.Min.Y-5, img.Bounds().Max.X, top.Max.Y)
	styles := legendStyles(img, legend)
	if len(styles) != sc.Flows {
		t.Errorf("the top panel's legend shows %d distinct line styles %v, want one per flow (%d)", len(styles), styles, sc.Flows)
	}
}

// TestSummaryGoodput: with DCQCN off a 16:1 incast keeps the bottleneck
// busy but drops and resends, so its goodput is well below DCQCN's; both
// summary lines say so, and say "never" for flows that never converged.
func TestSummaryGoodput(t *testing.T) {
	var sums [2]Summary
	for i, off := range []bool{false, true} {
		sc := Incast(16)
		sc.Duration = 20 * time.Millisecond
		sc.DisableDCQCN = off
		res, err := RunVirtual(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = Summarize(res)
		t.Log(sums[i])
		line := sums[i].String()
		if !strings.Contains(line, " goodput_mbps=") || strings.Contains(line, "converge_ms=-") {
			t.Errorf("summary %q: want goodput_mbps and no negative converge_ms", line)
		}
	}
	on, off := sums[0], sums[1]
	if off.Utilization < 0.99 || off.Drops == 0 {
		t.Fatalf("DCQCN off: %v, want a busy link with drops", off)
	}
	if off.Goodput >= on.Goodput*9/10 {
		t.Errorf("goodput %v with DCQCN off, %v on: want off well below on", off.Goodput, on.Goodput)
	}
}

// near reports whether a is b give or take antialiasing's rounding.
func near(a, b uint8) bool { return a+8 >= b && a <= b+8 }

// isGlyphCore reports a pixel as dark as the inside of a letter: the
// plots' lines are all lighter.
func isGlyphCore(c color.RGBA) bool { return c.R < 0x30 && c.G < 0x30 && c.B < 0x30 }

// isAxisGrey reports a neutral grey pixel of an antialiased black line.
func isAxisGrey(c color.RGBA) bool { return c.R == c.G && c.G == c.B && c.R < 0xa0 }

func rgba(img image.Image, x, y int) color.RGBA {
	return color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
}

func forEach(img image.Image, r image.Rectangle, f func(color.RGBA)) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			f(rgba(img, x, y))
		}
	}
}

func find(img image.Image, r image.Rectangle, pred func(color.RGBA) bool) (image.Point, bool) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if pred(rgba(img, x, y)) {
				return image.Pt(x, y), true
			}
		}
	}
	return image.Point{}, false
}

// dataAreas finds the panels from their axes, top to bottom: a y axis is
// the leftmost column with a vertical run of at least 150 grey pixels; the
// panel's x axis is the longest horizontal grey run starting near it just
// below the run's bottom. The area spans from the y axis to the x axis's end, and
// from the run's top to the x axis.
func dataAreas(img image.Image) []image.Rectangle {
	b := img.Bounds()
	var areas []image.Rectangle
	for y := b.Min.Y; y < b.Max.Y; {
		found := false
		for x := b.Min.X; x < b.Min.X+b.Dx()/4 && !found; x++ {
			n := 0
			for y2 := y; y2 < b.Max.Y && isAxisGrey(rgba(img, x, y2)); y2++ {
				n++
			}
			if n < 150 {
				continue
			}
			found = true
			bottom, right, axis := y+n-1, x, y+n-1
			for yy := bottom; yy <= bottom+15 && yy < b.Max.Y; yy++ {
				for start := x; start <= x+20; start++ {
					end := start
					for end+1 < b.Max.X && isAxisGrey(rgba(img, end+1, yy)) {
						end++
					}
					if isAxisGrey(rgba(img, start, yy)) && end > right {
						right, axis = end, yy
					}
				}
			}
			areas = append(areas, image.Rect(x, y, right, axis))
			y = axis + 1
		}
		if !found {
			y++
		}
	}
	return areas
}

// ticks returns the columns of the tick marks under a panel's x axis.
func ticks(img image.Image, area image.Rectangle) []int {
	var xs []int
	for x := area.Min.X + 1; x <= area.Max.X; x++ {
		if isAxisGrey(rgba(img, x, area.Max.Y+4)) {
			xs = append(xs, x)
		}
	}
	return xs
}

// legendStyles returns the distinct line styles of the legend entries in
// r: per entry (a band of rows holding coloured pixels), the colour most of
// its most coloured row has and the number of dashes (runs of coloured
// pixels) in that row.
func legendStyles(img image.Image, r image.Rectangle) map[[4]int]int {
	coloured := func(c color.RGBA) bool {
		return max(c.R, c.G, c.B)-min(c.R, c.G, c.B) > 60
	}
	styles := map[[4]int]int{}
	bestRow, bestN := -1, 0
	flush := func() {
		if bestRow < 0 {
			return
		}
		counts := map[color.RGBA]int{}
		runs, in := 0, false
		for x := r.Min.X; x < r.Max.X; x++ {
			c := rgba(img, x, bestRow)
			if coloured(c) {
				counts[c]++
				if !in {
					runs++
				}
			}
			in = coloured(c)
		}
		var top color.RGBA
		for c, n := range counts {
			if n > counts[top] {
				top = c
			}
		}
		styles[[4]int{int(top.R), int(top.G), int(top.B), runs}]++
		bestRow, bestN = -1, 0
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		n := 0
		for x := r.Min.X; x < r.Max.X; x++ {
			if coloured(rgba(img, x, y)) {
				n++
			}
		}
		switch {
		case n == 0:
			flush()
		case n > bestN:
			bestRow, bestN = y, n
		}
	}
	flush()
	return styles
}
