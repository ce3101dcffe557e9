package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire"
)

const pingpongAbout = `The ibv_rc_pingpong workflow over a goroce device: two processes connect an
RC queue pair through a TCP side channel and bounce a SEND of -s bytes back
and forth -n times. Without HOST it is the server and waits for a client;
with HOST it is the client and connects to the server at HOST.

The side channel speaks ibv_rc_pingpong's format: each side sends
"LID:QPN:PSN:GID" ("%04x:%06x:%06x:%032x" plus NUL, 52 bytes), the client
first; the server connects its QP before it answers, and the client ends the
exchange with "done" plus NUL. The GID is the device's address (--addr) as
an IPv6 or IPv4-mapped address; -d and -g are accepted for compatibility
and ignored (a goroce device has one port and one GID).

Both sides print their local and remote address, then the throughput and
latency lines of ibv_rc_pingpong (bytes = 2 * size * iters). -p 0 makes the
server listen on a free port, which it reports on stderr.

Exit status: 0 when every exchange completed, 1 on a failed work completion,
a stalled peer or a side-channel error, 2 on bad flags.`

// Defaults and limits of goroce pingpong, after ibv_rc_pingpong.
const (
	pingpongPort    = 18515
	pingpongMsgLen  = len("0000:000000:000000:00000000000000000000000000000000") + 1 // with its NUL
	pingpongDone    = "done\x00"
	pingpongRecvID  = 1               // PINGPONG_RECV_WRID
	pingpongSendID  = 2               // PINGPONG_SEND_WRID
	pingpongDialFor = 3 * time.Second // how long a client retries a refused connect
	pingpongStall   = 5 * time.Second // the longest wait for a completion or a side-channel read
)

// pingpongConfig is what the command line asked for.
type pingpongConfig struct {
	server    string // host to connect to; "" for the server
	port      int    // TCP side-channel port (0: any, server only)
	ibPort    int
	size      int
	mtu       int
	rxDepth   int
	iters     int
	sl        int
	events    bool
	check     bool
	addr      netip.Addr // the device's address: its GID
	transport string

	// stall bounds each wait for progress once connected; dialFor is how
	// long a client retries a refused connect.
	stall, dialFor time.Duration
}

// runPingpong is `goroce pingpong [flags] [HOST]`.
func runPingpong(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parsePingpong(args, stdout, stderr)
	if !ok {
		return code
	}
	if err := pingpong(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "goroce pingpong: %v\n", err)
		return exitFail
	}
	return exitOK
}

