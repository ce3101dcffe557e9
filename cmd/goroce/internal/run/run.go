package run

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/nccl"
)

const runAbout = `Starts N copies of CMD on this host, one per rank, the way torchrun or
mpirun would, each with its own goroce RNIC address on loopback:

  RANK, LOCAL_RANK        the rank, 0 … N-1
  WORLD_SIZE, LOCAL_WORLD_SIZE
                          N
  MASTER_ADDR, MASTER_PORT
                          127.0.0.1 and a free TCP port: where rank 0 serves
                          the rendezvous (nccl.OptionsFromEnv reads these)
  GOROCE_ADDR             rank r's RNIC address, --addr-base + r; without
                          --addr-base, 127.A.B.(10+r) for an A.B drawn at
                          random whose RoCEv2 ports are free, so that two
                          jobs at once never share an address
  GOROCE_JOB_SECRET       32 random bytes in hex, new for each job: the
                          ranks prove themselves with it at the rendezvous,
                          so no other process that knows MASTER_ADDR and
                          MASTER_PORT can join or take a rank's place
  GOMAXPROCS              the rank's share of this host's CPUs, at least 1
                          (unless GOMAXPROCS is set already)
  GOROCE_LINK             the RNICs' wire, --link: shm by default, the
                          RoCEv2 frames through shared memory, since every
                          rank is on this host (as NCCL picks its SHM
                          transport within a node); udp if GOROCE_LINK=udp
                          or NCCL_SHM_DISABLE=1 is set

With --bind-to core, each rank is bound to its share of the CPUs goroce
run may use, as mpirun --bind-to core does: a block of CPUs each when the
ranks fit, else one CPU shared by consecutive ranks (ring neighbours).
--bind-to none leaves them to the kernel. The default, auto (or
GOROCE_BIND_TO), binds only when there are more ranks than CPUs.

Every line a rank prints appears on goroce's own stdout or stderr prefixed
with its rank ("[2] ..."); lines of different ranks never interleave.

The first rank that fails (exits non-zero or dies of a signal) stops the
job: goroce run names it and its status on stderr, sends SIGTERM to the
other ranks, SIGKILL to those still running after --grace, and exits with
the failing rank's status (128+N for signal N, as a shell reports it).
An interrupt (Ctrl-C) is passed on to the ranks as SIGINT, with the same
grace period; goroce run then exits 130.

Exit status: 0 when every rank exited 0, the failing rank's status when one
failed, 2 on bad flags, 127 when CMD cannot be started.`

// Run is `goroce run`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("goroce run -n N [flags] [--] CMD [ARG...]", runAbout)
	n := fs.Int("n", 2, "number of ranks (processes) to start")
	base := AddrBaseFlag(fs)
	grace := fs.Duration("grace", 3*time.Second, "after SIGTERM (or a forwarded SIGINT), how long ranks get before SIGKILL")
	linkName := cli.LinkFlag(fs, "")
	bindTo := fs.String("bind-to", "", "`auto` binds ranks to CPUs when they outnumber them, core always, none never (default auto, or $GOROCE_BIND_TO)")
	var obs cli.ObserveFlags
	obs.RegisterTrace(fs) // the ranks' program owns their devices: no servers here
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "goroce run: no command to run")
		fs.Usage()
		return cli.ExitUsage
	}
	if *linkName == "" {
		*linkName = cli.HostLink()
	}
	if err := cli.CheckLink(*linkName); err != nil {
		fmt.Fprintf(stderr, "goroce run: %v\n", err)
		return cli.ExitUsage
	}
	cfg := launchConfig{n: *n, argv: argv, grace: *grace, env: append(obs.Env(), cli.LinkEnv+"="+*linkName), stdout: stdout, stderr: stderr}
	var err error
	if cfg.addrBase, err = parseAddrBase(*base, *n); err != nil {
		fmt.Fprintf(stderr, "goroce run: %v\n", err)
		return cli.ExitUsage
	}
	if *grace < 0 {
		fmt.Fprintln(stderr, "goroce run: --grace must not be negative")
		return cli.ExitUsage
	}
	if cfg.bind, err = parseBind(*bindTo); err != nil {
		fmt.Fprintf(stderr, "goroce run: %v\n", err)
		return cli.ExitUsage
	}
	return launch(ctx, cfg)
}

// AddrBaseFlag defines --addr-base, rank 0's RNIC address; "" (the
// default) picks free ones (FreeAddrBase).
func AddrBaseFlag(fs *flag.FlagSet) *string {
	return fs.String("addr-base", "", "rank 0's RNIC `address`; rank r gets this + r (GOROCE_ADDR) "+
		"(default: 127.A.B.10 with A.B drawn at random, checked free, so that two jobs on one host do not collide)")
}

