package perf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/mr/sysmem"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

const perfAbout = `perftest (ib_send_bw, ib_write_lat, ...) over a goroce device: two processes
connect RC queue pairs through a TCP side channel and measure bandwidth or
latency. Without HOST it is the server and waits for a client; with HOST it
is the client. Run both with the same TEST and flags.

TEST is one of:
  send_bw    the client SENDs, the server keeps receives posted
  write_bw   the client RDMA WRITEs into the server's buffer (server passive)
  read_bw    the client RDMA READs from the server's buffer (server passive)
  atomic_bw  the client does 8-byte FETCH_ADDs on the server (server passive)
  send_lat   ping-pong of SENDs; reports half the round trip
  write_lat  ping-pong of RDMA WRITEs, each side polling the last byte of its
             own buffer for the peer's write; reports half the round trip
  read_lat   the client RDMA READs one message at a time (server passive)

Bandwidth tests keep up to -t operations outstanding per QP and ask for a
completion every 100th (perftest's CQ moderation), so -t bounds both the
send queue and the CQ. They print BW peak (the best average over any run of
operations, as perftest computes it; 0.00 when not measured: on the send_bw
server and with -D), BW average and the message rate. MB/sec is MiB/s, as
in perftest; --report_gbits prints Gb/sec (10^9 bit/s). Latency tests print
min, max, median (t_typical), mean, standard deviation and the 99% and
99.9% percentiles in microseconds, after dropping the two largest samples
as perftest does; with -D they print the mean and transactions per second.

The side channel is goroce's own unless the client is given --exchange
perftest: then it speaks perftest's (ib_write_bw and the rest, version
5.70 or later, without rdma_cm), so goroce faces perftest in either role.
The server answers either: it tells a perftest client by its first bytes.
goroce's exchange stays the default because it carries and checks every
flag (-a, -D, -q, -t, -s, -n) where perftest's server silently trusts its
own; with perftest's, give both sides the same -s and -n, and -a and -D
are not supported. In perftest's exchange the two sides also agree on the
smaller MTU and the larger buffer stride (page size), as perftest does.

In goroce's exchange the client speaks first. Each side sends one
parameter line, which must match the other's:
  goroce-perf 1 TEST qps=Q size=S all=A iters=N duration=D mtu=M
then one line per QP, the client's first (the server connects its QPs
before it answers):
  qp I qpn=0xQPN psn=0xPSN gid=GID rkey=0xRKEY addr=0xVADDR size=BYTES
where addr and size are the region the peer may write or read. At the end
the client sends "done" and the number of operations each QP completed;
the server answers "done" once it has seen them all (send_bw) or at once.

-x, -d and -F are accepted for perftest's command lines and ignored: a
goroce device has one port and one GID (its --addr), and there is no CPU
frequency to check (-F), since goroce times with the monotonic clock, not
the cycle counter. -p 0 makes the server listen on a free port, which it
reports on stderr.

A run that would allocate more memory than the host has available
(MemAvailable, or what is left under the cgroup's limit) is refused
before it starts: buffers of two halves of the largest message per QP,
and with -n the time of every operation.

Exit status: 0 when the test completed, 1 on a failed work completion, a
stalled peer or a side-channel error, 2 on bad flags or a run too big for
the host's memory.`

// perfTest names one test and what it does.
type perfTest struct {
	name   string
	op     qp.WROpcode
	lat    bool   // a latency test (ping-pong), not a bandwidth test
	title  string // perftest's banner
	access string // the verb, for messages
}

// perfTests are the tests, by name.
var perfTests = []perfTest{
	{name: "send_bw", op: qp.WRSend, title: "Send BW Test"},
	{name: "write_bw", op: qp.WRRDMAWrite, title: "RDMA_Write BW Test"},
	{name: "read_bw", op: qp.WRRDMARead, title: "RDMA_Read BW Test"},
	{name: "atomic_bw", op: qp.WRAtomicFetchAndAdd, title: "Atomic FETCH_AND_ADD BW Test"},
	{name: "send_lat", op: qp.WRSend, lat: true, title: "Send Latency Test"},
	{name: "write_lat", op: qp.WRRDMAWrite, lat: true, title: "RDMA_Write Latency Test"},
	{name: "read_lat", op: qp.WRRDMARead, lat: true, title: "RDMA_Read Latency Test"},
}

