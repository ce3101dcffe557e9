package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// The side channels of the rxe captures (wire/testdata): the TCP payloads
// that ibv_rc_pingpong and perftest traded on port 18515, read with wire's
// pcap reader, are the oracle for goroce's parsers and writers of those
// exchanges. Each message of those tools is one write(), and one TCP
// segment in the captures.

// sideChannelPort is the TCP port of the captured exchanges (the tools'
// default).
const sideChannelPort = 18515

// tcpSegment is one captured side-channel message.
type tcpSegment struct {
	fromClient bool
	data       []byte
}

// goldenCapture is what a capture holds: its side-channel messages in the
// order they were sent, the client's and server's addresses, and its
// RoCEv2 packets.
type goldenCapture struct {
	segments       []tcpSegment
	client, server netip.Addr
	packets        []goldenPacket
}

type goldenPacket struct {
	src netip.Addr
	pkt wire.Packet
}

// from returns the messages one side sent.
func (g *goldenCapture) from(client bool) [][]byte {
	var out [][]byte
	for _, s := range g.segments {
		if s.fromClient == client {
			out = append(out, s.data)
		}
	}
	return out
}

// readGoldenCapture reads wire/testdata/NAME.pcap.
func readGoldenCapture(t testing.TB, name string) *goldenCapture {
	t.Helper()
	g := &goldenCapture{}
	seen := map[[2]uint32]bool{} // direction, sequence number: a retransmission is read once
	eachRecord(t, filepath.Join(testdata, name+".pcap"), func(rec *pcap.Record) {
		if d, ok := rec.RoCEv2(); ok {
			if p, err := wire.Parse(bytes.Clone(d.Payload)); err == nil {
				g.packets = append(g.packets, goldenPacket{src: d.Src.Addr(), pkt: p})
			}
			return
		}
		src, dst, seg, ok := tcpPayload(rec.IP)
		if !ok || len(seg) == 0 || (src.Port() != sideChannelPort && dst.Port() != sideChannelPort) {
			return
		}
		fromClient := dst.Port() == sideChannelPort
		seq := binary.BigEndian.Uint32(seg[4:])
		key := [2]uint32{0, seq}
		if fromClient {
			key[0] = 1
			g.client, g.server = src.Addr(), dst.Addr()
		}
		payload := seg[int(seg[12]>>4)*4:]
		if len(payload) == 0 || seen[key] {
			return
		}
		seen[key] = true
		g.segments = append(g.segments, tcpSegment{fromClient: fromClient, data: bytes.Clone(payload)})
	})
	if len(g.segments) == 0 {
		t.Fatalf("%s: no side channel on port %d", name, sideChannelPort)
	}
	return g
}

// eachRecord calls fn on every record of the capture in file name.
func eachRecord(t testing.TB, name string, fn func(rec *pcap.Record)) {
	t.Helper()
	recs, err := pcap.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		fn(&recs[i])
	}
}

// startServer runs goroce with args (a server's, with -p 0) in the
// background, writing to stdout, and returns the TCP port it listens on
// the channel that delivers its exit status, and its standard error.
func startServer(t *testing.T, ctx context.Context, args []string, stdout io.Writer) (port int, code chan int, srvErr *portWriter) {
	t.Helper()
	srvErr = &portWriter{port: make(chan int, 1)}
	code = make(chan int, 1)
	go func() { code <- run(ctx, args, stdout, srvErr) }()
	select {
	case port = <-srvErr.port:
	case c := <-code:
		t.Fatalf("server exited %d before listening: %s", c, srvErr)
	}
	return port, code, srvErr
}