// parsePingpong reads the flags; like getopt in ibv_rc_pingpong, flags may
// come before or after HOST.
func parsePingpong(args []string, stdout, stderr io.Writer) (cfg pingpongConfig, code int, ok bool) {
	fs := newFlagSet("goroce pingpong [flags] [HOST]", pingpongAbout)
	cfg = pingpongConfig{stall: pingpongStall, dialFor: pingpongDialFor}
	intVar := func(p *int, short, long string, value int, usage string) { intFlag(fs, p, short, long, value, usage) }
	intVar(&cfg.port, "p", "port", pingpongPort, "listen on / connect to TCP `port` (server: 0 picks a free one)")
	intVar(&cfg.ibPort, "i", "ib-port", 1, "`port` of the device (a goroce device has only port 1)")
	intVar(&cfg.size, "s", "size", 4096, "`size` of the message to exchange")
	intVar(&cfg.mtu, "m", "mtu", 1024, "path `MTU`: 256, 512, 1024, 2048 or 4096")
	intVar(&cfg.rxDepth, "r", "rx-depth", 500, "number of receives to post at a time (`depth`)")
	intVar(&cfg.iters, "n", "iters", 1000, "number of exchanges (`iters`)")
	intVar(&cfg.sl, "l", "sl", 0, "service level `value` (0..15)")
	var gidIdx int
	intVar(&gidIdx, "g", "gid-idx", -1, "local GID `index` (ignored: the GID is --addr)")
	var dev string
	fs.StringVar(&dev, "d", "", "use IB `device` (ignored: goroce opens one device)")
	fs.StringVar(&dev, "ib-dev", "", "same as -d")
	fs.BoolVar(&cfg.events, "e", false, "sleep on CQ events (ReqNotify) instead of polling")
	fs.BoolVar(&cfg.events, "events", false, "same as -e")
	fs.BoolVar(&cfg.check, "c", false, "check the contents of every received message")
	fs.BoolVar(&cfg.check, "chk", false, "same as -c")
	fs.StringVar(&cfg.transport, "t", "rc", "transport `type`: rc (uc and ud are not supported yet)")
	addr := addrFlag(fs)

	// getopt order: flags and the one HOST argument in any order.
	hosts, code, ok := parseWithHosts(fs, args, stdout, stderr)
	if !ok {
		return cfg, code, false
	}
	usageErr := func(format string, a ...any) (pingpongConfig, int, bool) {
		fmt.Fprintf(stderr, "goroce pingpong: "+format+"\n", a...)
		return cfg, exitUsage, false
	}
	switch len(hosts) {
	case 0:
	case 1:
		cfg.server = hosts[0]
	default:
		return usageErr("one HOST at most, got %q", hosts)
	}
	a, err := parseDeviceAddr(*addr)
	if err != nil {
		return usageErr("%v", err)
	}
	cfg.addr = a
	switch {
	case cfg.transport != "rc":
		return usageErr("-t %q: only rc is supported for now (uc and ud are not implemented yet)", cfg.transport)
	case cfg.port < 0 || cfg.port > 65535 || (cfg.port == 0 && cfg.server != ""):
		return usageErr("-p %d: want a TCP port 1..65535 (0 only for the server)", cfg.port)
	case cfg.ibPort != 1:
		return usageErr("-i %d: a goroce device has one port, 1", cfg.ibPort)
	case qp.MTUFromBytes(cfg.mtu) == 0:
		return usageErr("-m %d: want 256, 512, 1024, 2048 or 4096", cfg.mtu)
	case cfg.size < 1 || cfg.size > rnic.MaxMsgSize:
		return usageErr("-s %d: want 1..%d", cfg.size, rnic.MaxMsgSize)
	case cfg.rxDepth < 1 || cfg.rxDepth > rnic.MaxQPWR:
		return usageErr("-r %d: want 1..%d", cfg.rxDepth, rnic.MaxQPWR)
	case cfg.iters < 1:
		return usageErr("-n %d: want at least 1", cfg.iters)
	case cfg.sl < 0 || cfg.sl > 15:
		return usageErr("-l %d: want a service level 0..15", cfg.sl)
	}
	return cfg, exitOK, true
}

// ppDest is one side's connection data, struct pingpong_dest: what the
// side channel carries.
type ppDest struct {
	lid uint16
	qpn uint32
	psn wire.PSN
	gid netip.Addr // 16 bytes: IPv6 or IPv4-mapped
}

// String is the "LID:QPN:PSN:GID" message without its NUL. The GID is its 16
// bytes in network order as 32 hex digits, which is what rdma-core's
// gid_to_wire_gid produces (four big-endian 32-bit words, "%08x" each).
func (d ppDest) String() string {
	g := d.gid.As16()
	return fmt.Sprintf("%04x:%06x:%06x:%s", d.lid, d.qpn, uint32(d.psn), hex.EncodeToString(g[:]))
}

// line is the text of the "local address" / "remote address" lines.
func (d ppDest) line() string {
	return fmt.Sprintf("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s", d.lid, d.qpn, uint32(d.psn), d.gid)
}

// errBadDest reports a side-channel message that is not "LID:QPN:PSN:GID".
var errBadDest = errors.New("malformed address message from the peer")

// parseDest reads the peer's 52-byte message.
func parseDest(msg []byte) (ppDest, error) {
	s, _, _ := strings.Cut(string(msg), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return ppDest{}, fmt.Errorf("%w: %q", errBadDest, s)
	}
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, 24)
		if err != nil {
			return ppDest{}, fmt.Errorf("%w: %q: field %d: %v", errBadDest, s, i+1, err)
		}
		v[i] = n
	}
	var g [16]byte
	if _, err := hex.Decode(g[:], []byte(f[3])); err != nil {
		return ppDest{}, fmt.Errorf("%w: %q: GID: %v", errBadDest, s, err)
	}
	if v[0] > 0xFFFF {
		return ppDest{}, fmt.Errorf("%w: %q: LID above 0xffff", errBadDest, s)
	}
	return ppDest{lid: uint16(v[0]), qpn: uint32(v[1]), psn: wire.PSN(v[2]), gid: netip.AddrFrom16(g)}, nil
}