// Defaults and limits of goroce perf, after perftest's.
const (
	perfPort      = 18515
	perfSizeBW    = 65536
	perfSizeLat   = 2
	perfItersBW   = 5000
	perfItersLat  = 1000
	perfMinIters  = 5 // perftest's MIN_ITER: the latency report drops two samples
	perfTxDepth   = 128
	perfCQMod     = 100 // signal every 100th WR, as perftest's default cq_mod
	perfMaxSize   = 1 << 23
	perfMaxQPs    = 1024
	perfRdAtomic  = 16 // outstanding READs/atomics per QP (perftest's out_reads on ConnectX)
	perfDialFor   = 3 * time.Second
	perfStall     = 5 * time.Second
	perfAtomicLen = 8
)

// perfConfig is what the command line asked for.
type perfConfig struct {
	obs      cli.ObserveFlags // --trace, --pcap
	test     perfTest
	server   string // host to connect to; "" for the server
	port     int
	size     int
	iters    int
	all      bool
	duration time.Duration // run for this long instead of iters (0: iterations)
	qps      int
	txDepth  int
	postList int // bandwidth client: WRs posted together (-l)
	timeout  int // -u: the QPs' local ACK timeout code
	// dataReport prints a CRC of what the run left in the buffers.
	dataReport bool
	mtu        int
	gbits      bool
	events     bool // -e: sleep on CQ events instead of polling
	addr       netip.Addr
	link       string     // --link: udp or shm
	scAddr     netip.Addr // where the server's side channel listens
	cpuprof    string

	// exchange is the side channel's format: exchangeGoroce or
	// exchangePerftest ("" until chosen: the client's default is goroce's,
	// the server follows the client).
	exchange string
	// perftestPeer is a perftest peer's version; cycle is the buffer
	// stride both perftest sides agreed on (0 in goroce's exchange).
	perftestPeer string
	cycle        int

	// stall bounds each wait for progress; dialFor is how long a client
	// retries a refused connect.
	stall, dialFor time.Duration
}

// Side-channel formats (--exchange).
const (
	exchangeGoroce   = "goroce"
	exchangePerftest = "perftest"
)

// client reports whether this side is the client.
func (c *perfConfig) client() bool { return c.server != "" }

// sizes returns the message sizes to run: -s, or with -a every power of
// two from 2 to 8 MiB.
func (c *perfConfig) sizes() []int {
	if !c.all {
		return []int{c.size}
	}
	var s []int
	for n := 2; n <= perfMaxSize; n *= 2 {
		s = append(s, n)
	}
	return s
}

// maxSize is the largest message of the run.
func (c *perfConfig) maxSize() int {
	s := c.sizes()
	return s[len(s)-1]
}

// paramLine is the side channel's first line: the parameters both sides
// must agree on.
func (c *perfConfig) paramLine() string {
	return fmt.Sprintf("goroce-perf 1 %s qps=%d size=%d all=%t iters=%d duration=%d mtu=%d",
		c.test.name, c.qps, c.size, c.all, c.iters, int(c.duration/time.Second), c.mtu)
}

// Run is `goroce perf TEST [flags] [HOST]`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parsePerf(args, stdout, stderr)
	if !ok {
		return code
	}
	// Refuse a run the machine cannot hold before allocating any of it:
	// Go's "out of memory" is a fatal stack dump, or the OOM killer.
	if err := sysmem.Check(cfg.memoryNeed()); err != nil {
		fmt.Fprintf(stderr, "goroce perf: %v: lower -q, -n or -s, or time the run with -D\n", err)
		return cli.ExitUsage
	}
	defer cli.ShareLoopbackCPUs(cfg.addr)()
	if cfg.cpuprof != "" {
		stop, err := cli.StartCPUProfile(cfg.cpuprof)
		if err != nil {
			fmt.Fprintf(stderr, "goroce perf: %v\n", err)
			return cli.ExitUsage
		}
		defer stop()
	}
	if err := perf(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "goroce perf %s: %v\n", cfg.test.name, err)
		return cli.ExitFail
	}
	return cli.ExitOK
}

