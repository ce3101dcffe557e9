package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A Target is one thing Cached builds from the goroce source.
type Target int

// The targets.
const (
	// Verbs is the preloadable libibverbs: Shim and Core.
	Verbs Target = iota
	// NCCL is libgoroce-nccl.so (NCCLLib) with its header, include/nccl.h,
	// and the Python package goroce_nccl under python/.
	NCCL
	// Goroce is the goroce command (GoroceBin).
	Goroce
)

// The files of the NCCL and Goroce targets in a cache directory.
const (
	NCCLLib   = "libgoroce-nccl.so"
	NCCLInc   = "include"
	NCCLPy    = "python"
	GoroceBin = "goroce"
)

func (t Target) String() string {
	switch t {
	case Verbs:
		return "the verbs libraries"
	case NCCL:
		return "the NCCL library"
	case Goroce:
		return "the goroce command"
	}
	return fmt.Sprintf("Target(%d)", int(t))
}

// stamp is the file, in the cache directory, that says t is built there.
func (t Target) stamp() string { return fmt.Sprintf("target%d.stamp", int(t)) }

// subdir is the directory of the cache directory that holds t: each
// target has its own, so that the goroce binary has no libraries beside
// it unless someone puts them there (goroce exec looks beside it first).
func (t Target) subdir() string {
	switch t {
	case Verbs:
		return "verbs"
	case NCCL:
		return "nccl"
	}
	return "bin"
}

// SourceRoot returns the root of the goroce source tree that holds the
// working directory: the nearest directory above it that CheckSource
// accepts. Tests use it to find what to build.
func SourceRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if CheckSource(d) == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no goroce source tree above %s", dir)
		}
	}
}

// CacheRoot is where Cached keeps its builds: $XDG_CACHE_HOME/goroce,
// else ~/.cache/goroce.
func CacheRoot() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "goroce"), nil
}

// keepUnused is how long a cache directory no build has used stays.
const keepUnused = 7 * 24 * time.Hour

// Cached returns the directory, under CacheRoot, that holds target t built
// from the goroce source in src (Shim and Core, NCCLLib with NCCLInc and
// NCCLPy, or GoroceBin), building it there first when it is not built
// yet. Each target has a directory of its own in one named after src's
// SourceHash, so every
// program and test that builds from the same source shares one build: a
// second caller, in this process or another, waits for the first one's
// (a lock file in the directory) until ctx ends. The directories are the
// user's own (mode 0700): one that another user owns, or that others may
// write, is refused, never used. logf, if not nil, is told when a build
// starts. Directories unused for a week are removed.
func Cached(ctx context.Context, src string, t Target, logf func(format string, args ...any)) (string, error) {
	if err := CheckSource(src); err != nil {
		return "", err
	}
	src, err := filepath.Abs(src)
	if err != nil {
		return "", err
	}
	if t == Verbs {
		if err := Check(src); err != nil { // gcc and the headers
			return "", err
		}
	}
	hash, err := SourceHash(src)
	if err != nil {
		return "", err
	}
	root, err := CacheRoot()
	if err != nil {
		return "", err
	}
	if err := ownDir(filepath.Dir(root), false); err != nil {
		return "", err
	}
	if err := ownDir(root, true); err != nil {
		return "", err
	}
	dir := filepath.Join(root, hash[:16])
	if err := ownDir(dir, true); err != nil {
		return "", err
	}
	out := filepath.Join(dir, t.subdir())
	if err := ownDir(out, true); err != nil {
		return "", err
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	now := time.Now()
	os.Chtimes(dir, now, now) // in use: not pruned
	if b, err := os.ReadFile(filepath.Join(dir, t.stamp())); err == nil && strings.TrimSpace(string(b)) == hash {
		return out, nil
	}
	if logf != nil {
		logf("building %v from %s into %s", t, src, out)
	}
	switch t {
	case Verbs:
		err = Build(ctx, src, out)
	case NCCL:
		err = buildNCCL(ctx, src, out)
	case Goroce:
		err = goBuild(ctx, src, filepath.Join(out, GoroceBin), "./cmd/goroce")
	default:
		err = fmt.Errorf("build: no target %d", int(t))
	}
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, t.stamp()), []byte(hash+"\n"), 0o600); err != nil {
		return "", err
	}
	prune(root, dir)
	return out, nil
}

