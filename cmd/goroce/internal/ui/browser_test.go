//go:build unix

package ui

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/qp"
)

// The browser tests load the page in headless Chromium (Debian's chromium
// package) from a real server on loopback, with real devices behind it,
// and check what the page's script rendered: the DOM as Chromium dumps it
// after the script has run, and a screenshot. They skip only when Chromium
// is not installed (CI installs it: apt-get install -y chromium), and fail
// then instead under GOROCE_CI_STRICT=1 (testenv), or the older
// GOROCE_UI_REQUIRE_BROWSER, which still works and means the same for
// these tests alone.

// chromiumPath returns the Chromium binary, or skips the test (fails it
// under GOROCE_CI_STRICT=1 or GOROCE_UI_REQUIRE_BROWSER).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("GOROCE_UI_REQUIRE_BROWSER") != "" {
		t.Fatal("chromium is not installed (apt-get install -y chromium) and GOROCE_UI_REQUIRE_BROWSER is set")
	}
	testenv.SkipOrFail(t, "chromium is not installed (apt-get install -y chromium)")
	return ""
}

// pageTime is how much virtual time Chromium gives the page before it
// dumps or shoots it: enough for several polls (fetches pause the virtual
// clock, so each completes whatever its real duration).
const pageTime = 3 * time.Second

// headless runs Chromium on url with args added to the usual headless
// flags, at most a minute, and returns what it wrote to stdout. Chromium
// and the helper processes it starts share a process group, which is
// killed if the minute runs out.
func headless(t *testing.T, url string, args ...string) []byte {
	t.Helper()
	bin := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argv := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir(),
		fmt.Sprintf("--virtual-time-budget=%d", pageTime.Milliseconds()),
	}, args...)
	cmd := exec.CommandContext(ctx, bin, append(argv, url)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return stdout.Bytes()
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// startServer serves srv on an ephemeral loopback port for the test.
func startServer(t *testing.T, srv *Server) string {
	t.Helper()
	addr, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop() })
	return "http://" + addr.String() + "/"
}

// deviceSection returns the HTML of the card of the device called name.
func deviceSection(t *testing.T, dom, name string) string {
	t.Helper()
	start := strings.Index(dom, `<section class="card device" data-name="`+name+`">`)
	if start < 0 {
		t.Fatalf("no card for device %s in the page:\n%s", name, dom)
	}
	end := strings.Index(dom[start:], "</section>")
	return dom[start : start+end]
}

var (
	qpRowRE   = regexp.MustCompile(`<tr class="qp" data-qpn="(\d+)" data-state="(\w+)">(.*?)</tr>`)
	cellRE    = regexp.MustCompile(`<td[^>]*>(?:<span[^>]*>)?([^<]*)(?:</span>)?</td>`)
	counterRE = regexp.MustCompile(`<div class="counter[^"]*" data-name="(\w+)" data-value="(\d+)">`)
)

