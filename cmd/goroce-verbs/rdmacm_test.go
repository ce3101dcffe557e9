//go:build cgo && linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/cmd/goroce-verbs/build"
)

// cmLibs is libs for the librdmacm programs: it also needs librdmacm-dev.
func cmLibs(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(build.CMAHeader); err != nil {
		testenv.SkipOrFailf(t, "%s is missing: apt-get install librdmacm-dev", build.CMAHeader)
	}
	return libs(t)
}

// listenWatch is a server's stderr: it keeps what the program writes and
// closes listening at the core's "rdma_listen: listening on" line
// (GOROCE_DEBUG=1), the moment its client can connect. An rdma_cm server
// listens on no socket a test could probe.
type listenWatch struct {
	mu        sync.Mutex
	buf       *bytes.Buffer
	listening chan struct{}
	once      sync.Once
}

func (w *listenWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if strings.Contains(w.buf.String(), "goroce-verbs: rdma_listen: listening on ") {
		w.once.Do(func() { close(w.listening) })
	}
	return len(b), nil
}

// cmPair runs server and client, both preloaded (server on sa with
// GOROCE_DEBUG=1, client on ca), starting the client once the server
// listens, and returns their outputs once both have exited 0.
func cmPair(t *testing.T, lib, sa, ca string, server, client []string) (sout, cout string) {
	t.Helper()
	sout, cout, err := tryCMPair(t, lib, sa, ca, server, client)
	if err != nil {
		t.Fatal(err)
	}
	return sout, cout
}

// tryCMPair is cmPair that returns the failure of either program, with
// both their outputs, instead of failing the test.
func tryCMPair(t *testing.T, lib, sa, ca string, server, client []string) (sout, cout string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &proc{cmd: exec.CommandContext(ctx, server[0], server[1:]...), done: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "GOROCE_ADDR="+sa, "GOROCE_DEBUG=1")
	w := &listenWatch{buf: &s.stderr, listening: make(chan struct{})}
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, w
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	select {
	case <-w.listening:
	case err := <-s.done:
		t.Fatalf("%s exited before listening: %v\n%s%s", server[0], err, &s.stdout, &s.stderr)
	case <-ctx.Done():
		s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("%s never listened:\n%s%s", server[0], &s.stdout, &s.stderr)
	}
	c := start(ctx, t, lib, ca, []string{"GOROCE_DEBUG=1"}, client[0], client[1:]...)
	cerr := <-c.done
	serr := s.waitAfterClient()
	return s.stdout.String(), c.stdout.String(), pairErr(c, cerr, s, serr)
}

// waitAfterClient waits for a server whose client has exited, and kills
// it if it is still running 30 s later.
func (s *proc) waitAfterClient() error {
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		return fmt.Errorf("still running 30 s after its client exited (%v)", <-s.done)
	}
}

// rpingData is what rping puts in its buffer for ping number n, with -S
// size (rping.c: RPING_MSG_FMT, then characters from 'A'+n on, wrapping
// from 'z' to 'A', to size-1 bytes and a NUL): the oracle for what each
// side prints of what it read or was sent.
func rpingData(n, size int) string {
	b := []byte(fmt.Sprintf("rdma-ping-%d: ", n))
	c := byte(65 + n%58)
	for len(b) < size-1 {
		b = append(b, c)
		if c++; c > 122 {
			c = 65
		}
	}
	return string(b)
}

