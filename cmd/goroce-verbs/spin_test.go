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

// TestPollerDoesNotSpin: while the program polls its CQs (here, an RDMA
// WRITE at a time, each completion polled for as ibv_poll_cq does), the
// device does not spin: the polls run the receive path, and a spinning
// goroutine would only take the process's P from them.
func TestPollerDoesNotSpin(t *testing.T) {
	p := newVerbsPair(t, "127.22.249.1")
	before := spins.Load()
	for range 3000 { // longer than the spinner's first looks (1 to 8 ms apart)
		p.writeOnce(t)
	}
	if n := spins.Load() - before; n != 0 {
		t.Errorf("the device spun %d times while the program polled", n)
	}
	if polled := device().Counter("polled_pkts"); polled == 0 {
		t.Errorf("polled_pkts = 0: the program's polls did not run the receive path")
	}
}