// ppContext is struct pingpong_context: one side's device and verbs objects.
type ppContext struct {
	cfg  pingpongConfig
	dev  *rnic.Device
	pd   *mr.PD
	mr   *mr.MR
	buf  []byte
	cq   *qp.CQ
	qp   *rnic.QP
	sge  []qp.SGE // the whole buffer: every send and receive uses it
	send qp.SendWR
	recv qp.RecvWR
	wcs  []qp.WC
}

// pingpong runs one side of the exchange and prints what ibv_rc_pingpong
// prints.
func pingpong(ctx context.Context, cfg pingpongConfig, stdout, stderr io.Writer) error {
	pp, err := newPingpongContext(cfg)
	if err != nil {
		return err
	}
	defer pp.dev.Close()

	routs, err := pp.postRecv(cfg.rxDepth)
	if err != nil {
		return fmt.Errorf("couldn't post receive (%d): %w", routs, err)
	}
	if cfg.events {
		if err := pp.cq.ReqNotify(false); err != nil {
			return fmt.Errorf("couldn't request CQ notification: %w", err)
		}
	}
	my := ppDest{qpn: pp.qp.QPN(), psn: randomPSN(), gid: pp.dev.GID()}
	fmt.Fprintf(stdout, "  local address:  %s\n", my.line())

	var rem ppDest
	if cfg.server != "" {
		rem, err = pp.clientExchange(ctx, my)
	} else {
		rem, err = pp.serverExchange(ctx, my, stderr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  remote address: %s\n", rem.line())

	pending := pingpongRecvID
	if cfg.server != "" {
		if err := pp.connect(my.psn, rem); err != nil {
			return err
		}
		if err := pp.qp.PostSend(&pp.send); err != nil {
			return fmt.Errorf("couldn't post send: %w", err)
		}
		pending |= pingpongSendID
	}

	start := time.Now()
	rcnt, scnt := 0, 0
	for rcnt < cfg.iters || scnt < cfg.iters {
		n, err := pp.waitCompletions(ctx)
		if err != nil {
			return fmt.Errorf("after %d sends and %d receives of %d: %w", scnt, rcnt, cfg.iters, err)
		}
		for _, wc := range pp.wcs[:n] {
			if wc.Status != qp.WCSuccess {
				return fmt.Errorf("failed status %s (%d) for wr_id %d", wc.Status, wc.Status, wc.WRID)
			}
			switch wc.WRID {
			case pingpongSendID:
				scnt++
			case pingpongRecvID:
				if err := pp.checkRecv(&wc); err != nil {
					return fmt.Errorf("receive %d: %w", rcnt+1, err)
				}
				if routs--; routs <= 1 {
					k, err := pp.postRecv(cfg.rxDepth - routs)
					if routs += k; err != nil {
						return fmt.Errorf("couldn't post receive (%d): %w", routs, err)
					}
				}
				rcnt++
			default:
				return fmt.Errorf("completion for unknown wr_id %d", wc.WRID)
			}
			pending &^= int(wc.WRID)
			if scnt < cfg.iters && pending == 0 {
				if err := pp.qp.PostSend(&pp.send); err != nil {
					return fmt.Errorf("couldn't post send: %w", err)
				}
				pending = pingpongRecvID | pingpongSendID
			}
		}
	}
	elapsed := time.Since(start)

	usec := float64(elapsed.Microseconds())
	if usec == 0 {
		usec = 1 // a clock too coarse for the run; avoid dividing by zero
	}
	bytes := int64(2) * int64(cfg.size) * int64(cfg.iters)
	fmt.Fprintf(stdout, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec/1e6, float64(bytes)*8/usec)
	fmt.Fprintf(stdout, "%d iters in %.2f seconds = %.2f usec/iter\n", cfg.iters, usec/1e6, usec/float64(cfg.iters))
	return nil
}

// newPingpongContext opens the device and creates the PD, MR, CQ and QP
// (in INIT) as pp_init_ctx does.
func newPingpongContext(cfg pingpongConfig) (*ppContext, error) {
	dev, err := rnic.Open(rnic.Config{Addr: netip.AddrPortFrom(cfg.addr, 0)})
	if err != nil {
		return nil, fmt.Errorf("couldn't open the device on %v: %w", cfg.addr, err)
	}
	pp := &ppContext{cfg: cfg, dev: dev, buf: make([]byte, cfg.size), wcs: make([]qp.WC, 16)}
	if err := pp.init(); err != nil {
		dev.Close()
		return nil, err
	}
	return pp, nil
}

func (pp *ppContext) init() error {
	cfg := pp.cfg
	for i := range pp.buf {
		pp.buf[i] = 0x7b // as ibv_rc_pingpong; the client overwrites it with -c
	}
	var err error
	if pp.pd, err = pp.dev.AllocPD(); err != nil {
		return fmt.Errorf("couldn't allocate PD: %w", err)
	}
	if pp.mr, err = pp.pd.RegMR(pp.buf, mr.AccessLocalWrite); err != nil {
		return fmt.Errorf("couldn't register MR: %w", err)
	}
	if pp.cq, err = pp.dev.CreateCQ(cfg.rxDepth + 1); err != nil {
		return fmt.Errorf("couldn't create CQ: %w", err)
	}
	pp.qp, err = pp.dev.CreateQP(pp.pd, &qp.InitAttr{Type: qp.RC, SendCQ: pp.cq, RecvCQ: pp.cq,
		Cap: qp.Cap{MaxSendWR: 1, MaxRecvWR: uint32(cfg.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return fmt.Errorf("couldn't create QP: %w", err)
	}
	attr := qp.Attr{State: qp.StateInit, PKeyIndex: 0, PortNum: uint8(cfg.ibPort)}
	if err := pp.qp.Modify(&attr, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		return fmt.Errorf("failed to modify QP to INIT: %w", err)
	}
	if cfg.check && cfg.server != "" {
		fillPattern(pp.buf)
	}
	pp.sge = []qp.SGE{{Addr: pp.mr.Addr(), Length: uint32(cfg.size), LKey: pp.mr.LKey()}}
	pp.send = qp.SendWR{WRID: pingpongSendID, Opcode: qp.WRSend, SGL: pp.sge, Flags: qp.SendSignaled}
	pp.recv = qp.RecvWR{WRID: pingpongRecvID, SGL: pp.sge}
	return nil
}

// postRecv posts n receives of the whole buffer and returns how many it
// posted.
func (pp *ppContext) postRecv(n int) (int, error) {
	for i := 0; i < n; i++ {
		if err := pp.qp.PostRecv(&pp.recv); err != nil {
			return i, err
		}
	}
	return n, nil
}

// connect moves the QP to RTR and RTS towards the peer, with the attributes
// pp_connect_ctx uses.
func (pp *ppContext) connect(myPSN wire.PSN, rem ppDest) error {
	attr := qp.Attr{State: qp.StateRTR, PathMTU: qp.MTUFromBytes(pp.cfg.mtu), DestQPN: rem.qpn, RQPSN: rem.psn,
		MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AH: qp.AH{GID: rem.gid, SL: uint8(pp.cfg.sl), HopLimit: 1}}
	if err := pp.qp.Modify(&attr, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|
		qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	attr.State, attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.SQPSN, attr.MaxRdAtomic = qp.StateRTS, 14, 7, 7, myPSN, 1
	if err := pp.qp.Modify(&attr, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|
		qp.AttrSQPSN|qp.AttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("failed to modify QP to RTS: %w", err)
	}
	return nil
}

// errZeroGID: the peer did not send a GID, as ibv_rc_pingpong does without
// -g; RoCE cannot address it.
var errZeroGID = errors.New("the peer sent GID :: (run ibv_rc_pingpong with -g IDX: RoCE needs a GID)")

// clientExchange is pp_client_exch_dest: connect to the server (retrying
// while it is not yet listening), send our address, read the server's and
// answer "done".
func (pp *ppContext) clientExchange(ctx context.Context, my ppDest) (ppDest, error) {
	hostPort := net.JoinHostPort(pp.cfg.server, strconv.Itoa(pp.cfg.port))
	conn, err := dialRetry(ctx, hostPort, pp.cfg.dialFor)
	if err != nil {
		return ppDest{}, fmt.Errorf("couldn't connect to %s: %w", hostPort, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(pp.cfg.stall))
	if _, err := conn.Write(destMsg(my)); err != nil {
		return ppDest{}, fmt.Errorf("couldn't send local address: %w", err)
	}
	msg := make([]byte, pingpongMsgLen)
	if _, err := io.ReadFull(conn, msg); err != nil {
		return ppDest{}, fmt.Errorf("couldn't read remote address: %w", ctxErr(ctx, err))
	}
	if _, err := conn.Write([]byte(pingpongDone)); err != nil {
		return ppDest{}, fmt.Errorf("couldn't write done: %w", err)
	}
	rem, err := parseDest(msg)
	if err != nil {
		return ppDest{}, err
	}
	if rem.gid == netip.IPv6Unspecified() {
		return ppDest{}, errZeroGID
	}
	return rem, nil
}

// serverExchange is pp_server_exch_dest: wait for a client (until ctx is
// done), read its address, connect the QP, answer with ours and wait for
// "done".
func (pp *ppContext) serverExchange(ctx context.Context, my ppDest, stderr io.Writer) (ppDest, error) {
	conn, err := acceptPeer(ctx, pp.cfg.port, "goroce pingpong", stderr)
	if err != nil {
		return ppDest{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(pp.cfg.stall))

	msg := make([]byte, pingpongMsgLen)
	if _, err := io.ReadFull(conn, msg); err != nil {
		return ppDest{}, fmt.Errorf("couldn't read remote address: %w", ctxErr(ctx, err))
	}
	rem, err := parseDest(msg)
	if err != nil {
		return ppDest{}, err
	}
	if rem.gid == netip.IPv6Unspecified() {
		return ppDest{}, errZeroGID
	}
	if err := pp.connect(my.psn, rem); err != nil {
		return ppDest{}, fmt.Errorf("couldn't connect to remote QP: %w", err)
	}
	if _, err := conn.Write(destMsg(my)); err != nil {
		return ppDest{}, fmt.Errorf("couldn't send local address: %w", err)
	}
	done := make([]byte, len(pingpongDone))
	if _, err := io.ReadFull(conn, done); err != nil {
		return ppDest{}, fmt.Errorf("couldn't read done: %w", ctxErr(ctx, err))
	}
	if string(done) != pingpongDone {
		return ppDest{}, fmt.Errorf("the client answered %q, want \"done\"", done)
	}
	return rem, nil
}

// destMsg is d's side-channel message with its NUL: 52 bytes.
func destMsg(d ppDest) []byte {
	msg := make([]byte, pingpongMsgLen)
	copy(msg, d.String())
	return msg
}

// errStalled reports a peer that stopped answering.
var errStalled = errors.New("no completion (the peer stopped answering?)")

// waitCompletions returns the next completions in pp.wcs. With -e it
// sleeps on the CQ's completion events, re-arming after each as
// ibv_rc_pingpong does (ibv_get_cq_event, ibv_req_notify_cq, ibv_poll_cq);
// otherwise it polls, blocking in CQ.Wait rather than spinning when the CQ
// is empty. Either way it gives up after cfg.stall without a completion.
func (pp *ppContext) waitCompletions(ctx context.Context) (int, error) {
	deadline := time.Now().Add(pp.cfg.stall)
	if pp.cfg.events {
		timer := time.NewTimer(pp.cfg.stall)
		defer timer.Stop()
		for {
			select {
			case <-pp.cq.Events():
			case <-timer.C:
				return 0, fmt.Errorf("%w: waited %v for a CQ event", errStalled, pp.cfg.stall)
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			if err := pp.cq.ReqNotify(false); err != nil {
				return 0, fmt.Errorf("couldn't request CQ notification: %w", err)
			}
			if n := pp.cq.Poll(pp.wcs); n > 0 {
				return n, nil
			}
		}
	}
	for {
		if n := pp.cq.Poll(pp.wcs); n > 0 {
			return n, nil
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		err := pp.cq.Wait(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			return 0, fmt.Errorf("%w: waited %v", errStalled, pp.cfg.stall)
		case err != nil:
			return 0, err
		}
	}
}

// errBadData reports a received message that differs from what was sent.
var errBadData = errors.New("received data differs from the pattern sent")

// checkRecv verifies a receive completion with -c: the whole message
// arrived and holds the client's pattern (the server sends back what it
// received, so the pattern makes the round trip).
func (pp *ppContext) checkRecv(wc *qp.WC) error {
	if !pp.cfg.check {
		return nil
	}
	if int(wc.ByteLen) != pp.cfg.size {
		return fmt.Errorf("%w: %d bytes, want %d", errBadData, wc.ByteLen, pp.cfg.size)
	}
	for i, b := range pp.buf {
		if want := patternByte(i); b != want {
			return fmt.Errorf("%w: byte %d is %#02x, want %#02x", errBadData, i, b, want)
		}
	}
	return nil
}

// fillPattern writes the -c pattern into b.
func fillPattern(b []byte) {
	for i := range b {
		b[i] = patternByte(i)
	}
}

// patternByte is byte i of the -c pattern: a period of 251 (prime) so no
// two pages of the buffer look alike.
func patternByte(i int) byte { return byte(i % 251) }
