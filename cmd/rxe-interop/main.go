package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFail    = 1
	exitUsage   = 2
	exitSkipped = 77 // every case skipped: the lab cannot run here
)

// defaultLabs are where the rxe lab may live, in order: the shared/ folder
// beside the repository (how CI lays it out), then the project machines'.
var defaultLabs = []string{"../shared/rxe-lab/rxe-lab", "/work/shared/rxe-lab/rxe-lab"}

// findLab returns the first lab script that exists, or the first candidate.
func findLab() string {
	for _, p := range defaultLabs {
		if abs, err := filepath.Abs(p); err == nil {
			if _, err := os.Stat(abs); err == nil {
				return abs
			}
		}
	}
	return defaultLabs[0]
}

// config is what the command line asked for.
type config struct {
	goroce      string // prebuilt binary; "" builds ./cmd/goroce
	lab         string
	out         string
	ns          string
	verbose     bool
	plan        plan
	caseTimeout time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "rxe-interop: %v\n", err)
		return exitUsage
	}
	start := time.Now()
	cases := matrix(cfg.plan)

	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		fmt.Fprintf(stderr, "rxe-interop: %v\n", err)
		return exitFail
	}
	progress := io.Discard
	if cfg.verbose {
		progress = stderr
	}
	labLog, err := os.Create(filepath.Join(cfg.out, "rxe-lab.log"))
	if err != nil {
		fmt.Fprintf(stderr, "rxe-interop: %v\n", err)
		return exitFail
	}
	defer labLog.Close()
	progress = io.MultiWriter(progress, labLog)

	var results []result
	report := func(r result) { printResult(stdout, r) }
	goroce, err := goroceBinary(ctx, cfg, stderr)
	switch {
	case err != nil:
		results = failAll(cases, err.Error())
		for _, r := range results {
			report(r)
		}
	case os.Geteuid() != 0:
		results = skipAll(cases, "not root: the lab needs network namespaces and tap devices")
		for _, r := range results {
			report(r)
		}
	default:
		if _, err := os.Stat(cfg.lab); err != nil {
			results = skipAll(cases, "no rxe lab: "+err.Error())
			for _, r := range results {
				report(r)
			}
			break
		}
		guestTimeout := time.Minute
		for _, c := range cases {
			guestTimeout += c.timeout(cfg.caseTimeout) + 15*time.Second
		}
		s := &suite{
			lab:    newLab(cfg.lab, cfg.ns, guestTimeout, cfg.caseTimeout, progress),
			goroce: goroce, out: cfg.out, caseTimeout: cfg.caseTimeout, report: report,
		}
		results = s.run(ctx, cases)
		s.lab.run(context.Background(), "down") // the suite's own namespace; nothing runs in it now
	}

	n := map[verdict]int{}
	for _, r := range results {
		n[r.verdict]++
	}
	fmt.Fprintf(stdout, "summary: interop passed=%d failed=%d skipped=%d\n", n[pass], n[fail], n[skip])
	fmt.Fprintf(stderr, "rxe-interop: %d cases in %.0f s; logs and captures in %s\n",
		len(results), time.Since(start).Seconds(), cfg.out)
	switch {
	case n[fail] > 0 || ctx.Err() != nil:
		return exitFail
	case n[skip] == len(results) && len(results) > 0:
		return exitSkipped
	}
	return exitOK
}

