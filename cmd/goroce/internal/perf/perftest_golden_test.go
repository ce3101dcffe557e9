package perf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/qp"
)

// perftestGoldens are the captures of perftest's exchange, each with the
// message size it ran (-s; ib_atomic_bw's is 8).
var perftestGoldens = []struct {
	name, test string
	size       int
}{
	{"ib_write_bw", "write_bw", 4096},
	{"ib_send_lat", "send_lat", 64},
	{"ib_read_bw", "read_bw", 4096},
	{"ib_atomic_bw", "atomic_bw", 8},
}

// perftestMessageSizes is the size of every message a side of test sends,
// in order, as goroce's perftestFlow makes them: the prelude (version,
// cycle buffer, cache line, MTU), the handshakes and barriers (108 bytes),
// the bandwidth report (five 8-byte fields) and "done".
func perftestMessageSizes(test perfTest) []int {
	sizes := []int{perftestVersionLen, 4, 4, perftestMTULen}
	flow := perftestFlowOf(test)
	keys := 3 // the two per-QP rounds and the barrier after connecting
	if flow.early {
		keys++
	}
	if flow.startSync {
		keys++
	}
	if flow.reports {
		keys++ // the barrier before the report
	}
	for range keys {
		sizes = append(sizes, perftestKeyLen)
	}
	if flow.reports {
		sizes = append(sizes, 8, 8, 8, 8, 8)
	}
	if flow.closing {
		sizes = append(sizes, perftestKeyLen, len("done\x00"))
	}
	return sizes
}

// TestPerftestGoldenMessages reads perftest's exchange as ib_write_bw,
// ib_send_lat, ib_read_bw and ib_atomic_bw traded it between two rxe
// hosts. Each side sends the messages goroce's flow for that test sends,
// of the same sizes, in the same order; goroce parses every handshake and
// writes the same 108 bytes back from what it parsed; and what it parsed
// is what the RoCEv2 packets used: QPNs, first PSNs, GIDs as the senders'
// addresses, and the server's buffer (RKey, VAddr) in the client's first
// RETH or AtomicETH.
func TestPerftestGoldenMessages(t *testing.T) {
	for _, gc := range perftestGoldens {
		t.Run(gc.name, func(t *testing.T) {
			g := clitest.ReadGoldenCapture(t, gc.name)
			want := perftestMessageSizes(perfTestNamed(t, gc.test))
			var keys [2]perfDest
			for side, msgs := range [][][]byte{g.From(true), g.From(false)} {
				var sizes []int
				for _, m := range msgs {
					sizes = append(sizes, len(m))
				}
				if fmt.Sprint(sizes) != fmt.Sprint(want) {
					t.Errorf("side %d sent messages of %v bytes, goroce's flow for %s %v", side, sizes, gc.test, want)
				}
				if cString(msgs[0]) != perftestVersion || string(msgs[len(msgs)-1]) != "done\x00" {
					t.Errorf("side %d: version %q, last message %q", side, msgs[0], msgs[len(msgs)-1])
				}
				for _, m := range msgs {
					if len(m) != perftestKeyLen {
						continue
					}
					d, err := parsePerftestKey(m)
					if err != nil {
						t.Fatal(err)
					}
					if again := d.perftestKey(); !bytes.Equal(again, m) {
						t.Errorf("goroce writes %+v as\n%q\nrxe wrote\n%q", d, again, m)
					}
					if keys[side] == (perfDest{}) {
						keys[side] = d
					} else if d != keys[side] {
						t.Errorf("side %d's barriers carry %+v, its handshake %+v", side, d, keys[side])
					}
				}
			}
			cli, srv := keys[0], keys[1]
			clitest.CheckPeerPackets(t, g, cli.gid, srv.gid, cli.qpn, srv.qpn, cli.psn, srv.psn)
			for _, p := range g.Packets {
				if p.Src != cli.gid.Unmap() || !p.Pkt.Info().Request {
					continue
				}
				var va uint64
				var rkey uint32
				if r := p.Pkt.RETH(); r != nil {
					va, rkey = r.VA(), r.RKey()
				} else if a := p.Pkt.AtomicETH(); a != nil {
					va, rkey = a.VA(), a.RKey()
				} else {
					break // send_lat: no remote buffer
				}
				if va != srv.addr || rkey != srv.rkey {
					t.Errorf("the client's first %v: VA %#x RKey %#x, the server announced %#x %#x", p.Pkt, va, rkey, srv.addr, srv.rkey)
				}
				break
			}
		})
	}
}

// rxeServerRow returns the result row perftest's server printed under its
// "#bytes" header (the client's results, from the report exchange).
func rxeServerRow(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(clitest.Testdata, name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, server, _ := strings.Cut(string(b), "===== guest A console =====")
	lines := strings.Split(server, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, " #bytes") && i+1 < len(lines) {
			return lines[i+1]
		}
	}
	t.Fatalf("%s: no result row in the server's console", name)
	return ""
}

