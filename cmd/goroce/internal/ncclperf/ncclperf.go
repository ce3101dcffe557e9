package ncclperf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	runcmd "github.com/goroce/goroce/cmd/goroce/internal/run"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/mr/sysmem"
	"github.com/goroce/goroce/nccl"
)

const ncclPerfAbout = `nccl-tests (all_reduce_perf, all_gather_perf, ...) over goroce: every rank
runs the collective on its own RNIC, RoCEv2 over UDP on loopback, and rank
0 prints nccl-tests' table: for each size, the time of one call averaged
over the ranks, algbw (bytes/time) and busbw (algbw times the collective's
bus factor, nccl-tests' doc/PERFORMANCE.md), out of place, then in place,
and the number of wrong elements (-c 1: every rank checks its result
against a reference it computes from every rank's input).

COLLECTIVE is one of all_reduce, all_gather, reduce_scatter, alltoall,
broadcast, reduce, gather, scatter, sendrecv. busbw factors, for n ranks:
all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall, gather and
scatter (n-1)/n; broadcast, reduce and sendrecv 1. The size of a row is
the larger of a rank's send and recv buffers; its count is the count
argument of the call (for all_gather, reduce_scatter, alltoall, gather and
scatter: size / type size / n). sendrecv sends to rank+1 and receives from
rank-1; its in-place result is not checked (N/A), as in nccl-tests.

Where the ranks come from:
  -np N      start N ranks on this host (re-executing goroce under the same
             launcher as goroce run, RNICs at --addr-base + rank)
  otherwise  this process is one rank of a job started by goroce run,
             torchrun, mpirun or srun (nccl.OptionsFromEnv reads RANK,
             WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GOROCE_ADDR, ...); with
             none of those set, a single rank at --addr-base.

The RNICs' wire is --link, else GOROCE_LINK: with -np, as under goroce
run, shm (the RoCEv2 frames through shared memory) unless GOROCE_LINK=udp
or NCCL_SHM_DISABLE=1; a single rank on its own uses udp.

Sizes take K, M and G suffixes (powers of 1024): -b 8 -e 64M -f 4. -g
(GPUs per process) and -t (threads) must be 1: a goroce process is one rank.

The other nccl-tests flags mean what they mean there:
  -a 0|1|2|3  the time a row reports: rank 0's, the ranks' average (the
              default), the fastest rank's, the slowest rank's
  -z 1        blocking: every call (with -m, every group) completes, then a
              barrier, before the next is issued (the time includes them)
  -m N        agg iterations: each timed iteration issues N calls in one
              group (GroupStart/GroupEnd); the time is per call
  -G N        CUDA graph launches: goroce has no CUDA graphs (a rank's calls
              are issued by the CPU to its RNIC), so -G N issues a timed
              iteration's calls N times over, as N launches of the captured
              graph would replay them, and divides the time by N
  -p 0|1      parallel init: accepted; each rank is its own process and
              joins the job concurrently with the others whatever its value

Sizes the host cannot hold are refused before any rank starts: each rank
needs its send and recv buffers at -e, the library's copy of the send
buffer and, with -c 1, the reference it computes from every rank's input,
against MemAvailable (or what is left under the cgroup's limit).

Exit status: 0 when every result was right, 1 when a collective failed or
returned wrong elements, 2 on bad flags or sizes too big for the host.`

// ncclPerfConfig is what the flags ask for.
type ncclPerfConfig struct {
	coll               *perfColl
	minBytes, maxBytes int
	stepBytes, factor  int // factor > 1 multiplies, otherwise stepBytes adds
	iters, warmup      int
	check              bool
	dt                 nccl.DataType
	op                 nccl.Op
	root               int
	timeout            time.Duration
	device             *deviceConfig // --device; nil for host buffers
	// average is -a: which rank's time a row reports (averageRank0, ...).
	average int
	// blocking is -z 1: each timed call completes, then a barrier.
	blocking bool
	// aggIters is -m: calls per timed iteration, in one group.
	aggIters int
	// graphLaunches is -G: how many times the timed calls are issued
	// over (0 and 1: once).
	graphLaunches int
	// parallelInit is -p, printed in the header.
	parallelInit int
	// now is the clock the timed calls are measured on (time.Now unless a
	// test gives each rank its own).
	now func() time.Time
	// progressEvery is how often rank 0 says on stderr which size it is
	// at (cli.ProgressEvery unless a test sets it).
	progressEvery time.Duration
}

