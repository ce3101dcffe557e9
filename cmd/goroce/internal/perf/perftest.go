package perf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// This file is perftest's own side channel (perftest_communication.c, its
// "ethernet" exchange, not rdma_cm), so that goroce perf can face
// ib_send_bw, ib_write_lat and the rest from linux-rdma's perftest.
//
// Every exchange is symmetric: the client writes its message, then reads
// the server's; the server reads first, then writes. Messages have fixed
// sizes and no framing (perftest reads each with one read() of exactly
// that size, so each is written here with one write):
//
//	version    16 bytes: the version string, NUL-padded. perftest refuses a
//	           peer older than 5.70.
//	sys data   4 + 4 bytes, big-endian: the cycle buffer (the page size) and
//	           the cache line size; both sides keep the larger of each.
//	MTU        2 bytes: the ibv_mtu number as a decimal digit and a NUL;
//	           both sides use the smaller.
//	handshake  108 bytes: "LID:OUT_READS:QPN:PSN:RKEY:VADDR:", the 16 GID
//	           bytes as "xx:" each, "SRQN:" and a NUL, all in hex. OUT_READS
//	           is the RDMA READs and atomics this side accepts at once
//	           (max_dest_rd_atomic); the peer uses it as its max_rd_atomic.
//	           VADDR and RKEY name the buffer the peer may write or read.
//	report     five 8-byte big-endian fields: message size and iterations
//	           (integers), BW peak, BW average and message rate (IEEE 754
//	           doubles, in the report's units: MB/sec and Mpps).
//	done       "done" and a NUL, written by both at the very end, read by
//	           neither.
//
// After the per-QP handshake that carries the QPs' data, perftest uses
// further handshakes as barriers (each side sends its first QP's message
// again): after both QPs are connected, before the data once the receives
// are posted, and after the data. Which barriers a test makes, and in
// what order, is perftestFlow.

// perftestVersion is the version this side announces: that of the
// perftest whose exchange it follows (Debian bookworm's perftest 4.5-0.17
// reports 6.06). The peer's version decides some message sizes; every
// version from 5.70 on uses the sizes above.
const perftestVersion = "6.06"

// Sizes of perftest's side-channel messages.
const (
	perftestVersionLen = 16
	perftestKeyLen     = 108
	perftestMTULen     = 2
	perftestMinVersion = 5.70 // check_version_compatibility
	perftestCacheLine  = 64   // cache line size this side reports
)

// errPerftest reports a perftest side-channel message that this side
// cannot use.
var errPerftest = errors.New("unusable message from the perftest peer")

// perftestFlow is the order of one test's barriers, as each of
// perftest's programs makes them (send_bw.c, write_lat.c, ...).
type perftestFlow struct {
	early     bool // one barrier before the per-QP handshakes (write_lat, read_lat)
	syncFirst bool // after connecting, the barrier precedes the second per-QP round (send tests)
	startSync bool // a barrier once the receives are posted, before the data (send tests)
	reports   bool // after the data, a barrier and the client's bandwidth report
	closing   bool // ctx_close_connection: a last barrier and "done" (all but write_lat)
}

// perftestFlowOf is test's barrier order.
func perftestFlowOf(t perfTest) perftestFlow {
	switch {
	case t.op == qp.WRSend:
		return perftestFlow{syncFirst: true, startSync: true, closing: true}
	case !t.lat:
		return perftestFlow{reports: true, closing: true}
	case t.op == qp.WRRDMAWrite:
		return perftestFlow{early: true}
	default: // read_lat
		return perftestFlow{early: true, closing: true}
	}
}

// perftestChannel is the side channel in perftest's format.
type perftestChannel struct {
	sc     *sideChannel
	client bool
	stall  time.Duration
}

// xchg trades one fixed-size message: the client writes first.
func (p *perftestChannel) xchg(mine []byte, what string) ([]byte, error) {
	p.sc.conn.SetDeadline(time.Now().Add(p.stall))
	peer := make([]byte, len(mine))
	read := func() error {
		if _, err := io.ReadFull(p.sc.rd, peer); err != nil {
			return fmt.Errorf("couldn't read the peer's %s: %w", what, err)
		}
		return nil
	}
	if !p.client {
		if err := read(); err != nil {
			return nil, err
		}
	}
	if _, err := p.sc.conn.Write(mine); err != nil {
		return nil, fmt.Errorf("couldn't send %s: %w", what, err)
	}
	if p.client {
		if err := read(); err != nil {
			return nil, err
		}
	}
	return peer, nil
}

// cString is msg up to its first NUL.
func cString(msg []byte) string {
	s, _, _ := strings.Cut(string(msg), "\x00")
	return s
}

