package rnic

import (
	"errors"
	"net/netip"
	"time"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// rxBatch is how many datagrams one ReadBatch may return.
const rxBatch = 64

// receive is the device's receive loop: read a batch, check each datagram
// (well-formed, ICRC), hand it to its QP, then send what the QPs that got
// packets now have to send.
func (d *Device) receive() {
	defer d.wg.Done()
	pkts := make([]link.Packet, rxBatch)
	bufs := make([][]byte, rxBatch)
	for i := range bufs {
		bufs[i] = make([]byte, 65536)
	}
	touched := make([]*QP, 0, rxBatch)
	cnps := make([]cnpTo, 0, rxBatch)
	snd := newSender(d)
	for {
		for i := range pkts {
			pkts[i] = link.Packet{Buf: bufs[i]}
		}
		n, err := d.link.ReadBatch(pkts)
		if err != nil {
			if errors.Is(err, link.ErrClosed) || d.closed.Load() {
				return
			}
			d.log.Sugar().Warnf("receive: %v", err)
			continue
		}
		now := time.Now()
		view := *d.view.Load()
		touched, cnps = touched[:0], cnps[:0]
		for i := range pkts[:n] {
			q, cnp := d.deliver(now, &pkts[i], view)
			if q != nil && !containsQP(touched, q) {
				touched = append(touched, q)
			}
			if cnp {
				cnps = append(cnps, cnpTo{q: q, addr: pkts[i].Addr})
			}
		}
		// Send what the packets called for (ACKs, NAKs, read responses,
		// requests an ACK let through the window) from here, without
		// waking a worker.
		if len(touched) > 0 {
			d.sendMu.Lock()
			for _, c := range cnps {
				if snd.out.Room() == 0 {
					snd.flush(now)
				}
				snd.out.AddCNP(c.addr, c.q.Query().DestQPN, c.q.QPN())
				d.dev.CNPsSent.Add(1)
			}
			for _, q := range touched {
				snd.transmit(now, q)
			}
			snd.flush(now)
			d.sendMu.Unlock()
			for _, q := range touched {
				q.rearm()
			}
		}
	}
}

// cnpTo is a CNP to send: for the flow that q receives from addr.
type cnpTo struct {
	q    *QP
	addr netip.AddrPort
}

// deliver checks one datagram and gives it to its QP, which it returns.
// It also reports whether the packet carried an ECN CE mark that the QP's
// notification point answers with a CNP.
func (d *Device) deliver(now time.Time, lp *link.Packet, view map[uint32]*QP) (q *QP, cnp bool) {
	d.dev.LinkRcvdPkts.Add(1)
	d.dev.RcvdBytes.Add(uint64(len(lp.Buf)))
	p, err := wire.Parse(lp.Buf)
	if err != nil {
		d.dev.Malformed.Add(1)
		return nil, false
	}
	ipID, ok := d.verifyICRC(lp)
	if !ok {
		d.dev.ICRCErr.Add(1)
		if d.tracer != nil {
			d.tracer.note(now, "drop: bad ICRC from "+lp.Addr.String())
		}
		return nil, false
	}
	if d.tracer != nil {
		d.tracer.packet(now, false, lp.Addr, d.local, lp.Buf, nil, nil)
	}
	if d.cfg.Tap != nil {
		d.cfg.Tap.Tap(now, lp.Addr, d.local, ipID, lp.TOS, lp.Buf)
	}
	q = view[p.BTH().DestQP()]
	if q == nil {
		d.dev.UnknownQP.Add(1)
		return nil, false
	}
	if p.Opcode() == wire.CNPOpcode {
		// Our flow to the CNP's sender crossed a congested queue.
		d.dev.CNPs.Add(1)
		// Only the connected peer may slow a QP down: a CNP from any other
		// address is counted and ignored.
		if ah := q.Query().AH; q.cc != nil && lp.Addr.Addr() == ah.Addr().Addr() {
			d.dev.CNPsHandled.Add(1)
			if q.cc.onCNP(now) {
				d.dev.RateReductions.Add(1)
			}
		}
		return q, false
	}
	q.Receive(now, p, lp.Addr, lp.TOS, nil)
	if lp.TOS&link.CE == link.CE && p.Info().Request {
		d.dev.ECNMarked.Add(1)
		cnp = q.cc != nil && q.cc.onCE(now)
	}
	return q, cnp
}

// verifyICRC checks the packet's ICRC and returns the IPv4 Identification
// it verified with (0 for IPv6). IPv6 and goroce's IPv4 packets verify in
// full, goroce's with the Identification the link expects (0, or a GSO
// segment's number, link.Packet.IPv4ID); other IPv4 packets verify only by
// solving for the Identification the socket did not show, unless the
// device is strict.
func (d *Device) verifyICRC(lp *link.Packet) (ipID uint16, ok bool) {
	e := wire.Endpoints{Src: lp.Addr, Dst: d.local, IPv4ID: lp.IPv4ID}
	if d.rxICRC.Verify(e, lp.Buf) {
		return lp.IPv4ID, true
	}
	if d.cfg.StrictICRC || !lp.Addr.Addr().Unmap().Is4() {
		return 0, false
	}
	if id, ok := e.SolveIPv4ID(lp.Buf); ok {
		d.dev.ICRCIDSolved.Add(1)
		return id, true
	}
	return 0, false
}

func containsQP(qs []*QP, q *QP) bool {
	for _, x := range qs {
		if x == q {
			return true
		}
	}
	return false
}
