package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOwnCases: -own ext_qp makes one case per role and family, at MTU
// 1024 only, whose command lines run the program under goroce exec on
// goroce0's GID 0 and from the lab's /add on rxe0's GID of the family.
func TestOwnCases(t *testing.T) {
	cfg, err := parseFlags([]string{"-transports", "none", "-perftests", "none", "-preload", "none", "-rdmacm", "none",
		"-ucx", "none"}, &strings.Builder{})
	if err != nil || !slices.Equal(cfg.plan.own, ownPrograms) {
		t.Fatalf("parseFlags: %+v %v", cfg.plan, err)
	}
	cs := matrix(cfg.plan)
	if len(cs) != 4 {
		t.Fatalf("%d cases, want 4: 2 roles, 2 families, MTU 1024 only", len(cs))
	}
	c := cs[0]
	c.OwnBin = "/out/ext_qp"
	if c.Name() != "preload-ext_qp-server-ipv4-mtu1024" || c.Line() != "ext_qp preloaded rxe-server ipv4 mtu=1024" {
		t.Errorf("first case %q (%q)", c.Name(), c.Line())
	}
	want := []string{"exec", "--addr", "10.99.0.254", "--mtu", "1024", "--", "/out/ext_qp", "-g", "0", "-p", "18600", "10.99.0.1"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("goroce client args\n got %q\nwant %q", got, want)
	}
	if got, want := c.rxeCommand(), "/add/ext_qp -d rxe0 -g $G4 -p 18600"; got != want {
		t.Errorf("rxe server command %q, want %q", got, want)
	}
	c = cs[3]
	c.OwnBin = "/out/ext_qp"
	if got, want := c.rxeCommand(), "/add/ext_qp -d rxe0 -g $G6 -p 18603 10.99.0.254"; got != want || c.Family != ipv6 {
		t.Errorf("rxe client command %q, want %q", got, want)
	}
	want = []string{"exec", "--addr", "fd00:99::254", "--mtu", "1024", "--", "/out/ext_qp", "-g", "0", "-p", "18603"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("goroce server args\n got %q\nwant %q", got, want)
	}
	if _, err := parseFlags([]string{"-own", "verbs_check"}, &strings.Builder{}); err == nil {
		t.Error("-own verbs_check: want an error")
	}
}

// ownOut is what ext_qp prints, cut down: two api lines, the checks'
// result and the wire line.
func ownOut(failed, requests int) string {
	return "api: create_cq_ex with cqe 0: EINVAL\napi: query_gid_ex of index 100: ENODATA\n" +
		"check RC wr_send data: ok\n" +
		"wire: requests=" + strconv.Itoa(requests) + " read_responses=3 atomic_acks=2 naks=3\n" +
		"result: 72 checks, " + strconv.Itoa(failed) + " failed\n"
}

// TestOwnProblems: an ext_qp case passes when both sides report 0 failed
// checks, the same api lines, and a capture with what each says it sent
// and asked for; each difference is named.
func TestOwnProblems(t *testing.T) {
	c := interopCase{Own: "ext_qp", Preload: true, RxeRole: rxeServer, Family: ipv4, MTU: 1024, Port: 18600}
	side := flow{Requests: 26, ReadResponses: 3, AtomicACKs: 2, NAKs: 3, ACKs: 20}
	good := observed{goroceOut: ownOut(0, 26), rxeOut: strings.Split(ownOut(0, 26), "\n"),
		wire: wireCount{goroce: side, rxe: side}}
	if ps, what := ownProblems(c, good); len(ps) != 0 || !strings.Contains(what, "72 checks each side, 2 api lines alike") {
		t.Fatalf("clean case: %q (%s)", ps, what)
	}
	for _, tc := range []struct {
		name string
		edit func(*observed)
		want string
	}{
		{"a failed check", func(o *observed) {
			o.goroceOut = strings.Replace(ownOut(1, 26), "data: ok", "data: FAIL (differs)", 1)
		}, "goroce: 1 of 72 checks failed: check RC wr_send data: FAIL (differs)"},
		{"rxe answers otherwise", func(o *observed) {
			o.rxeOut = strings.Split(strings.Replace(ownOut(0, 26), "ENODATA", "EINVAL", 1), "\n")
		}, "the api lines differ"},
		{"no result", func(o *observed) { o.rxeOut = nil }, "rxe printed no result line"},
		{"a request missing", func(o *observed) { o.wire.goroce.Requests = 25 }, "goroce sent 25 requests (0 duplicates), its program 26"},
		{"a NAK missing", func(o *observed) { o.wire.rxe.NAKs = 2 }, "for goroce's requests the peer sent 3 read responses, 2 atomic ACKs, 2 NAKs; want 3, 2, 3"},
		{"a goroce retransmission", func(o *observed) { o.wire.goroce.Retransmits = 1 }, "goroce retransmitted 1 packets"},
		{"a goroce duplicate", func(o *observed) { o.wire.goroce.Requests, o.wire.goroce.Duplicates = 27, 1 }, "goroce sent 27 requests (1 duplicates)"},
	} {
		o := good
		tc.edit(&o)
		ps, _ := ownProblems(c, o)
		if !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, tc.want) }) {
			t.Errorf("%s: problems %q, want one with %q", tc.name, ps, tc.want)
		}
	}
	// A client run again (its peer was not listening yet) printed its
	// api lines twice in goroce's log: the last run counts.
	o := good
	o.goroceOut = "$ goroce exec -- ext_qp\n" + ownOut(0, 26) + "ext_qp: Couldn't connect to 10.99.0.1:18600\n" +
		"$ goroce exec -- ext_qp\n" + ownOut(0, 26)
	if ps, _ := ownProblems(c, o); len(ps) != 0 {
		t.Errorf("a client run twice: %q", ps)
	}
	// rxe's rare duplicates are allowed.
	o = good
	o.wire.rxe.Requests, o.wire.rxe.Duplicates = 27, 1
	if ps, _ := ownProblems(c, o); len(ps) != 0 {
		t.Errorf("one rxe duplicate: %q", ps)
	}
}
