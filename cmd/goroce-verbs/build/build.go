// Package build builds what goroce's C-facing parts are made of from the
// goroce source: the two libraries of the preloadable libibverbs (see
// cmd/goroce-verbs; the Go core with go build -buildmode=c-shared, the C
// shim with gcc against the system's <infiniband/verbs.h> and
// <rdma/rdma_cma.h>), libgoroce-nccl with its header and Python package
// (cmd/goroce-nccl), and the goroce command. Cached keeps each in a
// per-user cache directory named after the source's hash, so goroce exec,
// goroce nccl-env and every test that needs them share one build. It
// needs no cgo itself: it runs go and gcc.
package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The libraries' file names. The shim is the one to preload; it loads the
// core from its own directory.
const (
	Shim = "libgoroce-verbs.so"
	Core = "libgoroce-verbs-core.so"
)

// Module is the module path the source directory must hold.
const Module = "github.com/goroce/goroce"

// VerbsHeader and CMAHeader are the headers the shim is compiled against:
// it stands in for libibverbs and librdmacm.
const (
	VerbsHeader = "/usr/include/infiniband/verbs.h"
	CMAHeader   = "/usr/include/rdma/rdma_cma.h"
)

// A MissingError says that something the build needs is not there, and
// what to install or set to get it.
type MissingError struct {
	What string // "gcc", "go", "libibverbs-dev", "the goroce source"
	Fix  string // e.g. "apt-get install gcc"
}

func (e *MissingError) Error() string { return e.What + " is missing: " + e.Fix }

// Check reports, as a *MissingError, the first thing a build from the module
// source in src lacks: the go and gcc commands, Debian's libibverbs-dev and
// librdmacm-dev, or the source itself.
func Check(src string) error {
	if err := CheckSource(src); err != nil {
		return err
	}
	if _, err := exec.LookPath("go"); err != nil {
		return &MissingError{"go", "install Go (https://go.dev/dl/, or apt-get install golang-go) and put it on PATH"}
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		return &MissingError{"gcc", "apt-get install gcc"}
	}
	if _, err := os.Stat(VerbsHeader); err != nil {
		return &MissingError{"libibverbs-dev", "apt-get install libibverbs-dev (for " + VerbsHeader + ")"}
	}
	if _, err := os.Stat(CMAHeader); err != nil {
		return &MissingError{"librdmacm-dev", "apt-get install librdmacm-dev (for " + CMAHeader + ")"}
	}
	return nil
}

// CheckSource reports, as a *MissingError, whether src is not the root of a
// goroce source tree with cmd/goroce-verbs in it.
func CheckSource(src string) error {
	missing := &MissingError{"the goroce source", fmt.Sprintf("%q is not a goroce checkout; pass --src DIR or set GOROCE_SRC to one (git clone https://%s)", src, Module)}
	if src == "" {
		missing.Fix = "pass --src DIR or set GOROCE_SRC to a goroce checkout (git clone https://" + Module + ")"
		return missing
	}
	mod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil || !strings.HasPrefix(string(mod), "module "+Module+"\n") {
		return missing
	}
	if _, err := os.Stat(filepath.Join(src, "cmd", "goroce-verbs", "shim", "verbs.c")); err != nil {
		return missing
	}
	return nil
}

// SourceHash returns a hash of what the targets are built from: every .go
// (but tests), .c, .h and .py file of the module in src outside testdata,
// with go.mod and go.sum.
func SourceHash(src string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != src && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(name, "_test.go"):
			return nil
		case strings.HasSuffix(name, ".go"), strings.HasSuffix(name, ".c"), strings.HasSuffix(name, ".h"),
			strings.HasSuffix(name, ".py"), name == "go.mod", name == "go.sum":
		default:
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(src, path)
		fmt.Fprintf(h, "%s\x00", filepath.ToSlash(rel))
		n, err := io.Copy(h, f)
		fmt.Fprintf(h, "\x00%d\x00", n)
		return err
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ShimSources lists the shim's C files, every cmd/goroce-verbs/shim/*.c
// of the source in src, relative to it.
func ShimSources(src string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(src, "cmd", "goroce-verbs", "shim", "*.c"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, &MissingError{"the goroce source", fmt.Sprintf("%q has no cmd/goroce-verbs/shim/*.c", src)}
	}
	for i, f := range files {
		if files[i], err = filepath.Rel(src, f); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// Build builds both verbs libraries from the module source in src into
// dir, creating it. The libraries are built under temporary names and
// renamed into place, so that concurrent builds into one dir, and programs
// already running with the old ones, never see a half-written file. The
// shim is built with -Wall -Werror.
func Build(ctx context.Context, src, dir string) error {
	if err := Check(src); err != nil {
		return err
	}
	src, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	shim, err := ShimSources(src)
	if err != nil {
		return err
	}
	for _, args := range [][]string{
		{"go", "build", "-buildmode=c-shared", "-o", filepath.Join(tmp, Core), "./cmd/goroce-verbs"},
		append(append([]string{"gcc", "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", filepath.Join(tmp, Shim)},
			shim...), "-ldl", "-lpthread"),
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var errs []error
	for _, name := range []string{Core, Shim} {
		errs = append(errs, os.Rename(filepath.Join(tmp, name), filepath.Join(dir, name)))
	}
	return errors.Join(errs...)
}
