package perf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// runPerfPair runs `goroce perf` as a server and a client in two
// goroutines with the same flags and returns their outputs.
func runPerfPair(t *testing.T, test string, flags ...string) (srvOut, cliOut string) {
	t.Helper()
	return runPerfPairWith(t, test, flags, flags)
}

// runPerfPairWith is runPerfPair with flags of each side's own.
func runPerfPairWith(t *testing.T, test string, srvFlags, cliFlags []string) (srvOut, cliOut string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	srvAddr, cliAddr := clitest.LoopbackPair()
	var srv, client bytes.Buffer
	srvErr := clitest.NewPortWriter()
	srvCode := make(chan int, 1)
	go func() {
		srvCode <- run(ctx, append([]string{"perf", test, "--addr", srvAddr, "-p", "0"}, srvFlags...), &srv, srvErr)
	}()
	var port int
	select {
	case port = <-srvErr.Port:
	case code := <-srvCode:
		t.Fatalf("server exited %d before listening: %s", code, srvErr)
	}
	var cliErr bytes.Buffer
	// HOST before the flags, as getopt allows.
	code := run(ctx, append([]string{"perf", test, srvAddr, "--addr", cliAddr, "-p", strconv.Itoa(port)}, cliFlags...), &client, &cliErr)
	if code != cli.ExitOK {
		t.Errorf("client exit %d: %s", code, cliErr.String())
	}
	if code := <-srvCode; code != cli.ExitOK {
		t.Errorf("server exit %d: %s", code, srvErr)
	}
	return srv.String(), client.String()
}

// reportRows returns the numeric rows under header in out, each as its
// fields parsed as numbers, and fails the test if a field is not one.
func reportRows(t *testing.T, who, out, header string) [][]float64 {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if l != header {
			continue
		}
		var rows [][]float64
		for _, row := range lines[i+1:] {
			if strings.HasPrefix(row, "---") || row == "" {
				return rows
			}
			var nums []float64
			for _, f := range strings.Fields(row) {
				x, err := strconv.ParseFloat(f, 64)
				if err != nil {
					t.Fatalf("%s: field %q of %q is not a number", who, f, row)
				}
				nums = append(nums, x)
			}
			rows = append(rows, nums)
		}
		return rows
	}
	t.Fatalf("%s output has no header %q:\n%s", who, header, out)
	return nil
}

// checkBW checks one bandwidth row: size, iterations, and positive
// rates (the peak may be 0.00 where perftest does not measure it).
func checkBW(t *testing.T, who string, row []float64, size, iters int, peak bool) {
	t.Helper()
	checkBWUnit(t, who, row, size, iters, peak, 0x100000)
}

// checkBWUnit is checkBW for rates in bytes per second over unit (perftest's
// MB, a MiB, or 125e6 for Gb/sec). The message rate must be positive and the
// average agree with it (avg = rate × size), to the digits printed: a slow
// run on a loaded machine prints an average of 0.00 for a few small
// messages, which the clock decides, not the code.
func checkBWUnit(t *testing.T, who string, row []float64, size, iters int, peak bool, unit float64) {
	t.Helper()
	if len(row) != 5 || row[0] != float64(size) || row[1] != float64(iters) {
		t.Errorf("%s row %v, want %d bytes, %d iterations and 3 rates", who, row, size, iters)
		return
	}
	fromRate := row[4] * 1e6 * float64(size) / unit
	slack := 0.005 + 5e-7*1e6*float64(size)/unit + fromRate*1e-6 // the printed digits
	if row[4] <= 0 || row[3] < 0 || math.Abs(row[3]-fromRate) > slack+fromRate*0.01 || (peak && (row[2] < 0 || row[2] < row[3]*0.5)) {
		t.Errorf("%s row %v, want %d bytes, %d iterations, a positive message rate and an average of about %.4f (rate × size)",
			who, row, size, iters, fromRate)
	}
}

// checkLat checks one latency row: size, iterations, and ordered
// positive statistics.
func checkLat(t *testing.T, who string, row []float64, size, iters int) {
	t.Helper()
	if len(row) != 9 || row[0] != float64(size) || row[1] != float64(iters) {
		t.Fatalf("%s row %v, want %d bytes, %d iterations and 7 statistics", who, row, size, iters)
	}
	min, max, typ, avg, p99, p999 := row[2], row[3], row[4], row[5], row[7], row[8]
	if min <= 0 || typ < min || max < typ || avg < min || avg > max || p99 < typ || p999 < p99 || p999 > max || row[6] < 0 {
		t.Errorf("%s statistics out of order: %v", who, row)
	}
}

