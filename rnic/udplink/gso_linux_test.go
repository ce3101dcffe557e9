package udplink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// turnOffGRO turns UDP GRO off on l's socket and gives it a receiver that
// reads into the offered buffers.
func turnOffGRO(t testing.TB, l *Link) {
	t.Helper()
	setsockopt(t, l, unix.IPPROTO_UDP, unix.UDP_GRO, 0)
	l.rx = newMmsgReceiver(l.conn, DefaultBatchSize, false, false, &l.count, l.errs)
	l.newPoll = func() polledReceiver { return newMmsgReceiver(l.conn, DefaultBatchSize, false, true, &l.count, l.errs) }
}

func setsockopt(t testing.TB, l *Link, level, name, value int) {
	t.Helper()
	rc, err := l.conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, name, value) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatalf("setsockopt %d: %v", name, serr)
	}
}

func gsoOn(l *Link) bool {
	s, ok := l.tx.(*mmsgSender)
	return ok && s.gso.on
}

// needGSO skips where the kernel lacks UDP GSO or GRO.
func needGSO(t *testing.T, l *Link) {
	t.Helper()
	if !gsoOn(l) || l.rx.(*mmsgReceiver).gro == nil {
		testenv.SkipOrFailf(t, "kernel without UDP GSO/GRO (features: %v)", l.tx)
	}
}

// runsBatch is datagrams in runs of equal length to one destination, as
// the device sends them: 40 of 1040 bytes, a shorter one ending the run,
// then 30 of 300 bytes, then single ones of varied lengths, each gathered
// from Buf, Payload and Tail and numbered by its first bytes.
func runsBatch(dst netip.AddrPort) (pkts []link.Packet, want [][]byte) {
	add := func(n int) {
		data := payload(len(want), n)
		want = append(want, data)
		pkts = append(pkts, link.Packet{Buf: data[:12], Payload: data[12 : n-4], Tail: data[n-4:], Addr: dst})
	}
	for range 40 {
		add(1040)
	}
	add(500)
	for range 30 {
		add(300)
	}
	for i := range 10 {
		add(100 + i*50)
	}
	return pkts, want
}

// TestGSOGRORoundTrip sends runs that go as UDP GSO sends over IPv6 and
// come back as GRO runs, and checks every datagram arrives byte for byte,
// in order, from the sender, with ECT(0).
func TestGSOGRORoundTrip(t *testing.T) {
	a, b := openLink(t, "::1", batched), openLink(t, "::1", batched)
	needGSO(t, a)
	pkts, want := runsBatch(b.LocalAddr())
	for round := range 3 {
		mustWrite(t, a, pkts)
		// Read through small slot slices, so that runs are returned over
		// several calls.
		got := readN(t, b, len(want), 2048)
		for i, p := range got {
			if !bytes.Equal(p.Buf, want[i]) {
				t.Fatalf("round %d: datagram %d is %d bytes %q..., want %d bytes %q...", round, i,
					len(p.Buf), p.Buf[:min(5, len(p.Buf))], len(want[i]), want[i][:5])
			}
			if p.Addr != a.LocalAddr() || p.TOS != link.ECT0 {
				t.Errorf("datagram %d from %v with TOS %#02x, want %v and ECT(0)", i, p.Addr, p.TOS, a.LocalAddr())
			}
		}
	}
	st, sa := b.Stats(), a.Stats()
	// Each round: 40 of 1040 ended by the 500, then 30 of 300 ended by
	// the 100; the rest grow, so each goes alone.
	if want := uint64(3 * (41 + 31)); sa.TxSegmented != want {
		t.Errorf("TxSegmented = %d, want %d: not every run went as one GSO send", sa.TxSegmented, want)
	}
	if st.RxCoalesced == 0 {
		t.Error("RxCoalesced = 0: no GRO run received")
	}
}

