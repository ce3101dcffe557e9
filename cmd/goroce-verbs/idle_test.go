//go:build cgo && linux

package main

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The P an empty poll offers, case by case: with one P, at once if
// another goroutine holds the receive path, else after offerAfter of
// empty polls in a row; with more, never (the device's goroutines have
// the others).
func TestOfferP(t *testing.T) {
	for _, c := range []struct {
		what      string
		procs     int
		receiving bool
		empty     time.Duration
		want      bool
	}{
		{"one P, the CQ just found empty", 1, false, 0, false},
		{"one P, empty for a while, short of offerAfter", 1, false, offerAfter - time.Microsecond, false},
		{"one P, empty for offerAfter", 1, false, offerAfter, true},
		{"one P, the receive path held by another goroutine", 1, true, 0, true},
		{"two Ps, empty for long", 2, false, time.Second, false},
		{"two Ps, the receive path held by another goroutine", 2, true, 0, false},
	} {
		if got := offerP(c.procs, c.receiving, c.empty); got != c.want {
			t.Errorf("%s: offerP = %v, want %v", c.what, got, c.want)
		}
	}
}

// TestSpinningThreadOffersP runs testdata/idle_poll.c: its one thread,
// confined to one CPU with GOMAXPROCS 1 as perftest under taskset, spins
// on ibv_poll_cq. An offer of the P from that thread is a handoff to
// another thread and back (two context switches): the program's polls
// may make at most one per offerAfter they spent polling (and a few
// more), where an offer every few empty polls makes thousands; and at
// least one, since the polls last longer than offerAfter. The device's
// goroutines must run while it only polls: a SEND to a QP with no
// receive posted is retried on the QP's RNR timer, and completes once the
// receive is there, with its bytes; the RNR NAKs counted (rcvd_rnr_err)
// show that the timer ran while the thread spun. (On a loaded machine the
// runtime also takes the P back while the kernel keeps the thread off
// its CPU, so there the timer may run without an offer.)
func TestSpinningThreadOffersP(t *testing.T) {
	lib := libs(t)
	prog := buildC(t, "idle_poll", "-libverbs")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := start(ctx, t, lib, "127.141.1.1", []string{"GOMAXPROCS=1", "GOROCE_DEBUG=1"}, prog)
	out := p.wait(t)
	phases := regexp.MustCompile(`(?m)^(idle|rnr): polls (\d+) ns (\d+)(.*)$`).FindAllStringSubmatch(out, -1)
	if len(phases) != 2 {
		t.Fatalf("idle_poll printed\n%s\nwant an idle and an rnr line", out)
	}
	var polls, ns int64
	for _, m := range phases {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		d, _ := strconv.ParseInt(m[3], 10, 64)
		polls, ns = polls+n, ns+d
	}
	if rest := phases[1][4]; rest != " status success data intact" {
		t.Errorf("rnr: the SEND and its receive ended with%s, want status success data intact", rest)
	}
	stderr := p.stderr.String()
	m := regexp.MustCompile(`pollers offered their P (\d+) times`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no count of offers as goroce0 closed:\n%s", stderr)
	}
	offers, _ := strconv.ParseInt(m[1], 10, 64)
	if offers == 0 {
		t.Errorf("the polling thread never offered its P in %d polls over %v", polls, time.Duration(ns))
	}
	if most := ns/int64(offerAfter) + 10; offers > most {
		t.Errorf("the polling thread offered its P %d times in %d polls over %v, want at most %d (one per %v)",
			offers, polls, time.Duration(ns), most, offerAfter)
	}
	line := regexp.MustCompile(`goroce0 on \S+ closes: .*`).FindString(stderr)
	if naks := counterIn(line, "rcvd_rnr_err"); naks < 2 {
		t.Errorf("rcvd_rnr_err = %d: the SEND was not retried on its RNR timer while the thread polled (%s)", naks, line)
	}
}
