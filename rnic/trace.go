package rnic

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/goroce/goroce/wire"
)

// tracer writes the device's trace: one line per packet and per QP event,
//
//	12.345678 send 127.0.0.1:4791 > 127.0.0.2:4791 RC_SEND_ONLY qp=0x3a11c2 psn=0x1d2e3f ackreq len=64
//	12.345702 qp 0x3a11c2: completion wr_id=1 SEND status="success" len=64
//
// with times in seconds since the device opened, each after the tag
// (Config.TraceTag) if there is one.
type tracer struct {
	// Fixed.
	start time.Time
	local netip.AddrPort
	tag   string // "" or the tag and a space

	// mu guards the writer and the line being built.
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	pkt []byte
}

func newTracer(w io.Writer, tag string, local netip.AddrPort, start time.Time) *tracer {
	if tag != "" {
		tag += " "
	}
	return &tracer{w: w, start: start, local: local, tag: tag}
}

// stamp starts a line: the tag and the time.
func (t *tracer) stamp(now time.Time) {
	t.buf = strconv.AppendFloat(append(t.buf[:0], t.tag...), now.Sub(t.start).Seconds(), 'f', 6, 64)
}

// packet traces a packet given as head, payload and tail.
func (t *tracer) packet(now time.Time, sent bool, src, dst netip.AddrPort, head, payload, tail []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pkt = append(append(append(t.pkt[:0], head...), payload...), tail...)
	t.stamp(now)
	if sent {
		t.buf = append(t.buf, " send "...)
	} else {
		t.buf = append(t.buf, " recv "...)
	}
	t.buf = src.AppendTo(t.buf)
	t.buf = append(t.buf, " > "...)
	t.buf = dst.AppendTo(t.buf)
	t.buf = append(t.buf, ' ')
	if p, err := wire.Parse(t.pkt); err == nil {
		t.buf = wire.AppendText(t.buf, p)
	} else {
		t.buf = append(t.buf, "malformed: "...)
		t.buf = append(t.buf, err.Error()...)
	}
	t.buf = append(t.buf, '\n')
	t.w.Write(t.buf)
}

// QPEvent implements qp.Tracer.
func (t *tracer) QPEvent(now time.Time, qpn uint32, what string) {
	t.note(now, fmt.Sprintf("qp %#06x: %s", qpn, what))
}

func (t *tracer) note(now time.Time, s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stamp(now)
	t.buf = append(t.buf, ' ')
	t.buf = append(t.buf, s...)
	t.buf = append(t.buf, '\n')
	t.w.Write(t.buf)
}
