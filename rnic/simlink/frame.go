package simlink

import "sync"

// frame is a packet inside the network: a pooled copy of the datagram the
// sender wrote, so the sender may reuse its buffers as soon as WriteBatch
// returns, as after a real NIC has taken a posted send.
type frame struct {
	pkt   Packet // what impairment predicates see; pkt.Data aliases buf
	buf   []byte
	class int   // index into framePools
	src   *Port // the sending port (it may have closed since)
	dst   *Port // set when the switch routes the frame
}

// Frame buffers come in three sizes, so a queue of MTU-sized packets does
// not pin 64 KiB per packet: up to a 1500-byte MTU, up to a 9000-byte jumbo
// frame, and the largest datagram.
var frameClasses = [...]int{2048, 9216, MaxDatagram}

var framePools [len(frameClasses)]sync.Pool

// newFrame returns a frame whose pkt.Data has length size (at most
// MaxDatagram) and unspecified contents.
func newFrame(size int) *frame {
	c := 0
	for size > frameClasses[c] {
		c++
	}
	f, _ := framePools[c].Get().(*frame)
	if f == nil {
		f = &frame{buf: make([]byte, frameClasses[c]), class: c}
	}
	f.pkt.Data = f.buf[:size]
	return f
}

// clone returns a new frame with the same bytes and header fields.
func (f *frame) clone() *frame {
	g := newFrame(len(f.pkt.Data))
	copy(g.pkt.Data, f.pkt.Data)
	data := g.pkt.Data
	g.pkt = f.pkt
	g.pkt.Data = data
	g.src, g.dst = f.src, f.dst
	return g
}

// free returns the frame to its pool. The caller must hold the only
// reference.
func (f *frame) free() {
	f.pkt = Packet{}
	f.src, f.dst = nil, nil
	framePools[f.class].Put(f)
}