// ownDir makes sure dir is a directory of this user that no one else may
// write, creating it with mode 0700 when create is set and it does not
// exist. A symbolic link is not followed.
func ownDir(dir string, create bool) error {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		st, err = os.Lstat(dir)
	}
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return fmt.Errorf("build cache %s is not a directory (a symbolic link or a file): remove it", dir)
	case !ok || int(sys.Uid) != os.Getuid():
		return fmt.Errorf("build cache %s belongs to another user: remove it, or set XDG_CACHE_HOME to a directory of yours", dir)
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("build cache %s may be written by others (mode %v): chmod go-w it", dir, st.Mode().Perm())
	}
	return nil
}

// lockDir takes dir's lock file, waiting for another holder until ctx
// ends, and returns its release.
func lockDir(ctx context.Context, dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another build in %s: %w", dir, ctx.Err())
		case <-tick.C:
		}
	}
}

// prune removes the directories of root other than keep that no build has
// used for keepUnused.
func prune(root, keep string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if p == keep || !e.IsDir() {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > keepUnused {
			os.RemoveAll(p)
		}
	}
}

// buildNCCL builds the NCCL target into dir: the library, a copy of its
// header and of the Python package, each put in place whole.
func buildNCCL(ctx context.Context, src, dir string) error {
	if err := goBuild(ctx, src, filepath.Join(dir, NCCLLib), "-buildmode=c-shared", "./cmd/goroce-nccl"); err != nil {
		return err
	}
	os.Remove(filepath.Join(dir, "libgoroce-nccl.h")) // go build's header of the exports; include/nccl.h is the API
	for _, d := range []struct{ from, to string }{
		{filepath.Join(src, "cmd", "goroce-nccl", "include"), NCCLInc},
		{filepath.Join(src, "cmd", "goroce-nccl", "python"), NCCLPy},
	} {
		if err := copyTree(d.from, dir, d.to); err != nil {
			return err
		}
	}
	return nil
}

// goBuild runs go build -o out ARGS... in src with cgo on, building into a
// temporary name and renaming it into place.
func goBuild(ctx context.Context, src, out string, args ...string) error {
	tmp := out + ".tmp"
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", tmp}, args...)...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return os.Rename(tmp, out)
}

// copyTree copies the regular files of the tree from into dir/name,
// replacing what was there: it is copied beside it first, then renamed.
// Python's caches (__pycache__) stay behind.
func copyTree(from, dir, name string) error {
	tmp, err := os.MkdirTemp(dir, "."+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	err = filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		switch {
		case d.IsDir() && d.Name() == "__pycache__":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(tmp, rel), 0o700)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, rel), b, 0o600)
	})
	if err != nil {
		return err
	}
	dst := filepath.Join(dir, name)
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// Beside returns the directory that holds target t built from the same
// source as the goroce command at bin, when bin is the GoroceBin of a
// Cached directory (one a test or goroce nccl-env built) and t is built
// in that directory too. Such a binary keeps working with its own
// libraries after the checkout it was built from has moved, changed or
// gone: what is beside it in the cache matches it, byte for byte, where
// a fresh build from today's source might not. The directory must be
// in the cache this process would build in (CacheRoot: a program that
// points XDG_CACHE_HOME elsewhere gets its own builds) and the user's
// own, as Cached requires.
func Beside(bin string, t Target) (string, bool) {
	binDir := filepath.Dir(bin)
	if filepath.Base(binDir) != Goroce.subdir() {
		return "", false
	}
	dir := filepath.Dir(binDir)
	if root, err := CacheRoot(); err != nil || filepath.Dir(dir) != root {
		return "", false
	}
	if ownDir(dir, false) != nil {
		return "", false
	}
	built, err := os.ReadFile(filepath.Join(dir, Goroce.stamp()))
	if err != nil || len(built) == 0 {
		return "", false
	}
	if b, err := os.ReadFile(filepath.Join(dir, t.stamp())); err != nil || string(b) != string(built) {
		return "", false
	}
	return filepath.Join(dir, t.subdir()), true
}
