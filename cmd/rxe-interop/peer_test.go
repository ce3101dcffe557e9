package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRefusedConnect: a client's output that says its peer was not
// listening yet makes the case run again, on the host (refusedConnect)
// and in the guest (the shell's grep -iE of refusalPattern); any other
// failure does not. The outputs are the programs' own.
func TestRefusedConnect(t *testing.T) {
	grep, err := exec.LookPath("grep")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		out     string
		refused bool
	}{
		// udaddy's SIDR REQ answered with status 1 (no such service yet).
		{"udaddy: starting client\nudaddy: connecting\nudaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 1\ntest complete\nreturn status 1\n", true},
		// An unreachable peer (a timeout, -110) is not a refusal.
		{"udaddy: starting client\nudaddy: connecting\nudaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: -110\ntest complete\nreturn status -110\n", false},
		{"udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 12\n", false},
		{"cma event RDMA_CM_EVENT_REJECTED, error 8\nwait for CONNECTED state 10\nconnect error -1\n", true},
		{"rdma_connect: Connection refused\n", true},
		{" Couldn't connect to 10.99.0.1:18515\n Unable to open file descriptor for socket connection Unable to init the socket connection\n", true},
		{"goroce pingpong: couldn't connect to 10.99.0.1:18515: dial tcp: connection refused\n", true},
		{"Failed status transport retry counter exceeded (12) for wr_id 1\n", false},
		{"udaddy: starting client\nudaddy: connecting\nreceiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n", false},
	} {
		if got := refusedConnect(tc.out); got != tc.refused {
			t.Errorf("refusedConnect(%q) = %v, want %v", tc.out, got, tc.refused)
		}
		cmd := exec.Command(grep, "-qiE", refusalPattern())
		cmd.Stdin = strings.NewReader(tc.out)
		err := cmd.Run()
		if matched := err == nil; matched != tc.refused {
			t.Errorf("grep -qiE %q on %q: matched %v (%v), want %v", refusalPattern(), tc.out, matched, err, tc.refused)
		}
	}
}
