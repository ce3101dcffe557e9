//go:build cgo && linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// extAddrs gives each test of this file its own pair in 127.135.n.0/24,
// apart from the other tests' 127.22.0.0/16.
var extNet struct {
	sync.Mutex
	n int
}

func extAddrs() (server, client string) {
	extNet.Lock()
	defer extNet.Unlock()
	extNet.n++
	return fmt.Sprintf("127.135.%d.1", extNet.n), fmt.Sprintf("127.135.%d.2", extNet.n)
}

// buildC builds testdata/NAME.c against Debian's libibverbs (and librdmacm
// with rdmacm) into the test's directory, with -Wall -Werror.
func buildC(t *testing.T, name string, libs ...string) string {
	t.Helper()
	testenv.LookPath(t, "gcc", "gcc")
	prog := filepath.Join(t.TempDir(), name)
	args := append([]string{"-O2", "-Wall", "-Werror", "-o", prog, filepath.Join("testdata", name+".c")}, libs...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, out)
	}
	return prog
}

// apiLines are the "api: ..." lines of ext_qp's output, or of rxe's file
// of them (testdata/ext_qp.rxe-api.txt).
func apiLines(s string) []string {
	var ls []string
	for l := range strings.Lines(s) {
		if strings.HasPrefix(l, "api: ") {
			ls = append(ls, strings.TrimRight(l, "\n"))
		}
	}
	return ls
}

var reExtResult = regexp.MustCompile(`(?m)^result: (\d+) checks, (\d+) failed$`)

// TestExtQP runs testdata/ext_qp.c, two preloaded processes on loopback:
// the ibv_wr_* API on RC, UC and UD QPs (ibv_create_qp_ex) mixed with
// ibv_post_send, completions through the ibv_cq_ex poll API and
// ibv_poll_cq, RDMA READ and atomics, and memory windows over an MR with
// LOCAL_WRITE|MW_BIND only: type 1 by ibv_bind_mw, unbound by length 0 and
// bound again; type 2 by IBV_WR_BIND_MW and by ibv_wr_bind_mw, invalidated
// by IBV_WR_LOCAL_INV and by the peer's SEND_WITH_INV; each side in turn
// the sender, each checking the data it received and read. Each side's
// "api:" lines (the extended verbs' errno values and answers) must be
// those rxe printed for the same program in the lab.
func TestExtQP(t *testing.T) {
	lib := libs(t)
	prog := buildC(t, "ext_qp", "-libverbs")
	want, err := os.ReadFile("testdata/ext_qp.rxe-api.txt")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sa, ca := extAddrs()
	port := testenv.FreeTCPPort(t)
	argv := []string{prog, "-g", "0", "-p", strconv.Itoa(port)}
	server, client := runPair(ctx, t, port, side{lib, sa, nil, argv}, side{lib, ca, nil, argv})
	for _, p := range []*proc{server, client} {
		out := p.stdout.String()
		m := reExtResult.FindStringSubmatch(out)
		if m == nil || m[2] != "0" || m[1] == "0" {
			t.Errorf("%s: no clean result line:\n%s", strings.Join(p.cmd.Args, " "), out)
		}
		if got, want := apiLines(out), apiLines(string(want)); !slices.Equal(got, want) {
			t.Errorf("%s: api lines differ from rxe's (testdata/ext_qp.rxe-api.txt):\ngot\n%s\nwant\n%s",
				strings.Join(p.cmd.Args, " "), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if !strings.Contains(out, "wire: requests=") {
			t.Errorf("%s printed no wire line:\n%s", strings.Join(p.cmd.Args, " "), out)
		}
	}
	if s, c := reExtResult.FindString(server.stdout.String()), reExtResult.FindString(client.stdout.String()); s != c {
		t.Errorf("the sides ran different checks: server %q, client %q", s, c)
	}
}
