package simlink

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/goroce/goroce/rnic/clock"
	"github.com/goroce/goroce/rnic/link"
)

// Wire is one direction of a cable: a transmitter sending Rate bits per
// second, one packet after another, and Latency of propagation delay.
type Wire struct {
	Rate    int64         // bits per second; 0 is infinite (no serialization delay)
	Latency time.Duration // propagation delay
}

// PortConfig describes a port's cable and the switch queue towards it. The
// zero value is an ideal cable: infinite rate, no latency, unlimited buffer,
// no marking, no impairments.
type PortConfig struct {
	// Uplink is the host-to-switch direction. The host's transmit queue is
	// unlimited: WriteBatch never blocks and never drops.
	Uplink Wire
	// Downlink is the switch-to-host direction: the egress queue towards
	// this port drains at Downlink.Rate.
	Downlink Wire
	// Buffer is the egress queue's capacity in bytes; a packet that does
	// not fit is tail-dropped. 0 means unlimited.
	Buffer int
	// Marker, if not nil, is the egress queue's ECN congestion point.
	Marker Marker
	// MarkAt says when the Marker judges a packet: as it joins the queue
	// (MarkOnEnqueue, the zero value) or as it leaves (MarkOnDequeue).
	MarkAt MarkPoint
	// Send applies to packets this port sends, Receive to packets towards
	// it, after the network's Config.Impairments.
	Send, Receive []Impairment
}

func (c *PortConfig) validate() error {
	switch {
	case c.Uplink.Rate < 0:
		return fmt.Errorf("%w: Uplink.Rate %d is negative", ErrInvalidConfig, c.Uplink.Rate)
	case c.Uplink.Latency < 0:
		return fmt.Errorf("%w: Uplink.Latency %v is negative", ErrInvalidConfig, c.Uplink.Latency)
	case c.Downlink.Rate < 0:
		return fmt.Errorf("%w: Downlink.Rate %d is negative", ErrInvalidConfig, c.Downlink.Rate)
	case c.Downlink.Latency < 0:
		return fmt.Errorf("%w: Downlink.Latency %v is negative", ErrInvalidConfig, c.Downlink.Latency)
	case c.Buffer < 0:
		return fmt.Errorf("%w: Buffer %d is negative", ErrInvalidConfig, c.Buffer)
	case c.MarkAt != MarkOnEnqueue && c.MarkAt != MarkOnDequeue:
		return fmt.Errorf("%w: MarkAt %v", ErrInvalidConfig, c.MarkAt)
	}
	if err := validateRules("PortConfig.Send", c.Send); err != nil {
		return err
	}
	return validateRules("PortConfig.Receive", c.Receive)
}

// Port is a host's attachment to a Network; it implements link.Link for its
// address. As link.Link requires, one goroutine at a time may call
// ReadBatch and one WriteBatch, concurrently with each other; the other
// methods are safe for concurrent use.
type Port struct {
	net  *Network
	addr netip.AddrPort
	cfg  PortConfig

	readable chan struct{} // signalled when rx becomes non-empty
	done     chan struct{} // closed by Close
	wait     clock.Waiter  // ReadBatch's, on readable and done

	outbox []*frame // WriteBatch's frames before they are scheduled
	inbox  []*frame // ReadBatch's frames after they leave rx

	// Guarded by net.mu.
	closed bool
	uplink serializer
	egress egressQueue
	held   []*frame     // frames towards this port waiting for a swap
	rx     fifo[*frame] // delivered, not yet read
	rng    *rand.Rand   // draws for packets towards this port
	sent   uint64       // packets sent, for Packet.Seq
	stats  PortStats
}

var _ link.Link = (*Port)(nil)

// LocalAddr returns the port's address (an IPv4-mapped address given to
// Attach is returned as plain IPv4). Received packets from this port carry
// it as their source.
func (p *Port) LocalAddr() netip.AddrPort { return p.addr }

// String says what the link is, for banners: "RoCEv2 through a simulated
// switch".
func (p *Port) String() string { return "RoCEv2 through a simulated switch" }

// Caps reports that a port carries the TOS byte both ways, sends with IPv4
// Identification 0 (as goroce's UDP sends do), and carries datagrams of up
// to MaxDatagram bytes.
func (p *Port) Caps() link.Caps {
	return link.Caps{TOS: true, IPv4ID: 0, MaxDatagram: MaxDatagram}
}

