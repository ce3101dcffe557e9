package pingpong

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

const pingpongAbout = `The verbs ping-pong examples over a goroce device: two processes connect
their queue pairs through a TCP side channel and bounce a SEND of -s bytes
back and forth -n times. Without HOST it is the server and waits for a
client; with HOST it is the client and connects to the server at HOST.
-t picks the example:

  rc   ibv_rc_pingpong: one RC QP (the default)
  uc   ibv_uc_pingpong: one UC QP; nothing is acknowledged or retransmitted
  ud   ibv_ud_pingpong: one UD QP with Q_Key 0x11111111 and an address handle
       to the peer; every receive starts with the 40-byte GRH area, so a
       message fits one packet: -s (default 2048) at most the port's MTU,
       which -m sets here (default 4096)
  srq  ibv_srq_pingpong: -q RC QPs (default 16) sharing one shared receive
       queue of -r receives; -n counts the exchanges of all QPs together

The side channel speaks the examples' format: each side sends
"LID:QPN:PSN:GID" ("%04x:%06x:%06x:%032x" plus NUL, 52 bytes) for its QP
(srq: one for each of its 256 QP slots, zero beyond -q), the client first;
the server connects its QPs before it answers, and the client ends the
exchange with "done" plus NUL. The GID is the device's address (--addr) as
an IPv6 or IPv4-mapped address; -d and -g are accepted for compatibility
and ignored (a goroce device has one port and one GID).

Both sides print their local and remote addresses, then the throughput and
latency lines of the examples (bytes = 2 * size * iters). -c (--chk) makes
the client send a pattern (with rdma-core's -c zero at each 4096-byte page
start, so an ibv_*_pingpong server with -c accepts it) and both sides check
every message they receive, landed in a receive area that is poisoned
before each receive and kept apart from what is sent; the server also
accepts an ibv_*_pingpong client's -c fill (0x7b, zero at each page start).
The server sends back what it received. -p 0 makes the server listen on a
free port, which it reports on stderr.

Exit status: 0 when every exchange completed, 1 on a failed work completion,
a stalled peer or a side-channel error, 2 on bad flags.`

// Defaults and limits of goroce pingpong, after the verbs examples.
const (
	pingpongPort    = 18515
	pingpongMsgLen  = len("0000:000000:000000:00000000000000000000000000000000") + 1 // with its NUL
	pingpongDone    = "done\x00"
	pingpongRecvID  = 1               // PINGPONG_RECV_WRID
	pingpongSendID  = 2               // PINGPONG_SEND_WRID
	pingpongDialFor = 3 * time.Second // how long a client retries a refused connect
	pingpongStall   = 5 * time.Second // the longest wait for a completion or a side-channel read

	ppMaxQP     = 256  // MAX_QP of ibv_srq_pingpong: the QP slots its side channel always carries
	ppUDSize    = 2048 // ibv_ud_pingpong's default -s
	ppUDPortMTU = 4096 // a goroce port's active MTU unless -m says otherwise
)

// pingpongConfig is what the command line asked for.
type pingpongConfig struct {
	obs       cli.ObserveFlags // --trace, --pcap
	server    string           // host to connect to; "" for the server
	port      int              // TCP side-channel port (0: any, server only)
	ibPort    int
	size      int
	mtu       int // the path MTU; for ud, the port's active MTU
	rxDepth   int
	iters     int
	sl        int
	timeout   int // RC's local ACK timeout, 4.096 us * 2^timeout
	numQP     int // srq only
	events    bool
	check     bool
	addr      netip.Addr // the device's address: its GID
	scAddr    netip.Addr // where the server's side channel listens
	transport string     // rc, uc, ud or srq

	// stall bounds each wait for progress once connected; dialFor is how
	// long a client retries a refused connect.
	stall, dialFor time.Duration
}

// Run is `goroce pingpong [flags] [HOST]`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parsePingpong(args, stdout, stderr)
	if !ok {
		return code
	}
	defer cli.ShareLoopbackCPUs(cfg.addr)()
	if err := pingpong(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "goroce pingpong: %v\n", err)
		return cli.ExitFail
	}
	return cli.ExitOK
}

