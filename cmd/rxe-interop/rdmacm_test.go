package main

import (
	"slices"
	"strings"
	"testing"
)

// TestRdmacmPreloadCases: the -rdmacm items, the cases they make (MTU 1024
// only, both roles and families), and each program's command lines on
// both sides, as librdmacm's examples take them (rdma-core's rping.c,
// cmatose.c, udaddy.c, rdma_server.c and rdma_client.c getopt strings).
func TestRdmacmPreloadCases(t *testing.T) {
	cfg, err := parseFlags([]string{"-transports", "none", "-perftests", "none", "-preload", "none",
		"-rdmacm", "rping-preload,ucmatose,udaddy,rdma_server", "-own", "none", "-ucx", "none"}, &strings.Builder{})
	if err != nil || len(cfg.plan.rdmacm) != 0 || !slices.Equal(cfg.plan.rdmacmPreload, rdmacmPreloaded) {
		t.Fatalf("parseFlags: %+v %v", cfg.plan, err)
	}
	cs := matrix(cfg.plan)
	if len(cs) != 16 {
		t.Fatalf("%d cases, want 16: 4 programs, 2 roles, 2 families, MTU 1024 only", len(cs))
	}
	if c := cs[0]; c.Name() != "preload-rping-server-ipv4-mtu1024" || c.Line() != "rping preloaded rxe-server ipv4 mtu=1024" || !c.Preload {
		t.Errorf("first case %q (%q)", c.Name(), c.Line())
	}
	exec4 := []string{"exec", "--addr", "10.99.0.254", "--mtu", "1024", "--"}
	exec6 := []string{"exec", "--addr", "fd00:99::254", "--mtu", "1024", "--"}
	for _, tc := range []struct {
		prog   string
		r      role
		f      family
		rxe    string
		goroce []string
	}{
		{"rping", rxeServer, ipv4, "rping -s -a 10.99.0.1 -p 18600 -C 5 -S 64 -V -v",
			slices.Concat(exec4, []string{"rping", "-c", "-a", "10.99.0.1", "-p", "18600", "-C", "5", "-S", "64", "-V", "-v", "-I", "10.99.0.254"})},
		{"rping", rxeClient, ipv6, "rping -c -a fd00:99::254 -p 18600 -C 5 -S 64 -V -v",
			slices.Concat(exec6, []string{"rping", "-s", "-a", "fd00:99::254", "-p", "18600", "-C", "5", "-S", "64", "-V", "-v"})},
		{"ucmatose", rxeServer, ipv6, "ucmatose -C 5 -p 18600 -b fd00:99::1",
			slices.Concat(exec6, []string{"ucmatose", "-C", "5", "-p", "18600", "-s", "fd00:99::1", "-b", "fd00:99::254"})},
		{"ucmatose", rxeClient, ipv4, "ucmatose -C 5 -p 18600 -s 10.99.0.254",
			slices.Concat(exec4, []string{"ucmatose", "-C", "5", "-p", "18600", "-b", "10.99.0.254"})},
		{"udaddy", rxeServer, ipv4, "udaddy -C 5 -b 10.99.0.1",
			slices.Concat(exec4, []string{"udaddy", "-C", "5", "-s", "10.99.0.1", "-b", "10.99.0.254"})},
		{"udaddy", rxeClient, ipv6, "udaddy -C 5 -s fd00:99::254",
			slices.Concat(exec6, []string{"udaddy", "-C", "5", "-b", "fd00:99::254"})},
		{"rdma_server", rxeServer, ipv6, "rdma_server -s fd00:99::1 -p 18600",
			slices.Concat(exec6, []string{"rdma_client", "-s", "fd00:99::1", "-p", "18600"})},
		{"rdma_server", rxeClient, ipv4, "rdma_client -s 10.99.0.254 -p 18600",
			slices.Concat(exec4, []string{"rdma_server", "-s", "10.99.0.254", "-p", "18600"})},
	} {
		c := cfg.plan.rdmacmPreloadCase(tc.prog, tc.r, tc.f, 18600)
		if tc.prog == "rping" {
			c = cfg.plan.rdmacmPreloadCase("rping-preload", tc.r, tc.f, 18600)
		}
		if got := c.rxeCommand(); got != tc.rxe {
			t.Errorf("%s: rxe command\n got %s\nwant %s", c.Name(), got, tc.rxe)
		}
		if got := c.goroceArgs(); !slices.Equal(got, tc.goroce) {
			t.Errorf("%s: goroce args\n got %q\nwant %q", c.Name(), got, tc.goroce)
		}
		if want := map[string]int{"rping": 64, "ucmatose": 100, "udaddy": 100, "rdma_server": 16}[tc.prog]; c.Size != want {
			t.Errorf("%s: message size %d, want %d", c.Name(), c.Size, want)
		}
	}
}

// TestRdmacmPreloadProblems: a preloaded ucmatose or rdma_server case
// passes only if each side printed its own program's closing lines, in
// the role it played.
func TestRdmacmPreloadProblems(t *testing.T) {
	c := interopCase{Rdmacm: "ucmatose", Preload: true, RxeRole: rxeServer, Family: ipv4, MTU: 1024, Iters: 5, Port: 18600}
	client := "$ goroce exec ...\ncmatose: starting client\ncmatose: connecting\nreceiving data transfers\nsending replies\n" +
		"data transfers complete\ntest complete\nreturn status 0\n"
	server := []string{"cmatose: starting server", "initiating data transfers", "completing sends", "receiving data transfers",
		"data transfers complete", "cmatose: disconnecting", "disconnected", "test complete", "return status 0"}
	if ps, _ := rdmacmPreloadProblems(c, observed{goroceOut: client, rxeOut: server}); len(ps) != 0 {
		t.Errorf("ucmatose that completed: %q", ps)
	}
	ps, _ := rdmacmPreloadProblems(c, observed{goroceOut: strings.Replace(client, "return status 0", "return status -1", 1), rxeOut: server[:7]})
	if want := []string{`goroce did not print "return status 0"`, `rxe did not print "test complete"`, `rxe did not print "return status 0"`}; !slices.Equal(ps, want) {
		t.Errorf("ucmatose that failed: %q, want %q", ps, want)
	}
	c.Rdmacm, c.RxeRole = "rdma_server", rxeClient
	if ps, _ := rdmacmPreloadProblems(c, observed{goroceOut: "rdma_server: start\nrdma_server: end 0\n", rxeOut: []string{"rdma_client: start", "rdma_client: end 0"}}); len(ps) != 0 {
		t.Errorf("rdma_server that completed: %q", ps)
	}
	if ps, _ := rdmacmPreloadProblems(c, observed{goroceOut: "rdma_client: end 0\n", rxeOut: []string{"rdma_server: end 0"}}); len(ps) != 2 {
		t.Errorf("the roles swapped: %q, want 2 problems", ps)
	}
}