// prelude trades the version, the buffer geometry and the MTU, as
// perftest does before it creates its QPs. It returns cfg with the
// agreed MTU and cycle buffer.
func (p *perftestChannel) prelude(cfg perfConfig) (perfConfig, error) {
	v := make([]byte, perftestVersionLen)
	copy(v, perftestVersion)
	peer, err := p.xchg(v, "version")
	if err != nil {
		return cfg, err
	}
	rem := cString(peer)
	if n, err := strconv.ParseFloat(rem, 64); err != nil || n < perftestMinVersion {
		return cfg, fmt.Errorf("%w: version %q: want perftest %.2f or later", errPerftest, rem, perftestMinVersion)
	}
	cfg.perftestPeer = rem

	var geo [4]byte
	binary.BigEndian.PutUint32(geo[:], uint32(os.Getpagesize()))
	if peer, err = p.xchg(geo[:], "cycle buffer size"); err != nil {
		return cfg, err
	}
	// The server allocates the cycle buffer twice per QP: a peer may not
	// ask for more than the largest message (perftest's is a page, or a
	// huge page with --use_hugepages).
	cycle := int(int32(binary.BigEndian.Uint32(peer)))
	if cycle > perfMaxSize {
		return cfg, fmt.Errorf("%w: cycle buffer of %d bytes: want at most %d (perftest's is a page)", errPerftest, cycle, perfMaxSize)
	}
	cfg.cycle = max(os.Getpagesize(), cycle)
	binary.BigEndian.PutUint32(geo[:], perftestCacheLine)
	if _, err = p.xchg(geo[:], "cache line size"); err != nil {
		return cfg, err
	}

	mine := qp.MTUFromBytes(cfg.mtu)
	m := make([]byte, perftestMTULen)
	copy(m, strconv.Itoa(int(mine)))
	if peer, err = p.xchg(m, "MTU"); err != nil {
		return cfg, err
	}
	// Like perftest, ignore an MTU that is not an ibv_mtu.
	if n, err := strconv.Atoi(cString(peer)); err == nil && qp.MTU(n).Bytes() != 0 && qp.MTU(n) < mine {
		cfg.mtu = qp.MTU(n).Bytes()
	}
	return cfg, nil
}

// perftestKey is d's 108-byte handshake message.
func (d perfDest) perftestKey() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", 0, d.outReads, d.qpn, uint32(d.psn), d.rkey, d.addr)
	for _, x := range d.gid.As16() {
		fmt.Fprintf(&b, "%02x:", x)
	}
	fmt.Fprintf(&b, "%08x:", 0) // SRQN: no SRQ
	msg := make([]byte, perftestKeyLen)
	copy(msg, b.String())
	return msg
}

// parsePerftestKey reads a 108-byte handshake message.
func parsePerftestKey(msg []byte) (perfDest, error) {
	s := cString(msg)
	f := strings.Split(s, ":")
	if len(f) != 6+16+2 {
		return perfDest{}, fmt.Errorf("%w: %q: want LID:OUT_READS:QPN:PSN:RKEY:VADDR, 16 GID bytes and SRQN", errPerftest, s)
	}
	bits := [6]int{16, 16, 24, 24, 32, 64}
	var n [6]uint64
	for i := range n {
		x, err := strconv.ParseUint(f[i], 16, bits[i])
		if err != nil {
			return perfDest{}, fmt.Errorf("%w: %q: field %d: %v", errPerftest, s, i+1, err)
		}
		n[i] = x
	}
	var g [16]byte
	for i := range g {
		x, err := strconv.ParseUint(f[6+i], 16, 8)
		if err != nil {
			return perfDest{}, fmt.Errorf("%w: %q: GID byte %d: %v", errPerftest, s, i, err)
		}
		g[i] = byte(x)
	}
	return perfDest{outReads: int(n[1]), qpn: uint32(n[2]), psn: wire.PSN(n[3]), rkey: uint32(n[4]), addr: n[5],
		gid: netip.AddrFrom16(g)}, nil
}

// handshake trades QP i's message and returns the peer's.
func (p *perftestChannel) handshake(d perfDest) (perfDest, error) {
	peer, err := p.xchg(d.perftestKey(), "QP data")
	if err != nil {
		return perfDest{}, err
	}
	return parsePerftestKey(peer)
}

// perftestReport is a bandwidth report as xchg_bw_reports carries it.
type perftestReport struct {
	size, iters        uint64
	peak, avg, msgRate float64
}

// xchgReport trades bandwidth reports (both sides send one; a passive
// server's is zero) and returns the peer's.
func (p *perftestChannel) xchgReport(r perftestReport) (perftestReport, error) {
	var peer perftestReport
	ints := []*uint64{&peer.size, &peer.iters}
	for i, x := range []uint64{r.size, r.iters} {
		b, err := p.xchg(binary.BigEndian.AppendUint64(nil, x), "bandwidth report")
		if err != nil {
			return peer, err
		}
		*ints[i] = binary.BigEndian.Uint64(b)
	}
	floats := []*float64{&peer.peak, &peer.avg, &peer.msgRate}
	for i, x := range []float64{r.peak, r.avg, r.msgRate} {
		b, err := p.xchg(binary.BigEndian.AppendUint64(nil, math.Float64bits(x)), "bandwidth report")
		if err != nil {
			return peer, err
		}
		*floats[i] = math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	return peer, nil
}

// close is ctx_close_connection: a last barrier, then "done".
func (p *perftestChannel) close(d perfDest) error {
	if _, err := p.handshake(d); err != nil {
		return err
	}
	if _, err := p.sc.conn.Write([]byte("done\x00")); err != nil {
		return fmt.Errorf("couldn't send done: %w", err)
	}
	return nil
}

// awaitHangUp waits, up to the stall time, for the peer to close the
// side channel: write_lat's end, where nothing else tells this side that
// the peer has its last completion (the ACK of this side's last packet).
func (p *perftestChannel) awaitHangUp() {
	p.sc.conn.SetDeadline(time.Now().Add(p.stall))
	io.Copy(io.Discard, p.sc.rd)
}
