package ncclenv

import (
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// prog is a C program written for NCCL: one rank's AllReduce.
const prog = `#include <nccl.h>
#include <stdio.h>
int main(void) {
	ncclUniqueId id;
	ncclComm_t c;
	float x[4] = {1, 2, 3, 4};
	if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&c, 1, id, 0) != ncclSuccess)
		return 1;
	if (ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, NULL) != ncclSuccess)
		return 2;
	printf("C: sum %g\n", x[0] + x[1] + x[2] + x[3]);
	return ncclCommDestroy(c) == ncclSuccess ? 0 : 3;
}
`

// script is the same in Python, on numpy.
const script = `import numpy as np, goroce_nccl as gn
c = gn.Communicator(1, gn.unique_id(), 0)
x = np.arange(1, 5, dtype=np.float32)
c.allreduce(x)
print("Python: sum", x.sum())
`

// From nothing but the source and a fresh cache, one command makes both
// work: `eval "$(goroce nccl-env)"`, then `python3 -c 'import
// goroce_nccl ...'` and a plain `gcc prog.c -lgoroce-nccl`, each running a
// one-rank AllReduce. A second nccl-env builds nothing.
func TestNcclEnv(t *testing.T) {
	testenv.LookPath(t, "gcc", "gcc")
	py := cmp.Or(os.Getenv("GOROCE_PYTHON"), "/usr/bin/python3")
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		testenv.SkipOrFailf(t, "%s cannot import numpy (apt-get install python3-numpy, or set GOROCE_PYTHON): %v", py, err)
	}
	bin := clitest.BuildGoroce(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog.c"), []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "job.py"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	sh := `set -e
eval "$("$GOROCE" nccl-env)"
GOROCE_ADDR=127.136.7.1 "$PY" job.py
gcc -Wall -Werror -o prog prog.c -lgoroce-nccl
GOROCE_ADDR=127.136.7.2 ./prog
"$GOROCE" nccl-env >/dev/null
`
	cmd := exec.CommandContext(ctx, "sh", "-c", sh)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOROCE="+bin, "PY="+py, "XDG_CACHE_HOME="+t.TempDir(), clitest.GoCacheEnv(t),
		"PYTHONPATH=", "CPATH=", "LIBRARY_PATH=", "LD_LIBRARY_PATH=", "GOROCE_NCCL_LIB=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"Python: sum 10.0", "C: sum 10"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), "building the NCCL library"); n != 1 {
		t.Errorf("%d builds, want 1 (the second nccl-env finds the first one's):\n%s", n, out)
	}
}
