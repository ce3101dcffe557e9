// Command compare measures goroce against what this machine's loopback
// allows, in one run, and prints each goroce figure as a ratio to its
// ceiling:
//
//	go run ./bench/cmd/compare              # the full table, 3 interleaved repeats
//	go run ./bench/cmd/compare -quick       # fewer cases, 1 repeat
//
// goroce's figures come from `goroce perf` (built from this tree) run as two
// processes on 127.0.0.1 and 127.0.0.2, exactly as a user runs it (the
// bandwidth cases with --post_list 32; the 64 B message rate also with
// one WR per post, perftest's default, as a ratio to the lists'). The
// ceilings are plain Go UDP between two sockets on loopback
// (bench/udpceiling): batched sendmmsg/recvmmsg of 4096-byte datagrams, UDP
// GSO/GRO, 64-byte packet rate, and a ping-pong between two processes,
// blocking and busy-polling (median round trip, and with the full table
// the 99th percentile beside send_lat's and write_lat's); iperf3 (single
// TCP stream) if it is installed.
// goroce perf --link shm adds the same cases over the shared-memory wire
// (rnic/shmlink). write_bw of 64 KiB over 1,000 QPs (-q 1000, the same
// bytes in all) is shown as a ratio to one QP's. Each case runs once per repeat, the repeats interleaved,
// and the table shows min/median/max; ratios use medians. A last table
// gives every speed target with its ratio and whether it is met. Absolute numbers on shared
// machines swing 2-5x between runs; ratios from one run are what to compare.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	repeats := flag.Int("repeats", 3, "interleaved repeats of every case")
	quick := flag.Bool("quick", false, "a short run: the issue's headline cases only")
	goroce := flag.String("goroce", "", "goroce binary to use (default: build ./cmd/goroce)")
	echo := flag.Int("udp-echo", -1, "internal: be the echo side of a UDP ping-pong in this mode")
	flag.Parse()
	if *echo >= 0 {
		os.Exit(runEcho(*echo))
	}
	if *quick && !isFlagSet("repeats") {
		*repeats = 1
	}
	bin := *goroce
	if bin == "" {
		dir, err := os.MkdirTemp("", "goroce-compare")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "goroce")
		fmt.Fprintln(os.Stderr, "compare: building ./cmd/goroce")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/goroce").CombinedOutput(); err != nil {
			fatal(fmt.Errorf("go build ./cmd/goroce: %v\n%s", err, out))
		}
	}
	cases := allCases(bin, *quick)
	results := make(map[string][]float64)
	for r := 0; r < *repeats; r++ {
		for _, c := range cases {
			fmt.Fprintf(os.Stderr, "compare: repeat %d/%d: %s\n", r+1, *repeats, c.name)
			v, err := c.run()
			if err != nil {
				fmt.Fprintf(os.Stderr, "compare: %s: %v\n", c.name, err)
				continue
			}
			results[c.name] = append(results[c.name], v)
		}
	}
	printTable(os.Stdout, cases, results, *repeats)
	printTargets(os.Stdout, results)
}

// A measurement: name, unit, how to run it once, and the ceiling it is
// compared with (another case's name), if any.
type measurement struct {
	name    string
	unit    string
	run     func() (float64, error)
	ceiling []string // names of cases this one is a ratio of
	lower   bool     // lower is better (latency): the ratio is ceiling/this... shown as this/ceiling
}

// median returns the median of name's results, false if it has none.
func median(results map[string][]float64, name string) (float64, bool) {
	v := results[name]
	if len(v) == 0 {
		return 0, false
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2], true
}

// printTargets prints each of the speed targets with the ratio of the
// medians and whether it is met, or why it could not be judged.
func printTargets(w io.Writer, results map[string][]float64) {
	fmt.Fprintf(w, "\nissue 24 targets (ratios of medians)\n")
	for _, t := range targets {
		op := ">="
		if t.atMost {
			op = "<="
		}
		label := fmt.Sprintf("%s %s %.2fx %s", t.name, op, t.factor, t.ceiling)
		g, okG := median(results, t.name)
		c, okC := median(results, t.ceiling)
		if !okG || !okC || c <= 0 {
			fmt.Fprintf(w, "  %-62s not measured (the full table, without -quick, has every case)\n", label)
			continue
		}
		r := g / c
		verdict := "not met"
		if t.atMost && r <= t.factor || !t.atMost && r >= t.factor {
			verdict = "met"
		}
		fmt.Fprintf(w, "  %-62s %.2fx: %s\n", label, r, verdict)
	}
	fmt.Fprintf(w, "  %-62s see go test ./qp ./rnic/udplink ./rnic/shmlink -run Alloc\n", "0 allocations per packet")
}

func printTable(w io.Writer, cases []measurement, results map[string][]float64, repeats int) {
	med := func(name string) (float64, bool) { return median(results, name) }
	fmt.Fprintf(w, "\n%-34s %-8s %30s   %s\n", "case", "unit", fmt.Sprintf("min / median / max (n=%d)", repeats), "ratio to ceiling (medians)")
	for _, c := range cases {
		v := results[c.name]
		if len(v) == 0 {
			fmt.Fprintf(w, "%-34s %-8s %30s\n", c.name, c.unit, "failed or skipped")
			continue
		}
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		cell := fmt.Sprintf("%s / %s / %s", num(s[0]), num(s[len(s)/2]), num(s[len(s)-1]))
		var ratios []string
		for _, ceil := range c.ceiling {
			if cm, ok := med(ceil); ok && cm > 0 {
				ratios = append(ratios, fmt.Sprintf("%.2fx %s", s[len(s)/2]/cm, ceil))
			}
		}
		fmt.Fprintf(w, "%-34s %-8s %30s   %s\n", c.name, c.unit, cell, strings.Join(ratios, ", "))
	}
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(1)
}
