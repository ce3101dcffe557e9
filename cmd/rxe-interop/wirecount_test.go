package main

import (
	"strings"
	"testing"
)

// TestWantWireMatchesRxe holds the counts a case must show against rxe's
// own runs: the golden captures of rxe talking to rxe (wire/testdata),
// where guest B (10.99.0.2), the client, stands where goroce stands when
// rxe is the server. Both sides must show exactly what wantWire says, with
// no NAK and no retransmission.
func TestWantWireMatchesRxe(t *testing.T) {
	for _, tc := range []struct {
		pcap string
		c    interopCase
	}{
		{"rc_pingpong", interopCase{Transport: "rc", MTU: 1024, Size: 1024, Iters: 5}},
		{"ib_write_bw", interopCase{Transport: "rc", Perftest: "write_bw", MTU: 1024, Size: 4096, Iters: 20}},
		{"ib_send_lat", interopCase{Transport: "rc", Perftest: "send_lat", MTU: 1024, Size: 64, Iters: 20}},
	} {
		t.Run(tc.pcap, func(t *testing.T) {
			tc.c.RxeRole = rxeServer
			w, err := countWire("../../wire/testdata/"+tc.pcap+".pcap", "10.99.0.2", tc.c.ackTimeout())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("client %v; server %v", w.goroce, w.rxe)
			if ps := wireProblems(tc.c, w); len(ps) > 0 {
				t.Errorf("rxe's own run:\n%s", strings.Join(ps, "\n"))
			}
			if w.goroce.Packets == 0 || w.rxe.Packets == 0 {
				t.Errorf("no packets: %+v", w)
			}
			// One SEND fewer, as a lost packet would leave: the counts
			// must notice.
			tc.c.Iters++
			if ps := wireProblems(tc.c, w); len(ps) == 0 {
				t.Errorf("a run of %d operations passes for one of %d", tc.c.Iters-1, tc.c.Iters)
			}
		})
	}
}