// parsePerf reads TEST and the flags; like getopt in perftest, flags may
// come before or after HOST.
func parsePerf(args []string, stdout, stderr io.Writer) (cfg perfConfig, code int, ok bool) {
	var names []string
	for _, t := range perfTests {
		names = append(names, t.name)
	}
	fs := cli.NewFlagSet("goroce perf "+strings.Join(names, "|")+" [flags] [HOST]", perfAbout)
	cfg = perfConfig{stall: perfStall, dialFor: perfDialFor}
	cli.IntFlag(fs, &cfg.port, "p", "port", perfPort, "listen on / connect to TCP `port` (server: 0 picks a free one)")
	cli.SizeFlag(fs, &cfg.size, "s", "size", 0, "`size` of each message, in bytes with an optional K, M or G (default 65536 for bw tests, 2 for lat tests)")
	cli.IntFlag(fs, &cfg.iters, "n", "iters", 0, "number of operations per QP (default 5000 for bw tests, 1000 for lat tests)")
	fs.BoolVar(&cfg.all, "a", false, "run sizes from 2 to 2^23 bytes")
	fs.BoolVar(&cfg.all, "all", false, "same as -a")
	var secs int
	cli.IntFlag(fs, &secs, "D", "duration", 0, "run for `seconds` instead of -n operations")
	cli.IntFlag(fs, &cfg.qps, "q", "qp", 1, "number of QPs (bw tests)")
	cli.IntFlag(fs, &cfg.txDepth, "t", "tx-depth", perfTxDepth, "outstanding operations per QP (bw tests)")
	cli.IntFlag(fs, &cfg.postList, "l", "post_list", 1, "bw tests: post `N` WRs at a time as one list (ibv_post_send of a chain), which the device sends together")
	var gidIdx int
	cli.IntFlag(fs, &gidIdx, "x", "gid-index", -1, "source GID `index` (ignored: a goroce device has one GID, its --addr)")
	cli.IntFlag(fs, &cfg.mtu, "m", "mtu", 4096, "path `MTU`: 256, 512, 1024, 2048 or 4096")
	cli.IntFlag(fs, &cfg.timeout, "u", "qp-timeout", 14, "QP local ACK timeout: 4.096 µs × 2^`code`, 1..31 (with the 7 retries, 14 gives up after about 0.5 s)")
	fs.BoolVar(&cfg.gbits, "report_gbits", false, "report bandwidth in Gb/sec instead of MB/sec")
	fs.BoolVar(&cfg.events, "e", false, "sleep on CQ events instead of polling (default: poll, the device in polling mode)")
	fs.BoolVar(&cfg.events, "events", false, "same as -e")
	cfg.obs.Register(fs)
	var cpuFreq bool
	fs.BoolVar(&cpuFreq, "F", false, "do not fail on CPU frequency warnings (ignored: goroce times with the monotonic clock)")
	var dev string
	fs.StringVar(&dev, "d", "", "use IB `device` (ignored: goroce opens one device)")
	fs.StringVar(&dev, "ib-dev", "", "same as -d")
	fs.StringVar(&cfg.exchange, "exchange", "", "side-channel `format`: goroce or perftest (default: goroce for the client; the server follows the client)")
	fs.StringVar(&cfg.cpuprof, "cpuprofile", "", "write a CPU profile (runtime/pprof) to `file`")
	fs.BoolVar(&cfg.dataReport, "data-report", false, "when done, print a CRC-32 of the first -s bytes of the local and target buffers (what the last operation brought in)")
	addr := cli.AddrFlag(fs)
	linkName := cli.LinkFlag(fs, cli.DefaultLink())
	scAddr := cli.SideChannelAddrFlag(fs)

	args0, code, ok := cli.ParseWithHosts(fs, args, stdout, stderr)
	if !ok {
		return cfg, code, false
	}
	usageErr := func(format string, a ...any) (perfConfig, int, bool) {
		fmt.Fprintf(stderr, "goroce perf: "+format+"\n", a...)
		return cfg, cli.ExitUsage, false
	}
	if len(args0) == 0 {
		return usageErr("name a TEST: %s", strings.Join(names, ", "))
	}
	found := false
	for _, t := range perfTests {
		if t.name == args0[0] {
			cfg.test, found = t, true
		}
	}
	if !found {
		return usageErr("unknown TEST %q (want one of %s)", args0[0], strings.Join(names, ", "))
	}
	switch len(args0) {
	case 1:
	case 2:
		cfg.server = args0[1]
	default:
		return usageErr("one HOST at most, got %q", args0[1:])
	}
	a, err := cli.ParseDeviceAddr(*addr)
	if err != nil {
		return usageErr("%v", err)
	}
	cfg.addr = a
	if err := cli.CheckLink(*linkName); err != nil {
		return usageErr("%v", err)
	}
	cfg.link = *linkName
	if cfg.scAddr, err = cli.ParseSideChannelAddr(*scAddr, a); err != nil {
		return usageErr("%v", err)
	}
	cfg.duration = time.Duration(secs) * time.Second
	if !set(fs, "s", "size") {
		cfg.size = perfSizeBW
		if cfg.test.lat {
			cfg.size = perfSizeLat
		}
	}
	if cfg.test.op == qp.WRAtomicFetchAndAdd {
		if set(fs, "s", "size") && cfg.size != perfAtomicLen {
			return usageErr("-s %d: atomics are %d bytes", cfg.size, perfAtomicLen)
		}
		cfg.size = perfAtomicLen
	}
	if !set(fs, "n", "iters") {
		cfg.iters = perfItersBW
		if cfg.test.lat {
			cfg.iters = perfItersLat
		}
	}
	switch {
	case cfg.port < 0 || cfg.port > 65535 || (cfg.port == 0 && cfg.client()):
		return usageErr("-p %d: want a TCP port 1..65535 (0 only for the server)", cfg.port)
	case cfg.size < 1 || cfg.size > perfMaxSize:
		return usageErr("-s %d: want 1..%d", cfg.size, perfMaxSize)
	case cfg.iters < perfMinIters:
		return usageErr("-n %d: want at least %d", cfg.iters, perfMinIters)
	case secs < 0:
		return usageErr("-D %d: want a positive number of seconds", secs)
	case secs > 0 && cfg.all:
		return usageErr("-D and -a: duration mode runs one size")
	case cfg.all && cfg.test.op == qp.WRAtomicFetchAndAdd:
		return usageErr("-a: atomics are always %d bytes", perfAtomicLen)
	case cfg.qps < 1 || cfg.qps > perfMaxQPs:
		return usageErr("-q %d: want 1..%d", cfg.qps, perfMaxQPs)
	case cfg.qps > 1 && cfg.test.lat:
		return usageErr("-q %d: latency tests use one QP", cfg.qps)
	case cfg.txDepth < 1 || cfg.txDepth > rnic.MaxQPWR/2:
		return usageErr("-t %d: want 1..%d", cfg.txDepth, rnic.MaxQPWR/2)
	case cfg.postList < 1 || cfg.postList > cfg.txDepth:
		return usageErr("-l %d: want 1..%d (-t)", cfg.postList, cfg.txDepth)
	case qp.MTUFromBytes(cfg.mtu) == 0:
		return usageErr("-m %d: want 256, 512, 1024, 2048 or 4096", cfg.mtu)
	case cfg.timeout < 1 || cfg.timeout > 31:
		return usageErr("-u %d: want 1..31", cfg.timeout)
	case cfg.exchange != "" && cfg.exchange != exchangeGoroce && cfg.exchange != exchangePerftest:
		return usageErr("--exchange %q: want %s or %s", cfg.exchange, exchangeGoroce, exchangePerftest)
	case cfg.exchange == exchangePerftest && (cfg.all || secs > 0):
		return usageErr("-a and -D are not supported with --exchange perftest")
	}
	return cfg, cli.ExitOK, true
}

// set reports whether one of the named flags was given.
func set(fs *flag.FlagSet, names ...string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		for _, n := range names {
			if f.Name == n {
				found = true
			}
		}
	})
	return found
}

// errWC reports a work completion with an error status.
var errWC = errors.New("work completion with error")