func TestPerfBandwidth(t *testing.T) {
	for _, tc := range []struct {
		test       string
		size       int
		serverRows bool
	}{
		{"send_bw", 4096, true},
		{"write_bw", 4096, false},
		{"read_bw", 4096, false},
		{"atomic_bw", 8, false},
	} {
		t.Run(tc.test, func(t *testing.T) {
			srv, cli := runPerfPair(t, tc.test, "-n", "200", "-s", strconv.Itoa(tc.size))
			rows := reportRows(t, "client", cli, bwHeaderMB)
			if len(rows) != 1 {
				t.Fatalf("client rows %v:\n%s", rows, cli)
			}
			checkBW(t, "client", rows[0], tc.size, 200, true)
			if tc.serverRows {
				rows := reportRows(t, "server", srv, bwHeaderMB)
				if len(rows) != 1 || rows[0][2] != 0 {
					t.Fatalf("server rows %v (want one, peak not measured):\n%s", rows, srv)
				}
				checkBW(t, "server", rows[0], tc.size, 200, false)
			} else if strings.Contains(srv, "#bytes") {
				t.Errorf("passive server printed results:\n%s", srv)
			}
		})
	}
}

func TestPerfLatency(t *testing.T) {
	for _, tc := range []struct {
		test    string
		bothMea bool // the server measures too
	}{{"send_lat", true}, {"write_lat", true}, {"read_lat", false}} {
		t.Run(tc.test, func(t *testing.T) {
			srv, cli := runPerfPair(t, tc.test, "-n", "200", "-s", "8")
			rows := reportRows(t, "client", cli, latHeader)
			if len(rows) != 1 {
				t.Fatalf("client rows %v:\n%s", rows, cli)
			}
			checkLat(t, "client", rows[0], 8, 200)
			if tc.bothMea {
				rows := reportRows(t, "server", srv, latHeader)
				if len(rows) != 1 {
					t.Fatalf("server rows %v:\n%s", rows, srv)
				}
				checkLat(t, "server", rows[0], 8, 200)
			}
		})
	}
}

// TestPerfOptions: several QPs with a small tx-depth and Gb/s, and a
// timed latency run.
func TestPerfOptions(t *testing.T) {
	t.Run("send_bw -q 3 -t 8 --report_gbits", func(t *testing.T) {
		srv, cli := runPerfPair(t, "send_bw", "-n", "100", "-s", "1000", "-q", "3", "-t", "8", "--report_gbits", "-F", "-x", "3", "-d", "rxe0")
		checkBWUnit(t, "client", reportRows(t, "client", cli, bwHeaderGb)[0], 1000, 100, true, 125e6)
		checkBWUnit(t, "server", reportRows(t, "server", srv, bwHeaderGb)[0], 1000, 100, false, 125e6)
		if n := strings.Count(cli, " local address:  qp "); n != 3 {
			t.Errorf("client shows %d local QPs, want 3", n)
		}
	})
	t.Run("send_lat -D 1", func(t *testing.T) {
		srv, cli := runPerfPair(t, "send_lat", "-D", "1", "-s", "8")
		c, s := reportRows(t, "client", cli, latHeaderD), reportRows(t, "server", srv, latHeaderD)
		if len(c) != 1 || len(s) != 1 || c[0][1] < 10 || c[0][1] != s[0][1] || c[0][2] <= 0 || c[0][3] <= 0 {
			t.Errorf("client rows %v, server rows %v", c, s)
		}
	})
}

