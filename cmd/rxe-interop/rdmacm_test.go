package main

import (
	"slices"
	"strings"
	"testing"
)

// TestRdmacmPreloadCases: the -rdmacm items, the cases they make (MTU 1024
// only, both roles and families, fi_pingpong IPv4 only), and each
// program's command lines on both sides, as librdmacm's examples take them
// (rdma-core's rping.c, cmatose.c, udaddy.c, rdma_server.c and
// rdma_client.c getopt strings) and libfabric's fi_pingpong (util/pingpong.c).
func TestRdmacmPreloadCases(t *testing.T) {
	cfg, err := parseFlags([]string{"-transports", "none", "-perftests", "none", "-preload", "none",
		"-rdmacm", "rping-preload,ucmatose,udaddy,rdma_server,fi_pingpong", "-own", "none", "-ucx", "none"}, &strings.Builder{})
	if err != nil || len(cfg.plan.rdmacm) != 0 || !slices.Equal(cfg.plan.rdmacmPreload, rdmacmPreloaded) {
		t.Fatalf("parseFlags: %+v %v", cfg.plan, err)
	}
	cs := matrix(cfg.plan)
	if len(cs) != 18 {
		t.Fatalf("%d cases, want 18: 4 programs, 2 roles, 2 families, and fi_pingpong's 2 roles in IPv4, MTU 1024 only", len(cs))
	}
	for _, c := range cs {
		if c.Rdmacm == "fi_pingpong" && c.Family != ipv4 {
			t.Errorf("case %s: fi_pingpong runs over IPv4 only", c.Name())
		}
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
		{"fi_pingpong", rxeServer, ipv4, "fi_pingpong -p verbs -e msg -c -I 5 -S 4096 -B 18600",
			slices.Concat(exec4, []string{"fi_pingpong", "-p", "verbs", "-e", "msg", "-c", "-I", "5", "-S", "4096", "-P", "18600", "10.99.0.1"})},
		{"fi_pingpong", rxeClient, ipv4, "fi_pingpong -p verbs -e msg -c -I 5 -S 4096 -P 18600 10.99.0.254",
			slices.Concat(exec4, []string{"fi_pingpong", "-p", "verbs", "-e", "msg", "-c", "-I", "5", "-S", "4096", "-B", "18600"})},
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
		if want := map[string]int{"rping": 64, "ucmatose": 100, "udaddy": 100, "rdma_server": 16, "fi_pingpong": 4096}[tc.prog]; c.Size != want {
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

// TestFiPingpongProblems: a fi_pingpong case passes only if both sides
// printed the row of its size with -I messages sent and acknowledged
// (lines as fi_pingpong 1.17 prints them).
func TestFiPingpongProblems(t *testing.T) {
	c := interopCase{Rdmacm: "fi_pingpong", Preload: true, RxeRole: rxeServer, Family: ipv4, MTU: 1024, Iters: 5, Port: 18600}
	table := "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n" +
		"4k      5       =5       40k         0.01s      4.93     831.55       0.00\n"
	rxe := strings.Split(strings.TrimSpace(table), "\n")
	if ps, _ := rdmacmPreloadProblems(c, observed{goroceOut: "$ goroce exec ...\n" + table, rxeOut: rxe}); len(ps) != 0 {
		t.Errorf("fi_pingpong that completed: %q", ps)
	}
	short := strings.Replace(table, "=5 ", "=4 ", 1)
	ps, _ := rdmacmPreloadProblems(c, observed{goroceOut: short, rxeOut: rxe[:1]})
	if want := []string{"goroce's fi_pingpong printed no row of 5 x 4k sent and acknowledged",
		"rxe's fi_pingpong printed no row of 5 x 4k sent and acknowledged"}; !slices.Equal(ps, want) {
		t.Errorf("fi_pingpong that did not complete: %q, want %q", ps, want)
	}
}
