package rnic

import (
	"errors"
	"net/netip"
	"runtime/debug"
	"time"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/wire"
)

// rxBatch is how many datagrams one ReadBatch may return.
const rxBatch = 64

// rxPath is the receive path's state: the batch and the sender that
// answers it. The receive goroutine owns it, or, in polling mode, whoever
// holds the device's rxMu.
type rxPath struct {
	pkts    []link.Packet
	bufs    [][]byte
	touched []*QP
	cnps    []cnpTo
	// armed: the QPs whose token the receive path held when another path
	// left them work to send (see hand).
	armed []*QP
	snd   *sender
	// offered: pkts are as offer left them, since the last read found
	// nothing (a read that returns no datagram leaves pkts alone).
	offered bool
	// owed: in polling mode, the QPs that polled packets gave something
	// to send, until a poll that finds the link idle sends what is left.
	owed []*QP
	// granted: the QPs an answer takes from the device's grants.
	granted []*QP
}

func newRxPath(d *Device) *rxPath {
	rx := &rxPath{pkts: make([]link.Packet, rxBatch), bufs: make([][]byte, rxBatch),
		touched: make([]*QP, 0, rxBatch), cnps: make([]cnpTo, 0, rxBatch), armed: make([]*QP, 0, rxBatch),
		snd: newSender(d)}
	for i := range rx.bufs {
		rx.bufs[i] = make([]byte, 65536)
	}
	return rx
}

// offer readies the batch for a read: every slot gets its buffer back.
func (rx *rxPath) offer() []link.Packet {
	if !rx.offered {
		for i := range rx.pkts {
			rx.pkts[i] = link.Packet{Buf: rx.bufs[i]}
		}
	}
	return rx.pkts
}

// tryRead is a polled read into the batch.
func (d *Device) tryRead(rx *rxPath) (int, error) {
	n, err := d.poller.TryReadBatch(rx.offer())
	rx.offered = n == 0 && err == nil
	return n, err
}

// receive is the device's receive loop: read a batch, check each datagram
// (well-formed, ICRC), hand it to its QP, then send what the QPs that got
// packets now have to send.
func (d *Device) receive() {
	defer func() { d.exited <- struct{}{} }()
	rx := d.rx
	for {
		n, err := d.link.ReadBatch(rx.offer())
		if err != nil {
			if errors.Is(err, link.ErrClosed) || d.closed.Load() {
				return
			}
			d.log.Sugar().Warnf("receive: %v", err)
			continue
		}
		d.handle(rx, n)
	}
}

// receivePolled is the receive loop of a device in polling mode: it takes
// what arrives while nobody polls. It parks until the socket is readable,
// then reads under rxMu, as the pollers do (see progress).
func (d *Device) receivePolled() {
	defer func() { d.exited <- struct{}{} }()
	for {
		d.rxMu.Lock()
		n, err := d.tryRead(d.rx)
		if n > 0 {
			d.handle(d.rx, n)
		}
		d.rxMu.Unlock()
		if err == nil && n == 0 {
			err = d.poller.WaitReadable()
		}
		if err != nil {
			if errors.Is(err, link.ErrClosed) || d.closed.Load() {
				return
			}
			d.log.Sugar().Warnf("receive: %v", err)
			if err = d.poller.WaitReadable(); errors.Is(err, link.ErrClosed) {
				return
			}
		}
	}
}

// Progress runs the receive path once in the caller's goroutine, in
// polling mode (Config.BusyPoll): it takes everything waiting on the link,
// delivers it and sends what it calls for, without blocking. It is what
// CQ.Poll does first on an empty CQ, for programs that wait on memory
// rather than on a CQ, as ib_write_lat waits for the peer's WRITE to land
// in its buffer. If the receive goroutine or another poller is at it,
// Progress returns at once: the packets are in hand. Outside polling mode
// it does nothing.
func (d *Device) Progress() {
	if d.poller != nil {
		d.progress()
	}
}

// Receiving reports whether a goroutine is running the receive path at
// this moment, in polling mode (Progress): the receive goroutine, or a
// poller of another CQ. A poller whose CQ is empty while another receives
// gets nothing from polling again until that one is done; one that holds
// the only P the other needs (a C thread calling in from outside the Go
// scheduler, GOMAXPROCS 1) should offer it (runtime.Gosched). Outside
// polling mode it reports false.
func (d *Device) Receiving() bool {
	if d.poller == nil {
		return false
	}
	if !d.rxMu.TryLock() {
		return true
	}
	d.rxMu.Unlock()
	return false
}

// progress is the receive path run by a goroutine that polls a CQ in
// polling mode (see Progress).
func (d *Device) progress() {
	if !d.rxMu.TryLock() {
		return
	}
	d.poll()
	d.rxMu.Unlock()
}

