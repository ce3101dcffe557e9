//go:build linux

package shmlink_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/shmlink"
)

// The regions of a peer's buffer in the exchange: what it sends and lets
// be read, where a SEND lands, where the peer WRITEs, where a READ lands.
const (
	msgLen    = 64 << 10
	offSource = 0 * msgLen
	offRecv   = 1 * msgLen
	offWrite  = 2 * msgLen
	offRead   = 3 * msgLen
	bufLen    = 4 * msgLen
)

// peer is a device over a shared-memory link with one RC QP and a
// registered buffer; one side of an exchange, in this process or in a
// child process.
type peer struct {
	id   int // which pattern its source region holds
	link *shmlink.Link
	dev  *rnic.Device
	cq   *qp.CQ
	qp   *rnic.QP
	buf  []byte
	mr   *mr.MR
}

// endpoint is what peers tell each other to connect: what a real program
// sends over its side channel.
type endpoint struct {
	GID  netip.Addr
	QPN  uint32
	Addr uint64
	RKey uint32
}

// pattern is the bytes peer id puts in its source region: a plain
// reference the receiver computes for itself.
func pattern(id int) []byte {
	b := make([]byte, msgLen)
	x := uint32(id)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// openPeer opens a device at addr over a shared-memory link in dir.
func openPeer(t testing.TB, dir string, addr netip.AddrPort, id int, busyPoll time.Duration) *peer {
	t.Helper()
	return openPeerWith(t, dir, id, rnic.Config{Addr: addr, BusyPoll: busyPoll})
}

// openPeerWith is openPeer with the device's Config (its Addr, Link, MTU
// and StrictICRC set here).
func openPeerWith(t testing.TB, dir string, id int, cfg rnic.Config) *peer {
	t.Helper()
	l, err := shmlink.Open(shmlink.Config{Local: cfg.Addr, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Link, cfg.MTU, cfg.StrictICRC = l, 4096, true
	dev, err := rnic.Open(cfg)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	p := &peer{id: id, link: l, dev: dev}
	p.newQP(t)
	return p
}

// newQP gives p a fresh CQ, RC QP and buffer, its source region filled.
func (p *peer) newQP(t testing.TB) {
	t.Helper()
	pd, err := p.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if p.cq, err = p.dev.CreateCQ(64); err != nil {
		t.Fatal(err)
	}
	p.qp, err = p.dev.CreateQP(pd, &qp.InitAttr{Type: qp.RC, SendCQ: p.cq, RecvCQ: p.cq,
		Cap: qp.Cap{MaxSendWR: 64, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p.buf = make([]byte, bufLen)
	copy(p.buf[offSource:], pattern(p.id))
	p.mr, err = pd.RegMR(p.buf, mr.AccessLocalWrite|mr.AccessRemoteWrite|mr.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
}

func (p *peer) endpoint() endpoint {
	return endpoint{GID: p.dev.GID(), QPN: p.qp.QPN(), Addr: p.mr.Addr(), RKey: p.mr.RKey()}
}

func (p *peer) sge(off int) []qp.SGE {
	return []qp.SGE{{Addr: p.mr.Addr() + uint64(off), Length: msgLen, LKey: p.mr.LKey()}}
}

// connect brings the QP to RTS, posting the receive a SEND will take,
// towards the remote endpoint. timeout and retry are the QP's ACK timeout
// code and retry count.
func (p *peer) connect(t testing.TB, r endpoint, timeout, retry uint8) {
	t.Helper()
	const psn = 0x4242
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, PortNum: 1, AccessFlags: mr.AccessRemoteWrite | mr.AccessRemoteRead},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: r.GID}, PathMTU: qp.MTU4096, DestQPN: r.QPN, RQPSN: psn,
			MaxDestRdAtomic: 4, MinRNRTimer: 1},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{qp.Attr{State: qp.StateRTS, SQPSN: psn, Timeout: timeout, RetryCnt: retry, RNRRetry: 7, MaxRdAtomic: 4},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	}
	for i, s := range steps {
		if err := p.qp.Modify(&s.attr, s.mask); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := p.qp.PostRecv(&qp.RecvWR{WRID: 100, SGL: p.sge(offRecv)}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// exchange runs one side of the exchange with the peer at r: a SEND, an
// RDMA WRITE and an RDMA READ of 64 KiB each, then checks what the peer
// sent, what the READ fetched, and (after sync, which returns once the
// peer's WRITE completed too) what the peer wrote.
func (p *peer) exchange(r endpoint, peerID int, sync func() error) error {
	wrs := []qp.SendWR{
		{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: p.sge(offSource)},
		{WRID: 2, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: p.sge(offSource), RemoteAddr: r.Addr + offWrite, RKey: r.RKey},
		{WRID: 3, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: p.sge(offRead), RemoteAddr: r.Addr + offSource, RKey: r.RKey},
	}
	for i := range wrs {
		if err := p.qp.PostSend(&wrs[i]); err != nil {
			return err
		}
	}
	wcs, err := p.wait(4, 10*time.Second)
	if err != nil {
		return err
	}
	for _, wc := range wcs {
		if wc.Status != qp.WCSuccess {
			return fmt.Errorf("peer %d: wr %d (%v): %v", p.id, wc.WRID, wc.Opcode, wc.Status)
		}
	}
	want := pattern(peerID)
	check := func(what string, off int) error {
		if got := p.buf[off : off+msgLen]; !bytes.Equal(got, want) {
			i := 0
			for got[i] == want[i] {
				i++
			}
			return fmt.Errorf("peer %d: %s differs from peer %d's data first at byte %d", p.id, what, peerID, i)
		}
		return nil
	}
	if err := check("the SEND received", offRecv); err != nil {
		return err
	}
	if err := check("the READ's result", offRead); err != nil {
		return err
	}
	if err := sync(); err != nil {
		return err
	}
	return check("the region the peer WROTE", offWrite)
}

// clean reports an error if p's device dropped a packet as corrupt: over
// shared memory every frame arrives intact. (Retransmissions are not
// checked: a process descheduled for longer than the ACK timeout on a
// loaded machine causes them, correctly.)
func (p *peer) clean() error {
	for _, c := range []string{"icrc_err", "malformed", "unknown_qpn"} {
		if v := p.dev.Counter(c); v != 0 {
			var all []string
			for _, k := range p.dev.Counters() {
				if k.Value != 0 {
					all = append(all, fmt.Sprintf("%s=%d", k.Name, k.Value))
				}
			}
			return fmt.Errorf("peer %d: %s = %d, want 0 (%v)", p.id, c, v, all)
		}
	}
	return nil
}

// wait returns n completions, or an error after d.
func (p *peer) wait(n int, d time.Duration) ([]qp.WC, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var got []qp.WC
	wcs := make([]qp.WC, 8)
	for len(got) < n {
		k := p.cq.Poll(wcs)
		got = append(got, wcs[:k]...)
		if k == 0 {
			if err := p.cq.Wait(ctx); err != nil {
				return got, fmt.Errorf("peer %d: %d of %d completions: %w", p.id, len(got), n, err)
			}
		}
	}
	return got, nil
}

// writeEndpoint and readEndpoint carry an endpoint over a pipe as a line.
func writeEndpoint(w io.Writer, e endpoint) error {
	_, err := fmt.Fprintf(w, "%s %d %d %d\n", e.GID, e.QPN, e.Addr, e.RKey)
	return err
}

func readEndpoint(r *bufio.Reader) (endpoint, error) {
	var e endpoint
	var gid string
	line, err := r.ReadString('\n')
	if err != nil {
		return e, fmt.Errorf("reading the peer's endpoint: %w (got %q)", err, line)
	}
	if _, err := fmt.Sscanf(line, "%s %d %d %d", &gid, &e.QPN, &e.Addr, &e.RKey); err != nil {
		return e, fmt.Errorf("parsing %q: %w", line, err)
	}
	e.GID, err = netip.ParseAddr(gid)
	return e, err
}
