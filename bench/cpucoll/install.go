package cpucoll

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// glooHeader is the header whose presence says libgloo-dev is installed.
const glooHeader = "/usr/include/gloo/allreduce_ring.h"

// Packages are the Debian packages a family needs, for apt-get install.
func (f Family) Packages() []string {
	switch f {
	case OpenMPI:
		return []string{"openmpi-bin", "libopenmpi-dev"}
	case Gloo:
		return []string{"libgloo-dev", "g++"}
	}
	return nil
}

// Missing says why the family cannot be built and run on this machine,
// or returns "" when it can. goroce needs the go command (to build
// ./cmd/goroce), Open MPI needs mpicc and mpirun, Gloo needs g++ and
// Gloo's headers.
func (f Family) Missing() string {
	var tools, files []string
	switch f {
	case Goroce:
		if _, err := exec.LookPath("go"); err != nil {
			return "goroce cannot be built (no go command)"
		}
		return ""
	case OpenMPI:
		tools = []string{"mpicc", "mpirun"}
	case Gloo:
		tools, files = []string{"g++"}, []string{glooHeader}
	}
	var gone []string
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			gone = append(gone, t)
		}
	}
	for _, p := range files {
		if _, err := os.Stat(p); err != nil {
			gone = append(gone, p)
		}
	}
	if len(gone) == 0 {
		return ""
	}
	return fmt.Sprintf("%s is not installed (no %s)", f, strings.Join(gone, ", no "))
}

// ErrNotRoot is returned by Install when apt-get cannot work because
// this process is not root.
var ErrNotRoot = errors.New("cpucoll: apt-get install needs root")

// Install runs apt-get update and apt-get install -y for the packages of
// the families given that are Missing, writing apt-get's output to out.
// It does nothing when none is missing.
func Install(ctx context.Context, fams []Family, out io.Writer) error {
	var pkgs []string
	for _, f := range fams {
		if f.Missing() != "" {
			pkgs = append(pkgs, f.Packages()...)
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: run `apt-get install -y %s` as root", ErrNotRoot, strings.Join(pkgs, " "))
	}
	for _, args := range [][]string{{"update"}, append([]string{"install", "-y"}, pkgs...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}
