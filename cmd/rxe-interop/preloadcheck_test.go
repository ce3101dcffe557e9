package main

import (
	"strings"
	"testing"
)

// TestPreloadChecksMatchRxe: the preloaded cases' data checks must pass
// rxe's own bytes, both ways, on captures of rxe talking to rxe (rxe-lab
// capture; the commands are in each pcap's .txt; see rxeRun), and fail
// the same capture with one byte changed.
func TestPreloadChecksMatchRxe(t *testing.T) {
	for _, tc := range []struct {
		pcap string
		c    interopCase
		want string // what the check says it checked
	}{
		{"testdata/chk_rc_pingpong.pcap", interopCase{Transport: "rc", MTU: 4096, Size: 8192, Iters: 3},
			"3 messages from goroce and 3 messages from rxe hold the program's fill"},
		{"testdata/chk_srq_pingpong.pcap", interopCase{Transport: "srq", MTU: 1024, Size: 1024, Iters: 5},
			"messages from rxe hold the program's fill"},
		{"testdata/chk_write_lat.pcap", interopCase{Transport: "rc", Perftest: "write_lat", MTU: 1024, Size: 64, Iters: 10},
			"10 messages from goroce and 10 messages from rxe hold the program's fill"},
		{"../../wire/testdata/ib_read_bw.pcap", interopCase{Transport: "rc", Perftest: "read_bw", MTU: 1024, Size: 4096, Iters: 20},
			"the 20 messages from rxe alike"},
		{"../../wire/testdata/ib_write_bw.pcap", interopCase{Transport: "rc", Perftest: "write_bw", MTU: 1024, Size: 4096, Iters: 20},
			"the 20 messages from goroce alike"},
		{"testdata/chk_atomic_bw.pcap", interopCase{Transport: "rc", Perftest: "atomic_bw", MTU: 1024, Size: 8, Iters: 128},
			"64 original values from rxe, each the last for its address plus its add"},
	} {
		t.Run(tc.pcap, func(t *testing.T) {
			tc.c.Preload, tc.c.RxeRole = true, rxeServer
			w := rxeRun(t, tc.pcap, tc.c)
			ps, what := preloadDataProblems(tc.c, w)
			if len(ps) > 0 || !strings.Contains(what, tc.want) {
				t.Errorf("rxe's own run: problems %q, checked %q, want %q", ps, what, tc.want)
			}
			// One byte changed in what each side sent (or one original
			// value): the check must see it.
			for _, f := range []*flow{&w.goroce, &w.rxe} {
				if len(f.Data) > 0 {
					p := f.Data[len(f.Data)/2].payload
					p[len(p)-1] ^= 0x40
				}
			}
			if len(w.rxe.OrigValues) > 0 {
				w.rxe.OrigValues[len(w.rxe.OrigValues)/2]++
			}
			if ps, what := preloadDataProblems(tc.c, w); len(ps) == 0 {
				t.Errorf("a changed byte passes: checked %q", what)
			}
		})
	}
}

// TestTimedOutRetransmits: a preloaded ping-pong may show go-back-N after
// the examples' fixed 67 ms timeout, counted as what it is; goroce
// pingpong, a NAK, or too many copies may not.
func TestTimedOutRetransmits(t *testing.T) {
	c := interopCase{Transport: "rc", Preload: true, RxeRole: rxeClient, MTU: 1024, Size: 1024, Iters: 5}
	// goroce sent its 5 messages and 2 of them again after a timeout;
	// rxe ACKed all 7.
	w := wireCount{
		goroce: flow{Requests: 7, ACKs: 5, Retransmits: 2},
		rxe:    flow{Requests: 5, ACKs: 7},
	}
	if ps := wireProblems(c, w); len(ps) > 0 {
		t.Errorf("preloaded, 2 timed-out copies: %q", ps)
	}
	// rxe's first SEND sent three times (preload-rc_pingpong-client-ipv6-mtu1024),
	// which goroce read together and ACKed once.
	rw := wireCount{
		goroce: flow{Requests: 5, ACKs: 5},
		rxe:    flow{Requests: 7, ACKs: 5, Retransmits: 2},
	}
	if ps := wireProblems(c, rw); len(ps) > 0 {
		t.Errorf("preloaded, rxe's 2 timed-out copies: %q", ps)
	}
	for _, bad := range []struct {
		why    string
		c      interopCase
		change func(*wireCount)
	}{
		{"goroce pingpong", interopCase{Transport: "rc", RxeRole: rxeClient, MTU: 1024, Size: 1024, Iters: 5}, nil},
		{"a NAK from rxe", c, func(w *wireCount) { w.rxe.NAKs = 1 }},
		{"a copy rxe did not ACK", c, func(w *wireCount) { w.rxe.ACKs = 6 }},
		{"more copies than 7 retries", c, func(w *wireCount) {
			w.goroce.Retransmits, w.goroce.Requests, w.rxe.ACKs = 36, 41, 41
		}},
	} {
		w := w
		if bad.change != nil {
			bad.change(&w)
		}
		if ps := wireProblems(bad.c, w); len(ps) == 0 {
			t.Errorf("%s: passes", bad.why)
		}
	}
}

// TestAtomicOneRoundChecksNothing: rxe's own 20 FETCH_ADDs go to 20
// addresses, so no original value can be checked, and the check says so
// rather than pass.
func TestAtomicOneRoundChecksNothing(t *testing.T) {
	c := interopCase{Transport: "rc", Perftest: "atomic_bw", Preload: true, RxeRole: rxeServer, MTU: 1024, Size: 8, Iters: 20}
	w := rxeRun(t, "ib_atomic_bw", c)
	if ps, what := preloadDataProblems(c, w); len(ps) != 1 || !strings.Contains(ps[0], "no FETCH_ADD of 20 went to an address again") {
		t.Errorf("one round: problems %q, checked %q", ps, what)
	}
}
