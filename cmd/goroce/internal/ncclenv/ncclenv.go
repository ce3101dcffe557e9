package ncclenv

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/goroce/goroce/cmd/goroce-verbs/build"
	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/exec"
)

const about = `Builds libgoroce-nccl (NCCL's C API for host memory over goroce RNICs,
see cmd/goroce-nccl), its header nccl.h and its Python package
goroce_nccl into the build cache when missing or stale (go with cgo and
gcc), and prints shell lines that put them where Python, gcc and the
dynamic linker look:

  eval "$(goroce nccl-env)"
  python3 -c 'import goroce_nccl; print(goroce_nccl.version())'
  gcc -o prog prog.c -lgoroce-nccl && goroce run -n 4 ./prog

GOROCE_NCCL_LIB names the library for goroce_nccl; PYTHONPATH, CPATH,
LIBRARY_PATH and LD_LIBRARY_PATH gain the cache's directories in front of
what they held.`

// Run is the nccl-env command.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("goroce nccl-env [flags]", about)
	src := fs.String("src", "", "the goroce source `dir` to build from (GOROCE_SRC; default: where goroce was built)")
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		cli.UsageError(fs, stderr, "unexpected arguments %q", fs.Args())
		return cli.ExitUsage
	}
	dir, err := build.Cached(ctx, exec.Source(*src), build.NCCL, func(format string, args ...any) {
		fmt.Fprintf(stderr, "goroce nccl-env: "+format+"\n", args...)
	})
	if err != nil {
		fmt.Fprintf(stderr, "goroce nccl-env: %v\n", err)
		return cli.ExitFail
	}
	fmt.Fprintf(stdout, "export GOROCE_NCCL_LIB=%s\n", cli.ShellQuote(filepath.Join(dir, build.NCCLLib)))
	for _, v := range []struct{ name, dir string }{
		{"PYTHONPATH", filepath.Join(dir, build.NCCLPy)},
		{"CPATH", filepath.Join(dir, build.NCCLInc)},
		{"LIBRARY_PATH", dir},
		{"LD_LIBRARY_PATH", dir},
	} {
		fmt.Fprintf(stdout, "export %s=%s${%s:+:$%s}\n", v.name, cli.ShellQuote(v.dir), v.name, v.name)
	}
	return cli.ExitOK
}