// TestGSORefusedFallsBack makes the kernel refuse GSO sends (a socket that
// sends without UDP checksums may not segment: EINVAL) and checks that the
// datagrams still arrive, one per message, and that the link stops using
// GSO.
func TestGSORefusedFallsBack(t *testing.T) {
	a, b := openLink(t, "::1", batched), openLink(t, "::1", batched)
	needGSO(t, a)
	setsockopt(t, a, unix.SOL_UDP, unix.UDP_NO_CHECK6_TX, 1)
	pkts, want := runsBatch(b.LocalAddr())
	mustWrite(t, a, pkts)
	got := readN(t, b, len(want), 2048)
	for i, p := range got {
		if !bytes.Equal(p.Buf, want[i]) {
			t.Fatalf("datagram %d is %q..., want %q...", i, p.Buf[:min(5, len(p.Buf))], want[i][:5])
		}
	}
	if gsoOn(a) {
		t.Error("GSO still on after the kernel refused it")
	}
	if s := a.Stats(); s.TxSegmented != 0 {
		t.Errorf("TxSegmented = %d, want 0", s.TxSegmented)
	}
}

// TestGSOOffOnIPv4 checks that an IPv4 link does not use GSO (see
// gso_linux.go and TestGSOIPv4IDsOnTheWire) but does receive with GRO: a
// plain UDP socket (not a link) sends one GSO message of 10 datagrams of
// 1000 bytes and one of 500 to the link, which must return the 11
// datagrams byte for byte, in order, from that socket, counted as one GRO
// run, numbered 0 to 10 in Packet.IPv4ID (a GSO sender's numbering).
func TestGSOOffOnIPv4(t *testing.T) {
	a := openLink(t, "127.88.30.1", batched)
	if gsoOn(a) {
		t.Error("GSO on for an IPv4 link")
	}
	if a.rx.(*mmsgReceiver).gro == nil {
		t.Fatal("the IPv4 link receives without UDP GRO (Linux has it since 5.0)")
	}
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.88.30.2:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const segs, size, last = 10, 1000, 500
	var msg []byte
	var want [][]byte
	for i := range segs + 1 {
		d := payload(i, size)
		if i == segs {
			d = d[:last]
		}
		want = append(want, d)
		msg = append(msg, d...)
	}
	oob := cmsg(unix.SOL_UDP, unix.UDP_SEGMENT, binary.NativeEndian.AppendUint16(nil, size))
	if n, _, err := conn.WriteMsgUDP(msg, oob, net.UDPAddrFromAddrPort(a.LocalAddr())); err != nil || n != len(msg) {
		t.Fatalf("GSO send of %d bytes: %d, %v", len(msg), n, err)
	}
	from := netip.MustParseAddrPort(conn.LocalAddr().String())
	got := readN(t, a, len(want), 2048)
	for i, p := range got {
		if !bytes.Equal(p.Buf, want[i]) || p.Addr != from || p.IPv4ID != uint16(i) {
			t.Errorf("datagram %d: %d bytes %q... from %v, IPv4ID %d; want %d bytes %q... from %v, IPv4ID %d", i,
				len(p.Buf), p.Buf[:min(5, len(p.Buf))], p.Addr, p.IPv4ID, len(want[i]), want[i][:5], from, i)
		}
	}
	if st := a.Stats(); st.RxCoalesced != uint64(len(want)) {
		t.Errorf("RxCoalesced = %d, want %d: the datagrams did not come as one GRO run", st.RxCoalesced, len(want))
	}
}