// parsePingpong reads the flags; like getopt in the examples, flags may
// come before or after HOST.
func parsePingpong(args []string, stdout, stderr io.Writer) (cfg pingpongConfig, code int, ok bool) {
	fs := cli.NewFlagSet("goroce pingpong [flags] [HOST]", pingpongAbout)
	cfg = pingpongConfig{stall: pingpongStall, dialFor: pingpongDialFor}
	intVar := func(p *int, short, long string, value int, usage string) {
		cli.IntFlag(fs, p, short, long, value, usage)
	}
	intVar(&cfg.port, "p", "port", pingpongPort, "listen on / connect to TCP `port` (server: 0 picks a free one)")
	intVar(&cfg.ibPort, "i", "ib-port", 1, "`port` of the device (a goroce device has only port 1)")
	cli.SizeFlag(fs, &cfg.size, "s", "size", 4096, "`size` of the message to exchange, in bytes with an optional K, M or G (ud: default 2048)")
	intVar(&cfg.mtu, "m", "mtu", 1024, "path `MTU`: 256, 512, 1024, 2048 or 4096 (ud: the port's MTU, default 4096)")
	intVar(&cfg.numQP, "q", "num-qp", 16, "`number` of QPs to use (srq only, 1..256)")
	intVar(&cfg.rxDepth, "r", "rx-depth", 500, "number of receives to post at a time (`depth`)")
	intVar(&cfg.iters, "n", "iters", 1000, "number of exchanges (`iters`)")
	intVar(&cfg.sl, "l", "sl", 0, "service level `value` (0..15)")
	intVar(&cfg.timeout, "u", "qp-timeout", 14, "RC QP `timeout`: retransmit after 4.096 usec * 2^timeout without an ACK (1..31; the examples' 14; a goroce addition)")
	var gidIdx int
	intVar(&gidIdx, "g", "gid-idx", -1, "local GID `index` (ignored: the GID is --addr)")
	var dev string
	fs.StringVar(&dev, "d", "", "use IB `device` (ignored: goroce opens one device)")
	fs.StringVar(&dev, "ib-dev", "", "same as -d")
	fs.BoolVar(&cfg.events, "e", false, "sleep on CQ events (ReqNotify) instead of polling")
	fs.BoolVar(&cfg.events, "events", false, "same as -e")
	cfg.obs.Register(fs)
	fs.BoolVar(&cfg.check, "c", false, "check the contents of every received message")
	fs.BoolVar(&cfg.check, "chk", false, "same as -c")
	fs.StringVar(&cfg.transport, "t", "rc", "transport `type`: rc, uc, ud or srq (which ibv_*_pingpong)")
	addr := cli.AddrFlag(fs)
	scAddr := cli.SideChannelAddrFlag(fs)

	// getopt order: flags and the one HOST argument in any order.
	hosts, code, ok := cli.ParseWithHosts(fs, args, stdout, stderr)
	if !ok {
		return cfg, code, false
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	given := func(short, long string) bool { return set[short] || set[long] }

	usageErr := func(format string, a ...any) (pingpongConfig, int, bool) {
		fmt.Fprintf(stderr, "goroce pingpong: "+format+"\n", a...)
		return cfg, cli.ExitUsage, false
	}
	switch len(hosts) {
	case 0:
	case 1:
		cfg.server = hosts[0]
	default:
		return usageErr("one HOST at most, got %q", hosts)
	}
	a, err := cli.ParseDeviceAddr(*addr)
	if err != nil {
		return usageErr("%v", err)
	}
	cfg.addr = a
	if cfg.scAddr, err = cli.ParseSideChannelAddr(*scAddr, a); err != nil {
		return usageErr("%v", err)
	}
	switch cfg.transport {
	case "rc", "uc", "srq":
	case "ud":
		if !given("s", "size") {
			cfg.size = ppUDSize
		}
		if !given("m", "mtu") {
			cfg.mtu = ppUDPortMTU
		}
	default:
		return usageErr("-t %q: want rc, uc, ud or srq", cfg.transport)
	}
	switch {
	case given("q", "num-qp") && cfg.transport != "srq":
		return usageErr("-q is for -t srq (rc, uc and ud use one QP)")
	case cfg.port < 0 || cfg.port > 65535 || (cfg.port == 0 && cfg.server != ""):
		return usageErr("-p %d: want a TCP port 1..65535 (0 only for the server)", cfg.port)
	case cfg.ibPort != 1:
		return usageErr("-i %d: a goroce device has one port, 1", cfg.ibPort)
	case qp.MTUFromBytes(cfg.mtu) == 0:
		return usageErr("-m %d: want 256, 512, 1024, 2048 or 4096", cfg.mtu)
	case cfg.size < 1 || cfg.size > rnic.MaxMsgSize:
		return usageErr("-s %d: want 1..%d", cfg.size, rnic.MaxMsgSize)
	case cfg.transport == "ud" && cfg.size > cfg.mtu:
		// A datagram is one packet; ibv_ud_pingpong checks the same.
		return usageErr("-s %d: requested size larger than port MTU (%d): a UD message is one packet", cfg.size, cfg.mtu)
	case cfg.rxDepth < 1 || cfg.rxDepth > rnic.MaxQPWR:
		return usageErr("-r %d: want 1..%d", cfg.rxDepth, rnic.MaxQPWR)
	case cfg.numQP < 1 || cfg.numQP > ppMaxQP:
		return usageErr("-q %d: want 1..%d QPs", cfg.numQP, ppMaxQP)
	case cfg.transport == "srq" && cfg.numQP > cfg.rxDepth:
		return usageErr("-r %d is too small for %d QPs: the SRQ must hold at least one receive per QP", cfg.rxDepth, cfg.numQP)
	case cfg.iters < 1:
		return usageErr("-n %d: want at least 1", cfg.iters)
	case cfg.sl < 0 || cfg.sl > 15:
		return usageErr("-l %d: want a service level 0..15", cfg.sl)
	case cfg.timeout < 1 || cfg.timeout > 31:
		return usageErr("-u %d: want a QP timeout 1..31", cfg.timeout)
	}
	return cfg, cli.ExitOK, true
}

// localLine is the text of a "local address" line. ibv_ud_pingpong prints
// a colon before the GID where the other examples print a comma; goroce
// does too, for scripts that parse the output.
func (cfg *pingpongConfig) localLine(d ppDest) string {
	if cfg.transport == "ud" {
		return fmt.Sprintf("LID 0x%04x, QPN 0x%06x, PSN 0x%06x: GID %s", d.lid, d.qpn, uint32(d.psn), d.gid)
	}
	return d.line()
}

// pingpong runs one side of the exchange and prints what the verbs
// example prints.
func pingpong(ctx context.Context, cfg pingpongConfig, stdout, stderr io.Writer) error {
	pp, err := newPingpongContext(cfg, stderr)
	if err != nil {
		return err
	}
	defer pp.closeObs() // runs after the device closes
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
	slots := 1
	if cfg.transport == "srq" {
		slots = ppMaxQP
	}
	my := make([]ppDest, slots)
	for i, q := range pp.qps {
		my[i] = ppDest{qpn: q.QPN(), psn: cli.RandomPSN(), gid: pp.dev.GID()}
		fmt.Fprintf(stdout, "  local address:  %s\n", cfg.localLine(my[i]))
	}

	var rem []ppDest
	if cfg.server != "" {
		rem, err = pp.clientExchange(ctx, my)
	} else {
		rem, err = pp.serverExchange(ctx, my, stderr)
	}
	if err != nil {
		return err
	}
	for _, d := range rem {
		fmt.Fprintf(stdout, "  remote address: %s\n", d.line())
	}

	// pending[i] holds the work QP i waits for before its next send: its
	// receive, and its send's completion once it has sent.
	pending := make([]int, len(pp.qps))
	for i := range pending {
		pending[i] = pingpongRecvID
	}
	if cfg.server != "" {
		if err := pp.connect(my, rem); err != nil {
			return err
		}
		for i := range pp.qps {
			if err := pp.postSend(i); err != nil {
				return err
			}
			pending[i] |= pingpongSendID
		}
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
			i, ok := pp.qpi[wc.QPNum]
			if !ok {
				return fmt.Errorf("couldn't find QPN %06x", wc.QPNum)
			}
			kind := wrKind(wc.WRID)
			switch kind {
			case pingpongSendID:
				scnt++
			case pingpongRecvID:
				msg := pp.received(&wc)
				if err := pp.checkRecv(&wc, msg); err != nil {
					return fmt.Errorf("receive %d: %w", rcnt+1, err)
				}
				if pp.slotted {
					poison(msg) // before the slot is posted again
				}
				// Refill when no more than one receive per QP is left.
				if routs--; routs <= len(pp.qps) {
					k, err := pp.postRecv(cfg.rxDepth - routs)
					if routs += k; err != nil {
						return fmt.Errorf("couldn't post receive (%d): %w", routs, err)
					}
				}
				rcnt++
			default:
				return fmt.Errorf("completion for unknown wr_id %d", wc.WRID)
			}
			pending[i] &^= kind
			if scnt < cfg.iters && pending[i] == 0 {
				if err := pp.postSend(i); err != nil {
					return err
				}
				pending[i] = pingpongRecvID | pingpongSendID
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
	if cfg.check {
		fmt.Fprintf(stdout, "%d received messages checked: %s\n", pp.checked, fillName(pp.want))
	}
	return nil
}

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
				return 0, fmt.Errorf("%w: waited %v for a CQ event", cli.ErrStalled, pp.cfg.stall)
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
			return 0, fmt.Errorf("%w: waited %v", cli.ErrStalled, pp.cfg.stall)
		case err != nil:
			return 0, err
		}
	}
}