// loopbackKey rewrites the GID of a captured handshake to a loopback
// address nothing listens on, so that goroce never sends off this host.
func loopbackKey(msg []byte) []byte {
	if len(msg) != perftestKeyLen {
		return msg
	}
	d, err := parsePerftestKey(msg)
	if err != nil {
		return msg
	}
	d.gid = netip.MustParseAddr("::ffff:127.66.255.254")
	return d.perftestKey()
}

// TestPerftestGoldenServer plays the captured perftest client of
// ib_write_bw, ib_read_bw and ib_atomic_bw, byte for byte (its GID moved
// to loopback), against goroce perf's server, whose part is passive. The
// server answers with messages of rxe's sizes and shapes, the prelude's
// and "done" byte for byte; and it prints the client's results from the
// client's binary report exactly as perftest's server printed them.
func TestPerftestGoldenServer(t *testing.T) {
	for _, gc := range perftestGoldens {
		if gc.test == "send_lat" { // both sides send: no passive server
			continue
		}
		t.Run(gc.name, func(t *testing.T) {
			g := clitest.ReadGoldenCapture(t, gc.name)
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			srvAddr, _ := clitest.LoopbackPair()
			var srvOut bytes.Buffer
			port, srvCode, srvErr := clitest.StartServer(t, ctx, run, []string{"perf", gc.test, "--addr", srvAddr, "-p", "0", "-n", "20",
				"-s", strconv.Itoa(gc.size), "-m", "1024", "-d", "rxe0", "-x", "1", "-F"}, &srvOut)
			conn, err := net.Dial("tcp", net.JoinHostPort(srvAddr, strconv.Itoa(port)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			got, err := clitest.ReplayPeer(conn, g.Segments, true, loopbackKey)
			if err != nil {
				t.Fatalf("replaying the client: %v", err)
			}
			if code := <-srvCode; code != cli.ExitOK {
				t.Fatalf("server exit %d: %s\n%s", code, srvErr, srvOut.String())
			}
			want := g.From(false)
			for i, m := range got {
				switch {
				case len(want[i]) == perftestKeyLen:
					if err := clitest.ShapeDiff(m, want[i]); err != nil {
						t.Errorf("message %d: %v", i, err)
					}
					d, err := parsePerftestKey(m)
					if err != nil || d.gid != netip.MustParseAddr("::ffff:"+srvAddr) {
						t.Errorf("message %d: %+v %v, want the server's GID ::ffff:%s", i, d, err, srvAddr)
					}
				case len(want[i]) == 8 && i > 3: // the report: rxe's passive server sends whatever its struct held
				case i == 1 && os.Getpagesize() != 4096: // the cycle buffer is the page size
				default: // version, cycle buffer, cache line, MTU 1024, done
					if !bytes.Equal(m, want[i]) {
						t.Errorf("message %d: goroce sent %q, rxe %q", i, m, want[i])
					}
				}
			}
			row := rxeServerRow(t, gc.name)
			if !strings.Contains(srvOut.String(), "\n"+row+"\n") {
				t.Errorf("server output lacks perftest's row of the client's results\n%q\n%s", row, srvOut.String())
			}
		})
	}
}

// TestPerftestGoldenPrelude runs goroce's client prelude against the
// prelude of the captured ib_write_bw server: the client sends what
// perftest's client sent (on a 4 KiB-page machine, at MTU 1024), and
// agrees the MTU, cycle buffer and version. A server older than perftest
// 5.70 is refused, as perftest refuses it, and so is a peer that asks for
// a cycle buffer of 2 GiB, which a goroce server would allocate twice per
// QP.
func TestPerftestGoldenPrelude(t *testing.T) {
	g := clitest.ReadGoldenCapture(t, "ib_write_bw")
	prelude := g.Segments[:8] // version, cycle buffer, cache line and MTU, each way
	for _, tc := range []struct {
		name    string
		version string
		mtu     int
		cycle   uint32 // the peer's cycle buffer, if not the capture's
	}{{"rxe", "", 1024, 0}, {"rxe MTU 4096 here", "", 4096, 0}, {"older server", "5.60", 1024, 0},
		{"2 GiB cycle buffer", "", 1024, 1<<31 - 1}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			type result struct {
				got [][]byte
				err error
			}
			ch := make(chan result, 1)
			go func() {
				words := 0 // 4-byte messages: the cycle buffer, then the cache line
				got, err := clitest.ReplayPeer(b, prelude, false, func(m []byte) []byte {
					if tc.version != "" && len(m) == perftestVersionLen {
						m = append([]byte(tc.version), make([]byte, perftestVersionLen-len(tc.version))...)
					}
					if len(m) == 4 {
						if words++; words == 1 && tc.cycle != 0 {
							m = binary.BigEndian.AppendUint32(nil, tc.cycle)
						}
					}
					return m
				})
				ch <- result{got, err}
			}()
			pt := &perftestChannel{sc: &sideChannel{conn: a, rd: bufio.NewReader(a)}, client: true, stall: 5 * time.Second}
			cfg, err := pt.prelude(perfConfig{mtu: tc.mtu})
			if tc.version != "" {
				if !errors.Is(err, errPerftest) {
					t.Errorf("version %s: %v, want errPerftest", tc.version, err)
				}
				return
			}
			if tc.cycle != 0 {
				if !errors.Is(err, errPerftest) || !strings.Contains(err.Error(), "cycle buffer of 2147483647 bytes") {
					t.Errorf("cycle buffer %d: %v, want errPerftest naming it", tc.cycle, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.mtu != 1024 || cfg.cycle != max(4096, os.Getpagesize()) || cfg.perftestPeer != "6.06" {
				t.Errorf("agreed mtu %d cycle %d peer %q, want 1024, the page size, 6.06", cfg.mtu, cfg.cycle, cfg.perftestPeer)
			}
			r := <-ch
			if r.err != nil {
				t.Fatal(r.err)
			}
			for i, want := range g.From(true)[:4] {
				switch {
				case i == 1 && os.Getpagesize() != 4096:
				case i == 3 && tc.mtu != 1024:
					if m := strconv.Itoa(int(qp.MTUFromBytes(tc.mtu))) + "\x00"; string(r.got[i]) != m {
						t.Errorf("MTU message %q, want %q", r.got[i], m)
					}
				case !bytes.Equal(r.got[i], want):
					t.Errorf("message %d: goroce sent %q, rxe's client %q", i, r.got[i], want)
				}
			}
		})
	}
}

// TestPerftestGoldenReport has goroce's client send, in the bandwidth
// report exchange, the values perftest's client sent (decoded here from
// the capture): its five messages are rxe's client's, byte for byte; and
// it reads the server's five as this test decodes them.
func TestPerftestGoldenReport(t *testing.T) {
	decode := func(msgs [][]byte) perftestReport {
		u := func(i int) uint64 { return binary.BigEndian.Uint64(msgs[i]) }
		f := func(i int) float64 { return math.Float64frombits(u(i)) }
		return perftestReport{size: u(0), iters: u(1), peak: f(2), avg: f(3), msgRate: f(4)}
	}
	for _, gc := range perftestGoldens {
		if !perftestFlowOf(perfTestNamed(t, gc.test)).reports {
			continue
		}
		t.Run(gc.name, func(t *testing.T) {
			g := clitest.ReadGoldenCapture(t, gc.name)
			var segs []clitest.TCPSegment // the report: the 8-byte messages after the prelude
			for _, s := range g.Segments[8:] {
				if len(s.Data) == 8 {
					segs = append(segs, s)
				}
			}
			var cli, srv [][]byte
			for _, s := range segs {
				if s.FromClient {
					cli = append(cli, s.Data)
				} else {
					srv = append(srv, s.Data)
				}
			}
			if len(cli) != 5 || len(srv) != 5 {
				t.Fatalf("report messages: %d from the client, %d from the server, want 5 each", len(cli), len(srv))
			}
			if r := decode(cli); r.size != uint64(gc.size) || r.iters != 20 {
				t.Errorf("rxe's client reports %+v, its command ran -s %d -n 20", r, gc.size)
			}
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			ch := make(chan [][]byte, 1)
			go func() {
				got, err := clitest.ReplayPeer(b, segs, false, func(m []byte) []byte { return m })
				if err != nil {
					t.Error(err)
				}
				ch <- got
			}()
			pt := &perftestChannel{sc: &sideChannel{conn: a, rd: bufio.NewReader(a)}, client: true, stall: 5 * time.Second}
			peer, err := pt.xchgReport(decode(cli))
			if err != nil {
				t.Fatal(err)
			}
			if want := decode(srv); peer != want && !(math.IsNaN(want.peak) || math.IsNaN(want.avg) || math.IsNaN(want.msgRate)) {
				t.Errorf("goroce read the server's report as %+v, want %+v", peer, want)
			}
			got := <-ch
			if len(got) != len(cli) {
				t.Fatalf("goroce sent %d report messages, rxe's client %d", len(got), len(cli))
			}
			for i := range cli {
				if !bytes.Equal(got[i], cli[i]) {
					t.Errorf("report message %d: goroce sent % x, rxe's client % x", i, got[i], cli[i])
				}
			}
		})
	}
}

// perfTestNamed returns goroce perf's test called name.
func perfTestNamed(t *testing.T, name string) perfTest {
	t.Helper()
	i := slices.IndexFunc(perfTests, func(p perfTest) bool { return p.name == name })
	if i < 0 {
		t.Fatalf("no goroce perf test %s", name)
	}
	return perfTests[i]
}

// TestPerftestGoldenPair runs a goroce perf client on perftest's exchange
// against a goroce perf server, through a TCP relay that keeps what each
// side sent, for each captured test. Both byte streams split into the
// messages rxe's sides sent, with the same sizes in the same order: the
// prelude and "done" byte for byte, the handshakes of the same shape, the
// client's report starting with the size and iterations rxe's reported.
func TestPerftestGoldenPair(t *testing.T) {
	for _, gc := range perftestGoldens {
		t.Run(gc.name, func(t *testing.T) {
			g := clitest.ReadGoldenCapture(t, gc.name)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			srvAddr, cliAddr := clitest.LoopbackPair()
			flags := []string{"-n", "20", "-s", strconv.Itoa(gc.size), "-m", "1024", "-d", "rxe0", "-x", "1", "-F"}
			port, srvCode, srvErr := clitest.StartServer(t, ctx, run, append([]string{"perf", gc.test, "--addr", srvAddr, "-p", "0"}, flags...), io.Discard)
			relay, streams := relayTCP(t, ctx, srvAddr, port)
			var cliErr bytes.Buffer
			if code := run(ctx, append([]string{"perf", gc.test, srvAddr, "--addr", cliAddr, "-p", strconv.Itoa(relay), "--exchange", "perftest"}, flags...), io.Discard, &cliErr); code != cli.ExitOK {
				t.Errorf("client exit %d: %s", code, cliErr.String())
			}
			if code := <-srvCode; code != cli.ExitOK {
				t.Errorf("server exit %d: %s", code, srvErr)
			}
			sent := <-streams
			for side, who := range []string{"server", "client"} {
				want := g.From(side == 1)
				got, rest := splitLike(sent[side], want)
				if len(rest) != 0 || len(got) != len(want) {
					t.Errorf("the %s sent %d bytes that do not split into rxe's %d messages (%d bytes left)", who, len(sent[side]), len(want), len(rest))
					continue
				}
				for i, m := range got {
					var err error
					switch {
					case len(m) == perftestKeyLen:
						err = clitest.ShapeDiff(m, want[i])
					case len(m) == 8 && i > 3: // the report: size and iterations (8, 9), then rates
						if who == "client" && i <= 9 && !bytes.Equal(m, want[i]) {
							err = fmt.Errorf("% x, rxe's client % x", m, want[i])
						}
					case i == 1 && os.Getpagesize() != 4096:
					case !bytes.Equal(m, want[i]):
						err = fmt.Errorf("%q, rxe's %s %q", m, who, want[i])
					}
					if err != nil {
						t.Errorf("the %s's message %d: %v", who, i, err)
					}
				}
			}
		})
	}
}

// splitLike cuts b into pieces of the sizes of want's messages and
// returns them and what is left; it stops early if b runs out.
func splitLike(b []byte, want [][]byte) (pieces [][]byte, rest []byte) {
	for _, w := range want {
		if len(b) < len(w) {
			break
		}
		pieces, b = append(pieces, b[:len(w)]), b[len(w):]
	}
	return pieces, b
}

// relayTCP listens on a free port of addr and relays one connection to
// addr:port, keeping what each side sent. The channel delivers both
// streams, the server's first, once both sides have closed.
func relayTCP(t *testing.T, ctx context.Context, addr string, port int) (int, <-chan [2][]byte) {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan [2][]byte, 1)
	go func() {
		defer ln.Close()
		var sent [2][]byte
		defer func() { ch <- sent }()
		cli, err := ln.Accept()
		if err != nil {
			return
		}
		defer cli.Close()
		srv, err := net.Dial("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
		if err != nil {
			return
		}
		defer srv.Close()
		stop := context.AfterFunc(ctx, func() { cli.Close(); srv.Close() })
		defer stop()
		var bufs [2]bytes.Buffer
		done := make(chan struct{}, 2)
		pipe := func(dst, src net.Conn, keep *bytes.Buffer) {
			io.Copy(io.MultiWriter(dst, keep), src)
			dst.(*net.TCPConn).CloseWrite()
			done <- struct{}{}
		}
		go pipe(cli, srv, &bufs[0])
		go pipe(srv, cli, &bufs[1])
		<-done
		<-done
		sent = [2][]byte{bufs[0].Bytes(), bufs[1].Bytes()}
	}()
	return ln.Addr().(*net.TCPAddr).Port, ch
}