// TestBrowserShowsQPsAndCounters connects an RC pair over real UDP, moves
// SENDs, and loads the page in Chromium: its script must have drawn each
// device's QP table with the real QPN, state and PSNs, and its counters as
// the devices count them.
func TestBrowserShowsQPsAndCounters(t *testing.T) {
	chromiumPath(t)
	const sends, extra = 5, 3
	a, b := connectedPair(t, sends, extra)
	srv := New(Options{})
	names := map[*node]string{a: "goroce_a/1", b: "goroce_b/1"}
	for _, n := range []*node{a, b} {
		if err := srv.AddDevice(names[n], n.dev); err != nil {
			t.Fatal(err)
		}
	}
	url := startServer(t, srv)

	before := map[*node]uint64{a: a.dev.Counter("sent_pkts"), b: b.dev.Counter("sent_pkts")}
	dom := string(headless(t, url, "--dump-dom"))
	if !strings.Contains(dom, `class="status live"`) {
		t.Errorf("the page does not say it is live:\n%s", dom)
	}
	psn := uint32(startPSN) + sends
	for _, tc := range []struct {
		n, peer                   *node
		sqPSN, rqPSN              uint32
		sendWRs, recvWRs, minRcvd int
	}{
		{a, b, psn, uint32(startPSN), 0, 0, 1},
		{b, a, uint32(startPSN), psn, 0, extra, sends},
	} {
		name := names[tc.n]
		card := deviceSection(t, dom, name)
		if !strings.Contains(card, tc.n.dev.Addr().String()) {
			t.Errorf("%s: the card does not show the address %v", name, tc.n.dev.Addr())
		}
		rows := qpRowRE.FindAllStringSubmatch(card, -1)
		if len(rows) != 1 {
			t.Fatalf("%s: %d QP rows, want 1:\n%s", name, len(rows), card)
		}
		if qpn := strconv.FormatUint(uint64(tc.n.qp.QPN()), 10); rows[0][1] != qpn || rows[0][2] != "RTS" {
			t.Errorf("%s: row of QPN %s in state %s, want QPN %s in RTS", name, rows[0][1], rows[0][2], qpn)
		}
		var cells []string
		for _, m := range cellRE.FindAllStringSubmatch(rows[0][3], -1) {
			cells = append(cells, m[1])
		}
		hex := func(v uint32) string { return fmt.Sprintf("0x%04x", v) }
		want := []string{hex(tc.n.qp.QPN()), "RC", "RTS", hex(tc.peer.qp.QPN()), hex(tc.sqPSN), hex(tc.sqPSN),
			hex(tc.rqPSN), strconv.Itoa(tc.sendWRs), strconv.Itoa(tc.recvWRs), "1024", "100 Gb/s"}
		if strings.Join(cells, "|") != strings.Join(want, "|") {
			t.Errorf("%s: QP row shows\n %v\nwant\n %v", name, cells, want)
		}

		counters := map[string]uint64{}
		for _, m := range counterRE.FindAllStringSubmatch(card, -1) {
			v, _ := strconv.ParseUint(m[2], 10, 64)
			counters[m[1]] = v
		}
		if len(counters) != len(tc.n.dev.Counters()) {
			t.Errorf("%s: %d counters shown, the device has %d", name, len(counters), len(tc.n.dev.Counters()))
		}
		after := tc.n.dev.Counter("sent_pkts")
		if v := counters["sent_pkts"]; v == 0 || v < before[tc.n] || v > after {
			t.Errorf("%s: sent_pkts %d shown, want %d ... %d", name, v, before[tc.n], after)
		}
		if v := counters["rcvd_pkts"]; v < uint64(tc.minRcvd) || v > tc.n.dev.Counter("rcvd_pkts") {
			t.Errorf("%s: rcvd_pkts %d shown, want %d ... %d", name, v, tc.minRcvd, tc.n.dev.Counter("rcvd_pkts"))
		}
	}

	// The screenshot: the right size, and the page's colours in it.
	checkColours(t, screenshot(t, url, ""), []colourCount{
		{"header band", "#1d2b3a", 20000},
		{"QP table header", "#e6ecf3", 5000},
		{"RTS badge", "#dcf5e3", 200},
	})
}

// incastSamples makes a DCQCN incast's time series: flows start at the
// line rate, are cut when the queue builds, and settle near their fair
// share while the queue drains to a ripple.
func incastSamples(flows, n int, lineRate dcqcn.Rate, duration time.Duration, buffer int) []DCQCNSample {
	fair := float64(lineRate) / float64(flows)
	out := make([]DCQCNSample, n)
	for i := range out {
		x := float64(i+1) / float64(n) // 0 ... 1 through the run
		s := DCQCNSample{At: time.Duration(x * float64(duration))}
		settle := math.Exp(-x * 12)
		for f := range flows {
			wobble := 0.08 * math.Sin(2*math.Pi*(x*9+float64(f)/float64(flows)))
			r := min(fair*(1+wobble)+(float64(lineRate)-fair)*settle, float64(lineRate))
			s.Rate = append(s.Rate, dcqcn.Rate(r))
			s.Throughput = append(s.Throughput, dcqcn.Rate(r*0.97))
		}
		s.QueueBytes = int(float64(buffer) * (0.7*math.Exp(-math.Pow((x-0.08)/0.05, 2)) + 0.12 + 0.05*math.Sin(2*math.Pi*x*9)))
		s.QueueMax = s.QueueBytes + buffer/50
		s.Marked, s.CNPs = uint64(i*7), uint64(i*3)
		out[i] = s
	}
	return out
}

var (
	polylineRE = regexp.MustCompile(`<polyline ([^>]*)>`)
	attrRE     = regexp.MustCompile(`([\w-]+)="([^"]*)"`)
)

// attrs returns the attributes of a start tag's inside.
func attrs(tag string) map[string]string {
	m := map[string]string{}
	for _, a := range attrRE.FindAllStringSubmatch(tag, -1) {
		m[a[1]] = a[2]
	}
	return m
}

