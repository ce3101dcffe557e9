package flood

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"

	"golang.org/x/net/ipv4"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/udplink"
)

// attacker floods the victim from its own loopback address. Every packet
// is built once, before the flood; the flood itself only hands batches of
// them to the kernel, so its rate is that of sendmmsg.
//
// Datagrams with bytes go through a udplink socket (the same path a goroce
// device sends on) bound to the attacker's address and port 4791;
// zero-length datagrams, which udplink refuses (ErrEmptyPacket), go
// through a second plain UDP socket on the same address, also with
// sendmmsg. The kernel sends 0-byte UDP datagrams through sendmmsg as it
// does any other.
type attacker struct {
	link *udplink.Link
	zero *ipv4.PacketConn // nil without ZeroLength
	conn *net.UDPConn     // under zero

	// deck is the mix of datagrams with bytes, kinds interleaved, cut into
	// batches of Config.Batch; deckKinds says which kind each one is and
	// batchKinds how many of each kind a whole batch holds.
	deck       []link.Packet
	deckKinds  []Kind
	batchKinds [][numKinds]uint64
	batch      int
	// zeroMsgs are the zero-length datagrams sent after each batch: as
	// many as each other kind has in a batch.
	zeroMsgs []ipv4.Message

	sent     [numKinds]atomic.Uint64 // datagrams handed to the kernel, by kind
	sendErrs atomic.Uint64           // datagrams the kernel refused (skipped)
	firstErr atomic.Pointer[error]
}

// newAttacker opens the attacker's sockets and builds its packets.
func newAttacker(cfg Config, t target) (*attacker, error) {
	l, err := udplink.Open(udplink.Config{Local: netip.AddrPortFrom(cfg.Attacker, link.RoCEv2Port), BatchSize: cfg.Batch})
	if err != nil {
		return nil, fmt.Errorf("attacker's socket: %w", err)
	}
	a := &attacker{link: l, batch: cfg.Batch}
	if err := a.build(cfg, t); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// build makes the deck and the zero-length messages.
func (a *attacker) build(cfg Config, t target) error {
	m := newPacketMaker(t, a.link.LocalAddr(), uint64(t.qpn))
	var kinds []Kind
	var bodies [][][]byte
	zero := false
	for _, k := range cfg.Kinds {
		if k == ZeroLength {
			zero = true
			continue
		}
		ps, err := m.packets(k)
		if err != nil {
			return fmt.Errorf("attacker's %v packets: %w", k, err)
		}
		kinds, bodies = append(kinds, k), append(bodies, ps)
	}
	if len(kinds) > 0 {
		// Kinds in turn, variants in turn, rounded up to whole batches.
		n := variants * len(kinds)
		n = (n + a.batch - 1) / a.batch * a.batch
		for i := range n {
			j := i % len(kinds)
			a.deck = append(a.deck, link.Packet{Buf: bodies[j][i/len(kinds)%variants], Addr: t.victim, TOS: link.ECT0})
			a.deckKinds = append(a.deckKinds, kinds[j])
		}
		for b := 0; b < n; b += a.batch {
			var c [numKinds]uint64
			for _, k := range a.deckKinds[b : b+a.batch] {
				c[k]++
			}
			a.batchKinds = append(a.batchKinds, c)
		}
	}
	if !zero {
		return nil
	}
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.Attacker, 0)))
	if err != nil {
		return fmt.Errorf("attacker's zero-length socket: %w", err)
	}
	a.conn, a.zero = conn, ipv4.NewPacketConn(conn)
	n := a.batch
	if len(kinds) > 0 {
		n = max(1, a.batch/len(kinds))
	}
	dst := net.UDPAddrFromAddrPort(t.victim)
	a.zeroMsgs = make([]ipv4.Message, n)
	for i := range a.zeroMsgs {
		a.zeroMsgs[i].Addr = dst // Buffers nil: a datagram of no bytes
	}
	return nil
}

// run floods until ctx is done.
func (a *attacker) run(ctx context.Context) {
	for b := 0; ; b = (b + 1) % max(1, len(a.batchKinds)) {
		select {
		case <-ctx.Done():
			return
		default:
		}
		if len(a.deck) > 0 {
			a.sendBatch(b)
		}
		if a.zero != nil {
			n, err := a.zero.WriteBatch(a.zeroMsgs, 0)
			if err != nil {
				a.refused(len(a.zeroMsgs), err)
				continue
			}
			a.sent[ZeroLength].Add(uint64(n))
		}
	}
}

// sendBatch sends batch b of the deck. A datagram the kernel refuses is
// counted and skipped.
func (a *attacker) sendBatch(b int) {
	pkts := a.deck[b*a.batch : (b+1)*a.batch]
	kinds := a.deckKinds[b*a.batch : (b+1)*a.batch]
	n, err := a.link.WriteBatch(pkts)
	if err == nil {
		for k, c := range a.batchKinds[b] {
			a.sent[k].Add(c)
		}
		return
	}
	for {
		for _, k := range kinds[:n] {
			a.sent[k].Add(1)
		}
		if err == nil {
			return
		}
		a.refused(1, err)
		if errors.Is(err, link.ErrClosed) || n+1 == len(pkts) {
			return
		}
		pkts, kinds = pkts[n+1:], kinds[n+1:]
		n, err = a.link.WriteBatch(pkts)
	}
}

// refused counts n datagrams the kernel did not take and keeps the first
// error.
func (a *attacker) refused(n int, err error) {
	a.sendErrs.Add(uint64(n))
	a.firstErr.CompareAndSwap(nil, &err)
}

// sentByKind returns how many datagrams of each kind went to the kernel.
func (a *attacker) sentByKind() [numKinds]uint64 {
	var s [numKinds]uint64
	for k := range s {
		s[k] = a.sent[k].Load()
	}
	return s
}

// close closes the attacker's sockets.
func (a *attacker) close() {
	a.link.Close()
	if a.conn != nil {
		a.conn.Close()
	}
}
