package rping

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/qp"
)

// rpingForms are rping's two ways to run, as its usage shows them.
const rpingForms = `goroce rping -s [-vVdP] [-S size] [-C count] [-a addr] [-p port]
goroce rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]

`

const rpingAbout = `librdmacm's rping over a goroce device: a client and a server connect an
RC QP through the RDMA connection manager (CM REQ, REP and RTU as MADs to
QP1, the rdma_cm port space TCP, port -p) and ping -C times. Each ping:

  1. the client fills its start buffer with "rdma-ping-N: " and rping's
     rotating printable characters, and SENDs its advertisement (address,
     rkey, length: 16 bytes, big-endian);
  2. the server RDMA READs the start buffer and SENDs "go ahead";
  3. the client SENDs the advertisement of its sink buffer;
  4. the server RDMA WRITEs what it read into the sink and SENDs "go ahead";
  5. with -V the client compares the sink with the start buffer.

The client disconnects at the end (DREQ, DREP); the server then exits
(with -P it serves the next client). Output is rping's: -v prints each
ping's data ("ping data: ..." on the client, "server ping data: ..." on the
server), -d rping's debug lines, and each side says "client DISCONNECT
EVENT..." or "server DISCONNECT EVENT..." on stderr.

Addresses: the server's device takes -a's address (0.0.0.0 or ::, the
default, mean --addr); the client connects to -a and its device takes -I,
else --addr. Each device is a RoCEv2 endpoint on UDP port 4791 of its own
address, so a client and a server on one host need two addresses
(127.0.0.1 and 127.0.0.2; for IPv6, two addresses in a network namespace).

-V on the server (a goroce addition; rping's server ignores it) checks that
what each RDMA READ brought is the client's ping pattern for that ping. A
client whose REQ a REJ refuses because nothing listens on the port yet
(reason 8, invalid service ID), or finds no RoCE device at the address
(the host answers ICMP port unreachable: RDMA_CM_EVENT_UNREACHABLE, error
-111, at once), tries again for 3 seconds (also a goroce addition), then
says which. One whose REQ reaches a host that never answers resends it as
the CM does (every 4.3 s, 15 times) and then reports
RDMA_CM_EVENT_UNREACHABLE, error -110.

Exit status: 0 when every ping completed (and validated with -V), 1 on a
failed connection, completion or validation, 2 on bad flags.`

// rping's limits and defaults (rping.c).
const (
	defaultPort = 7174
	defaultSize = 64
	bufSize     = 64 * 1024 // RPING_BUFSIZE: -S must be below it
	// minSize is RPING_MIN_BUFSIZE: sizeof(stringify(INT_MAX)) +
	// sizeof(RPING_MSG_FMT), room for the ping prefix with the largest
	// count: INT_MAX expands to ten characters (2147483647, or gcc's
	// 0x7fffffff), 11 bytes with the NUL, and the format is 15: 26.
	minSize = len("2147483647") + 1 + len("rdma-ping-%d: ") + 1
)

// config is what the command line asked for.
type config struct {
	obs        cli.ObserveFlags
	server     bool
	persistent bool
	addr       netip.Addr // -a: the server's address
	port       uint16
	source     netip.Addr // the client's device address (-I, else --addr)
	devAddr    netip.Addr // this side's device address
	count      int        // 0: forever
	size       int
	verbose    bool
	validate   bool
	debug      bool
	mtu        int
}

// Run is `goroce rping -s|-c [flags]`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parse(args, stdout, stderr)
	if !ok {
		return code
	}
	defer cli.ShareLoopbackCPUs(cfg.devAddr)()
	if err := run(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "goroce rping: %v\n", err)
		return cli.ExitFail
	}
	return cli.ExitOK
}

