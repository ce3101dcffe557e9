package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMatrixOrderAndPorts(t *testing.T) {
	cs := matrix(plan{transports: []string{"rc", "uc", "ud"}, roles: []role{rxeServer, rxeClient},
		families: []family{ipv4, ipv6}, mtus: []int{1024, 4096}, iters: 5})
	if len(cs) != 24 {
		t.Fatalf("got %d cases, want 24", len(cs))
	}
	names, ports := map[string]bool{}, map[int]bool{}
	raised := false
	for i, c := range cs {
		if names[c.Name()] || ports[c.Port] {
			t.Errorf("case %d %s: name or port %d used twice", i, c.Name(), c.Port)
		}
		names[c.Name()], ports[c.Port] = true, true
		if c.MTU == 4096 {
			raised = true
		} else if raised {
			t.Errorf("case %d %s: MTU 1024 after a 4096 case; the guest cannot lower its MTU", i, c.Name())
		}
	}
}

func TestMessageSizeFitsTheMTU(t *testing.T) {
	for _, tc := range []struct {
		transport string
		mtu, want int
	}{
		{"rc", 1024, 1024}, {"uc", 1024, 1024}, {"ud", 1024, 512},
		{"rc", 4096, 8192}, {"uc", 4096, 8192}, {"ud", 4096, 2048},
	} {
		if got := messageSize(tc.transport, tc.mtu); got != tc.want {
			t.Errorf("messageSize(%s, %d) = %d, want %d", tc.transport, tc.mtu, got, tc.want)
		}
	}
}

func TestCommandLines(t *testing.T) {
	c := interopCase{Transport: "rc", RxeRole: rxeServer, Family: ipv6, MTU: 4096, Size: 8192, Iters: 5, Port: 18612}
	if got, want := c.rxeCommand(), "ibv_rc_pingpong -d rxe0 -g $G6 -n 5 -s 8192 -c -m 4096 -p 18612"; got != want {
		t.Errorf("rxe server command\n got %s\nwant %s", got, want)
	}
	want := []string{"pingpong", "-t", "rc", "-m", "4096", "-s", "8192", "-n", "5", "-u", "18", "-p", "18612",
		"--addr", "fd00:99::254", "-c", "10.99.0.1"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("goroce client args\n got %q\nwant %q", got, want)
	}

	c = interopCase{Transport: "ud", RxeRole: rxeClient, Family: ipv4, MTU: 1024, Size: 512, Iters: 5, Port: 18605}
	if got, want := c.rxeCommand(), "ibv_ud_pingpong -d rxe0 -g $G4 -n 5 -s 512 -c -p 18605 10.99.0.254"; got != want {
		t.Errorf("rxe client command\n got %s\nwant %s", got, want)
	}
	want = []string{"pingpong", "-t", "ud", "-m", "1024", "-s", "512", "-n", "5", "-u", "18", "-p", "18605", "--addr", "10.99.0.254", "-c"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("goroce server args\n got %q\nwant %q", got, want)
	}
}