// The values of -a, as nccl-tests' Allreduce(..., average) takes them.
const (
	averageRank0 = iota // rank 0's time
	averageMean         // the mean over the ranks (nccl-tests' default)
	averageMin          // the fastest rank's
	averageMax          // the slowest rank's
)

// Run is `goroce nccl-perf`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("goroce nccl-perf COLLECTIVE [flags]", ncclPerfAbout+"\n"+ncclPerfDeviceAbout)
	var dtName, opName string
	var cfg ncclPerfConfig
	var factor, iters, warmup, check, root, ngpus, nthreads int
	var average, blocking, aggIters, graphs, parInit int
	cli.SizeFlag(fs, &cfg.minBytes, "b", "minbytes", 32<<20, "smallest size in `bytes`")
	cli.SizeFlag(fs, &cfg.maxBytes, "e", "maxbytes", 32<<20, "largest size in `bytes`")
	cli.SizeFlag(fs, &cfg.stepBytes, "i", "stepbytes", 1<<20, "step between sizes in `bytes`, when -f is 1")
	cli.IntFlag(fs, &factor, "f", "stepfactor", 1, "multiply the size by this `factor` from one row to the next")
	cli.IntFlag(fs, &iters, "n", "iters", 20, "timed `iterations` per size")
	cli.IntFlag(fs, &warmup, "w", "warmup_iters", 5, "untimed `iterations` at the largest and smallest size first")
	cli.IntFlag(fs, &check, "c", "check", 1, "1: check every result (one more, untimed call per row); 0: do not")
	strFlag(fs, &dtName, "d", "datatype", "float", "element `type`: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16")
	strFlag(fs, &opName, "o", "op", "sum", "reduction `op`: sum, prod, max, min, avg")
	cli.IntFlag(fs, &root, "r", "root", 0, "root `rank` of broadcast, reduce, gather and scatter")
	cli.IntFlag(fs, &ngpus, "g", "ngpus", 1, "GPUs per process (nccl-tests' flag; must be 1)")
	cli.IntFlag(fs, &nthreads, "t", "nthreads", 1, "threads per process (nccl-tests' flag; must be 1)")
	cli.IntFlag(fs, &average, "a", "average", averageMean, "the time reported: 0 rank 0's, 1 the ranks' mean, 2 the fastest rank's, 3 the slowest rank's")
	cli.IntFlag(fs, &blocking, "z", "blocking", 0, "1: each call completes, then a barrier, before the next (blocking collectives)")
	cli.IntFlag(fs, &aggIters, "m", "agg_iters", 1, "calls per timed iteration, issued in one group")
	cli.IntFlag(fs, &graphs, "G", "cudagraph", 0, "CUDA graph launches: goroce has none; N issues each timed iteration's calls N times over (see above)")
	cli.IntFlag(fs, &parInit, "p", "parallel_init", 0, "parallel init (accepted: goroce's ranks are processes that always join concurrently)")
	np := fs.Int("np", 0, "start this many ranks on this host (0: this process is a rank)")
	var dev deviceFlags
	dev.register(fs)
	var obs cli.ObserveFlags
	obs.Register(fs)
	linkName := cli.LinkFlag(fs, "")
	base := runcmd.AddrBaseFlag(fs)
	grace := fs.Duration("grace", 3*time.Second, "with -np: how long ranks get to stop after one fails")
	timeout := fs.Duration("timeout", nccl.DefaultTimeout, "a collective fails when none of its transfers completes for this long")
	cpuprof := fs.String("cpuprofile", "", "write a CPU profile (runtime/pprof) of each rank to `file`.rankN")
	pos, code, ok := cli.ParseWithHosts(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "goroce nccl-perf: "+format+"\n", a...)
		return cli.ExitUsage
	}
	if len(pos) != 1 {
		return usageErr("want one COLLECTIVE (all_reduce, all_gather, ...), got %q", pos)
	}
	cfg.factor, cfg.iters, cfg.warmup, cfg.check, cfg.root, cfg.timeout = factor, iters, warmup, check != 0, root, *timeout
	cfg.average, cfg.blocking, cfg.aggIters, cfg.graphLaunches, cfg.parallelInit = average, blocking != 0, aggIters, graphs, parInit
	cfg.now = time.Now
	if cfg.coll, ok = findPerfColl(strings.TrimSuffix(pos[0], "_perf")); !ok {
		return usageErr("unknown collective %q", pos[0])
	}
	var err error
	switch {
	case cfg.maxBytes < cfg.minBytes:
		return usageErr("-e %d is smaller than -b %d", cfg.maxBytes, cfg.minBytes)
	case factor < 1:
		return usageErr("-f %d: the factor must be at least 1", factor)
	case factor == 1 && cfg.stepBytes < 1:
		return usageErr("-i %d: the step must be at least 1 byte", cfg.stepBytes)
	case factor > 1 && cfg.minBytes == 0:
		return usageErr("-b 0 with -f %d would never grow", factor)
	case iters < 1 || warmup < 0:
		return usageErr("-n %d -w %d: want at least one iteration and no negative warmup", iters, warmup)
	case average < averageRank0 || average > averageMax:
		return usageErr("-a %d: want 0 (rank 0), 1 (mean), 2 (min) or 3 (max)", average)
	case aggIters < 1:
		return usageErr("-m %d: want at least one call per iteration", aggIters)
	case graphs < 0 || blocking < 0 || parInit < 0:
		return usageErr("-G %d -z %d -p %d: want no negative value", graphs, blocking, parInit)
	case ngpus != 1 || nthreads != 1:
		return usageErr("-g %d -t %d: a goroce process drives one RNIC with one thread (-g 1 -t 1)", ngpus, nthreads)
	case *np < 0:
		return usageErr("-np %d: want the number of ranks to start on this host (1 to 245), or 0 for this process to be one rank of a launched job", *np)
	}
	if *linkName != "" {
		if err := cli.CheckLink(*linkName); err != nil {
			return usageErr("%v", err)
		}
	}
	if cfg.dt, ok = parseNcclType(dtName); !ok {
		return usageErr("-d %q: unknown type", dtName)
	}
	if cfg.op, ok = parseNcclOp(opName); !ok {
		return usageErr("-o %q: unknown op", opName)
	}
	if cfg.device, err = dev.config(fs, cfg.coll); err != nil {
		return usageErr("%v", err)
	}

	// Refuse sizes the host cannot hold before any rank allocates: Go's
	// out of memory is a fatal stack dump, or the OOM killer.
	ranks, local := *np, *np
	if ranks == 0 {
		ranks, local = envCount("WORLD_SIZE"), envCount("LOCAL_WORLD_SIZE")
	}
	if err := sysmem.Check(sysmem.Mul(uint64(local), cfg.rankMemory(ranks)),
		fmt.Sprintf("%d rank(s) on this host at -e %d bytes", local, cfg.maxBytes)); err != nil {
		return usageErr("%v: lower -e (or -np)", err)
	}
	if *np > 0 {
		return runcmd.Relaunch(ctx, fs, []string{"nccl-perf", cfg.coll.name}, *np, *base, *grace, stdout, stderr, "np")
	}
	opts, err := rankOptions(&obs, *linkName, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce nccl-perf: %v\n", err)
		return cli.ExitFail
	}
	opts.Timeout = cfg.timeout
	if cfg.device != nil {
		// The GPU is chosen before the communicator, as cudaSetDevice
		// comes before ncclCommInitRank: with GPUDirect RDMA the
		// connections' FIFOs are then allocated in its memory.
		if opts.GPU, err = cfg.device.setup(cfg.maxBytes); err != nil {
			fmt.Fprintf(stderr, "goroce nccl-perf: --device: %v\n", err)
			return cli.ExitFail
		}
	}
	c, err := commFromEnv(ctx, *base, opts)
	if err != nil {
		fmt.Fprintf(stderr, "goroce nccl-perf: %v\n", err)
		return cli.ExitFail
	}
	if cfg.root < 0 || cfg.root >= c.Size() {
		c.Abort()
		return usageErr("-r %d: there are %d ranks", cfg.root, c.Size())
	}
	stopObs, err := obs.AttachRank(c.Device(), c.Rank(), stderr)
	if err != nil {
		c.Abort()
		fmt.Fprintf(stderr, "goroce nccl-perf: rank %d: %v\n", c.Rank(), err)
		return cli.ExitFail
	}
	defer stopObs()
	if *cpuprof != "" {
		stop, err := cli.StartCPUProfile(fmt.Sprintf("%s.rank%d", *cpuprof, c.Rank()))
		if err != nil {
			c.Abort()
			fmt.Fprintf(stderr, "goroce nccl-perf: rank %d: --cpuprofile: %v\n", c.Rank(), err)
			return cli.ExitFail
		}
		defer stop()
	}
	code, err = ncclPerf(ctx, c, &cfg, stdout, cli.ProgressWriter(stderr))
	if err != nil {
		c.Abort()
		fmt.Fprintf(stderr, "goroce nccl-perf: rank %d: %v\n", c.Rank(), err)
		return cli.ExitFail
	}
	if err := c.Destroy(); err != nil {
		fmt.Fprintf(stderr, "goroce nccl-perf: rank %d: destroy: %v\n", c.Rank(), err)
		return cli.ExitFail
	}
	return code
}

