package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The lab's fixed addresses: the guest and the namespace's bridge, where
// goroce runs.
const (
	guestIPv4  = "10.99.0.1"
	guestIPv6  = "fd00:99::1"
	goroceIPv4 = "10.99.0.254"
	goroceIPv6 = "fd00:99::254"

	// firstPort is the TCP side-channel port of the first case; case i
	// uses firstPort+i, away from the examples' default 18515 so that a
	// stray run of the lab's own cases cannot answer.
	firstPort = 18600
	// qpTimeout is both perftest sides' QP timeout (-u): 4.096 us * 2^18,
	// about 1.07 s. The default, 14 (67 ms), is shorter than a TCG
	// guest's rxe takes to ACK the first burst of a bandwidth test
	// (67 ms was seen), so the requester would time out and go back N on
	// a clean bridge. With 1 s, a retransmission means a packet lost or
	// ignored, which fails the case.
	qpTimeout = 18
	// srqQPs is the number of QPs ibv_srq_pingpong shares its SRQ
	// between (-q) on both sides of a preloaded case.
	srqQPs = 4
)

// role is the part rxe plays in a case; goroce plays the other one.
type role string

const (
	rxeServer role = "server" // rxe listens in the guest; goroce connects
	rxeClient role = "client" // goroce listens in the namespace; rxe connects
)

// family is the IP version of the RoCEv2 packets (and of both GIDs).
type family string

const (
	ipv4 family = "ipv4"
	ipv6 family = "ipv6"
)

// perftests are the perftest programs the suite runs, by goroce perf's
// TEST names: rxe runs ib_TEST.
var perftests = []string{"write_bw", "read_bw", "send_bw", "atomic_bw", "send_lat", "write_lat", "read_lat"}

// preloadPingpongs are the rdma-core examples the suite runs preloaded
// on goroce (goroce exec) against the same example on rxe.
var preloadPingpongs = []string{"rc", "uc", "ud", "srq"}

// preloadEvents are the programs the suite also runs preloaded in event
// mode (-e, on both sides: each sleeps on its completion channel instead
// of spinning on its CQ): ibv_rc_pingpong, and of perftest one bandwidth
// and one latency tool. ib_write_bw and ib_write_lat refuse -e ("Events
// feature not available on WRITE verb"), so the SEND ones.
var preloadEvents = []string{"rc", "send_bw", "send_lat"}

// eventSuffix marks a -preload item as a program of preloadEvents in
// event mode: rc-e, send_bw-e, send_lat-e.
const eventSuffix = "-e"

// interopCase is one ping-pong, or one perftest run, between rxe and
// goroce.
type interopCase struct {
	Transport string // rc, uc, ud or srq: which ibv_*_pingpong (rc for perftest)
	// Preload: goroce's side is the same Debian program as rxe's
	// (rdma-core's example or perftest's tool), run with goroce exec, so
	// with goroce's libibverbs preloaded; else goroce pingpong or perf.
	Preload bool
	// Events: both programs run in event mode (-e); preloaded cases only.
	Events   bool
	Perftest string // "" for a ping-pong; else the test: rxe runs ib_<Perftest>, goroce `perf <Perftest>`
	Rdmacm   string // "" or a librdmacm example (rping): rxe runs it, goroce its own (see rping.go)
	// Own is "" or a program of goroce's own (own.go), run preloaded on
	// goroce and on rxe; OwnBin is its binary, built by the suite.
	Own    string
	OwnBin string
	// UCX is "" or a ucx_perftest UCT test over rc_verbs (ucx.go): am_lat
	// or put_bw; UCXBatch is goroce's side's batch file, written by the
	// suite.
	UCX      string
	UCXBatch string
	RxeRole  role
	Family   family
	MTU      int // path MTU in bytes: 1024 or 4096
	Size     int // message size, -s
	Iters    int // exchanges, -n
	Port     int // TCP side-channel port, -p
}

// Name identifies the case in the guest's serial log (the lab's
// "RXELAB-CASE BEGIN name" markers) and names its files.
func (c interopCase) Name() string {
	prog := c.program()
	if c.Events {
		prog += "-e"
	}
	name := fmt.Sprintf("%s-%s-%s-mtu%d", prog, c.RxeRole, c.Family, c.MTU)
	if c.Preload {
		name = "preload-" + name
	}
	return name
}

