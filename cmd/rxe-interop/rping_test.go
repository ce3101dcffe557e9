package main

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/goroce/goroce/wire"
)

// TestRpingCommandLines: rping's flags on both sides, each side's address
// of the case's family.
func TestRpingCommandLines(t *testing.T) {
	c := interopCase{Transport: "rc", Rdmacm: "rping", RxeRole: rxeServer, Family: ipv6, MTU: 1024, Size: 64, Iters: 5, Port: 18610}
	if got, want := c.rxeCommand(), "rping -s -a fd00:99::1 -p 18610 -C 5 -S 64 -V -v"; got != want {
		t.Errorf("rxe server command\n got %s\nwant %s", got, want)
	}
	want := []string{"rping", "-c", "-a", "fd00:99::1", "-p", "18610", "-C", "5", "-S", "64", "-V", "-v", "-I", "fd00:99::254", "--mtu", "1024"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("goroce client args\n got %q\nwant %q", got, want)
	}
	c.RxeRole, c.Family = rxeClient, ipv4
	if got, want := c.rxeCommand(), "rping -c -a 10.99.0.254 -p 18610 -C 5 -S 64 -V -v"; got != want {
		t.Errorf("rxe client command\n got %s\nwant %s", got, want)
	}
	want = []string{"rping", "-s", "-a", "10.99.0.254", "-p", "18610", "-C", "5", "-S", "64", "-V", "-v", "--mtu", "1024"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("goroce server args\n got %q\nwant %q", got, want)
	}
	if c.Name() != "rping-client-ipv4-mtu1024" || c.goroceChecks() {
		t.Errorf("name %s, goroceChecks %v", c.Name(), c.goroceChecks())
	}
	cfg, err := parseFlags([]string{"-transports", "none", "-perftests", "none", "-preload", "none"}, &strings.Builder{})
	if err != nil || !slices.Equal(cfg.plan.rdmacm, []string{"rping"}) {
		t.Fatalf("parseFlags: %+v %v", cfg.plan, err)
	}
	cfg.plan.rdmacmPreload, cfg.plan.own, cfg.plan.ucx = nil, nil, nil // see TestRdmacmPreloadCases, TestOwnCases, TestUCXCases
	if cs := matrix(cfg.plan); len(cs) != 8 || cs[0].Rdmacm != "rping" {
		t.Errorf("%d cases (%+v), want 8 rping cases: 2 roles, 2 families, 2 MTUs", len(cs), cs)
	}
	if _, err := parseFlags([]string{"-rdmacm", "cmtime"}, &strings.Builder{}); err == nil {
		t.Error("-rdmacm cmtime: want an error")
	}
}

// TestRpingWireMatchesRealRping: the suite's idea of rping's data and
// exchange holds for rxe-to-rxe rping (rping -C 3 -S 64, client
// 10.99.0.2), and a wrong count, size or client is seen.
func TestRpingWireMatchesRealRping(t *testing.T) {
	const golden = "../../wire/testdata/rping.pcap"
	if ps := rpingWireProblems(golden, "10.99.0.2", 7174, 3, 64); len(ps) != 0 {
		t.Errorf("the real rping's capture: %q", ps)
	}
	for _, tc := range []struct {
		client      string
		iters, size int
		want        string
	}{
		{"10.99.0.2", 4, 64, "3 READ responses and 3 WRITEs, want 4 each"},
		{"10.99.0.2", 3, 65, `READ response 0 carries "rdma-ping-0: ABC`},
		{"10.99.0.1", 3, 64, "CM messages [server:0x10 client:0x13"},
	} {
		ps := rpingWireProblems(golden, tc.client, 7174, tc.iters, tc.size)
		if !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, tc.want) }) {
			t.Errorf("client %s, %d x %d B: problems %q, want one with %q", tc.client, tc.iters, tc.size, ps, tc.want)
		}
	}
}

// TestRpingCMProblems: connects that a REJ refused (no listener yet),
// retransmitted messages and another case's REQ pass; a stray message, a
// second REQ that differs from the first, or a missing DREP does not.
func TestRpingCMProblems(t *testing.T) {
	msg := func(from string, attr uint16, fill func([]byte)) cmMsg {
		b := make([]byte, wire.MADLen-wire.MADHeaderLen)
		fill(b)
		return cmMsg{from: from, attr: attr, data: b}
	}
	req := func(id uint32, port uint16) cmMsg {
		return msg("client", wire.CMAttrREQ, func(b []byte) {
			binary.BigEndian.PutUint32(b, id)
			binary.BigEndian.PutUint64(b[8:], wire.ServiceID(wire.PortSpaceTCP, port))
		})
	}
	from := func(who string, attr uint16, local, remote uint32) cmMsg {
		return msg(who, attr, func(b []byte) { binary.BigEndian.PutUint32(b, local); binary.BigEndian.PutUint32(b[4:], remote) })
	}
	rej := msg("server", wire.CMAttrREJ, func(b []byte) {
		binary.BigEndian.PutUint32(b[4:], 1)
		b[8] = wire.CMMsgREQ << 6
		binary.BigEndian.PutUint16(b[10:], uint16(wire.CMRejInvalidServiceID))
	})
	conn := []cmMsg{req(2, 7174), from("server", wire.CMAttrREP, 9, 2), from("client", wire.CMAttrRTU, 2, 9),
		from("client", wire.CMAttrDREQ, 2, 9), from("server", wire.CMAttrDREP, 9, 2)}
	if ps := cmProblems(slices.Concat([]cmMsg{req(1, 7174), rej}, conn, []cmMsg{req(3, 7175)}), 7174); len(ps) != 0 {
		t.Errorf("a refused connect, the connection and the next case's REQ: %q", ps)
	}
	if ps := cmProblems(slices.Concat([]cmMsg{req(1, 7174)}, conn), 7174); len(ps) != 1 || !strings.Contains(ps[0], "outside the connection: client:0x10") {
		t.Errorf("a REQ nobody refused: %q", ps)
	}
	if ps := cmProblems(slices.Concat(conn[:1], conn), 7174); len(ps) != 0 {
		t.Errorf("a REQ sent twice (the first unanswered), then the connection: %q", ps)
	}
	again := req(2, 7174)
	again.data[20] ^= 1 // another REQ with the same ID is not a retransmission
	if ps := cmProblems(slices.Concat([]cmMsg{again}, conn), 7174); len(ps) != 1 || !strings.Contains(ps[0], "CM messages [client:0x10 client:0x10") {
		t.Errorf("two different REQs with one ID: %q", ps)
	}
	if ps := cmProblems(slices.Concat(conn[:2], conn[1:]), 7174); len(ps) != 0 {
		t.Errorf("a REP sent twice: %q", ps)
	}
	if ps := cmProblems(conn[:4], 7174); len(ps) != 1 || !strings.Contains(ps[0], "CM messages") {
		t.Errorf("no DREP: %q", ps)
	}
}
