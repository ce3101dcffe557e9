package pingpong

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// checkClosingLines checks the address lines (n local and n remote, in
// the comma form or ibv_ud_pingpong's colon form) and the two lines the
// examples end with.
func checkClosingLines(t *testing.T, who, out string, size, iters, n int) {
	t.Helper()
	bytesLine := regexp.MustCompile(fmt.Sprintf(`(?m)^%d bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit/sec$`, 2*size*iters))
	itersLine := regexp.MustCompile(fmt.Sprintf(`(?m)^%d iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter$`, iters))
	addrLine := regexp.MustCompile(`(?m)^  (local address: |remote address:) LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}[,:] GID ::ffff:127\.66\.\d+\.\d+$`)
	if !bytesLine.MatchString(out) || !itersLine.MatchString(out) || len(addrLine.FindAllString(out, -1)) != 2*n {
		t.Errorf("%s output:\n%s", who, out)
	}
}

// runPair runs a pingpong server and client with the same flags in two
// goroutines and returns their standard outputs.
func runPair(t *testing.T, ctx context.Context, flags []string) (srvOut, cliOut string) {
	t.Helper()
	srvAddr, cliAddr := clitest.LoopbackPair()
	var srvBuf, cliBuf bytes.Buffer
	srvErr := clitest.NewPortWriter()
	srvCode := make(chan int, 1)
	go func() {
		srvCode <- run(ctx, append([]string{"pingpong", "--addr", srvAddr, "-p", "0"}, flags...), &srvBuf, srvErr)
	}()
	var port int
	select {
	case port = <-srvErr.Port:
	case code := <-srvCode:
		t.Fatalf("server exited %d before listening: %s", code, srvErr)
	case <-ctx.Done():
		t.Fatal("server never listened")
	}
	var cliErr bytes.Buffer
	// Flags after HOST, as getopt allows.
	code := run(ctx, append([]string{"pingpong", "--addr", cliAddr, srvAddr, "-p", strconv.Itoa(port)}, flags...), &cliBuf, &cliErr)
	if code != cli.ExitOK {
		t.Errorf("client exit %d: %s", code, cliErr.String())
	}
	if code := <-srvCode; code != cli.ExitOK {
		t.Errorf("server exit %d: %s", code, srvErr)
	}
	return srvBuf.String(), cliBuf.String()
}

// TestPingpongInProcess runs a server and a client of each transport in
// two goroutines, checking every message (-c).
func TestPingpongInProcess(t *testing.T) {
	for _, tc := range []struct {
		flags     []string
		size, nqp int
	}{
		{[]string{"-t", "rc"}, 4096, 1},
		{[]string{"-e"}, 4096, 1}, // rc is the default
		{[]string{"-t", "uc", "-m", "2048"}, 4096, 1},
		{[]string{"-t", "ud"}, 2048, 1},
		{[]string{"-t", "ud", "-e", "-m", "1024", "-s", "1000"}, 1000, 1},
		{[]string{"-t", "srq", "-q", "4", "-r", "16"}, 4096, 4},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			const iters = 50
			srvOut, cliOut := runPair(t, ctx, append([]string{"-n", strconv.Itoa(iters), "-c"}, tc.flags...))
			checkClosingLines(t, "server", srvOut, tc.size, iters, tc.nqp)
			checkClosingLines(t, "client", cliOut, tc.size, iters, tc.nqp)
			// Each side's remote lines are the other's local lines.
			addrs := func(out, prefix string) (a []string) {
				for _, l := range strings.Split(out, "\n") {
					if s, ok := strings.CutPrefix(l, prefix); ok {
						a = append(a, strings.Replace(s, ": GID", ", GID", 1))
					}
				}
				return a
			}
			srvLocal, srvRemote := addrs(srvOut, "  local address:  "), addrs(srvOut, "  remote address: ")
			cliLocal, cliRemote := addrs(cliOut, "  local address:  "), addrs(cliOut, "  remote address: ")
			if !slices.Equal(srvLocal, cliRemote) || !slices.Equal(cliLocal, srvRemote) || len(srvLocal) != tc.nqp {
				t.Errorf("addresses do not match:\nserver:\n%s\nclient:\n%s", srvOut, cliOut)
			}
		})
	}
}