// Line is the start of the case's result line.
func (c interopCase) Line() string {
	prog := c.program()
	if c.Events {
		prog += " -e"
	}
	if c.Preload {
		prog += " preloaded"
	}
	return fmt.Sprintf("%s rxe-%s %s mtu=%d", prog, c.RxeRole, c.Family, c.MTU)
}

// program is the rxe side's program: ibv_rc_pingpong's "rc_pingpong" or
// perftest's "ib_write_bw".
func (c interopCase) program() string {
	if c.UCX != "" {
		return "ucx_" + c.UCX + "_rc"
	}
	if c.Own != "" {
		return c.Own
	}
	if c.Rdmacm != "" {
		return c.Rdmacm
	}
	if c.Perftest != "" {
		return "ib_" + c.Perftest
	}
	return c.Transport + "_pingpong"
}

// goroceChecks reports whether goroce pingpong checks every message it
// receives (-c): in both roles. As the client it sends its pattern, which
// rxe's server sends back; as the server it takes rdma-core's client's -c
// fill (0x7b, a zero at each page start) and sends it back.
// A preloaded example prints no such count: the capture is the oracle
// (see fillProblems).
func (c interopCase) goroceChecks() bool {
	return c.Perftest == "" && !c.Preload && c.Rdmacm == "" && c.Own == ""
}

// message sizes per transport and MTU: the lab's own choices at 1024 (one
// packet each), and at 4096 an RC/UC message of two packets (SEND_FIRST +
// SEND_LAST) and ibv_ud_pingpong's default datagram.
func messageSize(transport string, mtu int) int {
	switch {
	case transport == "ud" && mtu >= 4096:
		return 2048
	case transport == "ud":
		return mtu / 2
	case mtu >= 4096:
		return 2 * mtu
	default:
		return mtu
	}
}

// perftestSize is the message size of a perftest case: the lab's 4096
// bytes for bandwidth (at MTU 4096, two packets: 8192), 64 for latency,
// and an atomic's 8.
func perftestSize(test string, mtu int) int {
	switch {
	case test == "atomic_bw":
		return 8
	case strings.HasSuffix(test, "_lat"):
		return 64
	default:
		return max(4096, 2*mtu)
	}
}

// plan is what the suite runs: every combination of its lists.
type plan struct {
	transports []string // ping-pong transports: rc, uc, ud
	perftests  []string // perftest programs (see perftests)
	roles      []role
	families   []family
	mtus       []int
	// preloadPingpongs and preloadPerftests are the programs run
	// preloaded on goroce against the same program on rxe.
	preloadPingpongs []string
	preloadPerftests []string
	preloadEvents    []string // the programs run preloaded in event mode (see preloadEvents)
	rdmacm           []string // librdmacm examples (rping) against goroce's own
	rdmacmPreload    []string // librdmacm examples run preloaded on goroce (see rdmacmPreloaded)
	own              []string // goroce's own programs (see ownPrograms)
	ucx              []string // ucx_perftest tests (see ucxPrograms)
	iters            int      // exchanges per ping-pong case
	perfIters        int      // operations per perftest case (-n)
}

// matrix lists the cases to run, in the order the guest runs them: all
// cases of the smaller MTU first, since the guest can raise its MTU but
// the suite never lowers it again.
func matrix(p plan) []interopCase {
	var cs []interopCase
	for _, mtu := range p.mtus {
		for _, f := range p.families {
			for _, r := range p.roles {
				for _, t := range p.transports {
					cs = append(cs, interopCase{
						Transport: t, RxeRole: r, Family: f, MTU: mtu,
						Size: messageSize(t, mtu), Iters: p.iters,
						Port: firstPort + len(cs),
					})
				}
				for _, t := range p.perftests {
					cs = append(cs, interopCase{
						Transport: "rc", Perftest: t, RxeRole: r, Family: f, MTU: mtu,
						Size: perftestSize(t, mtu), Iters: p.perfIters,
						Port: firstPort + len(cs),
					})
				}
				for _, t := range p.rdmacm {
					cs = append(cs, interopCase{
						Transport: "rc", Rdmacm: t, RxeRole: r, Family: f, MTU: mtu,
						Size: rpingSize, Iters: p.iters, Port: firstPort + len(cs),
					})
				}
				for _, t := range p.preloadPingpongs {
					cs = append(cs, p.preloadCase(t, false, r, f, mtu, firstPort+len(cs)))
				}
				for _, t := range p.preloadPerftests {
					cs = append(cs, p.preloadCase(t, false, r, f, mtu, firstPort+len(cs)))
				}
				for _, t := range p.preloadEvents {
					cs = append(cs, p.preloadCase(t, true, r, f, mtu, firstPort+len(cs)))
				}
				for _, t := range p.rdmacmPreload {
					if mtu == rdmacmPreloadMTU && rdmacmPreloadRuns(t, f) {
						cs = append(cs, p.rdmacmPreloadCase(t, r, f, firstPort+len(cs)))
					}
				}
				for _, t := range p.own {
					if mtu == ownMTU {
						cs = append(cs, p.ownCase(t, r, f, firstPort+len(cs)))
					}
				}
				for _, t := range p.ucx {
					if mtu == ucxMTU {
						cs = append(cs, p.ucxCase(t, r, f, firstPort+len(cs)))
					}
				}
			}
		}
	}
	return cs
}

