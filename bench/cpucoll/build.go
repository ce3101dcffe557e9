package cpucoll

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The programs' sources, compiled by Build.
var (
	//go:embed programs/mpi_allreduce.c
	mpiSource []byte
	//go:embed programs/gloo_allreduce.cc
	glooSource []byte
)

// goroceCommand is the import path of goroce's command; building it by
// path works from any directory inside the module.
const goroceCommand = "github.com/goroce/goroce/cmd/goroce"

// Programs are the executables the libraries run.
type Programs struct {
	Goroce string // goroce (nccl-perf)
	MPI    string // mpi_allreduce, an MPI program to start with mpirun
	Gloo   string // gloo_allreduce, one Gloo rank
}

// Build compiles into dir the programs that the families need and that
// p does not name already (a prebuilt goroce, say), and returns p with
// their paths filled in. goroce is built with `go build` from this
// module, so the working directory must be inside it; the C and C++
// programs are compiled with mpicc and g++ at -O2.
func Build(ctx context.Context, dir string, fams []Family, p Programs) (Programs, error) {
	for _, f := range fams {
		var err error
		switch f {
		case Goroce:
			if p.Goroce == "" {
				p.Goroce = filepath.Join(dir, "goroce")
				err = compile(ctx, "go", "build", "-o", p.Goroce, goroceCommand)
			}
		case OpenMPI:
			if p.MPI == "" {
				p.MPI, err = compileSource(ctx, dir, "mpi_allreduce.c", mpiSource, "mpicc", []string{"-O2"}, nil)
			}
		case Gloo:
			if p.Gloo == "" {
				p.Gloo, err = compileSource(ctx, dir, "gloo_allreduce.cc", glooSource, "g++",
					[]string{"-O2", "-std=c++17", "-pthread"}, []string{"-lgloo"})
			}
		}
		if err != nil {
			return p, fmt.Errorf("building %s: %w", f, err)
		}
	}
	return p, nil
}

// compileSource writes src to dir/name and compiles it with compiler
// into an executable named after it without its extension: flags, then
// the source, then libs (the linker wants libraries after their users).
func compileSource(ctx context.Context, dir, name string, src []byte, compiler string, flags, libs []string) (string, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, src, 0o644); err != nil {
		return "", err
	}
	exe := strings.TrimSuffix(path, filepath.Ext(path))
	args := append(append(append([]string{}, flags...), "-o", exe, path), libs...)
	return exe, compile(ctx, compiler, args...)
}

func compile(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
