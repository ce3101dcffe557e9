package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
)

// TestBadFlags runs every command with bad flags (an unknown flag each,
// and bad values of the flags the issue met): the status is 2, nothing is
// printed on stdout (no banner) and no file is made, and stderr holds the
// error as its last line, naming the flag (or the environment variable),
// with at most a one-line usage hint before it.
func TestBadFlags(t *testing.T) {
	t.Chdir(t.TempDir()) // where dcqcn would write dcqcn-out/
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	type badCase struct {
		args []string
		env  string // NAME=value, or ""
		name string // what the last line must name
		says string // what else it must say of the value, if anything
	}
	var cases []badCase
	for _, c := range commands {
		cases = append(cases, badCase{args: []string{c.name, "--no-such-flag"}, name: "-no-such-flag"})
	}
	cases = append(cases,
		badCase{args: []string{"dcqcn", "incast", "--rate", "0"}, name: "--rate"},
		badCase{args: []string{"dcqcn", "incast", "--rate", "-3"}, name: "--rate"},
		badCase{args: []string{"dcqcn", "incast", "--flows", "0"}, name: "--flows"},
		badCase{args: []string{"dcqcn", "converge", "--flows", "8"}, name: "--flows"},
		badCase{args: []string{"dcqcn", "incast", "--duration", "0s"}, name: "--duration"},
		badCase{args: []string{"dcqcn", "incast", "--interval", "-1ms"}, name: "--interval"},
		badCase{args: []string{"dcqcn", "incast", "--preset", "nope"}, name: "--preset"},
		badCase{args: []string{"dcqcn", "incast", "-o", filepath.Join(notDir, "out")}, name: "-o"},
		badCase{args: []string{"dcqcn", "incast", "--ui-addr", "notaport"}, name: "-ui-addr"},
		badCase{args: []string{"perf", "write_bw", "-s", "1Q"}, name: "-s"},
		badCase{args: []string{"perf", "write_bw", "--metrics-addr", "notaport"}, name: "-metrics-addr"},
		badCase{args: []string{"perf", "write_bw", "--ui-addr", "127.0.0.1:99999"}, name: "-ui-addr"},
		badCase{args: []string{"perf", "write_bw"}, env: "GOROCE_ADDR=not-an-ip", name: "GOROCE_ADDR"},
		badCase{args: []string{"perf", "write_bw", "--addr", "1.2.3"}, name: "--addr"},
		// -s 1M is a size (so the error is the next flag's), as nccl-perf's -b is.
		badCase{args: []string{"perf", "write_bw", "-s", "1M", "--addr", "1.2.3"}, name: "--addr"},
		badCase{args: []string{"nccl-perf", "all_reduce", "-b", "1KiB", "-e", "1M", "--ui-addr", "notaport"}, name: "-ui-addr"},
		badCase{args: []string{"pingpong", "--ui-addr", "notaport"}, name: "-ui-addr"},
		badCase{args: []string{"pingpong", "-s", "4X"}, name: "-s"},
		badCase{args: []string{"pingpong"}, env: "GOROCE_ADDR=not-an-ip", name: "GOROCE_ADDR"},
		badCase{args: []string{"nccl-perf", "all_reduce", "--ui-addr", "notaport"}, name: "-ui-addr"},
		badCase{args: []string{"nccl-perf", "all_reduce", "-np", "2", "--metrics-addr", "x"}, name: "-metrics-addr"},
		badCase{args: []string{"nccl-perf", "all_reduce", "-b", "1Q"}, name: "-b"},
		badCase{args: []string{"nccl-perf", "all_reduce", "-np", "2", "--addr-base", "not-an-ip"}, name: "--addr-base"},
		badCase{args: []string{"demo", "--ui-addr", "notaport"}, name: "-ui-addr"},
		badCase{args: []string{"demo", "--size", "1Q"}, name: "-size"},
		badCase{args: []string{"run", "-n", "0", "true"}, name: "-n"},
		badCase{args: []string{"nccl-perf", "all_reduce", "-np", "-3"}, name: "-np -3", says: "number of ranks"},
		badCase{args: []string{"run", "--addr-base", "nope", "true"}, name: "--addr-base"},
		badCase{args: []string{"stat", "-w", "-1s", "127.0.0.1:1"}, name: "-w"},
		badCase{args: []string{"topo", "--gpus", "0"}, name: "--gpus"},
		badCase{args: []string{"soak", "--loss", "2"}, name: "--loss"},
	)
	for _, c := range cases {
		t.Run(strings.Join(append([]string{c.env}, c.args...), " "), func(t *testing.T) {
			if c.env != "" {
				k, v, _ := strings.Cut(c.env, "=")
				t.Setenv(k, v)
			}
			code, out, errOut := goroce(t, c.args...)
			if code != cli.ExitUsage {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, cli.ExitUsage, out, errOut)
			}
			if out != "" {
				t.Errorf("stdout before the error: %q", out)
			}
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			last := lines[len(lines)-1]
			if !strings.Contains(last, c.name) {
				t.Errorf("last line %q does not name %s\nstderr:\n%s", last, c.name, errOut)
			}
			if !strings.Contains(last, c.says) {
				t.Errorf("last line %q does not say %q", last, c.says)
			}
			if len(lines) > 2 || (len(lines) == 2 && !strings.HasPrefix(lines[0], "usage: ")) {
				t.Errorf("want the error alone, or after a one-line usage hint; stderr:\n%s", errOut)
			}
			if left, _ := os.ReadDir("."); len(left) > 0 {
				t.Errorf("left %s behind", left[0].Name())
				for _, e := range left {
					os.RemoveAll(e.Name())
				}
			}
		})
	}
}
