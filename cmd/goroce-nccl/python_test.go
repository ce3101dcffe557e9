//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// torchBound bounds one torch job: four Python processes importing torch
// take most of it on a loaded 2-CPU machine (9 s each measured there).
const torchBound = 3 * time.Minute

// python returns a Python 3 interpreter that imports modules: GOROCE_PYTHON
// if set, else the first of python3 on PATH and /usr/bin/python3 that does
// (a pyenv or venv python3 first on PATH may lack Debian's packages). The
// test skips without one, or fails under GOROCE_CI_STRICT=1.
func python(t *testing.T, modules ...string) string {
	t.Helper()
	candidates := []string{os.Getenv("GOROCE_PYTHON")}
	if candidates[0] == "" {
		candidates = []string{"python3", "/usr/bin/python3"}
	}
	imp := "import " + strings.Join(modules, ", ")
	var tried []string
	for _, c := range candidates {
		p, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, c+": not found")
			continue
		}
		out, err := exec.Command(p, "-c", imp).CombinedOutput()
		if err == nil {
			return p
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		tried = append(tried, p+": "+lines[len(lines)-1])
	}
	testenv.SkipOrFailf(t, "no Python 3 that can %q (%s): apt-get install python3-numpy python3-torch, or set GOROCE_PYTHON",
		imp, strings.Join(tried, "; "))
	return ""
}

// pythonEnv is the environment that lets Python find the package and the
// library built for the tests.
func pythonEnv(dir string) []string {
	pkg, _ := filepath.Abs("python")
	return []string{
		"GOROCE_NCCL_LIB=" + filepath.Join(dir, "libgoroce-nccl.so"),
		"PYTHONPATH=" + pkg,
		"PYTHONFAULTHANDLER=1", // a crash in C prints the Python stacks
		"PYTHONWARNINGS=ignore",
		"PYTHONDONTWRITEBYTECODE=1", // no __pycache__ in the source tree
	}
}

// Every collective of goroce_nccl, in place and out of place, on numpy
// arrays of the 10 data types, under goroce run -n 4, each rank checking
// against numpy's own reduction of every rank's input.
func TestNumpyCollectives(t *testing.T) {
	py := python(t, "numpy")
	dir := programs(t)
	out := run(t, pythonEnv(dir), filepath.Join(dir, "goroce"), "run", "-n", "4", "--addr-base", "127.77.27.60",
		py, "testdata/numpy_collectives.py")
	passed(t, out, fourRanks, 365)
}

// When rank 3 exits after the first allreduce, the others' next one raises
// RemoteError naming rank 3 as the peer, within the Go library's bound.
func TestNumpyDeadRank(t *testing.T) {
	py := python(t, "numpy")
	dir := programs(t)
	out := run(t, pythonEnv(dir), filepath.Join(dir, "goroce"), "run", "-n", "4", "--addr-base", "127.77.27.60",
		py, "testdata/numpy_collectives.py", "--dead=3")
	passed(t, out, []int{0, 1, 2}, 4)
	if n := strings.Count(out, "after rank 3 died: RemoteError"); n != 3 {
		t.Errorf("%d ranks raised RemoteError after rank 3 died, want 3\n%s", n, out)
	}
}

// A process that has loaded the library forks children that do not call
// it (as DataLoader workers are); its collectives keep working while they
// run and after they exit.
func TestForkAfterLoad(t *testing.T) {
	py := python(t, "numpy")
	dir := programs(t)
	out := run(t, pythonEnv(dir), filepath.Join(dir, "goroce"), "run", "-n", "2", "--addr-base", "127.77.27.60",
		py, "testdata/numpy_collectives.py", "--fork")
	passed(t, out, []int{0, 1}, 12)
}

// torchJob checks testdata/torch_job.py's output: every rank's checks of
// the collectives and of DDP on goroce against DDP on gloo passed.
func torchJob(t *testing.T, out string, ranks []int, least int) {
	t.Helper()
	passed(t, out, ranks, least)
	if n := strings.Count(out, "DDP parameters, goroce vs gloo"); n != len(ranks) {
		t.Errorf("%d ranks compared DDP's parameters, want %d\n%s", n, len(ranks), out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "DDP parameters") || strings.Contains(l, "DDP on goroce") {
			t.Log(l)
		}
	}
}

// init_process_group(backend="goroce") under goroce run -n 4: every
// torch.distributed collective, then DDP on goroce against DDP on gloo.
func TestTorchUnderGoroceRun(t *testing.T) {
	torchJob(t, torchUnderGoroceRun(t, "127.77.27.60", "testdata/torch_job.py"), fourRanks, 58)
}