// TestBrowserDCQCNChart feeds an incast's samples to the server, next to a
// real device with a connected RC QP, and loads the page in Chromium: the
// rate chart must have one line per flow through every sample, the queue
// chart a line through every sample, and the screenshot the flows'
// colours. GOROCE_UI_SCREENSHOT=PATH keeps the screenshot.
func TestBrowserDCQCNChart(t *testing.T) {
	chromiumPath(t)
	const flows, samples = 3, 400
	const lineRate, buffer, duration = dcqcn.Gbps, 80_000, 2 * time.Second
	a, _ := connectedPair(t, 4, 0)
	srv := New(Options{})
	if err := srv.AddDevice("goroce_"+a.dev.Addr().Addr().String()+"/1", a.dev); err != nil {
		t.Fatal(err)
	}
	srv.StartDCQCN(DCQCNRun{Name: "incast", Flows: flows, LineRate: lineRate, Duration: duration, Buffer: buffer, Preset: "paper"})
	for _, s := range incastSamples(flows, samples, lineRate, duration, buffer) {
		srv.PushDCQCN(s)
	}
	url := startServer(t, srv)

	dom := string(headless(t, url, "--dump-dom"))
	lines := map[string][][2]float64{} // "flow-line/0", "queue-line" → points
	for _, m := range polylineRE.FindAllStringSubmatch(dom, -1) {
		a := attrs(m[1])
		key := a["class"]
		if f, ok := a["data-flow"]; ok {
			key += "/" + f
		}
		for _, p := range strings.Fields(a["points"]) {
			x, y, _ := strings.Cut(p, ",")
			px, err1 := strconv.ParseFloat(x, 64)
			py, err2 := strconv.ParseFloat(y, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: bad point %q", key, p)
			}
			lines[key] = append(lines[key], [2]float64{px, py})
		}
	}
	want := []string{"queue-line"}
	for f := range flows {
		want = append(want, fmt.Sprintf("flow-line/%d", f))
	}
	if len(lines) != len(want) {
		t.Errorf("chart lines %v, want %v", keys(lines), want)
	}
	for _, key := range want {
		pts := lines[key]
		if len(pts) != samples {
			t.Errorf("%s: %d points, want %d", key, len(pts), samples)
			continue
		}
		// Time runs left to right across the plot, which is x 62 ... 548
		// and y 10 ... 224 of the 560×250 view box; the last sample, at
		// the run's end, sits on the right edge.
		for i, p := range pts {
			if p[0] < 62 || p[0] > 548 || p[1] < 10 || p[1] > 224 || (i > 0 && p[0] < pts[i-1][0]) {
				t.Fatalf("%s: point %d %v outside the plot or out of order", key, i, p)
			}
		}
		if last := pts[len(pts)-1][0]; last != 548 {
			t.Errorf("%s: last point at x %v, want 548", key, last)
		}
	}
	// Each flow starts at the line rate (the top of the axis, y 10) and
	// ends near its fair share, a third of it.
	for f := range flows {
		pts := lines[fmt.Sprintf("flow-line/%d", f)]
		if len(pts) == 0 {
			continue
		}
		if first, last := pts[0][1], pts[len(pts)-1][1]; first > 30 || last < 224-214*0.45 || last > 224-214*0.25 {
			t.Errorf("flow %d: from y %v to y %v, want from near 10 (line rate) to near %v (a third)", f, first, last, 224-214.0/3)
		}
	}
	if n := strings.Count(dom, `<li data-flow=`); n != flows {
		t.Errorf("legend has %d flows, want %d", n, flows)
	}
	if !strings.Contains(dom, "incast · 3 flows · 1 Gb/s links · preset paper") {
		t.Errorf("the chart's title does not describe the run")
	}
	if !strings.Contains(dom, `<tr class="qp" data-qpn="`+strconv.FormatUint(uint64(a.qp.QPN()), 10)+`" data-state="RTS">`) {
		t.Errorf("the device's QP is not on the page")
	}

	checkColours(t, screenshot(t, url, os.Getenv("GOROCE_UI_SCREENSHOT")), []colourCount{
		{"header band", "#1d2b3a", 20000},
		{"flow 0", "#0072b2", 150},
		{"flow 1", "#e69f00", 150},
		{"flow 2", "#009e73", 150},
		{"queue area", "#e7dcf1", 5000},
	})
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// Screenshot size.
const shotW, shotH = 1200, 900

// screenshot has Chromium shoot the page at 1200×900 and decodes the PNG,
// which must have that size and more than a few colours. keep, if not
// empty, is where the PNG is copied.
func screenshot(t *testing.T, url, keep string) image.Image {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ui.png")
	headless(t, url, "--screenshot="+path, fmt.Sprintf("--window-size=%d,%d", shotW, shotH))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != shotW || b.Dy() != shotH {
		t.Fatalf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), shotW, shotH)
	}
	if n := countColours(img); n < 50 {
		t.Errorf("screenshot has %d colours: blank?", n)
	}
	if keep != "" {
		if err := os.WriteFile(keep, raw, 0o644); err != nil {
			t.Errorf("GOROCE_UI_SCREENSHOT: %v", err)
		} else {
			t.Logf("screenshot saved to %s", keep)
		}
	}
	return img
}