// TestRping runs Debian's rping, both sides preloaded: per ping the client
// SENDs its buffer's address, the server RDMA READs the client's data,
// SENDs, RDMA WRITEs it back, and -V makes the client compare what came
// back with what it sent. With -v each side prints what it has; both
// must print exactly what rping's pattern gives for each ping, so the
// data crossed both ways.
func TestRping(t *testing.T) {
	bin := testenv.LookPath(t, "rping", "rdmacm-utils")
	lib := cmLibs(t)
	for _, size := range []int{64, 6000} {
		t.Run(fmt.Sprintf("S%d", size), func(t *testing.T) {
			sa, ca := addrs()
			port := strconv.Itoa(testenv.FreeTCPPort(t))
			common := []string{"-v", "-V", "-C", "10", "-S", strconv.Itoa(size), "-a", sa, "-p", port}
			sout, cout := cmPair(t, lib, sa, ca, append([]string{bin, "-s"}, common...), append([]string{bin, "-c"}, common...))
			var swant, cwant strings.Builder
			for n := range 10 {
				fmt.Fprintf(&swant, "server ping data: %s\n", rpingData(n, size))
				fmt.Fprintf(&cwant, "ping data: %s\n", rpingData(n, size))
			}
			if sout != swant.String() {
				t.Errorf("rping -s printed\n%s\nwant\n%s", sout, swant.String())
			}
			if cout != cwant.String() {
				t.Errorf("rping -c printed\n%s\nwant\n%s", cout, cwant.String())
			}
		})
	}
}

// TestUcmatose runs Debian's ucmatose with two connections (-c 2), both
// sides preloaded, and again with -m, which moves every ID to a second
// event channel (rdma_migrate_id) once connected. Each side SENDs -C
// messages per connection and waits for the other's; each must end with
// ucmatose's own "test complete" and status 0.
func TestUcmatose(t *testing.T) {
	bin := testenv.LookPath(t, "ucmatose", "rdmacm-utils")
	lib := cmLibs(t)
	for _, extra := range [][]string{nil, {"-m"}} {
		t.Run("c2"+strings.Join(extra, ""), func(t *testing.T) {
			sa, ca := addrs()
			args := append([]string{"-c", "2", "-C", "10", "-S", "5000", "-p", strconv.Itoa(testenv.FreeTCPPort(t))}, extra...)
			sout, cout := cmPair(t, lib, sa, ca, append([]string{bin, "-b", sa}, args...), append([]string{bin, "-s", sa}, args...))
			migrated := ""
			if extra != nil {
				migrated = "migrating to new event channel\n"
			}
			for _, c := range []struct{ who, out, want string }{
				{"server", sout, "cmatose: starting server\ninitiating data transfers\ncompleting sends\nreceiving data transfers\n" +
					"data transfers complete\n" + migrated + "cmatose: disconnecting\ndisconnected\ntest complete\nreturn status 0\n"},
				{"client", cout, "cmatose: starting client\ncmatose: connecting\nreceiving data transfers\nsending replies\n" +
					"data transfers complete\n" + migrated + "test complete\nreturn status 0\n"},
			} {
				if c.out != c.want {
					t.Errorf("ucmatose %s printed\n%s\nwant\n%s", c.who, c.out, c.want)
				}
			}
		})
	}
}

// TestUdaddy runs Debian's udaddy, both sides preloaded: UD QPs in
// RDMA_PS_UDP, whose client finds the server's QP with a SIDR_REQ and
// SIDR_REP (ESTABLISHED with rdma_ud_param's address handle, QPN and
// Q_Key), SENDs to it, and the server answers through
// ibv_create_ah_from_wc.
func TestUdaddy(t *testing.T) {
	bin := testenv.LookPath(t, "udaddy", "rdmacm-utils")
	lib := cmLibs(t)
	sa, ca := addrs()
	args := []string{"-c", "2", "-C", "10"} // udaddy has no port option: 7174 on each device
	sout, cout := cmPair(t, lib, sa, ca, append([]string{bin, "-b", sa}, args...), append([]string{bin, "-s", sa}, args...))
	for _, c := range []struct{ who, out, want string }{
		{"server", sout, "udaddy: starting server\nreceiving data transfers\nsending replies\ndata transfers complete\n" +
			"test complete\nreturn status 0\n"},
		{"client", cout, "udaddy: starting client\nudaddy: connecting\ninitiating data transfers\nreceiving data transfers\n" +
			"data transfers complete\ntest complete\nreturn status 0\n"},
	} {
		if c.out != c.want {
			t.Errorf("udaddy %s printed\n%s\nwant\n%s", c.who, c.out, c.want)
		}
	}
}

