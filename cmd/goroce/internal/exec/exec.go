package exec

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/goroce/goroce/cmd/goroce-verbs/build"
	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/nccl"
)

const execAbout = `Runs an unmodified libibverbs program (ibv_rc_pingpong, ibv_devinfo,
perftest's ib_write_bw, ...) on a goroce device inside its own process:
it preloads the goroce-verbs library (see cmd/goroce-verbs/doc.go), sets
the GOROCE_* variables from the flags, and replaces itself with PROGRAM,
so signals and the exit status are PROGRAM's own. Flags override the
environment.

The libraries are taken from beside the goroce binary, else from the
build cache, $XDG_CACHE_HOME/goroce/HASH/verbs (~/.cache/goroce/...),
where they are built from the goroce source (go, gcc, libibverbs-dev and
librdmacm-dev) when missing or stale: HASH names the source.

Under a launcher (mpirun's OMPI_COMM_WORLD_RANK, srun's SLURM_PROCID,
torchrun's RANK; run as mpirun ... goroce exec -- PROGRAM), each rank gets
a device of its own: --addr (or GOROCE_ADDR, else 127.0.0.1) is local rank
0's address and local rank r takes the r-th address after it, and the
files of --pcap FILE (or GOROCE_PCAP) and GOROCE_CPUPROFILE get .rankN
(the global rank) before their extension.

For UCX (ucx_perftest, Open MPI's pml ucx) it sets
UCX_UD_VERBS_ETH_DGID_CHECK=n unless the environment sets it: UCX 1.13's
UD transport reads a RoCE receive's IP version from wc.sl as mlx5 encodes
it, and rxe and goroce report sl 0, so with the check on it drops every
datagram over an IPv4 GID (UCX 1.19 reads the GRH area instead).`

func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("goroce exec [flags] -- PROGRAM [ARGS...]", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\n%s\n\nflags:\n", fs.Name(), execAbout)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "", "goroce0's IP address (GOROCE_ADDR; default 127.0.0.1)")
	mtu := fs.Int("mtu", 0, "the port's active MTU: 256, 512, 1024, 2048 or 4096 (GOROCE_MTU; default rxe's on the address's interface: 4096 on lo, 1024 on MTU 1500)")
	trace := fs.Bool("trace", false, "print the packet trace on stderr (GOROCE_TRACE=1)")
	pcap := fs.String("pcap", "", "write every packet to this pcap `file` (GOROCE_PCAP)")
	debugFlag := fs.Bool("debug", false, "say on stderr why a verb failed (GOROCE_DEBUG=1)")
	src := fs.String("src", "", "the goroce source `dir` to build the libraries from (GOROCE_SRC; default: where goroce was built)")
	printEnv := fs.Bool("print-env", false, "print the variables as shell export lines instead of running a program")
	fail := func(err error) int {
		cli.UsageError(fs, stderr, "%v", err)
		return cli.ExitUsage
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return cli.ExitOK
		}
		return fail(err)
	}
	set := map[string]string{}
	if *addr != "" {
		if net.ParseIP(*addr) == nil {
			return fail(fmt.Errorf("--addr %q: not an IP address", *addr))
		}
		set["GOROCE_ADDR"] = *addr
	}
	opts, err := nccl.OptionsFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "goroce exec: %v\n", err)
		return cli.ExitFail
	}
	launch := opts.Launch
	if launch.Launcher != "" {
		a, err := rankAddr(cmp.Or(*addr, os.Getenv("GOROCE_ADDR"), defaultAddr), launch.LocalRank)
		if err != nil {
			fmt.Fprintf(stderr, "goroce exec: %s rank %d (local rank %d): %v\n", launch.Launcher, launch.Rank, launch.LocalRank, err)
			return cli.ExitFail
		}
		set["GOROCE_ADDR"] = a
	}
	if *mtu != 0 {
		if !validMTU(*mtu) {
			return fail(fmt.Errorf("--mtu %d: not an RoCE MTU (256, 512, 1024, 2048 or 4096)", *mtu))
		}
		set["GOROCE_MTU"] = strconv.Itoa(*mtu)
	}
	if *trace {
		set["GOROCE_TRACE"] = "1"
	}
	if *pcap != "" {
		p, err := filepath.Abs(*pcap) // the program may change directory
		if err != nil {
			return fail(err)
		}
		set["GOROCE_PCAP"] = p
	}
	// Under a launcher every rank writes files of its own.
	for _, name := range []string{"GOROCE_PCAP", "GOROCE_CPUPROFILE"} {
		if p := cmp.Or(set[name], os.Getenv(name)); launch.Launcher != "" && p != "" {
			set[name] = rankFile(p, launch.Rank)
		}
	}
	if *debugFlag {
		set["GOROCE_DEBUG"] = "1"
	}
	if fs.NArg() == 0 && !*printEnv {
		return fail(errors.New("no PROGRAM to run"))
	}

	shim, err := verbsLibs(ctx, *src, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce exec: %v\n", err)
		return cli.ExitFail
	}
	set["LD_PRELOAD"] = addPreload(os.Getenv("LD_PRELOAD"), shim)
	if _, ok := os.LookupEnv(ucxDGIDCheck); !ok {
		set[ucxDGIDCheck] = "n"
	}
	if *printEnv {
		for _, name := range []string{"LD_PRELOAD", "GOROCE_ADDR", "GOROCE_MTU", "GOROCE_TRACE", "GOROCE_PCAP", "GOROCE_DEBUG",
			"GOROCE_CPUPROFILE", ucxDGIDCheck} {
			if v, ok := set[name]; ok {
				fmt.Fprintf(stdout, "export %s=%s\n", name, cli.ShellQuote(v))
			}
		}
		return cli.ExitOK
	}
	env := os.Environ()
	for name, v := range set {
		env = setEnv(env, name, v)
	}
	path, err := exec.LookPath(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "goroce exec: %v\n", err)
		return 127 // as a shell says command not found
	}
	err = execProgram(path, fs.Args(), env)
	fmt.Fprintf(stderr, "goroce exec: %s: %v\n", path, err)
	return 126 // as a shell says it could not execute a found command
}