// rankMemory is, roughly from above, what one of n ranks allocates at
// the largest size: its send and recv buffers, with -c the reference
// result and every rank's input it is computed from, and the library's
// staging, up to a private copy of the send buffer.
func (cfg *ncclPerfConfig) rankMemory(n int) uint64 {
	pc := perfCaseSizes(cfg.coll, n, cfg.maxBytes, cfg.dt)
	send, recv := uint64(pc.sendN*cfg.dt.Size()), uint64(pc.bytes)
	need := sysmem.Add(send, recv, send)
	if cfg.check {
		need = sysmem.Add(need, sysmem.Mul(uint64(n)+2, recv))
	}
	return need
}

// envCount reads a rank count from the launcher's environment; 1 if it
// is not set.
func envCount(name string) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return 1
}

// strFlag defines a string flag under a short and a long name.
func strFlag(fs *flag.FlagSet, p *string, short, long, value, usage string) {
	fs.StringVar(p, short, value, usage)
	fs.StringVar(p, long, value, "same as -"+short)
}

// ncclTypeNames are nccl-tests' spellings of the element types (the
// first one of each is what the table prints), with NCCL's as aliases.
var ncclTypeNames = []struct {
	dt    nccl.DataType
	names []string
}{
	{nccl.Int8, []string{"int8", "char"}}, {nccl.Uint8, []string{"uint8"}},
	{nccl.Int32, []string{"int32", "int"}}, {nccl.Uint32, []string{"uint32"}},
	{nccl.Int64, []string{"int64"}}, {nccl.Uint64, []string{"uint64"}},
	{nccl.Float16, []string{"half", "float16"}}, {nccl.Float32, []string{"float", "float32"}},
	{nccl.Float64, []string{"double", "float64"}}, {nccl.BFloat16, []string{"bfloat16"}},
}