// TestRdmaServerClient runs librdmacm's rdma_server and rdma_client, both
// preloaded: synchronous IDs (rdma_create_ep, rdma_get_request), the CQs
// rdma_create_qp makes for them, and rdma_verbs.h's helpers; the client
// SENDs 16 bytes inline with no MR, the server answers, and each waits for
// its completions with rdma_get_send_comp and rdma_get_recv_comp.
func TestRdmaServerClient(t *testing.T) {
	server := testenv.LookPath(t, "rdma_server", "rdmacm-utils")
	client := testenv.LookPath(t, "rdma_client", "rdmacm-utils")
	lib := cmLibs(t)
	sa, ca := addrs()
	port := strconv.Itoa(testenv.FreeTCPPort(t))
	sout, cout := cmPair(t, lib, sa, ca, []string{server, "-p", port}, []string{client, "-s", sa, "-p", port})
	if want := "rdma_server: start\nrdma_server: end 0\n"; sout != want {
		t.Errorf("rdma_server printed\n%s\nwant\n%s", sout, want)
	}
	if want := "rdma_client: start\nrdma_client: end 0\n"; cout != want {
		t.Errorf("rdma_client printed\n%s\nwant\n%s", cout, want)
	}
}

// TestWriteBwRDMACM runs perftest's ib_write_bw -R, both sides preloaded:
// the QPs connect through rdma_cm, and perftest exchanges its parameters
// over them.
func TestWriteBwRDMACM(t *testing.T) {
	bin := testenv.LookPath(t, "ib_write_bw", "perftest")
	lib := cmLibs(t)
	var sout, cout, sa, ca string
	for attempt := 1; ; attempt++ {
		sa, ca = addrs()
		args := []string{"-R", "-s", "65536", "-n", "100", "-p", strconv.Itoa(testenv.FreeTCPPort(t))}
		var err error
		sout, cout, err = tryCMPair(t, lib, sa, ca, append([]string{bin}, args...), append([]string{bin}, append(args, sa)...))
		if err == nil {
			break
		}
		// As in preloadedPair: perftest's measure of the CPU clock can
		// fail on a loaded machine; run the pair again, twice at most.
		if attempt < 3 && strings.Contains(err.Error(), "Can't produce a report") {
			t.Logf("attempt %d: perftest could not measure the CPU clock; running the pair again", attempt)
			continue
		}
		// perftest -R connects twice: once to exchange parameters, then,
		// after a handshake over that connection, for the test's QPs. Its
		// server sends its half of the handshake before it listens again,
		// so the client's second REQ can find nothing listening: the CM
		// rejects it (REJ reason 8, invalid service ID, as Linux's does).
		// The client is meant to retry, but Debian's perftest 4.5 retries
		// on the IDs it has just destroyed and crashes (fixed upstream in
		// 3d9d8d0, "Fix crashes and logical flaws in RDMA CM connection
		// retry", release 26.04.17). Run the pair again, twice at most.
		if attempt < 3 && strings.Contains(err.Error(), "Event: RDMA_CM_EVENT_REJECTED; error: 8.") &&
			strings.Contains(err.Error(), "segmentation fault") {
			t.Logf("attempt %d: perftest's second connection was rejected before its server listened, and its retry crashed; running the pair again", attempt)
			continue
		}
		t.Fatal(err)
	}
	for _, c := range []struct{ who, out, local, remote string }{{"server", sout, sa, ca}, {"client", cout, ca, sa}} {
		if err := perftestRows(c.out, []int{65536}); err != nil {
			t.Errorf("ib_write_bw -R %s: %v:\n%s", c.who, err, c.out)
		}
		for _, want := range []string{"rdma_cm QPs\t : ON", "Data ex. method : rdma_cm",
			"GID: " + gidString(c.local), "GID: " + gidString(c.remote)} {
			if !strings.Contains(c.out, want) {
				t.Errorf("ib_write_bw -R %s output lacks %q:\n%s", c.who, want, c.out)
			}
		}
	}
}

