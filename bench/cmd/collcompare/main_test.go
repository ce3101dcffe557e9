package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goroce/goroce/bench/cpucoll"
	"github.com/goroce/goroce/bench/testenv"
)

// TestCompareTiny runs the whole command at tiny sizes with 2 ranks, in
// two rounds: goroce (built from this tree) and whichever of Open MPI and
// Gloo is installed, every result checked against the exact sum by the
// programs themselves.
func TestCompareTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds goroce and the C programs and starts processes")
	}
	only := []string{"goroce", "goroce-shm"}
	for _, f := range []cpucoll.Family{cpucoll.OpenMPI, cpucoll.Gloo} {
		if why := f.Missing(); why != "" {
			if testenv.Strict() {
				t.Fatalf("without %s: %s (apt-get install openmpi-bin libopenmpi-dev libgloo-dev; %s=1: a missing library fails)", f, why, testenv.StrictEnv)
			}
			t.Logf("without %s: %s", f, why)
			continue
		}
		only = append(only, f.String())
	}
	if len(only) == 2 {
		testenv.SkipOrFail(t, "neither Open MPI nor Gloo is installed (apt-get install openmpi-bin libopenmpi-dev libgloo-dev): nothing to compare goroce with")
	}
	sizes := []int{8, 12, 4096} // 12 B: 3 floats, not a multiple of the ranks
	var stdout, stderr strings.Builder
	results, code := run(context.Background(), []string{
		"-np", "2", "-sizes", "8,12,4K", "-iters", "2", "-warmup", "1",
		"-only", strings.Join(only, ","), "-addr-base", "127.83.1.10", "-timeout", "3m", "-repeats", "2",
	}, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	if code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	want, _ := cpucoll.Select(strings.Join(only, ","))
	if len(results) != 2*len(want) {
		t.Fatalf("%d results, want %d (one per library and round)", len(results), 2*len(want))
	}
	for i, res := range results {
		if w := want[i%len(want)]; res.Library.Name != w.Name || res.Ranks != 2 {
			t.Errorf("result %d is %s with %d ranks, want %s with 2 (every library once a round)", i, res.Library.Name, res.Ranks, w.Name)
		}
		var got []int
		for _, r := range res.Rows {
			got = append(got, r.Bytes)
			for _, m := range []cpucoll.Measurement{r.OutOfPlace, r.InPlace} {
				if m.Valid && (m.Wrong != 0 || m.Usec <= 0) {
					t.Errorf("%s %d B: %+v, want checked (0 wrong) and timed", res.Library.Name, r.Bytes, m)
				}
			}
			if !r.InPlace.Valid || r.Count != r.Bytes/4 {
				t.Errorf("%s %d B: %+v, want an in-place measurement of %d floats", res.Library.Name, r.Bytes, r, r.Bytes/4)
			}
		}
		if !slices.Equal(got, sizes) {
			t.Errorf("%s measured %v, want %v", res.Library.Name, got, sizes)
		}
		if res.Library.Family != cpucoll.Gloo && !res.Rows[0].OutOfPlace.Valid {
			t.Errorf("%s has no out-of-place measurement", res.Library.Name)
		}
	}
	for _, line := range []string{"goroce / ", "goroce-shm / ", "AllReduce float32 sum, 2 ranks, in place", "round 1 of 2\n", "round 2 of 2\n",
		"issue 24 targets", "busbw (GB/s) at 16 MiB by rank count"} {
		if !strings.Contains(stdout.String(), line) {
			t.Errorf("output lacks %q", line)
		}
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-np", "1"},
		{"-np", "two"},
		{"-sizes", "6"},
		{"-sizes", "8,1X"},
		{"-sizes", "0"},
		{"-iters", "0"},
		{"-repeats", "0"},
		{"-only", "nccl"},
		{"stray"},
	} {
		var stdout, stderr strings.Builder
		if _, code := run(context.Background(), args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, exitUsage, stderr.String())
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"8": 8, "1K": 1024, "64k": 64 << 10, "16M": 16 << 20, "1G": 1 << 30} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "K", "-8", "9G", "1.5M", "8B"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded", bad)
		}
	}
}

func TestSkipsWhatIsNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no go, mpicc, mpirun, g++
	var stdout, stderr strings.Builder
	_, code := run(context.Background(), []string{"-only", "openmpi,goroce"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s", code, stderr.String())
	}
	wantLines(t, stdout.String(),
		"collcompare: skipping openmpi-tcp, openmpi-shm: openmpi is not installed (no mpicc, no mpirun)",
		"apt-get install -y openmpi-bin libopenmpi-dev",
		"collcompare: skipping goroce: goroce cannot be built (no go command); -goroce names a prebuilt binary",
		"collcompare: nothing to measure")
}

// TestSaysWhatFailed runs the command with a goroce binary that fails as
// a rank does when its QP gives up: the round's output must say, beside
// its tables, which library failed with how many ranks and the rank's own
// reason, not leave its figures silently missing, and the exit status
// must be 1.
func TestSaysWhatFailed(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "goroce")
	script := "#!/bin/sh\necho 'goroce nccl-perf: rank 1: ib: work request failed: transport retry counter exceeded' >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	_, code := run(context.Background(), []string{"-np", "2", "-sizes", "8", "-iters", "1", "-only", "goroce,goroce-shm",
		"-goroce", bin, "-addr-base", "127.83.1.10"}, &stdout, &stderr)
	if code != exitFail {
		t.Errorf("exit %d, want %d", code, exitFail)
	}
	wantLines(t, stdout.String(),
		"failed (not in the tables; the full errors are on stderr):\n",
		"  goroce, 2 ranks: exit status 1: goroce nccl-perf: rank 1: ib: work request failed: transport retry counter exceeded\n",
		"  goroce-shm, 2 ranks: exit status 1: goroce nccl-perf: rank 1: ib: work request failed: transport retry counter exceeded\n",
		"2 ranks: goroce 16 MiB busbw >= 1.0x openmpi-tcp       not measured")
}

// wantLines fails the test for each of lines that out lacks.
func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}
}