// parse reads and checks the flags; every mistake is exit status 2, with
// the error on the last line of stderr.
func parse(args []string, stdout, stderr io.Writer) (cfg config, code int, ok bool) {
	fs := cli.NewFlagSet("goroce rping -s|-c [flags] [-a addr]", rpingForms+rpingAbout)
	fs.BoolVar(&cfg.server, "s", false, "server side")
	client := fs.Bool("c", false, "client side")
	a := fs.String("a", "", "`address`: the server's (server: to bind to; default any, which is --addr)")
	src := fs.String("I", "", "source `address` for the client: its device's address (default --addr)")
	port := fs.Int("p", defaultPort, "rdma_cm `port`")
	fs.IntVar(&cfg.count, "C", 0, "ping `count` (0: until interrupted)")
	fs.IntVar(&cfg.size, "S", defaultSize, fmt.Sprintf("ping data `size` (%d to %d)", minSize, bufSize-1))
	fs.BoolVar(&cfg.verbose, "v", false, "display ping data to stdout")
	fs.BoolVar(&cfg.validate, "V", false, "validate ping data")
	fs.BoolVar(&cfg.debug, "d", false, "debug printfs (rping's DEBUG_LOG lines, to stdout)")
	fs.BoolVar(&cfg.persistent, "P", false, "persistent server mode allowing multiple connections")
	fs.IntVar(&cfg.mtu, "mtu", 4096, "the device port's active `MTU`: 256, 512, 1024, 2048 or 4096 (the path MTU the CM offers)")
	cfg.obs.Register(fs)
	devAddr := cli.AddrFlag(fs)
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return cfg, code, false
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	usageErr := func(format string, a ...any) (config, int, bool) {
		fmt.Fprintf(stderr, "goroce rping: "+format+"\n", a...)
		return cfg, cli.ExitUsage, false
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case cfg.server == *client:
		return usageErr("give -s (server) or -c (client)")
	case *port < 1 || *port > 65535:
		return usageErr("-p %d: want a port 1..65535", *port)
	case cfg.size < minSize || cfg.size > bufSize-1:
		// rping's words, which name RPING_BUFSIZE as the top of the range
		// while it takes at most RPING_BUFSIZE - 1.
		return usageErr("Invalid size %d (valid range is %d to %d)", cfg.size, minSize, bufSize)
	case cfg.count < 0:
		return usageErr("Invalid count %d", cfg.count)
	case qp.MTUFromBytes(cfg.mtu) == 0:
		return usageErr("--mtu %d: want 256, 512, 1024, 2048 or 4096", cfg.mtu)
	case cfg.persistent && !cfg.server:
		return usageErr("-P is for the server (-s)")
	case set["I"] && cfg.server:
		return usageErr("-I is for the client (-c)")
	case !cfg.server && *a == "":
		return usageErr("the client needs the server's address, -a")
	}
	cfg.port = uint16(*port)
	d, err := cli.ParseDeviceAddr(*devAddr)
	if err != nil {
		return usageErr("%v", err)
	}
	if *a != "" {
		if cfg.addr, err = lookup(*a); err != nil {
			return usageErr("-a %q: %v", *a, err)
		}
	}
	if cfg.server {
		cfg.devAddr = cfg.addr
		if !cfg.addr.IsValid() || cfg.addr.IsUnspecified() {
			if cfg.addr.IsValid() && cfg.addr.Is4() != d.Is4() {
				return usageErr("-a %v and --addr %v are of different families", cfg.addr, d)
			}
			cfg.devAddr = d
		}
		return cfg, cli.ExitOK, true
	}
	cfg.source = d
	if set["I"] {
		if cfg.source, err = lookup(*src); err != nil {
			return usageErr("-I %q: %v", *src, err)
		}
	}
	cfg.devAddr = cfg.source
	switch {
	case cfg.addr.IsUnspecified():
		return usageErr("-a %v: the client needs the server's address", cfg.addr)
	case cfg.addr.Is4() != cfg.source.Is4():
		return usageErr("-a %v and the client's address %v are of different families (give -I or --addr)", cfg.addr, cfg.source)
	case cfg.addr == cfg.source:
		return usageErr("-a %v is the client's own address: the client's device needs another one (-I or --addr, e.g. 127.0.0.2)", cfg.addr)
	}
	return cfg, cli.ExitOK, true
}

// lookup is rping's get_addr: an IP address or a host name.
func lookup(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), nil
	}
	addrs, err := net.LookupHost(s)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("invalid hostname or IP address")
	}
	a, err := netip.ParseAddr(addrs[0])
	if err != nil {
		return netip.Addr{}, err
	}
	return a.Unmap(), nil
}