// gidString is an IPv4 address's GID as perftest prints it: the bytes of
// ::ffff:a.b.c.d in decimal, two digits at least, colon-separated.
func gidString(ip4 string) string {
	var b [16]byte
	b[10], b[11] = 0xff, 0xff
	for i, f := range strings.Split(ip4, ".") {
		n, _ := strconv.Atoi(f)
		b[12+i] = byte(n)
	}
	parts := make([]string, 16)
	for i, v := range b {
		parts[i] = fmt.Sprintf("%02d", v)
	}
	return strings.Join(parts, ":")
}

// TestRDMACMCalls runs testdata/rdmacm_check.c, a librdmacm program of our
// own built against Debian's librdmacm, preloaded: one process whose
// client connects to its own listener. What it prints is what librdmacm
// gives over the kernel's rdma_cm: the channel's fd works with poll() and
// a non-blocking one gives EAGAIN; a bind to another host's address is
// EADDRNOTAVAIL, to a bound port EADDRINUSE; CONNECT_REQUEST names the
// listener and a new ID with the listener's context, carries the REQ's
// private data (56 bytes after rdma_cm's header, the first as sent) and
// the peer's resources seen from this side (cma.c
// cma_set_req_event_data swaps responder resources and initiator depth);
// rdma_reject's private data reaches the client's REJECTED, whose status
// is the REJ reason, 28 (consumer defined); unsupported calls fail with
// ENOSYS and GOROCE_DEBUG names each once.
func TestRDMACMCalls(t *testing.T) {
	lib := cmLibs(t)
	prog := filepath.Join(t.TempDir(), "rdmacm_check")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", prog, "testdata/rdmacm_check.c",
		"-lrdmacm", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := start(ctx, t, lib, "127.22.0.9", []string{"GOROCE_DEBUG=1"}, prog)
	got := p.wait(t)
	want := `rdma_get_devices: 1, goroce0
get_cm_event on an empty non-blocking channel: EAGAIN
bind to another host's address: EADDRNOTAVAIL
listener: port picked 1, verbs 1, port_num 1
bind to the listener's port: EADDRINUSE
RDMA_CM_EVENT_ADDR_RESOLVED: the client's 1, verbs 1, dst port 1
RDMA_CM_EVENT_ROUTE_RESOLVED: paths 1
rdma_create_qp: the QP is in INIT: 1
RDMA_CM_EVENT_CONNECT_REQUEST: listen_id 1, new id 1, context listener, private data 56 bytes, starts as sent 1, responder_resources 2, initiator_depth 1, rnr_retry_count 6, qp_num 1
the request comes from the client's address 1 and port 1
rdma_reject: 0
RDMA_CM_EVENT_REJECTED: the client's 1, status 28, private data starts as sent 1
rdma_set_option REUSEADDR: 0
rdma_set_option TOS: ENOSYS
rdma_join_multicast: ENOSYS
rdma_init_qp_attr: ENOSYS
rdma_establish: ENOSYS
rdma_event_str of an unknown event: UNKNOWN EVENT
rdma_getaddrinfo: dst 1 port 7471, qp_type RC 1
rdma_destroy_qp: id->qp 0
destroy ids: 0 0 0
`
	if got != want {
		t.Errorf("rdmacm_check printed\n%s\nwant\n%s", got, want)
	}
	for _, call := range []string{"rdma_set_option", "rdma_join_multicast", "rdma_init_qp_attr", "rdma_establish"} {
		if n := strings.Count(p.stderr.String(), "goroce-verbs: "+call+" is not supported (ENOSYS)\n"); n != 1 {
			t.Errorf("GOROCE_DEBUG named %s as unsupported %d times, want once", call, n)
		}
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", &p.stderr)
	}
}