// poll reads the link until a read leaves nothing behind, delivering each
// batch. Called with rxMu held.
func (d *Device) poll() {
	for {
		if len(d.rx.owed) > 0 {
			// What the last batch called for leaves before the next read,
			// so that the ACKs of a stream that keeps the link busy go
			// out once a batch rather than once the link falls idle,
			// when the peer's window has long been full.
			d.sendOwed(d.rx)
		}
		n, err := d.tryRead(d.rx)
		if n > 0 {
			d.dev.PolledPkts.Add(uint64(n))
			now := d.deliverBatch(d.rx, n)
			if len(d.rx.cnps) > 0 || len(d.rx.armed) > 0 || d.granted.Load() {
				// Congestion news goes at once, and so does what a
				// post left while this goroutine held its QP's token,
				// and what the QPs whose turns the batch's ACKs gave
				// back may send.
				d.answer(d.rx, d.rx.armed, now)
			}
			// What the packets call for goes out with this goroutine's
			// next post to the QP, right behind the request it posts (see
			// qp.Engine.Transmit), or before its next read, or from the
			// QPs' worker, whichever comes first: the poller takes its
			// completions before the system call that sends the ACKs, and
			// the ACK of a message it answers rides with the answer.
			for _, q := range d.rx.touched {
				if !containsQP(d.rx.owed, q) {
					d.rx.owed = append(d.rx.owed, q)
				}
				q.w.ring(q)
			}
		}
		if err != nil || n < len(d.rx.pkts) {
			break // a short batch leaves nothing behind (link.Poller)
		}
	}
}

// sendOwed sends what the QPs in rx.owed still have to send (nothing, as
// a rule, when the application has posted to them since) and forgets
// them.
func (d *Device) sendOwed(rx *rxPath) {
	d.answer(rx, rx.owed, d.clock.Now())
	clear(rx.owed)
	rx.owed = rx.owed[:0]
}

// handle delivers the batch's first n packets, then sends what they
// called for (ACKs, NAKs, read responses, requests an ACK let through the
// window) from here, without waking a worker.
func (d *Device) handle(rx *rxPath, n int) {
	now := d.deliverBatch(rx, n)
	if len(rx.touched) > 0 {
		d.answer(rx, rx.touched, now)
	}
}

// answer sends, from rx's sender, the CNPs the batch's notification
// points called for (once: it forgets them) and what the QPs qs have to
// send now.
func (d *Device) answer(rx *rxPath, qs []*QP, now time.Time) {
	snd := rx.snd
	d.sendMu.Lock()
	for _, c := range rx.cnps {
		if snd.out.Room() == 0 {
			snd.flush(now)
		}
		snd.out.AddCNP(c.addr, c.q.Query().DestQPN, c.q.QPN())
		d.dev.CNPsSent.Add(1)
	}
	rx.cnps = rx.cnps[:0]
	for _, q := range qs {
		snd.transmit(now, q)
	}
	// The QPs whose turns in the budget in flight these answers gave back
	// go now, from here, rather than once their worker wakes (which it
	// was rung to do, in case no sender came by first).
	rx.granted = d.takeGrants(rx.granted[:0])
	view := *d.view.Load()
	for _, q := range rx.granted {
		if view[q.QPN()] == q { // not destroyed since
			snd.transmit(now, q)
		}
	}
	snd.flush(now)
	d.sendMu.Unlock()
	for _, q := range qs {
		q.rearm()
	}
	for _, q := range rx.granted {
		q.rearm()
	}
	clear(rx.granted)
}

// grant notes that a turn in the budget in flight was reserved for q
// while it waited in line (qp.Env.Granted), for the next answer to send,
// and rings q's worker in case none comes first. Called with another QP's
// token held.
func (d *Device) grant(q *QP) {
	d.grantMu.Lock()
	d.grants = append(d.grants, q)
	d.grantMu.Unlock()
	d.granted.Store(true)
	q.w.ring(q)
}

// takeGrants moves the QPs grant noted to into, and returns it.
func (d *Device) takeGrants(into []*QP) []*QP {
	if !d.granted.Load() {
		return into
	}
	d.grantMu.Lock()
	into = append(into, d.grants...)
	clear(d.grants)
	d.grants = d.grants[:0]
	d.granted.Store(false)
	d.grantMu.Unlock()
	return into
}