// colourCount is a part of the page by its colour, and the fewest pixels
// of that colour a screenshot must show.
type colourCount struct {
	what   string
	colour string
	min    int
}

// checkColours fails the test for each part with too few pixels of its
// colour in img.
func checkColours(t *testing.T, img image.Image, parts []colourCount) {
	t.Helper()
	for _, c := range parts {
		n := countColour(img, c.colour)
		t.Logf("screenshot: %d pixels of the %s colour %s", n, c.what, c.colour)
		if n < c.min {
			t.Errorf("screenshot: %d pixels of the %s colour %s, want at least %d", n, c.what, c.colour, c.min)
		}
	}
}

// countColour counts the pixels within 6 per channel of colour ("#rrggbb").
func countColour(img image.Image, colour string) int {
	v, _ := strconv.ParseUint(colour[1:], 16, 32)
	want := [3]int{int(v >> 16), int(v >> 8 & 0xff), int(v & 0xff)}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			got := [3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}
			ok := true
			for i := range got {
				if d := got[i] - want[i]; d < -6 || d > 6 {
					ok = false
				}
			}
			if ok {
				n++
			}
		}
	}
	return n
}

// countColours counts the distinct colours in img.
func countColours(img image.Image) int {
	seen := map[[3]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r, g, bl}] = true
		}
	}
	return len(seen)
}

var textRE = regexp.MustCompile(`<text ([^>]*)>([^<]*)</text>`)

