package perf

import (
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"os"
	"time"
	"unsafe"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/mr/sysmem"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire"
)

// perfDest is one QP's connection data as the side channel carries it:
// where the peer's packets go (QPN, PSN, GID) and the memory the peer may
// write or read (rkey, addr, size).
type perfDest struct {
	qpn  uint32
	psn  wire.PSN
	gid  netip.Addr
	rkey uint32
	addr uint64
	size int
	// outReads is how many RDMA READs and atomics the side accepts at
	// once (its max_dest_rd_atomic), which perftest's exchange carries;
	// 0 from goroce's exchange, which does not.
	outReads int
}

// perfQP is one queue pair of the test with its own buffer. The buffer has
// two halves of the largest message size: the first is what this side
// sends, writes from or reads into; the second is where messages arrive:
// receives, and the target the peer writes to or reads from. Kept apart,
// what the device writes into never overlaps what this side changes
// (write_lat's marker byte).
type perfQP struct {
	qp     *rnic.QP
	mr     *mr.MR
	buf    []byte
	half   int
	local  perfDest
	remote perfDest
	send   qp.SendWR
	list   []qp.SendWR // the bandwidth client's WRs posted together
	sge    [1]qp.SGE   // the send WR's
	recv   qp.RecvWR
	rsge   [1]qp.SGE // the receive WR's: the whole second half

	posted, completed int // bandwidth client: operations posted, and known complete
	received          int // receives completed
}

// perfContext is one side's device and verbs objects.
type perfContext struct {
	cfg perfConfig
	dev *rnic.Device
	// closeObs flushes --pcap; after dev.Close.
	closeObs func() error
	pd       *mr.PD
	cq       *qp.CQ
	qps      []*perfQP
	wcs      []qp.WC
	cqMod    int // signal every cqMod-th send WR (bandwidth tests)
	rxDepth  int // receives kept posted per QP (send tests)
}

// perfAccess is what every region and QP of the test allows the peer.
const perfAccess = mr.AccessLocalWrite | mr.AccessRemoteWrite | mr.AccessRemoteRead | mr.AccessRemoteAtomic

// depths returns each QP's send and receive queue depths and the CQ's
// size.
func (c *perfConfig) depths() (send, recv, cqe int) {
	send, recv = c.txDepth, 1
	if c.test.lat {
		send = 16
	}
	if c.test.op == qp.WRSend {
		// Enough receives that the sender, with at most tx-depth sends
		// unacknowledged, finds one posted even while this side is slow
		// to repost; RNR retries (rnr_retry 7) cover the rest.
		recv = min(max(512, 4*c.txDepth), rnic.MaxQPWR)
		if c.test.lat {
			recv = 64
		}
	}
	// The CQ holds every completion that can be outstanding: a signalled
	// send per cqMod sends (at least one per QP) and every posted receive.
	cqe = c.qps * (send/max(c.cqMod(), 1) + 1 + recv)
	if c.test.lat {
		cqe = send + recv
	}
	return send, recv, cqe
}

// cqMod is how often a bandwidth test signals a send: every cqMod-th.
func (c *perfConfig) cqMod() int { return min(perfCQMod, c.txDepth) }

// half is the size of each half of a QP's buffer: the largest message,
// or a perftest peer's cycle buffer (a page) if larger, over which it
// spreads its RDMA WRITEs, READs and atomics when messages are small.
func (c *perfConfig) half() int { return max(c.maxSize(), c.cycle) }

// memoryNeed is, roughly from above, what a run of c allocates: two
// halves of buffer per QP, the queues and the CQ, and the timestamps it
// keeps per operation (a bandwidth client's post times and completion
// events, a latency test's samples and their sorted copy).
func (c *perfConfig) memoryNeed() (need uint64, what string) {
	u := func(n int) uint64 { return uint64(max(n, 0)) }
	send, recv, cqe := c.depths()
	qps := u(c.qps)
	need = sysmem.Add(
		sysmem.Mul(qps, sysmem.Mul(2, u(c.half()))),
		sysmem.Mul(qps, u(send)*uint64(unsafe.Sizeof(qp.SendWR{}))+u(recv)*uint64(unsafe.Sizeof(qp.RecvWR{}))),
		sysmem.Mul(u(cqe), uint64(unsafe.Sizeof(qp.WC{}))))
	what = fmt.Sprintf("%d QP(s) with 2 × %d bytes of buffer", c.qps, c.half())
	if c.duration > 0 {
		return need, what
	}
	ops := sysmem.Mul(qps, u(c.iters))
	switch {
	case c.test.lat:
		need = sysmem.Add(need, sysmem.Mul(ops, 2*uint64(unsafe.Sizeof(time.Duration(0)))))
		what += fmt.Sprintf(" and %d latency samples", c.iters)
	case c.client():
		events := sysmem.Add(ops/u(c.cqMod()), qps)
		need = sysmem.Add(need, sysmem.Mul(ops, uint64(unsafe.Sizeof(time.Duration(0)))),
			sysmem.Mul(events, uint64(unsafe.Sizeof(bwEvent{}))))
		what += fmt.Sprintf(" and the post times of %d QP(s) × %d operations", c.qps, c.iters)
	}
	return need, what
}