// torchUnderGoroceRun runs script with torch on 4 ranks under goroce run,
// their RNICs from addrBase on, and returns the output.
func torchUnderGoroceRun(t *testing.T, addrBase, script string) string {
	t.Helper()
	py := python(t, "numpy", "torch")
	dir := programs(t)
	// One OpenMP thread per rank, as torchrun sets by default: torch's
	// spinning OpenMP workers starve the RNICs' goroutines otherwise (4
	// ranks on 2 CPUs measured QPs exhausting their retries).
	env := append(pythonEnv(dir), "OMP_NUM_THREADS=1")
	out, err := startWithin(torchBound, env, filepath.Join(dir, "goroce"), "run", "-n", "4",
		"--addr-base", addrBase, py, script)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// envAfterLoad sets the RNIC's variables after the library has loaded,
// and after the unique ID is made, and creates one-rank communicators: a
// wrong GOROCE_LINK and a wrong GOROCE_ADDR must be rejected (so the
// library read them when it created the communicator), and right ones
// accepted.
const envAfterLoad = `
import os
import goroce_nccl as gn
gn.version()  # the library is loaded: the Go runtime has its copy of the environment
for link, addr in (("bogus", "127.77.27.90"), ("udp", "not-an-address"), ("udp", "127.77.27.90")):
    uid = gn.unique_id()
    os.environ["GOROCE_LINK"], os.environ["GOROCE_ADDR"] = link, addr
    try:
        gn.Communicator(1, uid, 0).destroy()
        print("%s %s: created" % (link, addr))
    except gn.InvalidArgument as e:
        print("%s %s: %s" % (link, addr, e))
    del os.environ["GOROCE_LINK"], os.environ["GOROCE_ADDR"]
`

// Variables a program sets after loading the library (Python's
// os.environ, which the torch backend uses to pick GOROCE_LINK=shm) count
// when it creates a communicator, as NCCL reads its environment then.
func TestEnvironmentSetAfterLoad(t *testing.T) {
	py := python(t, "numpy")
	dir := programs(t)
	out, err := start(pythonEnv(dir), py, "-c", envAfterLoad)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`bogus 127.77.27.90: nccl: ncclCommInitRank: nccl: invalid argument: GOROCE_LINK="bogus": want udp or shm`,
		`udp not-an-address: nccl: ncclCommInitRank: nccl: invalid argument: GOROCE_ADDR="not-an-address": want an IP address, or IP:port`,
		"udp 127.77.27.90: created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// GOROCE_CPUPROFILE=PATH: a process's CPU profile of the library is in
// PATH.rankN when it exits (written at exit: Python never calls the
// library to stop it), a gzipped pprof profile. Python's faulthandler
// (PYTHONFAULTHANDLER=1, as pythonEnv sets) takes away the main thread's
// alternate signal stack before the library's exit handler runs Go on that
// thread; a profiling or preemption signal landing there then killed the
// process ("non-Go code disabled sigaltstack") in about 1 exit in 6, so
// the script exits exitRuns times, each of which must succeed.
func TestCPUProfile(t *testing.T) {
	py := python(t, "numpy")
	dir := programs(t)
	const exitRuns = 20
	script := `
import numpy as np, goroce_nccl as gn
c = gn.Communicator(1, gn.unique_id(), 0)
x = np.ones(1 << 20, dtype=np.float32)
for _ in range(50):
    c.allreduce(x)
print("sum", x.sum())
`
	for run := range exitRuns {
		path := filepath.Join(t.TempDir(), "cpu")
		env := append(pythonEnv(dir), "GOROCE_CPUPROFILE="+path, "GOROCE_ADDR=127.77.27.92")
		if out, err := start(env, py, "-c", script); err != nil || !strings.Contains(out, "sum 1048576.0") {
			t.Fatalf("exit %d of %d: %v\n%s", run+1, exitRuns, err, out)
		}
		b, err := os.ReadFile(path + ".rank0")
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 64 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("%s.rank0 is %d bytes, starting % x: want a gzipped profile", path, len(b), b[:min(len(b), 4)])
		}
	}
}

// A torch job that ends without destroy_process_group(), its last
// operation run on the process group's thread: every rank exits 0, and no
// group's thread is still running when the interpreter finalizes (an
// atexit function of the script's, run after the backend's, looks).
func TestTorchExitWithoutDestroy(t *testing.T) {
	passed(t, torchUnderGoroceRun(t, "127.136.0.20", "testdata/torch_exit.py"), fourRanks, 2)
}

// torch.distributed.new_group on the goroce backend (groups [0, 1], [2,
// 3] and [1, 3], each a communicator with RNICs of its own next to the
// world's) and recv/irecv without a source, which return the sender's
// rank, under goroce run -n 4.
func TestTorchGroupsAndAnySource(t *testing.T) {
	passed(t, torchUnderGoroceRun(t, "127.77.27.80", "testdata/torch_groups.py"), fourRanks, 13)
}

// torchrun runs script on nproc ranks with python3 -m torch.distributed.run
// and returns the output. torchrun sets no RNIC address: the scripts put
// rank r at GOROCE_TEST_ADDR_BASE + r (testdata/checks.py).
func torchrun(t *testing.T, py, dir string, nproc int, script string) string {
	t.Helper()
	port := testenv.FreeTCPPort(t)
	env := append(pythonEnv(dir), "GOROCE_TEST_ADDR_BASE=127.77.27.70")
	// --redirects 1 --tee 1: torch 1.13's default of 0 fails on Python
	// 3.11 (Std.from_str("0") is None there: IntFlag no longer iterates
	// its zero member); 1 tees the ranks' standard output to ours.
	out, err := startWithin(torchBound, env, py, "-m", "torch.distributed.run", "--nproc_per_node", strconv.Itoa(nproc),
		"--redirects", "1", "--tee", "1", "--master_addr", "127.0.0.1", "--master_port", strconv.Itoa(port), script)
	if err != nil {
		t.Fatal(fmt.Errorf("torchrun: %w", err))
	}
	return out
}

// init_process_group(backend="goroce") under torchrun with 2 ranks:
// torch's store carries rank 0's unique ID.
func TestTorchUnderTorchrun(t *testing.T) {
	py := python(t, "numpy", "torch")
	dir := programs(t)
	torchJob(t, torchrun(t, py, dir, 2, "testdata/torch_job.py"), []int{0, 1}, 50)
}

// Communicator.from_env under torchrun, whose agent holds the store at
// MASTER_PORT: rank 0's unique ID goes through that store.
func TestNumpyUnderTorchrun(t *testing.T) {
	py := python(t, "numpy", "torch")
	dir := programs(t)
	passed(t, torchrun(t, py, dir, 2, "testdata/numpy_collectives.py"), []int{0, 1}, 365)
}
