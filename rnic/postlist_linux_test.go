package rnic

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// captureTo reads, from a raw IPv4 socket bound to y's address, the UDP
// datagrams x sends y (a GSO run arrives whole, as loopback carries it)
// until their RoCEv2 packets, runs split by wire.SplitGSO, number n. It
// returns the packets and how many datagrams carried them.
func captureTo(t *testing.T, raw *ipv4.RawConn, x, y *end, n int) (pkts []wire.Datagram, datagrams int) {
	t.Helper()
	buf := make([]byte, 1<<16)
	raw.SetReadDeadline(time.Now().Add(time.Minute))
	for len(pkts) < n {
		h, p, _, err := raw.ReadFrom(buf)
		if err != nil {
			t.Fatalf("raw socket, %d of %d packets: %v", len(pkts), n, err)
		}
		if !h.Src.Equal(net.IP(x.dev.Addr().Addr().AsSlice())) || len(p) < wire.UDPHeaderLen ||
			binary.BigEndian.Uint16(p[2:]) != y.dev.Addr().Port() {
			continue
		}
		ip, err := h.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		// Marshal writes the fields as the socket reported them; the
		// ICRC covers the IPv4 ID and the total length, which the kernel
		// gives as received.
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(p)))
		binary.BigEndian.PutUint16(ip[4:], uint16(h.ID))
		d := wire.Datagram{IP: ip, UDP: append([]byte(nil), p[:wire.UDPHeaderLen]...), Payload: append([]byte(nil), p[wire.UDPHeaderLen:]...)}
		datagrams++
		if wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
			pkts = append(pkts, d)
			continue
		}
		segs, ok := wire.SplitGSO(d)
		if !ok {
			t.Fatalf("a datagram of %d bytes is neither a RoCEv2 packet with a valid ICRC nor a GSO run of them", len(p))
		}
		pkts = append(pkts, segs...)
	}
	return pkts, datagrams
}

