package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/goroce/goroce/bench/pairrun"
)

// TestFigure reads the figure of each pair from what the tools print:
// perftest's own output (Debian's ib_write_bw and ib_send_lat, preloaded
// on goroce), goroce perf's and wrloop's (its loop rate), captured in
// testdata, with the values read off by eye.
func TestFigure(t *testing.T) {
	for _, c := range []struct {
		file   string
		column int
		want   float64
	}{
		{"ib_write_bw.txt", pairs[0].column, 125.00},
		{"goroce_write_bw.txt", pairs[0].column, 55.10},
		{"ib_send_lat.txt", pairs[1].column, 84.78},
		{"goroce_send_lat.txt", pairs[1].column, 11.15},
		{"wrloop.txt", pairs[3].column, 0.365},
	} {
		out, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := figure(string(out), c.column); err != nil || got != c.want {
			t.Errorf("%s: figure = %v, %v; want %v", c.file, got, err, c.want)
		}
	}
	if _, err := figure("Couldn't connect to 127.0.0.1:18515\n", 3); err == nil {
		t.Error("figure found a number in output without a table")
	}
}

// TestVerdict checks the ratios and the targets' directions at their
// edges: bandwidth must reach 0.9 of goroce perf's, latency stay within
// 1.2 of it; the ratio is the median of the rounds' ratios (each round's
// two runs side by side), worked out here by hand, not the ratio of the
// two sides' medians.
func TestVerdict(t *testing.T) {
	bw, lat := pairs[0], pairs[1]
	for _, c := range []struct {
		p        pair
		pre, nat []float64
		ratio    float64
		wantMet  bool
	}{
		{bw, []float64{90, 100, 80}, []float64{100, 50, 200}, 0.9, true},      // ratios 0.9 2 0.4
		{bw, []float64{89, 100, 80}, []float64{100, 50, 200}, 0.89, false},    // ratios 0.89 2 0.4
		{lat, []float64{12, 30, 11}, []float64{10, 10, 11}, 1.2, true},        // ratios 1.2 3 1
		{lat, []float64{12.1, 30, 11}, []float64{10, 10, 11}, 1.21, false},    // ratios 1.21 3 1
		{bw, []float64{1, 4}, []float64{2, 4}, 0.5, false},                    // even count: the lower middle of 0.5 1
		{bw, []float64{90, 100, 300}, []float64{100, 50, 400}, 0.9, true},     // medians 100/100 = 1
		{bw, []float64{500, 1000, 1000}, []float64{1000, 1000, 400}, 1, true}, // medians 1000/1000, ratios 0.5 1 2.5
		{bw, []float64{500, 600, 1400}, []float64{1000, 1000, 1500}, 0.6, false},
	} {
		ratio, met := verdict(c.p, pairrun.Sides{A: c.pre, B: c.nat})
		if ratio < c.ratio-1e-9 || ratio > c.ratio+1e-9 || met != c.wantMet {
			t.Errorf("%s %v vs %v: ratio %v met %v, want %v %v", c.p.name, c.pre, c.nat, ratio, met, c.ratio, c.wantMet)
		}
	}
}

// TestSameWork checks that both sides of each pair are asked for the same
// work: the same -s, -n, -u and -p, and for write_bw the CQ moderation
// goroce perf's banner shows (testdata/goroce_write_bw.txt, "CQ
// Moderation : 100"), which perftest, whose own banner shows 1 for a
// 64 KiB WRITE by default (testdata/ib_write_bw.txt), gets with -Q.
func TestSameWork(t *testing.T) {
	flagOf := func(argv []string, name string) string {
		for i, a := range argv[:len(argv)-1] {
			if a == name {
				return argv[i+1]
			}
		}
		return ""
	}
	for _, p := range pairs {
		pre, nat := argv(p, true, "127.0.0.2", 5000, 18515), argv(p, false, "127.0.0.2", 5000, 18515)
		for _, f := range []string{"-s", "-n", "-u", "-p"} {
			if flagOf(pre, f) != flagOf(nat, f) {
				t.Errorf("%s: %s %q preloaded, %q goroce perf (%q, %q)", p.name, f, flagOf(pre, f), flagOf(nat, f), pre, nat)
			}
		}
	}
	banner, err := os.ReadFile(filepath.Join("testdata", "goroce_write_bw.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`CQ Moderation\s*:\s*(\d+)`).FindSubmatch(banner)
	if m == nil {
		t.Fatal("goroce perf's banner shows no CQ Moderation")
	}
	if pre := argv(pairs[0], true, "127.0.0.2", 5000, 18515); flagOf(pre, "-Q") != string(m[1]) {
		t.Errorf("preloaded %s: -Q %q, want goroce perf's CQ moderation %s (%q)", pairs[0].tool, flagOf(pre, "-Q"), m[1], pre)
	}
}
