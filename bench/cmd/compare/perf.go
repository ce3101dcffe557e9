package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// runPerf runs `goroce perf TEST ARGS` as a server on 127.0.0.1 and a
// client on 127.0.0.2 and returns the client's output. The server picks
// its TCP port (-p 0) and says which on stderr.
func runPerf(bin, test string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srvArgs := append([]string{"perf", test, "--addr", "127.0.0.1", "-p", "0"}, args...)
	srv := pinned(ctx, 1, bin, srvArgs...)
	stderr, err := srv.StderrPipe()
	if err != nil {
		return "", err
	}
	var srvOut bytes.Buffer
	srv.Stdout = &srvOut
	if err := srv.Start(); err != nil {
		return "", err
	}
	defer srv.Wait()
	defer cancel()
	port := ""
	sc := bufio.NewScanner(stderr)
	for port == "" && sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), "listening on port "); ok {
			port = strings.TrimSpace(after)
		}
	}
	if port == "" {
		return "", errors.New("the perf server did not say which port it listens on")
	}
	go func() { // keep draining the server's stderr
		for sc.Scan() {
		}
	}()
	cliArgs := append([]string{"perf", test, "--addr", "127.0.0.2", "-p", port}, args...)
	cliArgs = append(cliArgs, "127.0.0.1")
	out, err := pinned(ctx, 0, bin, cliArgs...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("goroce %s: %v\n%s", strings.Join(cliArgs, " "), err, out)
	}
	return string(out), nil
}

// pinned is the command bin args, run on CPU cpu alone where the machine
// has two CPUs or more and taskset(1) is installed, as the UDP ping-pong
// ceiling pins its two threads: the perf server on one CPU, the client on
// another, rather than both wherever the scheduler puts them. Go sizes
// GOMAXPROCS to the one CPU it is given.
func pinned(ctx context.Context, cpu int, bin string, args ...string) *exec.Cmd {
	if ts, err := exec.LookPath("taskset"); err == nil && runtime.NumCPU() >= 2 {
		return exec.CommandContext(ctx, ts, append([]string{"-c", strconv.Itoa(cpu), bin}, args...)...)
	}
	return exec.CommandContext(ctx, bin, args...)
}

// dataLine returns the fields of the first line after the column header
// that starts with " #bytes".
func dataLine(out string) ([]float64, error) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "#bytes") && i+1 < len(lines) {
			var v []float64
			for _, f := range strings.Fields(lines[i+1]) {
				x, err := strconv.ParseFloat(f, 64)
				if err != nil {
					return nil, fmt.Errorf("data line %q: %v", lines[i+1], err)
				}
				v = append(v, x)
			}
			return v, nil
		}
	}
	return nil, errors.New("no #bytes header in the output")
}

// postList is the bandwidth cases' --post_list: the client posts its WRs
// in lists of 32, a quarter of its window, which the device sends
// together (many messages per system call), as an application
// that posts a batch of WRs at once would.
const postList = "32"

// iters picks an iteration count that moves about 256 MiB.
func iters(size int) int { return min(max((256<<20)/size, 256), 50000) }

// perfBW returns BW average in GB/s (perftest's MB/sec is MiB/s).
func perfBW(bin, test string, size int, extra ...string) (float64, error) {
	out, err := runPerf(bin, test, append([]string{"-s", strconv.Itoa(size), "-n", strconv.Itoa(iters(size)), "-l", postList}, extra...)...)
	if err != nil {
		return 0, err
	}
	return parseBW(out)
}

// perfBWQPs returns BW average in GB/s of write_bw over qps QPs, each
// moving its share of what perfBW's one QP moves (at least 8 messages), in
// the same lists of postList WRs.
func perfBWQPs(bin string, size, qps int) (float64, error) {
	n := max(iters(size)/qps, 8)
	out, err := runPerf(bin, "write_bw", "-s", strconv.Itoa(size), "-n", strconv.Itoa(n), "-l", postList, "-q", strconv.Itoa(qps))
	if err != nil {
		return 0, err
	}
	return parseBW(out)
}

func parseBW(out string) (float64, error) {
	v, err := dataLine(out)
	if err != nil {
		return 0, err
	}
	if len(v) < 5 {
		return 0, fmt.Errorf("bandwidth line has %d fields, want 5", len(v))
	}
	return v[3] * (1 << 20) / 1e9, nil
}

// perfRate returns the message rate of write_bw at size bytes, its WRs
// posted list WRs at a time (--post_list), in Mpps.
func perfRate(bin string, size int, list string, extra ...string) (float64, error) {
	out, err := runPerf(bin, "write_bw", append([]string{"-s", strconv.Itoa(size), "-n", "100000", "-l", list}, extra...)...)
	if err != nil {
		return 0, err
	}
	v, err := dataLine(out)
	if err != nil {
		return 0, err
	}
	if len(v) < 5 {
		return 0, fmt.Errorf("bandwidth line has %d fields, want 5", len(v))
	}
	return v[4], nil
}

// perfBW, perfRate and perfRTT pass extra to both sides (--link shm).

// perfRTT returns the median round trip of an 8-byte latency test in µs,
// or with p99 its 99th percentile: twice perftest's t_typical or 99%
// percentile, which measure half round trips.
func perfRTT(bin, test string, p99 bool, extra ...string) (float64, error) {
	out, err := runPerf(bin, test, append([]string{"-s", "8", "-n", "5000"}, extra...)...)
	if err != nil {
		return 0, err
	}
	return parseRTT(out, p99)
}

func parseRTT(out string, p99 bool) (float64, error) {
	v, err := dataLine(out)
	if err != nil {
		return 0, err
	}
	if len(v) < 9 {
		return 0, fmt.Errorf("latency line has %d fields, want 9", len(v))
	}
	if p99 {
		return 2 * v[7], nil
	}
	return 2 * v[4], nil
}
