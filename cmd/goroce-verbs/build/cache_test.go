package build

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// cacheHome gives the test a cache root of its own, keeping Go's build
// cache where it is (it lives under XDG_CACHE_HOME by default).
func cacheHome(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(out)))
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", home)
	return home
}

// Callers at once share one build: the second waits for the first's lock
// and finds its stamp.
func TestCachedBuildsOnce(t *testing.T) {
	cacheHome(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var builds atomic.Int32
	dirs := make([]string, 3)
	var wg sync.WaitGroup
	for i := range dirs {
		wg.Go(func() {
			dir, err := Cached(ctx, "../../..", Goroce, func(string, ...any) { builds.Add(1) })
			if err != nil {
				t.Error(err)
			}
			dirs[i] = dir
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
	for _, d := range dirs[1:] {
		if d != dirs[0] {
			t.Errorf("directories %s and %s", dirs[0], d)
		}
	}
	if out, err := exec.Command(filepath.Join(dirs[0], GoroceBin), "--version").Output(); err != nil || !strings.HasPrefix(string(out), "goroce ") {
		t.Errorf("the cached goroce --version: %v %q", err, out)
	}
}

// A cache directory others may write, or another user's, is refused with
// an error that names it, and nothing is built into it.
func TestCachedRefusesDirsOfOthers(t *testing.T) {
	home := cacheHome(t)
	root := filepath.Join(home, "goroce")
	if err := os.Mkdir(root, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o777) // past the umask
	_, err := Cached(t.Context(), "../../..", Goroce, nil)
	if err == nil || !strings.Contains(err.Error(), root+" may be written by others") {
		t.Errorf("world-writable %s: %v", root, err)
	}
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root to give the cache directory to another user")
	}
	os.Chmod(root, 0o755)
	if err := os.Chown(root, 65534, 65534); err != nil { // nobody
		t.Fatal(err)
	}
	_, err = Cached(t.Context(), "../../..", Goroce, nil)
	if err == nil || !strings.Contains(err.Error(), root+" belongs to another user") {
		t.Errorf("%s of nobody: %v", root, err)
	}
	if left, _ := os.ReadDir(root); len(left) > 0 {
		t.Errorf("%s holds %s", root, left[0].Name())
	}
}