// newPerfContext opens the device and creates the PD, the one CQ, and the
// QPs in INIT with their buffers, as perftest's ctx_init does.
func newPerfContext(cfg perfConfig) (*perfContext, error) {
	pc, err := openPerfDevice(cfg)
	if err != nil {
		return nil, err
	}
	if err := pc.init(); err != nil {
		pc.dev.Close()
		pc.closeObs()
		return nil, err
	}
	return pc, nil
}

// openPerfDevice opens the device alone: a server opens it before it
// waits for a client, as ibv_rc_pingpong does, so that a taken or foreign
// --addr fails at once and goroce stat can watch the waiting server.
// init creates the rest once the side channel has settled the
// parameters.
func openPerfDevice(cfg perfConfig) (*perfContext, error) {
	dc := rnic.Config{Addr: netip.AddrPortFrom(cfg.addr, 0), MTU: 4096, Wire: cli.Wire(cfg.link)}
	if !cfg.events {
		dc.BusyPoll = perfBusyPoll
	}
	role := "server"
	if cfg.client() {
		role = "client"
	}
	cfg.obs.TraceAs(role, cfg.addr)
	dev, closeObs, err := cfg.obs.OpenDevice(dc, os.Stderr)
	if err != nil {
		return nil, err
	}
	return &perfContext{cfg: cfg, dev: dev, cqMod: cfg.cqMod(), closeObs: closeObs}, nil
}