// TestPostSendListWire posts the same 40 small RDMA WRITEs three times
// between two devices over UDP on loopback, first one PostSend each
// (inline), then as one PostSendList, then one PostSend each on a device
// that batches posts (PostBatched), the QPs reset to the same PSNs in
// between, and captures what reaches the wire with a raw socket. The list
// leaves in a few GSO sends instead of 40 datagrams, and its packets and
// the batched posts', split apart, are those of the single posts byte for
// byte, but for the IPv4 Identification the kernel numbers GSO segments
// with and the ICRC that covers it (every segment's ICRC verifies under
// its ID).
func TestPostSendListWire(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root for a raw socket (CAP_NET_RAW); CI runs as root")
	}
	// Posted inline, each PostSend leaves at once in a datagram of its
	// own; the QP's worker (the default without polling) would gather
	// posts that came while it was busy into one send, as a list does.
	x, y := configuredPair(t, [2]string{"127.78.9.1", "127.78.9.2"}, openUDP, Config{MTU: 4096, PostMode: PostInline})
	c, err := net.ListenPacket("ip4:udp", y.dev.Addr().Addr().String())
	if err != nil {
		t.Fatalf("raw socket: %v", err)
	}
	defer c.Close()
	raw, err := ipv4.NewRawConn(c)
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 40, 64
	for i := range x.buf[:n*size] {
		x.buf[i] = byte(i*7 + i/size)
	}
	wrs := make([]qp.SendWR, n)
	for i := range wrs {
		wrs[i] = qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{x.sge(i*size, size)},
			RemoteAddr: y.mr.Addr() + uint64(i*size), RKey: y.mr.RKey()}
	}
	wrs[n-1].Flags = qp.SendSignaled
	pc := pairConfig{typ: qp.RC, mtu: 4096, timeout: 14, retry: 7, rnrRetry: 7, access: allAccess}
	done := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		for x.cq.Len() == 0 {
			if err := x.cq.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if k := x.cq.Poll(x.wcs); k != 1 || x.wcs[0].Status != qp.WCSuccess || x.wcs[0].WRID != n-1 {
			t.Fatalf("completions %+v", x.wcs[:k])
		}
		if !bytes.Equal(y.buf[:n*size], x.buf[:n*size]) {
			t.Fatal("the target does not hold what was written")
		}
		clear(y.buf[:n*size])
	}

	// Each single post waits for its completion before the next: a post
	// that found the QP's token held (the receive path handling the
	// previous WRITE's ACK) would leave with the holder, together with any
	// post after it, and the singles would not be single. The wire does
	// not say which WRs were signaled.
	for i := range wrs {
		wr := wrs[i]
		wr.Flags = qp.SendSignaled
		if err := x.qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		for x.cq.Len() == 0 {
			if err := x.cq.Wait(ctx); err != nil {
				t.Fatalf("waiting for WRITE %d's completion: %v", i, err)
			}
		}
		cancel()
		if k := x.cq.Poll(x.wcs); k != 1 || x.wcs[0].Status != qp.WCSuccess || x.wcs[0].WRID != uint64(i) {
			t.Fatalf("WRITE %d: completions %+v", i, x.wcs[:k])
		}
	}
	singles, singleDatagrams := captureTo(t, raw, x, y, n)
	if !bytes.Equal(y.buf[:n*size], x.buf[:n*size]) {
		t.Fatal("the target does not hold what was written one post at a time")
	}
	clear(y.buf[:n*size])

	for _, e := range []*end{x, y} {
		if err := e.qp.Modify(&qp.Attr{State: qp.StateReset}, qp.AttrState); err != nil {
			t.Fatal(err)
		}
	}
	connect(t, x, y, pc)
	connect(t, y, x, pc)
	if k, err := x.qp.PostSendList(wrs); k != n || err != nil {
		t.Fatalf("PostSendList posted %d of %d: %v", k, n, err)
	}
	listed, listDatagrams := captureTo(t, raw, x, y, n)
	done()

	// One post each again, the device batching them (PostBatched, the
	// default in polling mode): how many go together depends on how fast
	// they come, which the doorbell tests check in virtual time; here,
	// that the batches carry the same packets.
	for _, e := range []*end{x, y} {
		if err := e.qp.Modify(&qp.Attr{State: qp.StateReset}, qp.AttrState); err != nil {
			t.Fatal(err)
		}
	}
	connect(t, x, y, pc)
	connect(t, y, x, pc)
	x.dev.cfg.PostMode = PostBatched // this goroutine is the device's only poster
	for i := range wrs {
		if err := x.qp.PostSend(&wrs[i]); err != nil {
			t.Fatal(err)
		}
	}
	batched, batchedDatagrams := captureTo(t, raw, x, y, n)
	done()

	t.Logf("%d WRITEs of %d bytes: %d datagrams one post each inline, %d as a list, %d one post each batched",
		n, size, singleDatagrams, listDatagrams, batchedDatagrams)
	if singleDatagrams != n || listDatagrams > 2 {
		t.Errorf("%d and %d datagrams, want %d one post each and at most 2 (one GSO send) as a list", singleDatagrams, listDatagrams, n)
	}
	for i := range n {
		samePacket(t, i, singles[i], listed[i], "in list")
		samePacket(t, i, singles[i], batched[i], "batched")
	}
}

// samePacket fails the test unless b, packet i as sent another way (how),
// is a, as posted alone, byte for byte, but for the IPv4 Identification
// the kernel numbers GSO segments with, the checksums and the ICRC that
// covers the ID. a must carry ID 0.
func samePacket(t *testing.T, i int, a, b wire.Datagram, how string) {
	t.Helper()
	if id := binary.BigEndian.Uint16(a.IP[4:]); id != 0 {
		t.Errorf("packet %d posted alone has IPv4 ID %d, want 0", i, id)
	}
	// Compare all but the ID, the checksums (a split run keeps the run's
	// UDP checksum) and the ICRC.
	ipA, ipB, udpA, udpB := bytes.Clone(a.IP), bytes.Clone(b.IP), bytes.Clone(a.UDP), bytes.Clone(b.UDP)
	for _, ip := range [][]byte{ipA, ipB} {
		clear(ip[4:6])
		clear(ip[10:12])
	}
	clear(udpA[6:])
	clear(udpB[6:])
	end := len(a.Payload) - wire.ICRCLen
	if !bytes.Equal(ipA, ipB) || !bytes.Equal(udpA, udpB) || len(a.Payload) != len(b.Payload) ||
		!bytes.Equal(a.Payload[:end], b.Payload[:end]) {
		t.Fatalf("packet %d differs:\nalone   %x %x %x\n%-7s %x %x %x", i, a.IP, a.UDP, a.Payload, how, b.IP, b.UDP, b.Payload)
	}
}