// deliverBatch delivers the batch's first n packets to their QPs, which
// it lists in rx.touched, with the CNPs to send in rx.cnps. It returns
// the time it took as now.
//
// From a link that lends (link.Lender, shmlink) the packets are frames
// where they lie in memory the sender shares: they are parsed and their
// payloads scattered into the MRs or receive buffers from there, a copy
// fewer per byte than copying them out first, and the batch is released
// once delivered, whatever became of each packet. wire.Parse reads the
// fields it takes the layout from once, so a sender that rewrites a frame
// meanwhile changes values, not where the device reads or writes. A fault
// reading the shared memory (its file truncated under the mapping) drops
// the packet (counted Malformed) instead of crashing the process.
func (d *Device) deliverBatch(rx *rxPath, n int) (now time.Time) {
	now = d.clock.Now()
	view := *d.view.Load()
	rx.touched, rx.cnps = rx.touched[:0], rx.cnps[:0]
	clear(rx.armed)
	rx.armed = rx.armed[:0]
	bytes := 0
	if d.lender == nil {
		bytes = d.deliverSome(now, rx, rx.pkts[:n], view)
	} else {
		for i := 0; i < n; {
			k, b := d.deliverLent(now, rx, rx.pkts[i:n], view)
			i, bytes = i+k, bytes+b
		}
		d.lender.ReleaseBatch()
	}
	d.dev.LinkRcvdPkts.Add(uint64(n)) // once a batch: an atomic add costs
	d.dev.RcvdBytes.Add(uint64(bytes))
	return now
}

// deliverSome delivers pkts, noting in rx the QPs they touched and the
// CNPs to send, and returns their bytes.
func (d *Device) deliverSome(now time.Time, rx *rxPath, pkts []link.Packet, view map[uint32]*QP) (bytes int) {
	for i := range pkts {
		bytes += len(pkts[i].Buf)
		q, cnp := d.deliver(now, rx, &pkts[i], view)
		if q != nil && !containsQP(rx.touched, q) {
			rx.touched = append(rx.touched, q)
		}
		if cnp {
			rx.cnps = append(rx.cnps, cnpTo{q: q, addr: pkts[i].Addr})
		}
	}
	return bytes
}

// deliverLent delivers lent packets as deliverSome does until one faults,
// and returns how many it handled, the one that faulted included, and
// their bytes.
func (d *Device) deliverLent(now time.Time, rx *rxPath, pkts []link.Packet, view map[uint32]*QP) (n, bytes int) {
	defer link.CatchFault(debug.SetPanicOnFault(true), func() {
		d.dev.Malformed.Add(1)
		n++
	})
	for n = 0; n < len(pkts); n++ {
		bytes += d.deliverSome(now, rx, pkts[n:n+1], view)
	}
	return n, bytes
}

// hand runs p, which lp carries, through q's engines: at once if q's token
// is free, otherwise through q's inbox, for the holder to run before it
// lets go. If the inbox is full the receive path waits for the token: the
// holder's run is bounded and waits for nothing the receive path holds.
// A post or a worker that left work while the receive path held the token
// (armed) gets its QP listed in rx.armed, to be sent with the batch's
// answers.
func (d *Device) hand(now time.Time, rx *rxPath, q *QP, p wire.Packet, lp *link.Packet) {
	t := &q.task
	held := false
	defer func() {
		if held { // a fault reading lent memory (see deliverLent)
			t.Unlock()
		}
	}()
	switch {
	case t.tryTake():
		held = true
		q.runInbox(now) // what was left before goes first
		q.eng.Receive(now, p, lp.Addr)
	case t.inbox.push(lp.Buf, lp.Addr):
		if !t.takeOrArm() {
			return // the holder runs it
		}
		held = true
		q.runInbox(now)
	default:
		t.Lock()
		held = true
		q.runInbox(now)
		q.eng.Receive(now, p, lp.Addr)
	}
	for !t.tryRelease() {
		q.runInbox(now)
		if !containsQP(rx.armed, q) {
			rx.armed = append(rx.armed, q)
		}
	}
	held = false
}

// cnpTo is a CNP to send: for the flow that q receives from addr.
type cnpTo struct {
	q    *QP
	addr netip.AddrPort
}

// deliver checks one datagram and gives it to its QP, which it returns.
// It also reports whether the packet carried an ECN CE mark that the QP's
// notification point answers with a CNP.
func (d *Device) deliver(now time.Time, rx *rxPath, lp *link.Packet, view map[uint32]*QP) (q *QP, cnp bool) {
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
	d.hand(now, rx, q, p, lp)
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
// device is strict. A packet from an intact link (link.Caps.Intact) is
// accepted unverified and counted, unless Config.AlwaysVerifyICRC.
func (d *Device) verifyICRC(lp *link.Packet) (ipID uint16, ok bool) {
	if d.caps.Intact && !d.cfg.AlwaysVerifyICRC {
		d.dev.ICRCSkipped.Add(1)
		return lp.IPv4ID, true
	}
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