// preloadCase is the preloaded case of program prog (a ping-pong
// transport or a perftest test), in event mode if events.
func (p plan) preloadCase(prog string, events bool, r role, f family, mtu, port int) interopCase {
	c := interopCase{Transport: prog, Preload: true, Events: events, RxeRole: r, Family: f, MTU: mtu,
		Size: messageSize(prog, mtu), Iters: p.iters, Port: port}
	if !slices.Contains(preloadPingpongs, prog) {
		c.Transport, c.Perftest, c.Size, c.Iters = "rc", prog, perftestSize(prog, mtu), p.perfIters
		if prog == "atomic_bw" {
			c.Iters = max(c.Iters, 2*atomicSlots) // see preloadDataProblems
		}
	}
	return c
}

// timeout is the longest rxe's side of the case may take, base but for a
// UCX case (ucxCaseTimeout).
func (c interopCase) timeout(base time.Duration) time.Duration {
	if c.UCX != "" {
		return max(base, ucxCaseTimeout)
	}
	return base
}

// ackTimeout is the case's QP local ACK timeout, 4.096 us * 2^timeout:
// perftest's -u qpTimeout, and the 14 that ibv_rc_pingpong sets on rxe's
// side (goroce's is qpTimeout, so any repeat of its fails the case).
func (c interopCase) ackTimeout() time.Duration {
	t := 14
	if c.Perftest != "" || c.UCX != "" { // UCX's RC QPs wait 1 s (UCX_RC_TIMEOUT)
		t = qpTimeout
	}
	return 4096 * time.Nanosecond << t
}

// goroceAddr is goroce's device address, its GID.
func (c interopCase) goroceAddr() string {
	if c.Family == ipv6 {
		return goroceIPv6
	}
	return goroceIPv4
}

// goroceArgs is the goroce command line for the case (without the binary).
func (c interopCase) goroceArgs() []string {
	if c.UCX != "" {
		return c.ucxArgs()
	}
	if c.Own != "" {
		return c.ownArgs()
	}
	if c.Rdmacm != "" && c.Preload {
		return c.rdmacmPreloadArgs()
	}
	if c.Rdmacm != "" {
		return c.rpingGoroceArgs()
	}
	if c.Preload {
		return c.preloadArgs()
	}
	if c.Perftest != "" {
		return c.gorocePerfArgs()
	}
	// -u: goroce's RC QP waits 1 s for an ACK, as in the perftest cases
	// (ibv_rc_pingpong's 14 is fixed on rxe's side).
	args := []string{"pingpong", "-t", c.Transport,
		"-m", strconv.Itoa(c.MTU), "-s", strconv.Itoa(c.Size), "-n", strconv.Itoa(c.Iters),
		"-u", strconv.Itoa(qpTimeout), "-p", strconv.Itoa(c.Port), "--addr", c.goroceAddr()}
	if c.goroceChecks() {
		args = append(args, "-c")
	}
	if c.RxeRole == rxeServer {
		args = append(args, guestIPv4) // the side channel is IPv4 only
	}
	return append(args, c.sideChannelArgs()...)
}

// sideChannelArgs is, for a goroce server whose device is IPv6, --sc-addr
// with its IPv4 address: the side channel of rxe's client is IPv4 only,
// and goroce's listens at the device's address unless told otherwise.
func (c interopCase) sideChannelArgs() []string {
	if c.RxeRole == rxeClient && c.Family == ipv6 {
		return []string{"--sc-addr", goroceIPv4}
	}
	return nil
}

