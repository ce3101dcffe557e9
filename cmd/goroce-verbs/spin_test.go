//go:build cgo && linux

package main

import (
	"regexp"
	"strconv"
	"testing"
)

// TestPassiveSideSpins runs a preloaded ib_write_bw pair: its server polls
// no CQ (it waits on its TCP socket while the client's WRITEs land in its
// memory), so in polling mode only the device's spinning goroutine
// (spin.go) runs its receive path by polling: the server's polled_pkts,
// in the counters GOROCE_DEBUG prints as goroce0 closes, must be
// positive. With GOROCE_BUSY_POLL=0 nothing polls, and polled_pkts stays
// 0 (it is not printed).
func TestPassiveSideSpins(t *testing.T) {
	for _, c := range []struct {
		busyPoll string
		polled   bool
	}{{"", true}, {"0", false}} {
		t.Run("GOROCE_BUSY_POLL="+c.busyPoll, func(t *testing.T) {
			server, _, _, _ := preloadedPair(t, "ib_write_bw", "perftest", "-p",
				[]string{"GOROCE_DEBUG=1", "GOROCE_BUSY_POLL=" + c.busyPoll}, "-x", "0", "-F", "-s", "65536", "-n", "5000")
			line := regexp.MustCompile(`goroce0 on \S+ closes: .*`).FindString(server.stderr.String())
			if line == "" {
				t.Fatalf("the server printed no counters as goroce0 closed:\n%s", &server.stderr)
			}
			rcvd := counterIn(line, "rcvd_pkts")
			if rcvd < 5000*16 { // 16 packets of 4 KiB per WRITE
				t.Errorf("the server received %d packets, want at least %d: %s", rcvd, 5000*16, line)
			}
			if polled := counterIn(line, "polled_pkts"); polled > 0 != c.polled {
				t.Errorf("the server polled %d of its %d packets, want some: %v (%s)", polled, rcvd, c.polled, line)
			}
		})
	}
}

// counterIn returns the value of counter name in a line of "name value"
// pairs, or 0 if the line lacks it.
func counterIn(line, name string) uint64 {
	m := regexp.MustCompile(`(?:^|[ :])` + name + ` (\d+)`).FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseUint(m[1], 10, 64)
	return v
}

// The spinner's decision, look by look: it spins only for a device on
// the passive side, where packets arrive and the program polls no CQ and
// waits on no channel.
func TestSpinOnlyWhenPassive(t *testing.T) {
	for _, c := range []struct {
		what              string
		seen, n, polls, p uint64
		channels          int32
		want              bool
	}{
		{"packets arrive, the program polls none of its CQs", 10, 25, 7, 7, 0, true},
		{"packets arrive while the program polls", 10, 25, 7, 9, 0, false},
		{"nothing arrives", 10, 10, 7, 7, 0, false},
		{"nothing arrives while the program polls", 10, 10, 7, 8, 0, false},
		{"packets arrive, the program sleeps on a completion channel", 10, 25, 7, 7, 1, false},
	} {
		if got := passive(c.seen, c.n, c.polls, c.p, c.channels); got != c.want {
			t.Errorf("%s: passive = %v, want %v", c.what, got, c.want)
		}
	}
}

// TestPollsRunTheReceivePath: a program that polls its CQs (here, an RDMA
// WRITE at a time, each completion polled for as ibv_poll_cq does) runs
// the receive path itself, and each of its polls counts (cqPolls), which
// is what keeps the spinner off (TestSpinOnlyWhenPassive).
func TestPollsRunTheReceivePath(t *testing.T) {
	p := newVerbsPair(t, "127.22.249.1")
	before := cqPolls.Load()
	for range 300 {
		p.writeOnce(t)
	}
	if n := cqPolls.Load() - before; n < 300 {
		t.Errorf("%d CQ polls counted for 300 WRITEs polled for", n)
	}
	if polled := device().Counter("polled_pkts"); polled == 0 {
		t.Errorf("polled_pkts = 0: the program's polls did not run the receive path")
	}
}
