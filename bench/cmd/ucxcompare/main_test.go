package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goroce/goroce/bench/pairrun"
	"github.com/goroce/goroce/bench/testenv"
)

// TestFinal reads the figures off ucx_perftest's own output (Debian's
// ucx_perftest, captured in testdata: am_lat over goroce's rc_verbs,
// put_bw over UCX's tcp), with the values read off by eye.
func TestFinal(t *testing.T) {
	for _, c := range []struct {
		file  string
		field int
		want  float64
	}{
		{"am_lat_rc_verbs.txt", pairs[0].field, 52.827},
		{"put_bw_tcp.txt", pairs[1].field, 2290.81},
		{"put_bw_tcp.txt", 1, 2000},
	} {
		out, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := final(string(out), c.field); err != nil || got != c.want {
			t.Errorf("%s field %d: %v, %v; want %v", c.file, c.field, got, err, c.want)
		}
	}
	for _, bad := range []string{"[1796666774.203945] UCX  ERROR missing test name\n", "Final: 12 x\n"} {
		if v, err := final(bad, 2); err == nil {
			t.Errorf("final(%q) = %v, want an error", bad, v)
		}
	}
	if _, err := final("Final:                  2000     52.827\n", 5); err == nil {
		t.Error("final found field 5 on a line of two")
	}
}

// TestVerdict: the ratio is the median of the rounds' ratios (each
// round's two runs side by side), worked out by hand, judged in the
// pair's direction at the target's edge; a pair without a target is
// shown only.
func TestVerdict(t *testing.T) {
	lat, bw, shown := pairs[0], pairs[1], pairs[3]
	for _, c := range []struct {
		p           pair
		goroce, tcp []float64
		ratio       float64
		met         string
	}{
		{lat, []float64{20, 10, 100}, []float64{10, 10, 10}, 2, "yes"},    // ratios 2 1 10
		{lat, []float64{20.2, 10, 100}, []float64{10, 4, 10}, 2.5, "no"},  // ratios 2.02 2.5 10
		{bw, []float64{100, 50, 300}, []float64{100, 100, 100}, 1, "yes"}, // ratios 1 0.5 3
		{bw, []float64{99, 50, 300}, []float64{100, 100, 100}, 0.99, "no"},
		{shown, []float64{1, 2, 3}, []float64{2, 2, 2}, 1, "-"},
	} {
		ratio, met := verdict(c.p, pairrun.Sides{A: c.goroce, B: c.tcp})
		if ratio != c.ratio || met != c.met {
			t.Errorf("%s %v / %v: %v %s, want %v %s", c.p.name, c.goroce, c.tcp, ratio, met, c.ratio, c.met)
		}
	}
}

// TestCompareTiny runs the whole command for one round with few
// iterations: every pair on both sides (ucx_perftest over goroce and over
// tcp, mpi_allreduce over UCX on goroce and over Open MPI's TCP BTL, its
// sums checked by the program), and the table with a verdict per pair.
func TestCompareTiny(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "builds goroce, the verbs libraries and mpi_allreduce, and starts processes")
	}
	for _, tool := range []struct{ bin, pkg string }{{"ucx_perftest", "ucx-utils"}, {"mpirun", "openmpi-bin"}, {"mpicc", "libopenmpi-dev"}, {"gcc", "gcc"}} {
		testenv.LookPath(t, tool.bin, tool.pkg)
	}
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"-rounds", "1", "-n", "200", "-src", "../../..",
		"-server", "127.140.4.1", "-client", "127.140.4.2", "-addr-base", "127.140.4.10"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	for _, p := range pairs {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(p.name) + `\s+` + regexp.QuoteMeta(p.unit) + `\s+[0-9.]+ / `).MatchString(stdout.String()) {
			t.Errorf("the table has no row for %s", p.name)
		}
		for _, side := range []string{"goroce", "tcp"} {
			if !regexp.MustCompile(`(?m)^round 1  ` + regexp.QuoteMeta(p.name) + `\s+` + side + `\s+[0-9.]+ `).MatchString(stdout.String()) {
				t.Errorf("round 1 has no %s figure of %s", side, p.name)
			}
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", &stdout)
	}
}
