//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/cmd/goroce-verbs/build"
)

// The library, goroce and the C program, built once for all tests.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// TestMain removes the built programs after the tests, and says on the
// terminal while they run that they still do (testenv.Heartbeat).
func TestMain(m *testing.M) {
	stop := testenv.Heartbeat()
	code := m.Run()
	stop()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// programs builds libgoroce-nccl.so (cgo, -buildmode=c-shared) and goroce
// in the build cache every test shares (build.Cached), links both into a
// temporary directory, builds testdata/allcoll.c there (gcc against
// include/nccl.h) and returns the directory.
func programs(t *testing.T) string {
	t.Helper()
	testenv.LookPath(t, "gcc", "gcc")
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "goroce-nccl-test")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		for _, p := range []struct {
			target build.Target
			name   string
		}{{build.NCCL, build.NCCLLib}, {build.Goroce, build.GoroceBin}} {
			cached, err := build.Cached(ctx, "../..", p.target, nil)
			if err == nil {
				err = os.Symlink(filepath.Join(cached, p.name), filepath.Join(dir, p.name))
			}
			if err != nil {
				built.err = err
				return
			}
		}
		args := []string{"gcc", "-O2", "-Wall", "-Werror", "-I", "include", "-o", filepath.Join(dir, "allcoll"), "testdata/allcoll.c",
			"-L", dir, "-lgoroce-nccl", "-Wl,-rpath," + dir, "-lm"}
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			built.err = fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

// cleanEnv is the test's environment without any launcher's variables, so
// that only what a test sets says where the ranks are.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "RANK", k == "WORLD_SIZE", k == "GOROCE_ADDR", k == "NCCL_COMM_ID",
			strings.HasPrefix(k, "LOCAL_"), strings.HasPrefix(k, "MASTER_"),
			strings.HasPrefix(k, "OMPI_"), strings.HasPrefix(k, "SLURM_"):
			continue
		}
		env = append(env, kv)
	}
	return env
}

// run runs a command of the built programs and returns its output; it
// fails the test if the command does not exit 0 within a minute.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	out, err := start(env, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// start runs a command as run does and returns its output and an error
// saying how it failed, if it did.
func start(env []string, name string, args ...string) (string, error) {
	return startWithin(time.Minute, env, name, args...)
}

// startWithin is start with a bound of its own instead of a minute.
func startWithin(bound time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

var summary = regexp.MustCompile(`rank (\d+): (\d+) checks, (\d+) failed`)

// passed checks that each of ranks printed its summary with at least
// least checks and none failed.
func passed(t *testing.T, out string, ranks []int, least int) {
	t.Helper()
	seen := map[int]bool{}
	for _, m := range summary.FindAllStringSubmatch(out, -1) {
		r, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		if n < least || m[3] != "0" {
			t.Errorf("rank %d: %s checks, %s failed; want at least %d, none failed", r, m[2], m[3], least)
		}
		seen[r] = true
	}
	for _, r := range ranks {
		if !seen[r] {
			t.Errorf("rank %d printed no summary", r)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

var fourRanks = []int{0, 1, 2, 3}

// The C program runs every collective under goroce run -n 4, each rank
// taking the job's unique ID from its own ncclGetUniqueId.
func TestAllCollectivesUnderGoroceRun(t *testing.T) {
	dir := programs(t)
	out := run(t, nil, filepath.Join(dir, "goroce"), "run", "-n", "4", "--addr-base", "127.77.27.10",
		filepath.Join(dir, "allcoll"), "--id=env")
	passed(t, out, fourRanks, 150)
}

// Rank 0's ncclGetUniqueId, shipped to the others in a file, works under
// goroce run (it is the job's ID) and without a launcher (a rendezvous
// served by rank 0's process).
func TestUniqueIDThroughAFile(t *testing.T) {
	dir := programs(t)
	t.Run("goroce run", func(t *testing.T) {
		id := filepath.Join(t.TempDir(), "id")
		out := run(t, nil, filepath.Join(dir, "goroce"), "run", "-n", "4", "--addr-base", "127.77.27.10",
			filepath.Join(dir, "allcoll"), "--id=file:"+id)
		passed(t, out, fourRanks, 150)
	})
	t.Run("no launcher", func(t *testing.T) {
		id := filepath.Join(t.TempDir(), "id")
		outs := make([]string, 4)
		var wg sync.WaitGroup
		for r := range outs {
			wg.Go(func() {
				var err error
				outs[r], err = start([]string{fmt.Sprintf("GOROCE_ADDR=127.77.27.%d", 20+r)}, filepath.Join(dir, "allcoll"),
					"--rank="+strconv.Itoa(r), "--nranks=4", "--id=file:"+id)
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		passed(t, strings.Join(outs, ""), fourRanks, 150)
	})
}

// ncclCommInitAll, or ncclCommInitRank three times in a group, makes
// three ranks in one process; one thread drives them with a group.
func TestInitAll(t *testing.T) {
	dir := programs(t)
	out := run(t, []string{"GOROCE_ADDR=127.77.27.40"}, filepath.Join(dir, "allcoll"), "--initall=3")
	passed(t, out, []int{0}, 4)
	out = run(t, []string{"GOROCE_ADDR=127.77.27.50"}, filepath.Join(dir, "allcoll"), "--groupinit=3")
	passed(t, out, []int{0}, 7)
}

// When rank 3 exits after init, the others' next AllReduce returns
// ncclRemoteError naming rank 3 within the library's bound (the C
// program checks the code, the message, the time and the async error).
func TestDeadRank(t *testing.T) {
	dir := programs(t)
	out := run(t, nil, filepath.Join(dir, "goroce"), "run", "-n", "4", "--addr-base", "127.77.27.10",
		filepath.Join(dir, "allcoll"), "--dead=3")
	passed(t, out, []int{0, 1, 2}, 5)
	if n := strings.Count(out, "after rank 3 died: remote error"); n != 3 {
		t.Errorf("%d ranks report ncclRemoteError after rank 3 died, want 3\n%s", n, out)
	}
}
