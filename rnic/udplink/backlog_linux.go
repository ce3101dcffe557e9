package udplink

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"
)

// backlogAge is how old a view of the host's UDP sockets PeerBacklog may
// answer from: the QPs whose ACK timers expire together (a thousand of
// them, after their peer stalled) ask at once, and one read of the
// kernel's table answers them all, however long that read took on a
// loaded host.
const backlogAge = 5 * time.Millisecond

// backlogs is a view of the receive queues of the host's UDP sockets, by
// local address, read from /proc/net/udp and udp6.
type backlogs struct {
	mu  sync.Mutex
	at  time.Time // when the last read ended
	rx  map[netip.AddrPort]int
	now func() time.Time // time.Now; a test's clock
}

// PeerBacklog reports how many bytes wait unread in the receive queue of
// the UDP socket bound to peer, as the kernel shows it (/proc/net/udp,
// /proc/net/udp6: rx_queue, in bytes of the buffers the datagrams hold),
// and whether there is such a socket in this network namespace
// (link.BacklogReporter). A socket bound to the wildcard address at
// peer's port counts as peer's.
func (l *Link) PeerBacklog(peer netip.AddrPort) (int, bool) { return l.backlog.peer(peer) }

func (b *backlogs) peer(peer netip.AddrPort) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clock := b.now
	if clock == nil {
		clock = time.Now
	}
	if now := clock(); b.rx == nil || now.Sub(b.at) >= backlogAge || now.Before(b.at) {
		b.load()
		b.at = clock()
	}
	peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	if n, ok := b.rx[peer]; ok {
		return n, true
	}
	any := netip.IPv4Unspecified()
	if peer.Addr().Is6() {
		any = netip.IPv6Unspecified()
	}
	n, ok := b.rx[netip.AddrPortFrom(any, peer.Port())]
	return n, ok
}

// load reads the kernel's tables into b.rx.
func (b *backlogs) load() {
	if b.rx == nil {
		b.rx = make(map[netip.AddrPort]int)
	}
	clear(b.rx)
	for _, name := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		parseUDPTable(data, b.rx)
	}
}

// parseUDPTable adds the local address and rx_queue of each socket of a
// /proc/net/udp or udp6 table to rx:
//
//	sl  local_address rem_address st tx_queue:rx_queue ...
//	0: 0100007F:12B7 00000000:0000 07 00000000:00000000 ...
//
// The address is the kernel's in hex, 32-bit words in host byte order;
// the port and the queues are hex.
func parseUDPTable(data []byte, rx map[netip.AddrPort]int) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan() // the header
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 {
			continue
		}
		host, port, ok := bytes.Cut(f[1], []byte(":"))
		_, queue, ok2 := bytes.Cut(f[4], []byte(":"))
		if !ok || !ok2 {
			continue
		}
		addr, ok := procAddr(host)
		p, err := strconv.ParseUint(string(port), 16, 16)
		q, err2 := strconv.ParseUint(string(queue), 16, 32)
		if !ok || err != nil || err2 != nil {
			continue
		}
		rx[netip.AddrPortFrom(addr, uint16(p))] += int(q)
	}
}

// procAddr decodes an address of /proc/net/udp (8 hex digits) or udp6
// (32): 32-bit words, each in the host's byte order.
func procAddr(h []byte) (netip.Addr, bool) {
	var raw [16]byte
	n, err := hex.Decode(raw[:], h)
	if err != nil || (n != 4 && n != 16) {
		return netip.Addr{}, false
	}
	var out [16]byte
	for i := 0; i < n; i += 4 {
		binary.BigEndian.PutUint32(out[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	if n == 4 {
		return netip.AddrFrom4([4]byte(out[:4])), true
	}
	return netip.AddrFrom16(out).Unmap(), true
}