func parseNcclType(s string) (nccl.DataType, bool) {
	for _, t := range ncclTypeNames {
		for _, n := range t.names {
			if strings.EqualFold(s, n) {
				return t.dt, true
			}
		}
	}
	return 0, false
}

// ncclTypeName is the type's name in nccl-tests' table.
func ncclTypeName(dt nccl.DataType) string {
	for _, t := range ncclTypeNames {
		if t.dt == dt {
			return t.names[0]
		}
	}
	return dt.String()
}

func parseNcclOp(s string) (nccl.Op, bool) {
	for _, op := range []nccl.Op{nccl.Sum, nccl.Prod, nccl.Max, nccl.Min, nccl.Avg} {
		if strings.EqualFold(s, op.String()) {
			return op, true
		}
	}
	return 0, false
}

// commFromEnv joins the job the launcher's environment describes
// (opts.Launch), or, with no launcher, makes a communicator of one rank
// whose RNIC is at base.
func commFromEnv(ctx context.Context, base string, opts nccl.Options) (*nccl.Comm, error) {
	c, err := nccl.CommInitFromEnv(ctx, opts)
	if !errors.Is(err, nccl.ErrNoEnv) {
		return c, err
	}
	id, err := nccl.GetUniqueID(opts)
	if err != nil {
		return nil, err
	}
	if base == "" {
		a, err := runcmd.FreeAddrBase(1)
		if err != nil {
			return nil, err
		}
		base = a.String()
	}
	opts.Addr = base
	return nccl.CommInitRank(ctx, 1, id, 0, opts)
}

// rankOptions are the options of this process's rank: the environment's
// (nccl.OptionsFromEnv), with the command's flags over them: --link when
// given, --trace and --pcap.
func rankOptions(obs *cli.ObserveFlags, link string, stderr io.Writer) (nccl.Options, error) {
	opts, err := nccl.OptionsFromEnv(os.Getenv)
	if err != nil {
		return opts, err
	}
	if link != "" {
		opts.RNIC.Wire.Kind = link
	}
	obs.ApplyRanks(&opts.RNIC, &opts.Pcap, stderr)
	return opts, nil
}