// tcpPayload returns the addresses and the TCP segment (header first) of
// a raw IPv4 or IPv6 packet carrying TCP.
func tcpPayload(ip []byte) (src, dst netip.AddrPort, seg []byte, ok bool) {
	var s, d netip.Addr
	switch {
	case len(ip) >= 20 && ip[0]>>4 == 4 && ip[9] == 6:
		n := int(binary.BigEndian.Uint16(ip[2:]))
		hl := int(ip[0]&15) * 4
		if n > len(ip) || hl > n {
			return
		}
		s, d, seg = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), ip[hl:n]
	case len(ip) >= 40 && ip[0]>>4 == 6 && ip[6] == 6:
		n := 40 + int(binary.BigEndian.Uint16(ip[4:]))
		if n > len(ip) {
			return
		}
		s, d, seg = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40])), ip[40:n]
	default:
		return
	}
	if len(seg) < 20 || int(seg[12]>>4)*4 > len(seg) {
		return
	}
	src = netip.AddrPortFrom(s, binary.BigEndian.Uint16(seg[0:]))
	dst = netip.AddrPortFrom(d, binary.BigEndian.Uint16(seg[2:]))
	return src, dst, seg, true
}

// checkPeerPackets checks what the side channel announced against the
// RoCEv2 packets that followed: they come from the two GIDs announced
// (cliGID, srvGID), every packet from one side goes to the QPN the other
// announced, and the first request of each side carries the PSN it
// announced.
func checkPeerPackets(t *testing.T, g *goldenCapture, cliGID, srvGID netip.Addr, cliQPN, srvQPN uint32, cliPSN, srvPSN wire.PSN) {
	t.Helper()
	first := map[netip.Addr]bool{}
	for i, p := range g.packets {
		from, to, psn := "client", srvQPN, cliPSN
		switch p.src {
		case cliGID.Unmap():
		case srvGID.Unmap():
			from, to, psn = "server", cliQPN, srvPSN
		default:
			t.Errorf("packet %d (%v) from %v, neither GID the side channel announced (%v, %v)", i, p.pkt, p.src, cliGID, srvGID)
			continue
		}
		bth := p.pkt.BTH()
		if bth.DestQP() != to {
			t.Errorf("packet %d from the %s (%v): dest QP %#06x, the side channel said %#06x", i, from, p.pkt, bth.DestQP(), to)
		}
		if p.pkt.Info().Request && !first[p.src] {
			first[p.src] = true
			if bth.PSN() != psn {
				t.Errorf("the %s's first request %v: PSN %#06x, the side channel said %#06x", from, p.pkt, uint32(bth.PSN()), uint32(psn))
			}
		}
	}
	if len(first) == 0 {
		t.Error("no request packets to check the side channel against")
	}
}

// waitWriter collects output and closes seen once it contains want.
type waitWriter struct {
	want string
	seen chan struct{}

	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
}

func (w *waitWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *waitWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// replayPeer plays one side of a captured exchange (segs) on conn: it
// sends that side's messages (through edit, which may rewrite them) and
// reads, in between, as many bytes as the other side sent at that point,
// returning what it read, one entry per captured message of the other
// side.
func replayPeer(conn net.Conn, segs []tcpSegment, asClient bool, edit func([]byte) []byte) ([][]byte, error) {
	var got [][]byte
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	for i, s := range segs {
		if s.fromClient == asClient {
			if _, err := conn.Write(edit(s.data)); err != nil {
				return got, fmt.Errorf("message %d: %w", i, err)
			}
			continue
		}
		b := make([]byte, len(s.data))
		if n, err := io.ReadFull(conn, b); err != nil {
			return append(got, b[:n]), fmt.Errorf("message %d (%d bytes): %w after %q", i, len(b), err, b[:n])
		}
		got = append(got, b)
	}
	return got, nil
}

// shapeDiff reports how got differs from a captured message want of the
// same kind: the same length, hex digits where want has them (values may
// differ: QPNs, PSNs, keys, addresses), every other byte (separators,
// NULs) the same.
func shapeDiff(got, want []byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d bytes %q, rxe's %d %q", len(got), got, len(want), want)
	}
	hex := func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }
	for i := range want {
		if hex(want[i]) && hex(got[i]) || got[i] == want[i] {
			continue
		}
		return fmt.Errorf("byte %d is %q, rxe has %q there:\n%q\n%q", i, got[i], want[i], got, want)
	}
	return nil
}

