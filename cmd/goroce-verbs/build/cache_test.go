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

// Beside finds the libraries built from the goroce binary's own source in
// its cache directory, and nothing else: not a build from other source
// (a stamp that differs), not a target never built there, not for a
// binary outside a cache directory's bin, not in a directory others may
// write, not in a cache other than the one this process builds in.
func TestBeside(t *testing.T) {
	root := filepath.Join(cacheHome(t), "goroce")
	mk := func(name, goroceStamp, verbsStamp string, mode os.FileMode) string {
		dir := filepath.Join(root, name)
		for _, d := range []string{Goroce.subdir(), Verbs.subdir()} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		for s, content := range map[string]string{Goroce.stamp(): goroceStamp, Verbs.stamp(): verbsStamp} {
			if content != "" {
				if err := os.WriteFile(filepath.Join(dir, s), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, Goroce.subdir(), GoroceBin)
	}
	for _, c := range []struct {
		name string
		bin  string
		want bool
	}{
		{"same source", mk("same", "aaaa\n", "aaaa\n", 0o700), true},
		{"other source", mk("other", "aaaa\n", "bbbb\n", 0o700), false},
		{"verbs not built", mk("unbuilt", "aaaa\n", "", 0o700), false},
		{"goroce not built", mk("nobin", "", "aaaa\n", 0o700), false},
		{"others may write", mk("open", "aaaa\n", "aaaa\n", 0o777), false},
		{"not in a cache directory", filepath.Join(root, "same", GoroceBin), false},
	} {
		dir, ok := Beside(c.bin, Verbs)
		if ok != c.want {
			t.Errorf("%s: Beside(%s) = %q, %v; want %v", c.name, c.bin, dir, ok, c.want)
		}
		if ok && dir != filepath.Join(filepath.Dir(filepath.Dir(c.bin)), Verbs.subdir()) {
			t.Errorf("%s: Beside = %q, not the cache directory's %s", c.name, dir, Verbs.subdir())
		}
	}
	elsewhere := mk("elsewhere", "aaaa\n", "aaaa\n", 0o700)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if dir, ok := Beside(elsewhere, Verbs); ok {
		t.Errorf("another cache: Beside(%s) = %q with XDG_CACHE_HOME elsewhere; want nothing", elsewhere, dir)
	}
}