// TestPerfProcesses builds goroce and runs write_bw as two processes.
func TestPerfProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := clitest.BuildGoroce(t)
	// A guard against a hang, not a verdict: 128 MiB between two processes
	// take about a second idle and ten times that on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// -u 18: the QPs retry for about 8.6 s (1.07 s × 8), not 0.5 s, so a
	// process a loaded machine leaves unscheduled for a while is not taken
	// for dead (its peer's QP ran out of retries in 2 of 3 runs under load).
	_, cliOut := clitest.RunTwoProcesses(t, ctx, bin, []string{"perf", "write_bw"}, []string{"-s", "65536", "-n", "2000", "-u", "18"})
	rows := reportRows(t, "client", cliOut, bwHeaderMB)
	if len(rows) != 1 {
		t.Fatalf("client rows %v", rows)
	}
	checkBW(t, "client", rows[0], 65536, 2000, true)

	// With --trace, each process's lines say whose they are.
	p := clitest.RunTwoProcessesAll(t, ctx, bin, []string{"perf", "send_lat"}, []string{"-n", "5", "-s", "8", "--trace"})
	clitest.CheckTraceTagged(t, "server", p.SrvErr, "[server "+p.SrvAddr+"]")
	clitest.CheckTraceTagged(t, "client", p.CliErr, "[client "+p.CliAddr+"]")
}

func TestPerfBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "name a TEST"},
		{[]string{"bogus_bw"}, `unknown TEST "bogus_bw"`},
		{[]string{"write_bw", "-m", "1000"}, "want 256, 512"},
		{[]string{"write_bw", "--addr", "nowhere"}, "not an IP address"},
		{[]string{"write_bw", "-s", "0"}, "-s 0"},
		{[]string{"write_bw", "-s", "16777216"}, "-s 16777216"},
		{[]string{"write_lat", "-n", "4"}, "-n 4"},
		{[]string{"atomic_bw", "-s", "16"}, "atomics are 8 bytes"},
		{[]string{"atomic_bw", "-a"}, "atomics are always 8 bytes"},
		{[]string{"send_bw", "-D", "1", "-a"}, "-D and -a"},
		{[]string{"send_lat", "-q", "2"}, "latency tests use one QP"},
		{[]string{"write_bw", "-t", "0"}, "-t 0"},
		{[]string{"write_bw", "-u", "0"}, "-u 0: want 1..31"},
		{[]string{"write_bw", "-u", "32"}, "-u 32: want 1..31"},
		{[]string{"write_bw", "-p", "0", "127.0.0.1"}, "0 only for the server"},
		{[]string{"write_bw", "a", "b"}, "one HOST at most"},
		{[]string{"write_bw", "--bogus"}, "flag provided but not defined"},
	} {
		code, out, errOut := clitest.Goroce(t, run, append([]string{"perf"}, tc.args...)...)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want %q)", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestPerfMismatchedFlags: a client and a server that disagree fail with
// a message naming both parameter lines instead of hanging.
func TestPerfMismatchedFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	srvAddr, cliAddr := clitest.LoopbackPair()
	srvErr := clitest.NewPortWriter()
	srvCode := make(chan int, 1)
	go func() {
		srvCode <- run(ctx, []string{"perf", "write_bw", "--addr", srvAddr, "-p", "0", "-n", "100"}, io.Discard, srvErr)
	}()
	port := <-srvErr.Port
	var cliErr bytes.Buffer
	code := run(ctx, []string{"perf", "write_bw", srvAddr, "--addr", cliAddr, "-p", strconv.Itoa(port), "-n", "200"}, io.Discard, &cliErr)
	if code != cli.ExitFail || !strings.Contains(cliErr.String(), "iters=100") || !strings.Contains(cliErr.String(), "iters=200") {
		t.Errorf("client exit %d: %s", code, cliErr.String())
	}
	if code := <-srvCode; code != cli.ExitFail || !strings.Contains(srvErr.String(), "give both sides the same") {
		t.Errorf("server exit %d: %s", code, srvErr)
	}
}