// errBadData reports a received message that differs from what was sent.
var errBadData = errors.New("received data differs from the pattern sent")

// checkRecv verifies a receive completion with -c: the whole message
// arrived and holds what the client sent. The client knows: its own
// pattern, which the server sends back. The server takes the first
// message's fill, which must be goroce's pattern or rdma-core's -c fill
// (an ibv_*_pingpong client), and holds every later message to it. A UD
// receive counts the 40-byte GRH area before the message in its length.
// The receive area was poisoned before the receive, so a message that
// never arrived fails here.
func (pp *ppContext) checkRecv(wc *qp.WC, msg []byte) error {
	if !pp.cfg.check {
		return nil
	}
	if want := pp.recv.SGL[0].Length; wc.ByteLen != want {
		return fmt.Errorf("%w: %d bytes, want %d", errBadData, wc.ByteLen, want)
	}
	if pp.want == nil {
		ours := make([]byte, len(msg))
		fillPattern(ours)
		pp.want = ours
		if theirs := rdmaCoreFill(len(msg)); bytes.Equal(msg, theirs) {
			pp.want = theirs
		}
	}
	if i := firstDiff(msg, pp.want); i >= 0 {
		return fmt.Errorf("%w: byte %d is %#02x, want %#02x (%s)", errBadData, i, msg[i], pp.want[i], fillName(pp.want))
	}
	pp.checked++
	return nil
}