// TestPingpongProcesses builds goroce and runs server and client as two
// processes, over RC and UD.
func TestPingpongProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := clitest.BuildGoroce(t)
	for _, tc := range []struct {
		transport string
		size      int
	}{{"rc", 4096}, {"ud", 2048}} {
		t.Run(tc.transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			flags := []string{"-t", tc.transport, "-n", "200", "-c"}
			srvOut, cliOut := clitest.RunTwoProcesses(t, ctx, bin, []string{"pingpong"}, flags)
			checkClosingLines(t, "server", srvOut, tc.size, 200, 1)
			checkClosingLines(t, "client", cliOut, tc.size, 200, 1)
		})
	}
	// With --trace, each process's lines say whose they are.
	t.Run("trace", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		p := clitest.RunTwoProcessesAll(t, ctx, bin, []string{"pingpong"}, []string{"-n", "2", "-s", "64", "--trace"})
		clitest.CheckTraceTagged(t, "server", p.SrvErr, "[server "+p.SrvAddr+"]")
		clitest.CheckTraceTagged(t, "client", p.CliErr, "[client "+p.CliAddr+"]")
	})
}

func TestPingpongDestMessage(t *testing.T) {
	d := ppDest{qpn: 0x11, psn: 0xABCDEF, gid: netip.MustParseAddr("::ffff:127.0.0.1")}
	msg := destMsg(d)
	// The wire form rdma-core's gid_to_wire_gid gives for ::ffff:127.0.0.1.
	want := "0000:000011:abcdef:00000000000000000000ffff7f000001\x00"
	if string(msg) != want || len(msg) != 52 {
		t.Fatalf("message %q, want %q", msg, want)
	}
	got, err := parseDest(msg)
	if err != nil || got != d {
		t.Fatalf("parse: %+v %v, want %+v", got, err, d)
	}
	v6 := ppDest{lid: 0x1234, qpn: 0xFFFFFF, gid: netip.MustParseAddr("fe80::1:2")}
	if s := v6.String(); s != "1234:ffffff:000000:fe800000000000000000000000010002" {
		t.Errorf("IPv6 GID message %q", s)
	}
	if got := d.line(); got != "LID 0x0000, QPN 0x000011, PSN 0xabcdef, GID ::ffff:127.0.0.1" {
		t.Errorf("line %q", got)
	}
	ud := pingpongConfig{transport: "ud"}
	if got := ud.localLine(d); got != "LID 0x0000, QPN 0x000011, PSN 0xabcdef: GID ::ffff:127.0.0.1" {
		t.Errorf("ud local line %q", got)
	}
	// An unused slot of ibv_srq_pingpong's table.
	if s := (ppDest{}).String(); s != "0000:000000:000000:"+strings.Repeat("0", 32) {
		t.Errorf("empty slot %q", s)
	}
	for _, bad := range []string{"", "done", "0000:000011:abcdef", "0000:1000000:abcdef:00000000000000000000ffff7f000001",
		"0000:000011:abcdef:00000000000000000000ffff7f00000", "0000:000011:abcdef:0000000000000000000zffff7f000001",
		"10000:000011:abcdef:00000000000000000000ffff7f000001"} {
		if _, err := parseDest([]byte(bad + "\x00")); !errors.Is(err, errBadDest) {
			t.Errorf("parseDest(%q) = %v, want errBadDest", bad, err)
		}
	}
}

func TestPingpongBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-t", "xrc"}, `-t "xrc": want rc, uc, ud or srq`},
		{[]string{"-t", "ud", "-s", "4097"}, "-s 4097: requested size larger than port MTU (4096)"},
		{[]string{"-t", "ud", "-m", "1024"}, "-s 2048: requested size larger than port MTU (1024)"},
		{[]string{"-q", "4"}, "-q is for -t srq"},
		{[]string{"-t", "srq", "-q", "257"}, "-q 257: want 1..256"},
		{[]string{"-t", "srq", "-q", "0"}, "-q 0: want 1..256"},
		{[]string{"-t", "srq", "-r", "8"}, "-r 8 is too small for 16 QPs"},
		{[]string{"-i", "2"}, "one port"},
		{[]string{"-m", "1000"}, "want 256, 512"},
		{[]string{"--addr", "nowhere"}, "not an IP address"},
		{[]string{"-s", "0"}, "-s 0"},
		{[]string{"-r", "0"}, "-r 0"},
		{[]string{"-n", "0"}, "-n 0"},
		{[]string{"-l", "16"}, "service level"},
		{[]string{"-u", "32"}, "-u 32: want a QP timeout 1..31"},
		{[]string{"-p", "0", "127.0.0.1"}, "0 only for the server"},
		{[]string{"a", "b"}, "one HOST at most"},
		{[]string{"--bogus"}, "flag provided but not defined"},
	} {
		code, out, errOut := clitest.Goroce(t, run, append([]string{"pingpong"}, tc.args...)...)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want %q)", tc.args, code, out, errOut, tc.want)
		}
	}
}

// testConfig is a pingpong configuration with short timeouts.
func testConfig(addr string) pingpongConfig {
	return pingpongConfig{ibPort: 1, size: 64, mtu: 1024, rxDepth: 8, iters: 5, numQP: 1, transport: "rc", timeout: 14,
		addr: netip.MustParseAddr(addr), scAddr: netip.MustParseAddr(addr), stall: 300 * time.Millisecond, dialFor: 200 * time.Millisecond}
}

func TestPingpongClientCannotConnect(t *testing.T) {
	// A port nobody listens on: take one and close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, cliAddr := clitest.LoopbackPair()
	cfg := testConfig(cliAddr)
	cfg.server, cfg.port = "127.0.0.1", port
	err = pingpong(t.Context(), cfg, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "couldn't connect to 127.0.0.1:"+strconv.Itoa(port)) ||
		!strings.Contains(err.Error(), "refused") {
		t.Fatalf("got %v, want a refused connection", err)
	}
}