// TestBrowserDCQCNChartEdges loads the page for a run whose flows are far
// below the line rate (16 flows sharing 10 Gb/s links, as `goroce dcqcn
// incast --flows 16` runs) after the run has ended, next to a device with a
// UD QP, and checks what the rendered charts show (issue 25 item 11): the
// rate axis scaled to the flows, not the links (the flows' lines in the
// upper half); RED's Kmin and Kmax across the queue chart at their depths;
// every flow told apart (a dash pattern once the colours come round); no
// label outside the chart (the last time label used to run off its right
// edge); the status saying the run finished; and "off" as the DCQCN rate of
// a QP that has no DCQCN.
func TestBrowserDCQCNChartEdges(t *testing.T) {
	chromiumPath(t)
	const flows, samples = 16, 200
	const lineRate, buffer, duration = 10 * dcqcn.Gbps, 1_000_000, 200 * time.Millisecond
	const kmin, kmax = 5_000, 200_000
	a, _ := connectedPair(t, 1, 0)
	pd, err := a.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ud, err := a.dev.CreateQP(pd, &qp.InitAttr{Type: qp.UD, SendCQ: a.cq, RecvCQ: a.cq,
		Cap: qp.Cap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{})
	if err := srv.AddDevice("goroce_a/1", a.dev); err != nil {
		t.Fatal(err)
	}
	srv.StartDCQCN(DCQCNRun{Name: "incast", Flows: flows, LineRate: lineRate, Duration: duration,
		Buffer: buffer, Preset: "paper", Kmin: kmin, Kmax: kmax})
	// Every flow near its fair share, 0.625 Gb/s, from start to end; the
	// queue around Kmax.
	for i := range samples {
		x := float64(i+1) / samples
		s := DCQCNSample{At: time.Duration(x * float64(duration)), QueueBytes: int(kmax * (0.5 + 0.4*math.Sin(9*x)))}
		for f := range flows {
			r := dcqcn.Rate(float64(lineRate) / flows * (1 + 0.05*math.Sin(7*x+float64(f))))
			s.Rate, s.Throughput = append(s.Rate, r), append(s.Throughput, r)
		}
		s.QueueMax = s.QueueBytes
		srv.PushDCQCN(s)
	}
	srv.EndDCQCN()
	url := startServer(t, srv)
	dom := string(headless(t, url, "--dump-dom"))

	if !strings.Contains(dom, `class="status done"`) {
		t.Errorf("the page does not say the run finished")
	}
	// The rate chart is the first <svg>, the queue chart the second.
	rateSVG, queueSVG, ok := strings.Cut(dom[strings.Index(dom, `id="rate-chart"`):], `id="queue-chart"`)
	if !ok {
		t.Fatal("no queue chart")
	}
	// Plot area: y 10 (top) ... 224 (zero), as in TestBrowserDCQCNChart.
	const yTop, yZero = 10.0, 224.0
	for _, m := range polylineRE.FindAllStringSubmatch(rateSVG, -1) {
		at := attrs(m[1])
		pts := strings.Fields(at["points"])
		if len(pts) == 0 {
			t.Fatalf("flow %s: no points", at["data-flow"])
		}
		_, ys, _ := strings.Cut(pts[len(pts)-1], ",")
		y, _ := strconv.ParseFloat(ys, 64)
		if y > (yTop+yZero)/2 {
			t.Errorf("flow %s ends at y %v, in the lower half of the chart: the rate axis is not scaled to the flows", at["data-flow"], y)
		}
		f, _ := strconv.Atoi(at["data-flow"])
		if dashed := at["stroke-dasharray"] != ""; dashed != (f >= 7) {
			t.Errorf("flow %d: dash pattern %q, want one exactly for flows 7 and up", f, at["stroke-dasharray"])
		}
	}
	if n := strings.Count(rateSVG, `class="flow-line"`); n != flows {
		t.Errorf("%d flow lines, want %d", n, flows)
	}
	// Kmin and Kmax: y = yZero - (yZero-yTop)·K/top, top being the queue
	// axis's top label.
	var queueTopBytes float64
	for _, m := range textRE.FindAllStringSubmatch(queueSVG, -1) {
		if v, ok := parseBytes(m[2]); ok && !strings.Contains(m[1], "line-label") {
			queueTopBytes = max(queueTopBytes, v)
		}
	}
	for _, k := range []struct {
		cls   string
		bytes float64
	}{{"kmin-line", kmin}, {"kmax-line", kmax}} {
		m := regexp.MustCompile(`<line class="` + k.cls + `" [^>]*>`).FindString(queueSVG)
		if m == "" {
			t.Errorf("no %s on the queue chart", k.cls)
			continue
		}
		y, _ := strconv.ParseFloat(attrs(m)["y1"], 64)
		want := yZero - (yZero-yTop)*k.bytes/queueTopBytes
		if math.Abs(y-want) > 0.6 {
			t.Errorf("%s at y %v, want %v (%v bytes on an axis to %v)", k.cls, y, want, k.bytes, queueTopBytes)
		}
	}
	// Labels inside the 560-wide view box, 10px text being at most about
	// 6 units a character wide.
	for _, m := range textRE.FindAllStringSubmatch(dom, -1) {
		at := attrs(m[1])
		x, err := strconv.ParseFloat(at["x"], 64)
		if err != nil {
			continue
		}
		w := 6 * float64(len([]rune(m[2])))
		lo, hi := x, x+w
		switch at["text-anchor"] {
		case "end":
			lo, hi = x-w, x
		case "middle":
			lo, hi = x-w/2, x+w/2
		}
		if lo < 0 || hi > 560 {
			t.Errorf("label %q spans x %.0f ... %.0f, outside the chart's 0 ... 560", m[2], lo, hi)
		}
	}
	// The UD QP has no DCQCN; the RC QP has.
	card := deviceSection(t, dom, "goroce_a/1")
	for _, row := range qpRowRE.FindAllStringSubmatch(card, -1) {
		cells := cellRE.FindAllStringSubmatch(row[3], -1)
		rate := cells[len(cells)-1][1]
		want := "10 Gb/s"
		if row[1] == strconv.FormatUint(uint64(ud.QPN()), 10) {
			want = "off"
		}
		if rate != want && !(want != "off" && strings.HasSuffix(rate, "Gb/s")) {
			t.Errorf("QP %s: DCQCN rate %q, want %q", row[1], rate, want)
		}
	}
}

// parseBytes reads a label the page's bytes() wrote: "200 kB", "1 MB",
// "500 B".
func parseBytes(s string) (float64, bool) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), " ")
	v, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil {
		return 0, false
	}
	switch unit {
	case "B":
		return v, true
	case "kB":
		return v * 1e3, true
	case "MB":
		return v * 1e6, true
	}
	return 0, false
}