// WriteBatch copies the datagrams (Buf, Payload and Tail gathered into one)
// and sends them to their destinations, with the TOS byte each carries.
// The caller may reuse the buffers as soon as it returns. It never blocks;
// a datagram to an address no port has is counted as unroutable at the
// switch, not reported here. It fails, having sent the datagrams before it,
// on a datagram longer than MaxDatagram or with an invalid destination.
func (p *Port) WriteBatch(pkts []link.Packet) (int, error) {
	select {
	case <-p.done:
		return 0, ErrClosed
	default:
	}
	var err error
	out := p.outbox[:0]
	for i := range pkts {
		pkt := &pkts[i]
		size := pkt.Len()
		dst := netip.AddrPortFrom(pkt.Addr.Addr().Unmap(), pkt.Addr.Port())
		if size > MaxDatagram {
			err = fmt.Errorf("write to %v: %d bytes: %w", pkt.Addr, size, ErrDatagramTooLarge)
			break
		}
		if !dst.Addr().IsValid() || dst.Port() == 0 {
			err = fmt.Errorf("write to %v: %w", pkt.Addr, ErrInvalidAddr)
			break
		}
		f := newFrame(size)
		k := copy(f.pkt.Data, pkt.Buf)
		k += copy(f.pkt.Data[k:], pkt.Payload)
		copy(f.pkt.Data[k:], pkt.Tail)
		f.pkt.Src, f.pkt.Dst, f.pkt.TOS = p.addr, dst, pkt.TOS
		f.src = p
		out = append(out, f)
	}
	p.outbox = out

	n := p.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if p.closed {
		for i, f := range out {
			f.free()
			out[i] = nil
		}
		return 0, ErrClosed
	}
	now := n.now()
	for i, f := range out {
		p.sent++
		f.pkt.Seq = p.sent
		p.stats.SentPackets++
		p.stats.SentBytes += uint64(len(f.pkt.Data))
		n.schedule(p.uplink.finish(now, len(f.pkt.Data))+p.cfg.Uplink.Latency, evArrive, f)
		out[i] = nil
	}
	n.advance(now)
	return len(out), err
}

// ReadBatch blocks until at least one datagram has arrived, then copies up
// to len(pkts) of them into the Bufs (resliced to the datagram; a datagram
// longer than cap(Buf) is truncated and counted in PortStats.Truncated),
// with Addr set to the sender's address and TOS to the TOS byte as
// received, CE if the network marked it. After Close it returns ErrClosed.
func (p *Port) ReadBatch(pkts []link.Packet) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	n := p.net
	in := p.inbox[:0]
	for {
		n.mu.Lock()
		if p.closed {
			n.mu.Unlock()
			return 0, ErrClosed
		}
		for len(in) < len(pkts) && p.rx.len() > 0 {
			f := p.rx.pop()
			size := len(f.pkt.Data)
			p.stats.ReceivedPackets++
			p.stats.ReceivedBytes += uint64(size)
			if size > cap(pkts[len(in)].Buf) {
				p.stats.Truncated++
			}
			in = append(in, f)
		}
		n.mu.Unlock()
		if len(in) > 0 {
			break
		}
		p.wait.Wait() // readable or done: either way, look again
	}
	for i, f := range in {
		pkt := &pkts[i]
		pkt.Buf = pkt.Buf[:copy(pkt.Buf[:cap(pkt.Buf)], f.pkt.Data)]
		pkt.Addr, pkt.TOS = f.pkt.Src, f.pkt.TOS
		f.free()
		in[i] = nil
	}
	p.inbox = in
	return len(in), nil
}

// Close detaches the port: its reader gets ErrClosed, packets still on the
// way to it are discarded, and its address may be attached again. Packets it
// has already sent continue on their way. Close is idempotent.
func (p *Port) Close() error {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	p.closeLocked()
	return nil
}

func (p *Port) closeLocked() {
	if p.closed {
		return
	}
	p.closed = true
	close(p.done)
	delete(p.net.ports, p.addr)
	for p.rx.len() > 0 {
		p.rx.pop().free()
	}
	for _, f := range p.held {
		f.free()
	}
	p.held = nil
}

// Stats returns the port's counters and its egress queue's counters and
// current depth.
func (p *Port) Stats() PortStats {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	return p.statsLocked()
}

func (p *Port) statsLocked() PortStats {
	s := p.stats
	s.Egress.Packets = p.egress.frames.len()
	s.Egress.Bytes = p.egress.bytes
	return s
}