// firstDiff is the first index where a and b (of one length) differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// The -c contents. rdma-core's ibv_rc/uc/ud_pingpong fill their buffer
// with 0x7b and, with -c, the client writes a zero at the start of every
// page (buf[i] = i / page_size % sizeof(char), which is 0) and the server
// checks those bytes when it is done, printing "invalid data in page N"
// (its exit status stays 0). goroce's pattern keeps those zeros, so an
// rdma-core server accepts it, and fills the rest with a count that says
// where each byte belongs.
const (
	rdmaCoreByte = 0x7b // memset(ctx->buf, 0x7b, size) in pp_init_ctx
	ppPageSize   = 4096 // the page size of rdma-core's -c (sysconf(_SC_PAGESIZE) on x86)
	ppPoison     = 0xe5 // the receive area's contents before each receive, with -c
)

// fillPattern writes goroce's -c pattern into b.
func fillPattern(b []byte) {
	for i := range b {
		b[i] = patternByte(i)
	}
}

// patternByte is byte i of goroce's -c pattern: zero at each page start,
// as rdma-core's -c wants; elsewhere a count of period 251 (prime), so no
// two pages of the buffer look alike.
func patternByte(i int) byte {
	if i%ppPageSize == 0 {
		return 0
	}
	return byte(i % 251)
}

// rdmaCoreFill is what an rdma-core ping-pong client sends with -c: n
// bytes of 0x7b with a zero at the start of every page.
func rdmaCoreFill(n int) []byte {
	b := bytes.Repeat([]byte{rdmaCoreByte}, n)
	for i := 0; i < n; i += ppPageSize {
		b[i] = 0
	}
	return b
}

// fillName says which fill want is, for the check's messages.
func fillName(want []byte) string {
	if want == nil {
		return "no message received"
	}
	if len(want) > 1 && want[1] == rdmaCoreByte {
		return "rdma-core's -c fill"
	}
	return "goroce's -c pattern"
}

// poison overwrites a receive area before a receive, with -c.
func poison(b []byte) {
	for i := range b {
		b[i] = ppPoison
	}
}
