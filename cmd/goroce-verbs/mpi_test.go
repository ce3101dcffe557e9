//go:build cgo && linux

package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// mpiBase is local rank 0's goroce0 address in the tests of this file;
// rank r's is the r-th after it (goroce exec under mpirun).
const mpiBase = "127.140.1.1"

// mpiJob is Open MPI's mpirun running a program on n ranks over UCX
// (--mca pml ucx --mca osc ucx) with UCX_TLS naming only goroce's verbs
// transports and self, each rank under goroce exec on a goroce0 of its
// own, as the README tells users to run it.
func mpiJob(n int, program ...string) []string {
	argv := []string{"mpirun", "-np", strconv.Itoa(n), "--oversubscribe", "--mca", "pml", "ucx", "--mca", "osc", "ucx",
		"-x", "UCX_TLS=rc_verbs,ud_verbs,self", "-x", "UCX_NET_DEVICES=goroce0:1"}
	if os.Geteuid() == 0 {
		argv = append(argv, "--allow-run-as-root") // as CI runs
	}
	return append(append(argv, built.bin, "exec", "--addr", mpiBase, "--debug", "--"), program...)
}

// runMPI runs program on n ranks and checks what every MPI test program of
// ours prints: rank 0's check lines, each "N of N ranks ok" (want of them),
// and every rank's "rank R moved: B", the payload bytes its operations must
// send to other ranks at the least. Each rank's goroce0 must be its own
// (the address goroce exec gives local rank r) and must have sent at least
// those bytes (GOROCE_DEBUG's counters as it closed): with UCX_TLS as
// mpiJob sets it UCX has no other way between the ranks, and bytes that
// went through shared memory or TCP would be missing there.
func runMPI(t *testing.T, n, want int, program ...string) {
	t.Helper()
	libs(t) // goroce exec's build, from the cache
	testenv.LookPath(t, "mpirun", "openmpi-bin")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	argv := mpiJob(n, program...)
	p := start(ctx, t, "", "", nil, argv[0], argv[1:]...)
	out := p.wait(t)
	all := out + p.stderr.String()
	checks := regexp.MustCompile(`(?m)^(.*): (\d+) of (\d+) ranks ok$`).FindAllStringSubmatch(out, -1)
	if len(checks) != want {
		t.Errorf("rank 0 reported %d checks, want %d", len(checks), want)
	}
	for _, c := range checks {
		if c[2] != strconv.Itoa(n) || c[3] != strconv.Itoa(n) {
			t.Errorf("%s: %s of %s ranks ok, want %d of %d", c[1], c[2], c[3], n, n)
		}
	}
	moved := map[int]int64{}
	for _, m := range regexp.MustCompile(`rank (\d+) moved: (\d+)`).FindAllStringSubmatch(out, -1) {
		r, _ := strconv.Atoi(m[1])
		moved[r], _ = strconv.ParseInt(m[2], 10, 64)
	}
	counters, err := closeCounters(p.stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) != n || len(counters) != n {
		t.Fatalf("%d ranks said what they moved and %d goroce0s what they sent, want %d of each\n%s", len(moved), len(counters), n, all)
	}
	// Open MPI's local ranks are its ranks on one host: rank r is on the
	// r-th address after mpiBase.
	a := netip.MustParseAddr(mpiBase)
	for r := range n {
		sent, ok := counters[netip.AddrPortFrom(a, 4791).String()]
		if !ok {
			t.Errorf("no goroce0 on %v (rank %d's)", a, r)
		} else if sent["sent_bytes"] < moved[r] {
			t.Errorf("rank %d's goroce0 (%v) sent %d bytes; the rank's operations send %d at the least: the rest went another way",
				r, a, sent["sent_bytes"], moved[r])
		} else {
			t.Logf("rank %d on %v: goroce0 sent %d bytes for %d of payload", r, a, sent["sent_bytes"], moved[r])
		}
		a = a.Next()
	}
	if t.Failed() {
		t.Logf("%s", all)
	}
}

// TestOpenMPI runs testdata/mpi_check.c (built with Debian's mpicc) on 2
// and 4 ranks under Open MPI 4.1 with pml ucx and osc ucx over goroce:
// ping-pongs, MPI_Allreduce of four types and three sizes, and MPI_Put and
// MPI_Get, every result checked by the rank that receives it, and every
// rank's bytes on its own goroce0 (runMPI).
func TestOpenMPI(t *testing.T) {
	mpicc := testenv.LookPath(t, "mpicc", "libopenmpi-dev")
	prog := filepath.Join(t.TempDir(), "mpi_check")
	if out, err := exec.Command(mpicc, "-O2", "-Wall", "-Werror", "-o", prog, "testdata/mpi_check.c").CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("np%d", n), func(t *testing.T) { runMPI(t, n, 17, prog) })
	}
}

// TestMPI4Py runs testdata/mpi4py_check.py, Debian's python3-mpi4py's
// Allreduce on numpy arrays of four types and three sizes (and its pickled
// allreduce once), on 2 ranks in the same way, each result checked
// element by element against the reference each rank computes.
func TestMPI4Py(t *testing.T) {
	python := "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import mpi4py, numpy").CombinedOutput(); err != nil {
		testenv.SkipOrFailf(t, "%s lacks mpi4py or numpy (apt-get install python3-mpi4py python3-numpy): %v\n%s", python, err, out)
	}
	script, err := filepath.Abs("testdata/mpi4py_check.py")
	if err != nil {
		t.Fatal(err)
	}
	runMPI(t, 2, 13, python, script)
}