func TestGuestScriptRaisesMTUOnceBeforeTheFirst4096Case(t *testing.T) {
	cs := matrix(plan{transports: []string{"rc"}, roles: []role{rxeServer, rxeClient},
		families: []family{ipv4}, mtus: []int{1024, 4096}, iters: 5})
	s := guestScript(cs, 10*time.Second)
	if n := strings.Count(s, "\nset_mtu 9000\n"); n != 1 {
		t.Fatalf("set_mtu 9000 appears %d times, want once:\n%s", n, s)
	}
	mtu := strings.Index(s, "\nset_mtu 9000\n")
	last1024 := strings.Index(s, "run_case client rc_pingpong-client-ipv4-mtu1024 ")
	first4096 := strings.Index(s, "run_case server rc_pingpong-server-ipv4-mtu4096 ")
	if last1024 < 0 || first4096 < 0 || !(last1024 < mtu && mtu < first4096) {
		t.Errorf("want the MTU raised between the 1024 and 4096 cases:\n%s", s)
	}
	if !strings.Contains(s, "CT=10 ") || !strings.HasSuffix(s, "exit $fail\n") {
		t.Errorf("want the case timeout and the failure count as exit status:\n%s", s)
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-mtus", "4096,1024", "-transports", "ud", "-families", "ipv6"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.plan.mtus, []int{1024, 4096}) || !slices.Equal(cfg.plan.transports, []string{"ud"}) ||
		!slices.Equal(cfg.plan.families, []family{ipv6}) || len(cfg.plan.roles) != 2 {
		t.Errorf("got %+v", cfg)
	}
	for _, bad := range [][]string{{"-mtus", "2048"}, {"-transports", "rd"}, {"-roles", "both"}, {"-iters", "0"}, {"extra"}} {
		if _, err := parseFlags(bad, &strings.Builder{}); err == nil {
			t.Errorf("parseFlags(%q): want an error", bad)
		}
	}
}

func TestPerftestCases(t *testing.T) {
	cs := matrix(plan{transports: []string{"rc"}, perftests: perftests, roles: []role{rxeServer, rxeClient},
		families: []family{ipv4}, mtus: []int{1024}, iters: 5, perfIters: 20})
	if len(cs) != 2*(1+len(perftests)) {
		t.Fatalf("got %d cases, want %d", len(cs), 2*(1+len(perftests)))
	}
	c := cs[1]
	if c.Line() != "ib_write_bw rxe-server ipv4 mtu=1024" || c.Name() != "ib_write_bw-server-ipv4-mtu1024" || c.goroceChecks() {
		t.Errorf("case %q named %q", c.Line(), c.Name())
	}
	if got, want := c.rxeCommand(), "ib_write_bw -d rxe0 -x $G4 -n 20 -s 4096 -F -m 1024 -u 18 -p 18601"; got != want {
		t.Errorf("rxe server command\n got %s\nwant %s", got, want)
	}
	want := []string{"perf", "write_bw", "-d", "rxe0", "-x", "1", "-F", "-m", "1024", "-n", "20", "-u", "18", "-s", "4096",
		"-p", "18601", "--addr", "10.99.0.254", "--data-report", "--exchange", "perftest", "10.99.0.1"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("goroce client args\n got %q\nwant %q", got, want)
	}
	c = interopCase{Transport: "rc", Perftest: "atomic_bw", RxeRole: rxeClient, Family: ipv6, MTU: 4096, Size: 8, Iters: 20, Port: 18650}
	if got, want := c.rxeCommand(), "ib_atomic_bw -d rxe0 -x $G6 -n 20 -F -m 4096 -u 18 -p 18650 10.99.0.254"; got != want {
		t.Errorf("rxe client command\n got %s\nwant %s", got, want)
	}
	want = []string{"perf", "atomic_bw", "-d", "rxe0", "-x", "1", "-F", "-m", "4096", "-n", "20",
		"-u", "18", "-p", "18650", "--addr", "fd00:99::254", "--data-report", "--sc-addr", "10.99.0.254"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("goroce server args\n got %q\nwant %q", got, want)
	}
	if perftestSize("write_bw", 4096) != 8192 || perftestSize("send_lat", 4096) != 64 || perftestSize("atomic_bw", 1024) != 8 {
		t.Error("perftestSize")
	}
	if _, err := parseFlags([]string{"-transports", "none", "-perftests", "none", "-preload", "none", "-rdmacm", "none", "-own", "none", "-ucx", "none"}, &strings.Builder{}); err == nil {
		t.Error("nothing to run: want an error")
	}
	cfg, err := parseFlags([]string{"-transports", "none", "-perftests", "ib_send_bw,read_lat"}, &strings.Builder{})
	if err != nil || !slices.Equal(cfg.plan.perftests, []string{"send_bw", "read_lat"}) || len(cfg.plan.transports) != 0 {
		t.Errorf("parseFlags: %+v %v", cfg.plan, err)
	}
}

func TestPreloadCases(t *testing.T) {
	cs := matrix(plan{preloadPingpongs: []string{"srq"}, preloadPerftests: []string{"read_lat"},
		roles: []role{rxeServer, rxeClient}, families: []family{ipv6}, mtus: []int{4096}, iters: 5, perfIters: 20})
	if len(cs) != 4 {
		t.Fatalf("got %d cases, want 4", len(cs))
	}
	c := cs[0]
	if c.Line() != "srq_pingpong preloaded rxe-server ipv6 mtu=4096" || c.Name() != "preload-srq_pingpong-server-ipv6-mtu4096" ||
		c.goroceChecks() || c.Size != 8192 {
		t.Errorf("case %q named %q, size %d", c.Line(), c.Name(), c.Size)
	}
	if got, want := c.rxeCommand(), "ibv_srq_pingpong -d rxe0 -g $G6 -n 5 -s 8192 -c -q 4 -m 4096 -p 18600"; got != want {
		t.Errorf("rxe server command\n got %s\nwant %s", got, want)
	}
	want := []string{"exec", "--addr", "fd00:99::254", "--mtu", "4096", "--",
		"ibv_srq_pingpong", "-d", "goroce0", "-g", "0", "-n", "5", "-s", "8192", "-c", "-q", "4", "-m", "4096", "-p", "18600", "10.99.0.1"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("preloaded client args\n got %q\nwant %q", got, want)
	}
	c = cs[3]
	if c.Line() != "ib_read_lat preloaded rxe-client ipv6 mtu=4096" || c.Size != 64 {
		t.Errorf("case %q, size %d", c.Line(), c.Size)
	}
	if got, want := c.rxeCommand(), "ib_read_lat -d rxe0 -x $G6 -n 20 -s 64 -F -m 4096 -u 18 -p 18603 10.99.0.254"; got != want {
		t.Errorf("rxe client command\n got %s\nwant %s", got, want)
	}
	want = []string{"exec", "--addr", "fd00:99::254", "--mtu", "4096", "--",
		"ib_read_lat", "-d", "goroce0", "-x", "0", "-n", "20", "-s", "64", "-F", "-m", "4096", "-u", "18", "-p", "18603"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("preloaded server args\n got %q\nwant %q", got, want)
	}
	cfg, err := parseFlags([]string{"-transports", "none", "-perftests", "none", "-preload", "ud,ib_write_bw,srq"}, &strings.Builder{})
	if err != nil || !slices.Equal(cfg.plan.preloadPingpongs, []string{"ud", "srq"}) ||
		!slices.Equal(cfg.plan.preloadPerftests, []string{"write_bw"}) {
		t.Errorf("parseFlags: %+v %v", cfg.plan, err)
	}
	if _, err := parseFlags([]string{"-preload", "xrc"}, &strings.Builder{}); err == nil {
		t.Error("-preload xrc: want an error")
	}
}

func TestPreloadEventCases(t *testing.T) {
	cs := matrix(plan{preloadEvents: []string{"rc", "send_lat"}, roles: []role{rxeServer, rxeClient},
		families: []family{ipv4}, mtus: []int{1024}, iters: 5, perfIters: 20})
	if len(cs) != 4 {
		t.Fatalf("got %d cases, want 4", len(cs))
	}
	c := cs[0]
	if c.Line() != "rc_pingpong -e preloaded rxe-server ipv4 mtu=1024" || c.Name() != "preload-rc_pingpong-e-server-ipv4-mtu1024" ||
		c.Size != 1024 || c.Iters != 5 {
		t.Errorf("case %q named %q, size %d, iters %d", c.Line(), c.Name(), c.Size, c.Iters)
	}
	if got, want := c.rxeCommand(), "ibv_rc_pingpong -d rxe0 -g $G4 -n 5 -s 1024 -c -m 1024 -e -p 18600"; got != want {
		t.Errorf("rxe server command\n got %s\nwant %s", got, want)
	}
	want := []string{"exec", "--addr", "10.99.0.254", "--mtu", "1024", "--",
		"ibv_rc_pingpong", "-d", "goroce0", "-g", "0", "-n", "5", "-s", "1024", "-c", "-m", "1024", "-e", "-p", "18600", "10.99.0.1"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("preloaded client args\n got %q\nwant %q", got, want)
	}
	c = cs[3]
	if c.Line() != "ib_send_lat -e preloaded rxe-client ipv4 mtu=1024" || c.Name() != "preload-ib_send_lat-e-client-ipv4-mtu1024" ||
		c.Size != 64 || c.Iters != 20 {
		t.Errorf("case %q named %q, size %d, iters %d", c.Line(), c.Name(), c.Size, c.Iters)
	}
	if got, want := c.rxeCommand(), "ib_send_lat -d rxe0 -x $G4 -n 20 -s 64 -F -m 1024 -u 18 -e -p 18603 10.99.0.254"; got != want {
		t.Errorf("rxe client command\n got %s\nwant %s", got, want)
	}
	want = []string{"exec", "--addr", "10.99.0.254", "--mtu", "1024", "--",
		"ib_send_lat", "-d", "goroce0", "-x", "0", "-n", "20", "-s", "64", "-F", "-m", "1024", "-u", "18", "-e", "-p", "18603"}
	if got := c.goroceArgs(); !slices.Equal(got, want) {
		t.Errorf("preloaded server args\n got %q\nwant %q", got, want)
	}
	cfg, err := parseFlags([]string{"-transports", "none", "-perftests", "none", "-preload", "rc-e,ib_send_bw-e,srq"}, &strings.Builder{})
	if err != nil || !slices.Equal(cfg.plan.preloadEvents, []string{"rc", "send_bw"}) ||
		!slices.Equal(cfg.plan.preloadPingpongs, []string{"srq"}) || len(cfg.plan.preloadPerftests) != 0 {
		t.Errorf("parseFlags: %+v %v", cfg.plan, err)
	}
	if _, err := parseFlags([]string{"-preload", "write_bw-e"}, &strings.Builder{}); err == nil {
		t.Error("-preload write_bw-e (ib_write_bw has no -e): want an error")
	}
	if cfg, err := parseFlags(nil, &strings.Builder{}); err != nil || !slices.Equal(cfg.plan.preloadEvents, preloadEvents) {
		t.Errorf("by default: preloaded in event mode %q, %v; want %q", cfg.plan.preloadEvents, err, preloadEvents)
	}
}