// loopbackGID rewrites the GID of a captured pingpong message to a
// loopback address nothing listens on, so that a replayed peer never
// makes goroce send packets off this host.
func loopbackGID(msg []byte) []byte {
	d, err := parseDest(msg)
	if err != nil {
		return msg
	}
	d.gid = netip.MustParseAddr("::ffff:127.66.255.254")
	return destMsg(d)
}

// TestPingpongGoldenMessages reads the address messages ibv_rc_pingpong
// traded over IPv4 and IPv6 GIDs: goroce parses each, writes the same 52
// bytes back from what it parsed, and what it parsed is what the RoCEv2
// packets then used (QPNs, PSNs, the GID as the sender's IP address). The
// client ends with "done" and its NUL.
func TestPingpongGoldenMessages(t *testing.T) {
	for _, name := range []string{"rc_pingpong", "rc_pingpong_ipv6"} {
		t.Run(name, func(t *testing.T) {
			g := readGoldenCapture(t, name)
			cli, srv := g.from(true), g.from(false)
			if len(cli) != 2 || len(srv) != 1 || string(cli[1]) != pingpongDone {
				t.Fatalf("client sent %q, server %q: want an address each and the client's done", cli, srv)
			}
			var d [2]ppDest
			for i, msg := range [][]byte{cli[0], srv[0]} {
				if len(msg) != pingpongMsgLen {
					t.Errorf("message %q: %d bytes, goroce's pingpongMsgLen %d", msg, len(msg), pingpongMsgLen)
				}
				var err error
				if d[i], err = parseDest(msg); err != nil {
					t.Fatal(err)
				}
				if again := destMsg(d[i]); !bytes.Equal(again, msg) {
					t.Errorf("goroce writes %+v as\n%q\nrxe wrote\n%q", d[i], again, msg)
				}
			}
			checkPeerPackets(t, g, d[0].gid, d[1].gid, d[0].qpn, d[1].qpn, d[0].psn, d[1].psn)
		})
	}
}

// TestPingpongGoldenServerExchange plays ibv_rc_pingpong's client, its
// captured bytes, against goroce pingpong's server: the server's answer
// has the shape of rxe's (52 bytes, the same separators and NUL) and
// names the server's own QP, and the server takes the client's "done".
func TestPingpongGoldenServerExchange(t *testing.T) {
	g := readGoldenCapture(t, "rc_pingpong")
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	remote, err := parseDest(loopbackGID(g.from(true)[0]))
	if err != nil {
		t.Fatal(err)
	}
	srvAddr, _ := loopbackPair()
	// The server prints the remote address once it has the client's done.
	srvOut := &waitWriter{want: "  remote address: " + remote.line() + "\n", seen: make(chan struct{})}
	port, srvCode, _ := startServer(t, ctx, []string{"pingpong", "--addr", srvAddr, "-p", "0", "-n", "5", "-s", "1024", "-g", "0"}, srvOut)
	conn, err := net.Dial("tcp", net.JoinHostPort(srvAddr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := replayPeer(conn, g.segments, true, loopbackGID)
	if err != nil {
		t.Fatalf("replaying the client: %v", err)
	}
	if err := shapeDiff(got[0], g.from(false)[0]); err != nil {
		t.Errorf("server's address message: %v", err)
	}
	d, err := parseDest(got[0])
	if err != nil || d.gid != netip.MustParseAddr("::ffff:"+srvAddr) || d.lid != 0 {
		t.Errorf("server's address message %q: %+v %v, want LID 0 and GID ::ffff:%s", got[0], d, err, srvAddr)
	}
	select {
	case <-srvOut.seen:
	case code := <-srvCode:
		t.Fatalf("server exited %d before taking the client's done:\n%s", code, srvOut)
	}
	// Past its exchange, the server waits for a ping that never comes.
	cancel()
	<-srvCode
	if want := "  local address:  " + d.line() + "\n"; !strings.Contains(srvOut.String(), want) {
		t.Errorf("server output has no %q:\n%s", want, srvOut)
	}
}