// gorocePerfArgs is goroce perf's command line: perftest's flags as the
// lab gives them to rxe's side (-d and -x are accepted and ignored), and
// as the client, perftest's side-channel format.
func (c interopCase) gorocePerfArgs() []string {
	args := []string{"perf", c.Perftest, "-d", "rxe0", "-x", "1", "-F", "-m", strconv.Itoa(c.MTU),
		"-n", strconv.Itoa(c.Iters), "-u", strconv.Itoa(qpTimeout)}
	if c.Perftest != "atomic_bw" {
		args = append(args, "-s", strconv.Itoa(c.Size))
	}
	args = append(args, "-p", strconv.Itoa(c.Port), "--addr", c.goroceAddr(), "--data-report")
	if c.RxeRole == rxeServer {
		args = append(args, "--exchange", "perftest", guestIPv4) // the side channel is IPv4 only
	}
	return append(args, c.sideChannelArgs()...)
}

// preloadArgs is goroce exec running the Debian program of the case on
// goroce0, whose one GID (index 0) is its address, with the path MTU as
// the port's active MTU.
func (c interopCase) preloadArgs() []string {
	server := ""
	if c.RxeRole == rxeServer {
		server = guestIPv4 // the side channel is IPv4 only
	}
	return append(c.execArgs(), c.toolArgs("goroce0", "0", server)...)
}

// execArgs is goroce exec on goroce0 with goroce's address as its one GID
// and the path MTU as the port's active MTU, up to the program.
func (c interopCase) execArgs() []string {
	return []string{"exec", "--addr", c.goroceAddr(), "--mtu", strconv.Itoa(c.MTU), "--"}
}

// rxeGID is the guest script's variable that holds the GID index of
// rxe0's GID of the case's family: $G4 (IPv4-mapped) or $G6.
func (c interopCase) rxeGID() string {
	if c.Family == ipv6 {
		return "$G6"
	}
	return "$G4"
}

// rxeCommand is the guest's command line for the case. $G4 and $G6 are
// the guest script's GID indexes of its IPv4-mapped and IPv6 GIDs.
func (c interopCase) rxeCommand() string {
	if c.UCX != "" {
		return c.ucxRxeCommand()
	}
	if c.Own != "" {
		return c.ownRxeCommand()
	}
	if c.Rdmacm != "" && c.Preload {
		return c.rdmacmPreloadRxeCommand()
	}
	if c.Rdmacm != "" {
		return c.rpingRxeCommand()
	}
	gid := c.rxeGID()
	server := ""
	if c.RxeRole == rxeClient {
		server = goroceIPv4
	}
	return strings.Join(c.toolArgs("rxe0", gid, server), " ")
}

// toolArgs is the case's rdma-core example or perftest tool with its
// arguments, on device dev with GID index gid, as the client of server
// when server is not "". ibv_ud_pingpong has no -m: a datagram's limit is
// the port's active MTU.
func (c interopCase) toolArgs(dev, gid, server string) []string {
	var args []string
	if c.Perftest != "" {
		args = []string{"ib_" + c.Perftest, "-d", dev, "-x", gid, "-n", strconv.Itoa(c.Iters)}
		if c.Perftest != "atomic_bw" {
			args = append(args, "-s", strconv.Itoa(c.Size))
		}
		args = append(args, "-F", "-m", strconv.Itoa(c.MTU), "-u", strconv.Itoa(qpTimeout))
		if c.Events {
			args = append(args, "-e")
		}
		args = append(args, "-p", strconv.Itoa(c.Port))
	} else {
		// -c: the client writes a zero at the start of each page of what
		// it sends; the server checks those bytes of what it received
		// last and prints "invalid data in page N" for each that is not
		// zero.
		args = []string{"ibv_" + c.Transport + "_pingpong", "-d", dev, "-g", gid,
			"-n", strconv.Itoa(c.Iters), "-s", strconv.Itoa(c.Size), "-c"}
		if c.Transport == "srq" {
			args = append(args, "-q", strconv.Itoa(srqQPs))
		}
		if c.Transport != "ud" {
			args = append(args, "-m", strconv.Itoa(c.MTU))
		}
		if c.Events {
			args = append(args, "-e")
		}
		args = append(args, "-p", strconv.Itoa(c.Port))
	}
	if server != "" {
		args = append(args, server)
	}
	return args
}

// ethMTU is the guest eth0 MTU that gives rxe an active MTU of at least
// mtu (rxe: the largest IB MTU that fits the netdev MTU minus headers).
func ethMTU(mtu int) int {
	if mtu > 1024 {
		return 9000
	}
	return 1500
}