func TestPerfDestLine(t *testing.T) {
	d := perfDest{qpn: 0x12, psn: 0xABCDEF, gid: netip.MustParseAddr("::ffff:127.0.0.1"), rkey: 0xDEADBEEF,
		addr: 0x7F0012345000, size: 65536}
	line := d.line(2)
	if want := "qp 2 qpn=0x000012 psn=0xabcdef gid=::ffff:127.0.0.1 rkey=0xdeadbeef addr=0x00007f0012345000 size=65536"; line != want {
		t.Fatalf("line %q, want %q", line, want)
	}
	got, err := parsePerfDest(line, 2)
	if err != nil || got != d {
		t.Fatalf("parse: %+v %v, want %+v", got, err, d)
	}
	v4, err := parsePerfDest("qp 0 qpn=0x1 psn=0x2 gid=10.0.0.1 rkey=0x3 addr=0x4 size=5", 0)
	if err != nil || v4.gid != netip.MustParseAddr("::ffff:10.0.0.1") {
		t.Errorf("IPv4 GID: %+v %v", v4, err)
	}
	for _, bad := range []string{"", "done", line, "qp 2 qpn=0x1000000 psn=0x0 gid=::1 rkey=0x0 addr=0x0 size=1",
		"qp 2 qpn=0x1 psn=0x0 gid=nowhere rkey=0x0 addr=0x0 size=1", "qp 2 psn=0x1 qpn=0x0 gid=::1 rkey=0x0 addr=0x0 size=1",
		"qp 2 qpn=0x1 psn=0x0 gid=::1 rkey=0x0 addr=0x0 size=-1"} {
		if _, err := parsePerfDest(bad, 3); !errors.Is(err, errBadPerfLine) {
			t.Errorf("parsePerfDest(%q) = %v, want errBadPerfLine", bad, err)
		}
	}
	if c, err := parseDone(doneLine([]int{5, 7}), 2); err != nil || len(c) != 2 || c[0] != 5 || c[1] != 7 {
		t.Errorf("done round trip: %v %v", c, err)
	}
	for _, bad := range []string{"done 5", "done 5 x", "fini 5 7", "done 5 -1"} {
		if _, err := parseDone(bad, 2); !errors.Is(err, errBadPerfLine) {
			t.Errorf("parseDone(%q) = %v", bad, err)
		}
	}
}

func TestPerfLatencyStats(t *testing.T) {
	// Iterations 2, 4, ..., 24 µs apart: the ping-pong factor halves the
	// gaps to samples 1..12 µs; perftest drops the two largest, leaving
	// 1..10 for the mean and deviation, and indexes max and percentiles
	// one past them.
	starts := []time.Duration{0}
	for g := 1; g <= 12; g++ {
		starts = append(starts, starts[g-1]+time.Duration(2*g)*time.Microsecond)
	}
	got := latencyStats(starts, 2)
	want := latStats{min: 1, max: 11, typical: 5.5, avg: 5.5, stdev: 2.8722813232690143, p99: 11, p999: 11}
	if math.Abs(got.stdev-want.stdev) > 1e-9 {
		t.Errorf("stdev %v, want %v", got.stdev, want.stdev)
	}
	got.stdev = want.stdev
	if got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	var buf bytes.Buffer
	reportLat(&buf, 8, 13, got)
	if want := " 8       13          1.00           11.00        5.50     \t       5.50        \t2.87   \t\t11.00   \t\t11.00  \n"; buf.String() != want {
		t.Errorf("latency line %q, want %q", buf.String(), want)
	}
}

func TestPerfBandwidthReport(t *testing.T) {
	// 4 operations of 1 MiB posted at 0, 1, 2, 3 ms; the first two
	// complete at 4 ms, the last two at 5 ms: the best run is all four in
	// 5 ms (1.25 ms each), better than any shorter one.
	t0 := time.Unix(0, 0)
	ms := time.Millisecond
	r := &bwRun{size: 1 << 20, iters: 4, ops: 4, start: t0, end: t0.Add(5 * ms),
		posted: []time.Duration{0, ms, 2 * ms, 3 * ms}, events: []bwEvent{{4 * ms, 2}, {5 * ms, 4}}}
	if p := r.peak(); p != 1250*time.Microsecond {
		t.Errorf("peak time per operation %v, want 1.25ms", p)
	}
	var buf bytes.Buffer
	r.report(&buf, false)
	if want := " 1048576    4                800.00             800.00 \t\t   0.000800\n"; buf.String() != want {
		t.Errorf("MB/s line %q, want %q", buf.String(), want)
	}
	buf.Reset()
	r.report(&buf, true)
	if want := " 1048576    4                6.71               6.71   \t\t   0.000800\n"; buf.String() != want {
		t.Errorf("Gb/s line %q, want %q", buf.String(), want)
	}
	r.posted, r.events = nil, nil
	buf.Reset()
	r.report(&buf, false)
	if !strings.HasPrefix(buf.String(), " 1048576    4                0.00  ") {
		t.Errorf("unmeasured peak: %q", buf.String())
	}
}