// TestGSOIPv4IDsOnTheWire shows why IPv4 links do not use GSO: when the
// kernel cuts a GSO send into datagrams, it numbers their IPv4
// Identification fields 0, 1, 2, ..., while the ICRC promises 0. A plain
// send carries ID 0 with DF, as Caps().IPv4ID says.
//
// Loopback passes a GSO send through uncut, so the test builds a wire that
// cuts: in a network namespace of its own (nothing else sees it), a TUN
// device without offloads, whose file descriptor returns each IP packet
// that the kernel routes to it. Needs root.
func TestGSOIPv4IDsOnTheWire(t *testing.T) {
	tun := tunNamespace(t, "gotun0", netip.MustParsePrefix("10.88.0.1/24"))
	defer tun.Close()
	a := openLink(t, "10.88.0.1", batched)
	dst := netip.MustParseAddrPort("10.88.0.2:4791")
	const segs, size = 4, 1000

	capture := func() (ids []uint16, df bool) {
		t.Helper()
		df = true
		buf := make([]byte, 65536)
		for len(ids) < segs {
			n, err := tun.Read(buf)
			if err != nil {
				t.Fatalf("read TUN: %v", err)
			}
			ip := buf[:n]
			if n < 28 || ip[0]>>4 != 4 || ip[9] != unix.IPPROTO_UDP || binary.BigEndian.Uint16(ip[22:24]) != dst.Port() {
				continue // not ours
			}
			if udpLen := int(binary.BigEndian.Uint16(ip[24:26])); udpLen != 8+size {
				t.Fatalf("UDP length %d on the wire, want %d: the run was not cut", udpLen, 8+size)
			}
			ids = append(ids, binary.BigEndian.Uint16(ip[4:6]))
			df = df && ip[6]&0x40 != 0
		}
		return ids, df
	}
	batch := func() []link.Packet {
		pkts := make([]link.Packet, segs)
		for i := range pkts {
			pkts[i] = link.Packet{Buf: payload(i, size), Addr: dst}
		}
		return pkts
	}

	mustWrite(t, a, batch())
	if ids, df := capture(); !df || ids[0] != 0 || ids[segs-1] != 0 {
		t.Fatalf("plain sends: IDs %v, DF %v; want all 0 with DF", ids, df)
	}

	a.tx.(*mmsgSender).gso.on = true // what the link refuses to do on IPv4
	mustWrite(t, a, batch())
	if s := a.Stats(); s.TxSegmented != segs {
		t.Fatalf("TxSegmented = %d, want %d", s.TxSegmented, segs)
	}
	ids, df := capture()
	t.Logf("IPv4 IDs of one GSO send cut into %d datagrams: %v (DF %v)", segs, ids, df)
	for k, id := range ids {
		if id != uint16(k) {
			t.Errorf("segment %d has ID %d; this test expects the kernel to number segments 0, 1, 2, ... (if it sent 0 throughout, IPv4 GSO could be turned on)", k, id)
		}
	}
}

// tunNamespace moves the test's thread into a network namespace of its
// own (root only; the thread is never unlocked and dies with the
// namespace) and opens a TUN device there (openTUN). It skips where
// either cannot be had.
func tunNamespace(t *testing.T, name string, prefix netip.Prefix) *os.File {
	t.Helper()
	needRoot(t)
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		testenv.SkipOrFailf(t, "no network namespace: %v", err)
	}
	return openTUN(t, name, prefix)
}

