package clitest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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

// SideChannelPort is the TCP port of the captured exchanges (the tools'
// default).
const SideChannelPort = 18515

// TCPSegment is one captured side-channel message.
type TCPSegment struct {
	FromClient bool   // sent by the client
	Data       []byte // the message
}

// GoldenCapture is what a capture holds: its side-channel messages in the
// order they were sent, the client's and server's addresses, and its
// RoCEv2 packets.
type GoldenCapture struct {
	Segments       []TCPSegment
	Client, Server netip.Addr
	Packets        []GoldenPacket
}

// GoldenPacket is one RoCEv2 packet of a capture and the address it came
// from.
type GoldenPacket struct {
	Src netip.Addr
	Pkt wire.Packet
}

// From returns the messages one side sent.
func (g *GoldenCapture) From(client bool) [][]byte {
	var out [][]byte
	for _, s := range g.Segments {
		if s.FromClient == client {
			out = append(out, s.Data)
		}
	}
	return out
}

// ReadGoldenCapture reads wire/testdata/NAME.pcap.
func ReadGoldenCapture(t testing.TB, name string) *GoldenCapture {
	t.Helper()
	g := &GoldenCapture{}
	seen := map[[2]uint32]bool{} // direction, sequence number: a retransmission is read once
	EachRecord(t, filepath.Join(Testdata, name+".pcap"), func(rec *pcap.Record) {
		if d, ok := rec.RoCEv2(); ok {
			if p, err := wire.Parse(bytes.Clone(d.Payload)); err == nil {
				g.Packets = append(g.Packets, GoldenPacket{Src: d.Src.Addr(), Pkt: p})
			}
			return
		}
		src, dst, seg, ok := tcpPayload(rec.IP)
		if !ok || len(seg) == 0 || (src.Port() != SideChannelPort && dst.Port() != SideChannelPort) {
			return
		}
		fromClient := dst.Port() == SideChannelPort
		seq := binary.BigEndian.Uint32(seg[4:])
		key := [2]uint32{0, seq}
		if fromClient {
			key[0] = 1
			g.Client, g.Server = src.Addr(), dst.Addr()
		}
		payload := seg[int(seg[12]>>4)*4:]
		if len(payload) == 0 || seen[key] {
			return
		}
		seen[key] = true
		g.Segments = append(g.Segments, TCPSegment{FromClient: fromClient, Data: bytes.Clone(payload)})
	})
	if len(g.Segments) == 0 {
		t.Fatalf("%s: no side channel on port %d", name, SideChannelPort)
	}
	return g
}

// EachRecord calls fn on every record of the capture in file name.
func EachRecord(t testing.TB, name string, fn func(rec *pcap.Record)) {
	t.Helper()
	recs, err := pcap.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		fn(&recs[i])
	}
}

// StartServer runs the command line run with args (a server's, with -p 0) in the
// background, writing to stdout, and returns the TCP port it listens on
// the channel that delivers its exit status, and its standard error.
func StartServer(t *testing.T, ctx context.Context, run RunFunc, args []string, stdout io.Writer) (port int, code chan int, srvErr *PortWriter) {
	t.Helper()
	srvErr = NewPortWriter()
	code = make(chan int, 1)
	go func() { code <- run(ctx, args, stdout, srvErr) }()
	select {
	case port = <-srvErr.Port:
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

// CheckPeerPackets checks what the side channel announced against the
// RoCEv2 packets that followed: they come from the two GIDs announced
// (cliGID, srvGID), every packet from one side goes to the QPN the other
// announced, and the first request of each side carries the PSN it
// announced.
func CheckPeerPackets(t *testing.T, g *GoldenCapture, cliGID, srvGID netip.Addr, cliQPN, srvQPN uint32, cliPSN, srvPSN wire.PSN) {
	t.Helper()
	first := map[netip.Addr]bool{}
	for i, p := range g.Packets {
		from, to, psn := "client", srvQPN, cliPSN
		switch p.Src {
		case cliGID.Unmap():
		case srvGID.Unmap():
			from, to, psn = "server", cliQPN, srvPSN
		default:
			t.Errorf("packet %d (%v) from %v, neither GID the side channel announced (%v, %v)", i, p.Pkt, p.Src, cliGID, srvGID)
			continue
		}
		bth := p.Pkt.BTH()
		if bth.DestQP() != to {
			t.Errorf("packet %d from the %s (%v): dest QP %#06x, the side channel said %#06x", i, from, p.Pkt, bth.DestQP(), to)
		}
		if p.Pkt.Info().Request && !first[p.Src] {
			first[p.Src] = true
			if bth.PSN() != psn {
				t.Errorf("the %s's first request %v: PSN %#06x, the side channel said %#06x", from, p.Pkt, uint32(bth.PSN()), uint32(psn))
			}
		}
	}
	if len(first) == 0 {
		t.Error("no request packets to check the side channel against")
	}
}

// ReplayPeer plays one side of a captured exchange (segs) on conn: it
// sends that side's messages (through edit, which may rewrite them) and
// reads, in between, as many bytes as the other side sent at that point,
// returning what it read, one entry per captured message of the other
// side.
func ReplayPeer(conn net.Conn, segs []TCPSegment, asClient bool, edit func([]byte) []byte) ([][]byte, error) {
	var got [][]byte
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	for i, s := range segs {
		if s.FromClient == asClient {
			if _, err := conn.Write(edit(s.Data)); err != nil {
				return got, fmt.Errorf("message %d: %w", i, err)
			}
			continue
		}
		b := make([]byte, len(s.Data))
		if n, err := io.ReadFull(conn, b); err != nil {
			return append(got, b[:n]), fmt.Errorf("message %d (%d bytes): %w after %q", i, len(b), err, b[:n])
		}
		got = append(got, b)
	}
	return got, nil
}

// ShapeDiff reports how got differs from a captured message want of the
// same kind: the same length, hex digits where want has them (values may
// differ: QPNs, PSNs, keys, addresses), every other byte (separators,
// NULs) the same.
func ShapeDiff(got, want []byte) error {
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

// Testdata is the directory of the rxe captures, wire/testdata.
var Testdata = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "wire", "testdata")
}()

// ServerStalls starts the server of the command line run with args (plus
// --addr and -p 0), connects to its side channel, sends start (the
// beginning of a first message) and then nothing, and checks that the
// server gives up after its stall timeout stall, exits 1 and names the
// client in its error.
func ServerStalls(t *testing.T, run RunFunc, args []string, start string, stall time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	srvAddr, _ := LoopbackPair()
	port, code, srvErr := StartServer(t, ctx, run, append(args, "--addr", srvAddr, "-p", "0"), io.Discard)
	conn, err := net.Dial("tcp", net.JoinHostPort(srvAddr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t0 := time.Now()
	io.WriteString(conn, start)
	if got := <-code; got != 1 {
		t.Fatalf("server exit %d, want 1: %s", got, srvErr)
	}
	if el := time.Since(t0); el < stall || el > stall+5*time.Second {
		t.Errorf("the server gave up after %v, want its stall timeout %v", el, stall)
	}
	if want := conn.LocalAddr().String() + ": i/o timeout"; !strings.Contains(srvErr.String(), want) {
		t.Errorf("server said %q, want %q", srvErr, want)
	}
}
