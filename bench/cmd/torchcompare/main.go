// Command torchcompare measures torch.distributed's all_reduce of a
// float32 tensor on the "goroce" backend (cmd/goroce-nccl's Python
// package) against the "gloo" backend, in the same run: 2 and 4 ranks
// under goroce run, 8 B and 16 MiB, in rounds that alternate the two
// backends. It prints every measurement, then per rank count the median
// over the rounds and goroce's ratios to gloo against the backend's targets:
// at least 1.2 times gloo's bandwidth at 16 MiB, at most gloo's time at
// 8 B. Each measurement's line ends with the load average when its job
// began.
//
//	go run ./bench/cmd/torchcompare                  # -np 2,4 -rounds 3
//	go run ./bench/cmd/torchcompare -np 2 -rounds 1
//
// It builds libgoroce-nccl.so and goroce into a temporary directory (so run
// it from the repository), and needs a python3 with Debian's python3-torch
// (GOROCE_PYTHON, else python3 or /usr/bin/python3, the first that imports
// torch). Every rank runs with OMP_NUM_THREADS=1, as torchrun would set,
// for both backends. Absolute numbers on a shared machine swing between
// runs; compare the ratios of one run. Exit status 1: a run failed or
// summed wrong; 2: bad flags or no torch.
package main

import (
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

//go:embed allreduce.py
var allreducePy []byte

// size is one message size and its timed calls.
type size struct {
	bytes, iters int
}

var sizes = []size{{8, 2000}, {16 << 20, 20}}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("torchcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nps := fs.String("np", "2,4", "rank counts, comma-separated")
	rounds := fs.Int("rounds", 3, "rounds, each running both backends once per rank count")
	repo := fs.String("repo", ".", "the goroce repository")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var ranks []int
	for _, s := range strings.Split(*nps, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			fmt.Fprintf(stderr, "torchcompare: -np %q: want rank counts of 2 or more\n", *nps)
			return 2
		}
		ranks = append(ranks, n)
	}
	py, err := findPython()
	if err != nil {
		fmt.Fprintln(stderr, "torchcompare:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "torchcompare")
	if err != nil {
		fmt.Fprintln(stderr, "torchcompare:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := build(*repo, dir); err != nil {
		fmt.Fprintln(stderr, "torchcompare:", err)
		return 1
	}
	pkg, _ := filepath.Abs(filepath.Join(*repo, "cmd", "goroce-nccl", "python"))
	env := append(os.Environ(), "GOROCE_NCCL_LIB="+filepath.Join(dir, "libgoroce-nccl.so"), "PYTHONPATH="+pkg,
		"OMP_NUM_THREADS=1", "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")

	// us[np][backend][size] over the rounds.
	us := map[int]map[string]map[int][]float64{}
	backends := []string{"goroce", "gloo"}
	for round := 1; round <= *rounds; round++ {
		for _, np := range ranks {
			for i := range backends {
				b := backends[(i+round)%2] // alternate which goes first
				load := loadAverage()
				got, err := job(dir, py, env, np, b)
				if err != nil {
					fmt.Fprintf(stderr, "torchcompare: %d ranks, %s: %v\n", np, b, err)
					return 1
				}
				for _, s := range sizes {
					fmt.Fprintf(stdout, "round %d  np %d  %-6s  %9d B  %12.1f us  %8.3f GB/s busbw  load %s\n",
						round, np, b, s.bytes, got[s.bytes], busbw(s.bytes, np, got[s.bytes]), load)
					if us[np] == nil {
						us[np] = map[string]map[int][]float64{}
					}
					if us[np][b] == nil {
						us[np][b] = map[int][]float64{}
					}
					us[np][b][s.bytes] = append(us[np][b][s.bytes], got[s.bytes])
				}
			}
		}
	}
	fmt.Fprintf(stdout, "\nmedians of %d round(s): goroce / gloo\n", *rounds)
	for _, np := range ranks {
		small, big := sizes[0].bytes, sizes[len(sizes)-1].bytes
		tg, tl := median(us[np]["goroce"][small]), median(us[np]["gloo"][small])
		bg, bl := busbw(big, np, median(us[np]["goroce"][big])), busbw(big, np, median(us[np]["gloo"][big]))
		fmt.Fprintf(stdout, "np %d  %d B: goroce %.1f us, gloo %.1f us, time ratio %.2f (target <= 1: %s)\n",
			np, small, tg, tl, tg/tl, verdict(tg <= tl))
		fmt.Fprintf(stdout, "np %d  %d B: goroce %.3f GB/s, gloo %.3f GB/s busbw, ratio %.2f (target >= 1.2: %s)\n",
			np, big, bg, bl, bg/bl, verdict(bg >= 1.2*bl))
	}
	return 0
}

// loadAverage is the machine's load average over the last minute when a
// job starts (/proc/loadavg), or "?" where there is none: on a shared
// machine it says how far to trust the job's numbers.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// busbw is an allreduce's bus bandwidth in GB/s: the bytes each rank
// moves, 2(n-1)/n times the message, over the time of a call.
func busbw(bytes, n int, us float64) float64 {
	return float64(bytes) * 2 * float64(n-1) / float64(n) / (us * 1e-6) / 1e9
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// findPython returns a python3 that imports torch.
func findPython() (string, error) {
	candidates := []string{"python3", "/usr/bin/python3"}
	if p := os.Getenv("GOROCE_PYTHON"); p != "" {
		candidates = []string{p}
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil && exec.Command(p, "-c", "import torch").Run() == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no python3 (of %s) imports torch: apt-get install python3-torch, or set GOROCE_PYTHON",
		strings.Join(candidates, ", "))
}

// build puts libgoroce-nccl.so, goroce and the Python program in dir.
func build(repo, dir string) error {
	for _, args := range [][]string{
		{"build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libgoroce-nccl.so"), "./cmd/goroce-nccl"},
		{"build", "-o", filepath.Join(dir, "goroce"), "./cmd/goroce"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return os.WriteFile(filepath.Join(dir, "allreduce.py"), allreducePy, 0o644)
}

// job runs allreduce.py on np ranks with backend and returns rank 0's
// microseconds per call by message size.
func job(dir, py string, env []string, np int, backend string) (map[int]float64, error) {
	args := []string{"run", "-n", strconv.Itoa(np), "--addr-base", "127.78.27.10", py,
		filepath.Join(dir, "allreduce.py"), backend}
	for _, s := range sizes {
		args = append(args, fmt.Sprintf("%d:%d", s.bytes, s.iters))
	}
	cmd := exec.Command(filepath.Join(dir, "goroce"), args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%v\n%s", err, out)
	}
	got := map[int]float64{}
	for _, l := range strings.Split(string(out), "\n") {
		var rank, bytes, iters int
		var us float64
		if n, _ := fmt.Sscanf(l, "[%d] size %d iters %d us_per_call %g", &rank, &bytes, &iters, &us); n == 4 {
			got[bytes] = us
		}
	}
	for _, s := range sizes {
		if _, ok := got[s.bytes]; !ok {
			return nil, fmt.Errorf("no time for %d B in\n%s", s.bytes, out)
		}
	}
	return got, nil
}