// openTUN creates a TUN device without offloads (so the kernel segments
// GSO sends before handing them over), gives it prefix and brings it up.
func openTUN(t *testing.T, name string, prefix netip.Prefix) *os.File {
	t.Helper()
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		testenv.SkipOrFailf(t, "no TUN device: %v", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		t.Fatal(err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		testenv.SkipOrFailf(t, "TUNSETIFF: %v", err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun")

	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(s)
	ioctl := func(req uint, set func(*unix.Ifreq) error, what string) {
		t.Helper()
		r, _ := unix.NewIfreq(name)
		if set != nil {
			if err := set(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := unix.IoctlIfreq(s, req, r); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	ioctl(unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(prefix.Addr().AsSlice()) }, "SIOCSIFADDR")
	mask := netip.AddrFrom4([4]byte(bytesOfMask(prefix.Bits())))
	ioctl(unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(mask.AsSlice()) }, "SIOCSIFNETMASK")
	ioctl(unix.SIOCSIFFLAGS, func(r *unix.Ifreq) error { r.SetUint16(unix.IFF_UP | unix.IFF_RUNNING); return nil }, "SIOCSIFFLAGS")
	return f
}

func bytesOfMask(bits int) []byte {
	m := make([]byte, 4)
	for i := range bits {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}

// TestRoCEv2GSOIPv4ICRCOnTheWire: with Config.RoCEv2GSO an IPv4 link sends
// a run of RoCEv2 packets as one GSO send, and every segment the kernel
// cuts carries an ICRC that verifies against its real IP header, ID and
// all (what Linux rxe and Wireshark check); Packet.IPv4ID says which ID.
func TestRoCEv2GSOIPv4ICRCOnTheWire(t *testing.T) {
	tun, a := roceLink(t, "gotun1", "10.89.0")
	dst := netip.MustParseAddrPort("10.89.0.2:4791")
	pkts := roceDatagrams(wire.Endpoints{Src: a.LocalAddr(), Dst: dst}, dst, 1000, 1000, 1000, 1000, 1000)
	mustWrite(t, a, pkts)
	if s := a.Stats(); s.TxSegmented != uint64(len(pkts)) {
		t.Fatalf("TxSegmented = %d, want %d: not one GSO send", s.TxSegmented, len(pkts))
	}
	if ids := readICRCs(t, tun, dst, pkts); !slices.Equal(ids, []uint16{0, 1, 2, 3, 4}) {
		t.Errorf("IDs on the wire %v, want 0 to 4", ids)
	}
}

// roceLink opens an IPv4 link with Config.RoCEv2GSO at NET.1 in a network
// namespace of the test's own, beside a TUN device that NET.0/24 is routed
// to (tunNamespace); it skips where the kernel has no UDP GSO.
func roceLink(t *testing.T, tunName, net string) (*os.File, *Link) {
	t.Helper()
	tun := tunNamespace(t, tunName, netip.MustParsePrefix(net+".1/24"))
	t.Cleanup(func() { tun.Close() })
	a, err := Open(Config{Local: netip.MustParseAddrPort(net + ".1:0"), EphemeralPort: true, RoCEv2GSO: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if !gsoOn(a) {
		testenv.SkipOrFail(t, "the kernel has no UDP GSO")
	}
	return tun, a
}

// roceDatagrams is a batch of RoCEv2-shaped datagrams of the sizes given
// to dst, each with a valid ICRC for ID 0.
func roceDatagrams(e wire.Endpoints, dst netip.AddrPort, sizes ...int) []link.Packet {
	var pkts []link.Packet
	for i, size := range sizes {
		head := payload(i, size-wire.ICRCLen)
		head[0] = byte(wire.RCSendOnly) // a BTH's first byte, for the ICRC's masks
		tail := binary.LittleEndian.AppendUint32(nil, e.ICRC(head))
		pkts = append(pkts, link.Packet{Buf: head, Tail: tail, Addr: dst})
	}
	return pkts
}

// roceRuns is roceDatagrams in two GSO runs: 1000, 1000 and a shorter 900
// that ends the first; five of 1000.
func roceRuns(e wire.Endpoints, dst netip.AddrPort) []link.Packet {
	return roceDatagrams(e, dst, 1000, 1000, 900, 1000, 1000, 1000, 1000, 1000)
}

// readICRCs reads n datagrams to dst's port from the TUN device and checks
// that each one's ICRC verifies against its real IP header, ID and all,
// and that Packet.IPv4ID named that ID; it returns the IDs.
func readICRCs(t *testing.T, tun *os.File, dst netip.AddrPort, pkts []link.Packet) []uint16 {
	t.Helper()
	var ids []uint16
	buf := make([]byte, 65536)
	for len(ids) < len(pkts) {
		n, err := tun.Read(buf)
		if err != nil {
			t.Fatalf("read TUN: %v", err)
		}
		ip := buf[:n]
		if n < 28 || ip[0]>>4 != 4 || ip[9] != unix.IPPROTO_UDP || binary.BigEndian.Uint16(ip[22:24]) != dst.Port() {
			continue
		}
		k, id := len(ids), binary.BigEndian.Uint16(ip[4:6])
		if !wire.VerifyICRC(ip[:20], ip[20:28], ip[28:]) {
			t.Errorf("datagram %d (ID %d on the wire, Packet.IPv4ID %d): the ICRC does not verify against the real headers", k, id, pkts[k].IPv4ID)
		} else if pkts[k].IPv4ID != id {
			t.Errorf("datagram %d: ID %d on the wire, Packet.IPv4ID %d", k, id, pkts[k].IPv4ID)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestRoCEv2GSORetryICRCs: the kernel refuses a GSO send of an IPv4
// RoCEv2 link (EIO, as where the route's device cannot checksum
// segments), so the link sends that run's datagrams one by one; the
// system call that does so takes only those (as sendmmsg does when the
// socket buffer fills or the next message fails), and the link turns GSO
// off. The second run, which an earlier try numbered 0 to 4 for one GSO
// send, then goes one datagram per message with ID 0: every datagram on
// the wire must carry an ICRC for the ID it has there. The kernel's
// refusal and the short sendmmsg are injected (neither can be had on
// demand); the wire is real.
func TestRoCEv2GSORetryICRCs(t *testing.T) {
	tun, a := roceLink(t, "gotun2", "10.90.0")
	s := a.tx.(*mmsgSender)
	calls := 0
	s.sendmmsgFn = func(fd uintptr) bool {
		calls++
		switch calls {
		case 1: // two GSO runs; the kernel refuses the first
			s.n, s.errno = 0, unix.EIO
			return true
		case 2: // the first run one by one, the second as a GSO run: take 3
			vlen := s.vlen
			s.vlen = 3
			ok := s.sendmmsg(fd)
			s.vlen = vlen
			return ok
		}
		return s.sendmmsg(fd)
	}
	dst := netip.MustParseAddrPort("10.90.0.2:4791")
	pkts := roceRuns(wire.Endpoints{Src: a.LocalAddr(), Dst: dst}, dst)
	mustWrite(t, a, pkts)
	if calls != 3 || s.gso.on {
		t.Fatalf("%d sendmmsg calls, GSO on %v; want 3, off", calls, s.gso.on)
	}
	if ids := readICRCs(t, tun, dst, pkts); !slices.Equal(ids, make([]uint16, len(pkts))) {
		t.Errorf("IDs on the wire %v, want all 0 (one datagram per message)", ids)
	}
}

// TestRoCEv2GSOFirewallDrop: a firewall on output (an nftables rule in the
// test's own namespace) drops the link's GSO sends, so the kernel fails
// them with EPERM. The rule drops what is longer than 2000 bytes, a run
// and not its datagrams, as nccl's multi-host test's 1% random drop did
// when it hit a run: the datagrams of a retry one by one then went, and
// the link took the drop for the kernel refusing GSO, turned GSO off, and
// sent the other run's datagrams, numbered for one GSO send, alone with ID
// 0 (61 bad ICRCs in its capture). A drop is a loss: WriteBatch reports
// the error, GSO stays on, and once the rule is gone the next batch goes
// as GSO runs whose ICRCs verify on the wire.
func TestRoCEv2GSOFirewallDrop(t *testing.T) {
	tun, a := roceLink(t, "gotun3", "10.91.0")
	dst := netip.MustParseAddrPort("10.91.0.2:4791")
	nft, err := nftables.New() // this thread's namespace: the test's own
	if err != nil {
		t.Fatal(err)
	}
	table := nft.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "goroce_drop"})
	accept := nftables.ChainPolicyAccept
	chain := nft.AddChain(&nftables.Chain{Name: "out", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	nft.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Meta{Key: expr.MetaKeyLEN, Register: 1},
		// cmp compares bytes, so compare the length big-endian
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpGt, Register: 1, Data: binaryutil.BigEndian.PutUint32(2000)},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	if err := nft.Flush(); err != nil {
		testenv.SkipOrFailf(t, "nftables: %v", err)
	}
	pkts := roceRuns(wire.Endpoints{Src: a.LocalAddr(), Dst: dst}, dst)
	n, err := a.WriteBatch(pkts)
	if n != 0 || !errors.Is(err, unix.EPERM) {
		t.Fatalf("WriteBatch through a dropping firewall: %d sent, %v; want 0, EPERM", n, err)
	}
	if !gsoOn(a) {
		t.Fatal("GSO turned off by a firewall's drop")
	}
	nft.DelTable(table)
	if err := nft.Flush(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, a, pkts)
	if s := a.Stats(); s.TxSegmented != uint64(len(pkts)) {
		t.Errorf("TxSegmented = %d, want %d: not sent as GSO runs", s.TxSegmented, len(pkts))
	}
	if ids := readICRCs(t, tun, dst, pkts); !slices.Equal(ids, []uint16{0, 1, 2, 0, 1, 2, 3, 4}) {
		t.Errorf("IDs on the wire %v, want 0 1 2 and 0 1 2 3 4 (two GSO runs)", ids)
	}
}