func TestPingpongServerCancelled(t *testing.T) {
	srvAddr, _ := clitest.LoopbackPair()
	cfg := testConfig(srvAddr)
	ctx, cancel := context.WithCancel(t.Context())
	w := clitest.NewPortWriter()
	done := make(chan error, 1)
	go func() { done <- pingpong(ctx, cfg, io.Discard, w) }()
	<-w.Port // waiting for a client, forever
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestPingpongPeerStalls: a client that exchanges addresses and then never
// sends makes the server fail after its stall timeout instead of hanging.
func TestPingpongPeerStalls(t *testing.T) {
	srvAddr, cliAddr := clitest.LoopbackPair()
	cfg := testConfig(srvAddr)
	w := clitest.NewPortWriter()
	done := make(chan error, 1)
	go func() { done <- pingpong(t.Context(), cfg, io.Discard, w) }()
	port := <-w.Port
	conn, err := net.Dial("tcp", net.JoinHostPort(srvAddr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fake := ppDest{qpn: 0x123456, psn: wire.PSN(7), gid: netip.MustParseAddr("::ffff:" + cliAddr)}
	conn.Write(destMsg(fake))
	if _, err := io.ReadFull(conn, make([]byte, pingpongMsgLen)); err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte(pingpongDone))
	if err := <-done; !errors.Is(err, cli.ErrStalled) {
		t.Fatalf("got %v, want cli.ErrStalled", err)
	}
}

// TestPingpongCheckDetectsBadData: a server with -c rejects a client that
// sends its untouched buffer instead of the pattern.
func TestPingpongCheckDetectsBadData(t *testing.T) {
	srvAddr, cliAddr := clitest.LoopbackPair()
	srv := testConfig(srvAddr)
	srv.check = true
	w := clitest.NewPortWriter()
	done := make(chan error, 1)
	go func() { done <- pingpong(t.Context(), srv, io.Discard, w) }()
	cli := testConfig(cliAddr)
	cli.server, cli.port = srvAddr, <-w.Port
	cliErr := pingpong(t.Context(), cli, io.Discard, io.Discard)
	if err := <-done; !errors.Is(err, errBadData) {
		t.Fatalf("server: %v, want errBadData", err)
	}
	if cliErr == nil {
		t.Fatal("the client finished although the server gave up")
	}
}

// srqServer starts an srq pingpong server with nqp QPs and dials its side
// channel.
func srqServer(t *testing.T, nqp int) (net.Conn, chan error) {
	t.Helper()
	srvAddr, _ := clitest.LoopbackPair()
	cfg := testConfig(srvAddr)
	cfg.transport, cfg.numQP = "srq", nqp
	w := clitest.NewPortWriter()
	done := make(chan error, 1)
	go func() { done <- pingpong(t.Context(), cfg, io.Discard, w) }()
	conn, err := net.Dial("tcp", net.JoinHostPort(srvAddr, strconv.Itoa(<-w.Port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, done
}

// TestPingpongSRQExchange: an srq server trades ibv_srq_pingpong's 256
// messages, the unused slots zero, and refuses a peer with fewer QPs.
func TestPingpongSRQExchange(t *testing.T) {
	_, cliAddr := clitest.LoopbackPair()
	gid := netip.MustParseAddr("::ffff:" + cliAddr)
	client := func(n int) []byte { // the messages of a client with n QPs
		var b []byte
		for i := range ppMaxQP {
			d := ppDest{}
			if i < n {
				d = ppDest{qpn: uint32(0x100 + i), psn: wire.PSN(i), gid: gid}
			}
			b = append(b, destMsg(d)...)
		}
		return b
	}

	t.Run("slots", func(t *testing.T) {
		conn, done := srqServer(t, 2)
		conn.Write(client(2))
		reply := make([]byte, ppMaxQP*pingpongMsgLen)
		if _, err := io.ReadFull(conn, reply); err != nil {
			t.Fatal(err)
		}
		zero := "0000:000000:000000:" + strings.Repeat("0", 32) + "\x00"
		for i := range ppMaxQP {
			msg := string(reply[i*pingpongMsgLen : (i+1)*pingpongMsgLen])
			d, err := parseDest([]byte(msg))
			switch {
			case err != nil:
				t.Fatalf("slot %d: %v", i, err)
			case i < 2 && (d.qpn == 0 || !d.gid.Unmap().Is4()):
				t.Errorf("slot %d: %q, want a QP", i, msg)
			case i >= 2 && msg != zero:
				t.Fatalf("slot %d: %q, want zeros", i, msg)
			}
		}
		conn.Write([]byte(pingpongDone))
		// Connected, the server waits for SENDs nobody makes.
		if err := <-done; !errors.Is(err, cli.ErrStalled) {
			t.Fatalf("got %v, want cli.ErrStalled", err)
		}
	})
	t.Run("fewer QPs", func(t *testing.T) {
		conn, done := srqServer(t, 2)
		conn.Write(client(1))
		if err := <-done; !errors.Is(err, errFewerQPs) {
			t.Fatalf("got %v, want errFewerQPs", err)
		}
	})
}

// TestPingpongCheckFailsWhenNothingArrives: with -c, a receive completion
// whose data never landed fails the check, on both sides and every
// transport: the receive area is poisoned, not the pattern that was sent.
// A message that did arrive passes; the server takes an rdma-core
// client's -c fill as well, and then holds every message to it.
func TestPingpongCheckFailsWhenNothingArrives(t *testing.T) {
	for _, transport := range []string{"rc", "uc", "ud", "srq"} {
		for _, client := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s client=%v", transport, client), func(t *testing.T) {
				addr, _ := clitest.LoopbackPair()
				cfg := testConfig(addr)
				cfg.transport, cfg.check, cfg.size = transport, true, 2*ppPageSize+100
				if client {
					cfg.server = "127.0.0.1"
				}
				pp, err := newPingpongContext(cfg, io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				defer pp.closeObs()
				defer pp.dev.Close()
				if _, err := pp.postRecv(1); err != nil {
					t.Fatal(err)
				}
				// A completion as the device makes it for a whole
				// message: the right wr_id and length, nothing placed.
				wc := qp.WC{WRID: pp.recv.WRID, ByteLen: pp.recv.SGL[0].Length}
				msg := pp.received(&wc)
				if err := pp.checkRecv(&wc, msg); !errors.Is(err, errBadData) {
					t.Fatalf("nothing arrived: check says %v, want errBadData", err)
				}
				fillPattern(msg)
				if err := pp.checkRecv(&wc, msg); err != nil {
					t.Fatalf("the pattern arrived: %v", err)
				}
				if pp.checked != 1 {
					t.Errorf("checked %d messages, want 1", pp.checked)
				}
				if pp.slotted {
					return // a slot is poisoned by the loop once checked
				}
				// The next send poisons the area again before the peer can
				// answer it (the QP is not connected: the post itself fails).
				got := bytes.Clone(msg)
				pp.postSend(0)
				if !client && !bytes.Equal(pp.msg, got) {
					t.Error("the server does not send back what it received")
				}
				if err := pp.checkRecv(&wc, msg); !errors.Is(err, errBadData) {
					t.Fatalf("nothing arrived after a send: check says %v, want errBadData", err)
				}
			})
		}
	}
	t.Run("rdma-core client", func(t *testing.T) {
		addr, _ := clitest.LoopbackPair()
		cfg := testConfig(addr)
		cfg.check, cfg.size = true, 2*ppPageSize
		pp, err := newPingpongContext(cfg, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		defer pp.closeObs()
		defer pp.dev.Close()
		wc := qp.WC{WRID: pingpongRecvID, ByteLen: uint32(cfg.size)}
		msg := pp.received(&wc)
		// ibv_rc_pingpong -c's client buffer, written here by hand.
		for i := range msg {
			msg[i] = 0x7b
		}
		msg[0], msg[ppPageSize] = 0, 0
		if err := pp.checkRecv(&wc, msg); err != nil {
			t.Fatalf("rdma-core's fill: %v", err)
		}
		fillPattern(msg)
		if err := pp.checkRecv(&wc, msg); !errors.Is(err, errBadData) {
			t.Fatalf("goroce's pattern after rdma-core's fill: %v, want errBadData", err)
		}
	})
}

// TestPingpongSideChannelStall: a client that sends half of pingpong's
// 52-byte address message and then nothing is given up on after the stall
// timeout, and the server names it in its error.
func TestPingpongSideChannelStall(t *testing.T) {
	clitest.ServerStalls(t, run, []string{"pingpong", "-n", "5", "-g", "0"}, "0000:000001:", pingpongStall)
}

// TestPingpongSideChannelAddr: with --sc-addr the server's side channel
// listens there, not at its device's address, and a client that dials it
// there completes the exchange (rxe-interop's IPv6 cases need it: rxe's
// client speaks the side channel over IPv4).
func TestPingpongSideChannelAddr(t *testing.T) {
	srvAddr, cliAddr := clitest.LoopbackPair()
	scAddr, _ := clitest.LoopbackPair()
	srv := testConfig(srvAddr)
	srv.scAddr = netip.MustParseAddr(scAddr)
	w := clitest.NewPortWriter()
	done := make(chan error, 1)
	go func() { done <- pingpong(t.Context(), srv, io.Discard, w) }()
	port := <-w.Port
	if conn, err := net.Dial("tcp", net.JoinHostPort(srvAddr, strconv.Itoa(port))); err == nil {
		conn.Close()
		t.Errorf("the side channel listens at the device's address %s too", srvAddr)
	}
	c := testConfig(cliAddr)
	c.server, c.port = scAddr, port
	if err := pingpong(t.Context(), c, io.Discard, io.Discard); err != nil {
		t.Errorf("client: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("server: %v", err)
	}
}