// init creates the PD, the one CQ, and the QPs in INIT with their
// buffers, as perftest's ctx_init does, for pc.cfg, after checking that
// the machine has the memory they need.
func (pc *perfContext) init() error {
	cfg := pc.cfg
	if err := sysmem.Check(cfg.memoryNeed()); err != nil {
		return err
	}
	sendDepth, recvDepth, cqe := cfg.depths()
	if cfg.test.op == qp.WRSend {
		pc.rxDepth = recvDepth
	}
	var err error
	if pc.pd, err = pc.dev.AllocPD(); err != nil {
		return fmt.Errorf("couldn't allocate PD: %w", err)
	}
	if pc.cq, err = pc.dev.CreateCQ(cqe); err != nil {
		return fmt.Errorf("couldn't create CQ: %w", err)
	}
	pc.wcs = make([]qp.WC, 64)
	half := cfg.half()
	outReads := 1 // as perftest says for tests without READs or atomics
	if cfg.test.op == qp.WRRDMARead || cfg.test.op == qp.WRAtomicFetchAndAdd {
		outReads = perfRdAtomic
	}
	for i := 0; i < cfg.qps; i++ {
		q := &perfQP{half: half, buf: make([]byte, 2*half)}
		// What this side sends holds the pattern, and so does the target
		// the peer READs or updates atomically; a target the peer WRITEs
		// or SENDs into stays zero (write_lat's marker is a byte of it).
		fillPerfPattern(q.buf[:half])
		if cfg.test.op == qp.WRRDMARead || cfg.test.op == qp.WRAtomicFetchAndAdd {
			fillPerfPattern(q.buf[half:])
		}
		if q.mr, err = pc.pd.RegMR(q.buf, perfAccess); err != nil {
			return fmt.Errorf("couldn't register MR: %w", err)
		}
		q.qp, err = pc.dev.CreateQP(pc.pd, &qp.InitAttr{Type: qp.RC, SendCQ: pc.cq, RecvCQ: pc.cq,
			Cap: qp.Cap{MaxSendWR: uint32(sendDepth), MaxRecvWR: uint32(recvDepth), MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return fmt.Errorf("couldn't create QP: %w", err)
		}
		attr := qp.Attr{State: qp.StateInit, PortNum: 1, AccessFlags: perfAccess}
		if err := q.qp.Modify(&attr, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
			return fmt.Errorf("failed to modify QP to INIT: %w", err)
		}
		q.local = perfDest{qpn: q.qp.QPN(), psn: cli.RandomPSN(), gid: pc.dev.GID(), rkey: q.mr.RKey(),
			addr: q.mr.Addr() + uint64(half), size: half, outReads: outReads}
		q.sge[0] = qp.SGE{Addr: q.mr.Addr(), Length: uint32(half), LKey: q.mr.LKey()}
		q.rsge[0] = qp.SGE{Addr: q.mr.Addr() + uint64(half), Length: uint32(half), LKey: q.mr.LKey()}
		q.recv = qp.RecvWR{SGL: q.rsge[:]}
		pc.qps = append(pc.qps, q)
	}
	if cfg.test.op == qp.WRSend {
		for _, q := range pc.qps {
			if err := q.postRecv(pc.rxDepth); err != nil {
				return err
			}
		}
	}
	return nil
}

// fillPerfPattern fills b with goroce perf's data: byte i is i mod 251, so
// a capture shows whether a payload is a run of it (each byte one more
// than the last, mod 251) and, with its offset, which run.
func fillPerfPattern(b []byte) {
	for i := range b {
		b[i] = byte(i % 251)
	}
}

// dataReport prints, with --data-report, a CRC-32 (IEEE) of the first -s
// bytes of QP 0's buffer halves once the run is over: the local half
// holds what the last READ or atomic brought back, the target half what
// the peer's last SEND or WRITE left. rxe-interop compares them with the
// payloads in its capture.
func (pc *perfContext) dataReport(w io.Writer) {
	if !pc.cfg.dataReport {
		return
	}
	q, n := pc.qps[0], pc.cfg.size
	fmt.Fprintf(w, " data: local VAddr %#x crc32 %#08x, target VAddr %#x crc32 %#08x (first %d bytes)\n",
		q.mr.Addr(), crc32.ChecksumIEEE(q.buf[:n]), q.local.addr, crc32.ChecksumIEEE(q.buf[q.half:q.half+n]), n)
}

// postRecv posts n receives of the whole second half of q's buffer. Every
// receive lands in the same place: a benchmark does not look at the data.
func (q *perfQP) postRecv(n int) error {
	for i := 0; i < n; i++ {
		if err := q.qp.PostRecv(&q.recv); err != nil {
			return fmt.Errorf("couldn't post receive: %w", err)
		}
	}
	return nil
}

// connect moves q to RTR and RTS towards its remote side. rnr_retry is 7
// (retry forever), so a receiver that falls behind slows the sender down
// instead of failing it.
func (pc *perfContext) connect(q *perfQP) error {
	// This side's READs and atomics in flight: what the peer accepts, if
	// it says (perftest's out_reads), within perfRdAtomic.
	rdAtomic := perfRdAtomic
	if q.remote.outReads > 0 {
		rdAtomic = min(rdAtomic, q.remote.outReads)
	}
	attr := qp.Attr{State: qp.StateRTR, PathMTU: qp.MTUFromBytes(pc.cfg.mtu), DestQPN: q.remote.qpn,
		RQPSN: q.remote.psn, MaxDestRdAtomic: perfRdAtomic, MinRNRTimer: 1, AH: qp.AH{GID: q.remote.gid, HopLimit: 1}}
	if err := q.qp.Modify(&attr, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|
		qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	attr.State, attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.SQPSN, attr.MaxRdAtomic =
		qp.StateRTS, uint8(pc.cfg.timeout), 7, 7, q.local.psn, uint8(rdAtomic)
	if err := q.qp.Modify(&attr, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|
		qp.AttrSQPSN|qp.AttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("failed to modify QP to RTS: %w", err)
	}
	return nil
}

// prepare sets q's send WR for messages of size bytes.
func (pc *perfContext) prepare(q *perfQP, size int) {
	q.sge[0].Length = uint32(size)
	q.send = qp.SendWR{Opcode: pc.cfg.test.op, SGL: q.sge[:], RemoteAddr: q.remote.addr, RKey: q.remote.rkey}
	if q.send.Opcode == qp.WRAtomicFetchAndAdd {
		q.send.CompareAdd = 1
	}
}