// goroceBinary returns the goroce binary to test: -goroce, or a fresh
// build of ./cmd/goroce (run from the module root) into the out directory.
func goroceBinary(ctx context.Context, cfg config, stderr io.Writer) (string, error) {
	if cfg.goroce != "" {
		return filepath.Abs(cfg.goroce)
	}
	bin := filepath.Join(cfg.out, "goroce")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/goroce")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building ./cmd/goroce (run from the module root, or pass -goroce): %w", err)
	}
	return bin, nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("rxe-interop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rxe-interop [flags]   (as root, from the module root)")
		fmt.Fprintln(stderr, "Runs goroce pingpong, perf and rping against rxe's ibv_rc/uc/ud_pingpong, perftest and rping in the rxe lab; see the package doc.")
		fs.PrintDefaults()
	}
	labDir := os.Getenv("RXE_LAB_DIR")
	if labDir == "" {
		labDir = "/var/tmp/rxe-lab"
	}
	lab := os.Getenv("RXE_LAB")
	if lab == "" {
		lab = findLab()
	}
	var cfg config
	var transports, perfs, preload, rdmacm, own, ucx, roles, families, mtus string
	fs.StringVar(&cfg.goroce, "goroce", "", "goroce `binary` to test (default: go build ./cmd/goroce)")
	fs.StringVar(&cfg.lab, "lab", lab, "the rxe-lab `script` (env RXE_LAB)")
	fs.StringVar(&cfg.out, "out", filepath.Join(labDir, "interop", time.Now().Format("20060102T150405")),
		"`directory` for the serial log, goroce's output and one pcap per case")
	fs.StringVar(&cfg.ns, "ns", "rxe-interop", "network `namespace` for the lab (RXE_LAB_NS), apart from other users of the lab")
	fs.BoolVar(&cfg.verbose, "v", false, "show the lab's progress lines")
	fs.StringVar(&transports, "transports", "rc,uc,ud", "`list` of ping-pong transports: rc, uc, ud, or none")
	fs.StringVar(&perfs, "perftests", strings.Join(perftests, ","), "`list` of perftest programs (ib_TEST), or none")
	preloadDefault := append(slices.Clone(preloadPingpongs), perftests...)
	for _, t := range preloadEvents {
		preloadDefault = append(preloadDefault, t+eventSuffix)
	}
	fs.StringVar(&preload, "preload", strings.Join(preloadDefault, ","),
		"`list` of programs run preloaded on goroce (goroce exec) against the same on rxe: ping-pongs rc, uc, ud, srq and perftest programs, "+
			"and in event mode (-e on both sides) "+strings.Join(preloadEvents, eventSuffix+", ")+eventSuffix+"; or none")
	fs.StringVar(&rdmacm, "rdmacm", strings.Join(slices.Concat(rdmacmPrograms, rdmacmPreloaded), ","),
		"`list` of librdmacm examples: rping against goroce's own; "+strings.Join(rdmacmPreloaded, ", ")+
			" run preloaded on goroce (goroce exec) against the same on rxe, at MTU 1024 only; or none")
	fs.StringVar(&own, "own", strings.Join(ownPrograms, ","),
		"`list` of goroce's own programs (cmd/goroce-verbs/testdata) run preloaded on goroce against the same on rxe, at MTU 1024 only: "+
			strings.Join(ownPrograms, ", ")+"; or none")
	fs.StringVar(&ucx, "ucx", strings.Join(ucxPrograms, ","),
		"`list` of ucx_perftest UCT tests over rc_verbs run preloaded on goroce against the same on rxe, at MTU 1024 only: "+
			strings.Join(ucxPrograms, ", ")+"; or none")
	fs.StringVar(&roles, "roles", "server,client", "`list` of rxe's roles: server, client")
	fs.StringVar(&families, "families", "ipv4,ipv6", "`list` of address families: ipv4, ipv6")
	fs.StringVar(&mtus, "mtus", "1024,4096", "`list` of path MTUs: 1024, 4096")
	fs.IntVar(&cfg.plan.iters, "iters", 5, "exchanges per ping-pong case (`n`)")
	fs.IntVar(&cfg.plan.perfIters, "perf-iters", 20, "operations per perftest case (`n`, -n)")
	fs.DurationVar(&cfg.caseTimeout, "case-timeout", 10*time.Second, "longest rxe's side of one case may take (`duration`)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	p := &cfg.plan
	if transports != "none" {
		if p.transports, err = parseList(transports, "-transports", func(s string) (string, bool) {
			return s, s == "rc" || s == "uc" || s == "ud"
		}); err != nil {
			return cfg, err
		}
	}
	if perfs != "none" {
		if p.perftests, err = parseList(perfs, "-perftests", func(s string) (string, bool) {
			s = strings.TrimPrefix(s, "ib_")
			return s, slices.Contains(perftests, s)
		}); err != nil {
			return cfg, err
		}
	}
	if preload != "none" {
		var progs []string
		if progs, err = parseList(preload, "-preload", func(s string) (string, bool) {
			s = strings.TrimPrefix(s, "ib_")
			if t, ok := strings.CutSuffix(s, eventSuffix); ok {
				return s, slices.Contains(preloadEvents, t)
			}
			return s, slices.Contains(preloadPingpongs, s) || slices.Contains(perftests, s)
		}); err != nil {
			return cfg, err
		}
		for _, s := range progs {
			if t, ok := strings.CutSuffix(s, eventSuffix); ok {
				p.preloadEvents = append(p.preloadEvents, t)
			} else if slices.Contains(preloadPingpongs, s) {
				p.preloadPingpongs = append(p.preloadPingpongs, s)
			} else {
				p.preloadPerftests = append(p.preloadPerftests, s)
			}
		}
	}
	if rdmacm != "none" {
		var progs []string
		if progs, err = parseList(rdmacm, "-rdmacm", func(s string) (string, bool) {
			return s, slices.Contains(rdmacmPrograms, s) || slices.Contains(rdmacmPreloaded, s)
		}); err != nil {
			return cfg, err
		}
		for _, s := range progs {
			if slices.Contains(rdmacmPrograms, s) {
				p.rdmacm = append(p.rdmacm, s)
			} else {
				p.rdmacmPreload = append(p.rdmacmPreload, s)
			}
		}
	}
	if own != "none" {
		if p.own, err = parseList(own, "-own", func(s string) (string, bool) {
			return s, slices.Contains(ownPrograms, s)
		}); err != nil {
			return cfg, err
		}
	}
	if ucx != "none" {
		if p.ucx, err = parseList(ucx, "-ucx", func(s string) (string, bool) { return s, isUCXItem(s) }); err != nil {
			return cfg, err
		}
	}
	if p.roles, err = parseList(roles, "-roles", func(s string) (role, bool) {
		return role(s), s == string(rxeServer) || s == string(rxeClient)
	}); err != nil {
		return cfg, err
	}
	if p.families, err = parseList(families, "-families", func(s string) (family, bool) {
		return family(s), s == string(ipv4) || s == string(ipv6)
	}); err != nil {
		return cfg, err
	}
	if p.mtus, err = parseList(mtus, "-mtus", func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && (n == 1024 || n == 4096)
	}); err != nil {
		return cfg, err
	}
	slices.Sort(p.mtus) // the guest only raises its MTU
	switch {
	case len(p.transports)+len(p.perftests)+len(p.preloadPingpongs)+len(p.preloadPerftests)+len(p.preloadEvents)+len(p.rdmacm)+len(p.rdmacmPreload)+len(p.own)+len(p.ucx) == 0:
		return cfg, fmt.Errorf("-transports none, -perftests none, -preload none, -rdmacm none, -own none and -ucx none: nothing to run")
	case p.iters < 1:
		return cfg, fmt.Errorf("-iters %d: want at least 1", p.iters)
	case p.perfIters < 5:
		return cfg, fmt.Errorf("-perf-iters %d: want at least 5 (perftest's latency tests drop two samples)", p.perfIters)
	case cfg.caseTimeout < 5*time.Second:
		return cfg, fmt.Errorf("-case-timeout %v: want at least 5s (a TCG guest is slow to start a program)", cfg.caseTimeout)
	}
	return cfg, nil
}

// parseList splits a comma-separated flag value and checks each item.
func parseList[T comparable](s, flagName string, item func(string) (T, bool)) ([]T, error) {
	var out []T
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		v, ok := item(f)
		if !ok {
			return nil, fmt.Errorf("%s: unknown item %q", flagName, f)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", flagName)
	}
	return out, nil
}