// parseAddrBase checks that base and the n-1 addresses after it are IPv4
// loopback addresses: goroce run starts every rank on this host. An empty
// base picks a free one.
func parseAddrBase(s string, n int) (netip.Addr, error) {
	if n < 1 {
		return netip.Addr{}, fmt.Errorf("-n %d: need at least one rank", n)
	}
	if s == "" {
		return FreeAddrBase(n)
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Unmap().Is4() {
		return netip.Addr{}, fmt.Errorf("--addr-base %q is not an IPv4 address", s)
	}
	a = a.Unmap()
	last, ok := addrPlus(a, n-1)
	if !a.IsLoopback() || !ok || !last.IsLoopback() {
		return netip.Addr{}, fmt.Errorf("--addr-base %v: the %d ranks' addresses must all lie in 127.0.0.0/8", a, n)
	}
	return a, nil
}

// addrPlus returns the IPv4 address i after a; ok is false if it wraps.
func addrPlus(a netip.Addr, i int) (netip.Addr, bool) {
	b := a.As4()
	v := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	v += uint64(i)
	if v > 0xFFFFFFFF {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// launchConfig describes a job: n ranks of one command on this host.
type launchConfig struct {
	n        int
	addrBase netip.Addr // rank r's RNIC: addrBase + r
	argv     []string   // the command and its arguments
	env      []string   // extra KEY=VALUE for every rank, after the launcher's own
	grace    time.Duration
	secret   string     // GOROCE_JOB_SECRET of every rank; launch draws it
	bind     bindPolicy // bindAuto, bindCore or bindNone; "" is bindNone
	// plainRank0 passes rank 0's standard output through without the
	// "[0] " prefix: the tools that re-execute themselves (nccl-perf -np,
	// demo) have rank 0 print the report.
	plainRank0     bool
	stdout, stderr io.Writer
}

// rankEnv returns the launcher variables of rank r.
func (cfg *launchConfig) rankEnv(r int, masterPort int) []string {
	addr, _ := addrPlus(cfg.addrBase, r)
	size := strconv.Itoa(cfg.n)
	env := []string{
		"RANK=" + strconv.Itoa(r), "LOCAL_RANK=" + strconv.Itoa(r),
		"WORLD_SIZE=" + size, "LOCAL_WORLD_SIZE=" + size,
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(masterPort),
		"GOROCE_ADDR=" + addr.String(),
		nccl.JobSecretEnv + "=" + cfg.secret,
	}
	if os.Getenv("GOMAXPROCS") == "" {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(cli.RanksProcs(cfg.n, runtime.NumCPU())))
	}
	return append(env, cfg.env...)
}

// rankExit is how one rank ended.
type rankExit struct {
	rank  int
	state *os.ProcessState
	err   error // from Wait, when there is no state
}

// launch runs the job and returns goroce run's exit status: it starts the
// ranks, waits for them all, stops the rest when one fails or on ctx's
// end, and says on cfg.stderr who failed and how.
func launch(ctx context.Context, cfg launchConfig) int {
	var secret [32]byte
	rand.Read(secret[:])
	cfg.secret = hex.EncodeToString(secret[:])
	port, err := freePort()
	if err != nil {
		fmt.Fprintf(cfg.stderr, "goroce run: finding a free MASTER_PORT: %v\n", err)
		return cli.ExitFail
	}
	var mu sync.Mutex // one lock for both streams: lines never interleave
	ranks := make([]*exec.Cmd, cfg.n)
	var flush []*rankWriter
	exits := make(chan rankExit, cfg.n)
	cpus := allowedCPUs()
	if !cfg.bind.binds(cfg.n, len(cpus)) {
		cpus = nil
	}
	for r := range cfg.n {
		cmd := exec.Command(cfg.argv[0], cfg.argv[1:]...)
		cmd.Env = append(os.Environ(), cfg.rankEnv(r, port)...)
		prefix := fmt.Sprintf("[%d] ", r)
		out := &rankWriter{mu: &mu, out: cfg.stdout, prefix: prefix}
		if r == 0 && cfg.plainRank0 {
			out.prefix = ""
		}
		errw := &rankWriter{mu: &mu, out: cfg.stderr, prefix: prefix}
		flush = append(flush, out, errw)
		cmd.Stdout, cmd.Stderr = out, errw
		cmd.WaitDelay = cfg.grace + time.Second // a grandchild holding the pipes open
		ownProcessGroup(cmd)
		if err := startBound(cmd, rankCPUs(r, cfg.n, cpus)); err != nil {
			mu.Lock()
			fmt.Fprintf(cfg.stderr, "goroce run: starting rank %d: %v\n", r, err)
			mu.Unlock()
			for _, c := range ranks[:r] {
				signalRank(c, killSignal)
				c.Wait()
			}
			return 127
		}
		ranks[r] = cmd
		go func() {
			err := cmd.Wait()
			exits <- rankExit{rank: r, state: cmd.ProcessState, err: err}
		}()
	}

	code := cli.ExitOK
	stopping := false         // SIGTERM or SIGINT sent; SIGKILL at the deadline
	var kill <-chan time.Time // the grace deadline
	done := ctx.Done()
	running := make([]bool, cfg.n)
	for r := range running {
		running[r] = true
	}
	stop := func(sig os.Signal) {
		for r, c := range ranks {
			if running[r] {
				signalRank(c, sig)
			}
		}
		stopping = true
		kill = time.After(cfg.grace)
	}
	for left := cfg.n; left > 0; {
		select {
		case e := <-exits:
			left--
			running[e.rank] = false
			status, how := exitStatus(e.state, e.err)
			if status == cli.ExitOK || stopping {
				continue
			}
			code = status
			mu.Lock()
			fmt.Fprintf(cfg.stderr, "goroce run: rank %d (pid %d) %s", e.rank, ranks[e.rank].Process.Pid, how)
			if left > 0 {
				fmt.Fprintf(cfg.stderr, "; stopping the other %d rank(s)", left)
			}
			fmt.Fprintln(cfg.stderr)
			mu.Unlock()
			stop(termSignal)
		case <-done:
			done = nil
			if !stopping {
				code = 130
				mu.Lock()
				fmt.Fprintln(cfg.stderr, "goroce run: interrupted; passing SIGINT to the ranks")
				mu.Unlock()
				stop(os.Interrupt)
			}
		case <-kill:
			kill = nil
			var late []string
			for r, c := range ranks {
				if running[r] {
					late = append(late, strconv.Itoa(r))
					signalRank(c, killSignal)
				}
			}
			mu.Lock()
			fmt.Fprintf(cfg.stderr, "goroce run: rank(s) %s still running %v after the signal; sending SIGKILL\n", strings.Join(late, ", "), cfg.grace)
			mu.Unlock()
		}
	}
	for _, w := range flush {
		w.Flush()
	}
	return code
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// for rank 0's rendezvous (torchrun's --master-port=0 does the same).
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// rankWriter prefixes every line one rank writes to one stream and writes
// whole lines to out under a lock shared by all ranks, so that lines never
// interleave. A partial line waits for its end (or Flush).
type rankWriter struct {
	mu      *sync.Mutex
	out     io.Writer
	prefix  string
	pending []byte // the unfinished last line
}

// maxLine bounds the pending partial line: a rank writing megabytes with
// no newline gets them cut into lines of this size.
const maxLine = 64 << 10

// Write takes any bytes; it never fails (a failing out loses lines, as a
// closed terminal would).
func (w *rankWriter) Write(p []byte) (int, error) {
	w.pending = append(w.pending, p...)
	end := bytes.LastIndexByte(w.pending, '\n') + 1
	if end == 0 && len(w.pending) >= maxLine {
		w.pending = append(w.pending, '\n')
		end = len(w.pending)
	}
	if end == 0 {
		return len(p), nil
	}
	var b []byte
	for line := range bytes.Lines(w.pending[:end]) {
		b = append(b, w.prefix...)
		b = append(b, line...)
	}
	w.mu.Lock()
	w.out.Write(b)
	w.mu.Unlock()
	w.pending = slices.Delete(w.pending, 0, end)
	return len(p), nil
}

// Flush writes what is left of an unfinished line, ending it.
func (w *rankWriter) Flush() {
	if len(w.pending) > 0 {
		w.Write([]byte{'\n'})
	}
}

// Relaunch starts n ranks of this very program with cmdArgs followed by
// every flag set on fs except skip (the flag that asked for the launch),
// rank 0's report unprefixed. It is how nccl-perf -np and demo become
// multi-process jobs.
func Relaunch(ctx context.Context, fs *flag.FlagSet, cmdArgs []string, n int, base string, grace time.Duration, stdout, stderr io.Writer, skip string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "goroce: cannot find my own executable to start the ranks: %v\n", err)
		return cli.ExitFail
	}
	addr, err := parseAddrBase(base, n)
	if err != nil {
		fmt.Fprintf(stderr, "goroce: %v\n", err)
		return cli.ExitUsage
	}
	bind, err := parseBind("")
	if err != nil {
		fmt.Fprintf(stderr, "goroce: %v\n", err)
		return cli.ExitUsage
	}
	argv := append([]string{exe}, cmdArgs...)
	fs.Visit(func(f *flag.Flag) {
		if f.Name != skip {
			argv = append(argv, "-"+f.Name+"="+f.Value.String())
		}
	})
	// The ranks' wire is HostLink's choice unless the command's own
	// --link, passed on with the other flags, says otherwise.
	env := []string{cli.LinkEnv + "=" + cli.HostLink()}
	if _, set := os.LookupEnv(cli.ProgressEnv); !set && cli.IsTerminal(stderr) {
		env = append(env, cli.ProgressEnv+"=1") // the ranks' stderr is a pipe to this terminal
	}
	return launch(ctx, launchConfig{n: n, addrBase: addr, argv: argv, grace: grace, bind: bind,
		env: env, plainRank0: true, stdout: stdout, stderr: stderr})
}