// ucxDGIDCheck turns UCX's RoCE destination-GID filter of UD receives on
// or off. UCX 1.13 (uct_ud_iface_check_grh) takes the packet's IP version
// from wc.sl as mlx5 encodes it (2 for IPv4); rxe and goroce report sl 0, so
// UCX reads an IPv4 packet's GRH area as a 16-byte GID, matches none of the
// port's and drops the datagram: UD never connects. Over IPv6 GIDs it
// works. UCX 1.19 reads the version from the GRH area instead.
const ucxDGIDCheck = "UCX_UD_VERBS_ETH_DGID_CHECK"

// defaultAddr is goroce0's address when neither --addr nor GOROCE_ADDR
// names one (the core's default).
const defaultAddr = "127.0.0.1"

// rankAddr returns the address of local rank r's device: base (an IP
// address, or address:port, as GOROCE_ADDR takes) moved on by r addresses,
// the port kept.
func rankAddr(base string, r int) (string, error) {
	ap, err := netip.ParseAddrPort(base)
	withPort := err == nil
	a := ap.Addr()
	if !withPort {
		if a, err = netip.ParseAddr(base); err != nil {
			return "", fmt.Errorf("GOROCE_ADDR %q: not an IP address, or IP:port", base)
		}
	}
	first := a
	for range r {
		if a = a.Next(); !a.IsValid() || a.Is4() != first.Is4() {
			return "", fmt.Errorf("no address %d after %v", r, first)
		}
	}
	if withPort {
		return netip.AddrPortFrom(a, ap.Port()).String(), nil
	}
	return a.String(), nil
}

// rankFile returns path with ".rankN" before its extension: one file per
// rank of a launcher's job.
func rankFile(path string, rank int) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + ".rank" + strconv.Itoa(rank) + ext
}

// validMTU reports whether mtu is one a RoCE port can have (enum ibv_mtu).
func validMTU(mtu int) bool {
	switch mtu {
	case 256, 512, 1024, 2048, 4096:
		return true
	}
	return false
}

// addPreload returns the LD_PRELOAD value list with lib in front (so that
// its definitions win), keeping the other entries; ld.so separates them
// with colons or spaces.
func addPreload(list, lib string) string {
	keep := []string{lib}
	for _, e := range strings.FieldsFunc(list, func(r rune) bool { return r == ':' || r == ' ' }) {
		if e != lib {
			keep = append(keep, e)
		}
	}
	return strings.Join(keep, ":")
}

// setEnv returns env with name set to v, replacing any earlier value.
func setEnv(env []string, name, v string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return append(out, name+"="+v)
}

// verbsLibs returns the path of the shim to preload: beside the goroce
// binary if both libraries are there, else in the build cache
// (build.Cached), built there from the source if missing or stale.
func verbsLibs(ctx context.Context, src string, stderr io.Writer) (string, error) {
	self, err := os.Executable()
	if err == nil {
		dir := filepath.Dir(self)
		_, e1 := os.Stat(filepath.Join(dir, build.Shim))
		_, e2 := os.Stat(filepath.Join(dir, build.Core))
		if e1 == nil && e2 == nil {
			return filepath.Join(dir, build.Shim), nil
		}
	}
	dir, err := build.Cached(ctx, Source(src), build.Verbs, func(format string, args ...any) {
		fmt.Fprintf(stderr, "goroce exec: "+format+"\n", args...)
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, build.Shim), nil
}

// Source returns the goroce source to build from: flag if set, else
// $GOROCE_SRC, else where this binary was built from (sourceDir).
func Source(flag string) string {
	return cmp.Or(flag, os.Getenv("GOROCE_SRC"), sourceDir())
}

// sourceDir returns where goroce's source was when this binary was built:
// the module root above this file's compile-time path, or, for a binary
// built with -trimpath from a released version, its copy in the module
// cache. It returns "" when neither is known.
func sourceDir() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "..", "..", "..", "..") // .../cmd/goroce/internal/exec/exec.go
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return ""
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	return filepath.Join(strings.TrimSpace(string(out)), build.Module+"@"+bi.Main.Version)
}
