package nccl

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/goroce/goroce/mr/gpu"
	"github.com/goroce/goroce/rnic"
)

// OptionsFromEnv reads every variable the nccl and rnic packages take from
// the environment into Options, through getenv (os.Getenv for the
// process's own): goroce's (GOROCE_*), NCCL's (NCCL_*) and the launcher's
// (Options.Launch). Nothing else in those packages reads the environment:
// a program that builds its Options itself gets exactly those. An unset
// or empty variable leaves its field at the zero value, the default. Each
// value that does not parse is reported with its name and what it wants
// (`GOROCE_LINK="bogus": want udp or shm`), in an error that wraps
// ErrInvalidArgument.
//
// Read the environment when the communicator is made, not once at start,
// where a program may set variables in between: the C library calls it in
// each ncclCommInitRank, as NCCL reads its environment then.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	var o Options
	var errs []error
	for _, v := range envSettings {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		if err := v.set(&o, s); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %v", ErrInvalidArgument, v.name, s, err))
		}
	}
	launch, err := readLaunch(getenv)
	if err := errors.Join(append(errs, err)...); err != nil {
		return Options{}, err
	}
	o.Launch = launch
	return o, nil
}

// envSetting is one variable OptionsFromEnv reads: set parses its value,
// never "", into o, or says what it wants instead.
type envSetting struct {
	name string
	set  func(o *Options, s string) error
}

// envSettings are the variables OptionsFromEnv reads besides the
// launcher's (readLaunch), by name.
var envSettings = []envSetting{
	{"GOROCE_ADDR", func(o *Options, s string) error {
		if _, err := parseRNICAddr(s); err != nil {
			return err
		}
		o.Addr = s
		return nil
	}},
	{"GOROCE_BUSY_POLL", func(o *Options, s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return errors.New("want a duration such as 200us, or 0 for off")
		}
		o.BusyPoll = d
		if d == 0 {
			o.BusyPoll = -1 // off, where Options' zero is the default
		}
		return nil
	}},
	{"GOROCE_LINK", func(o *Options, s string) error {
		if s != rnic.WireUDP && s != rnic.WireShm {
			return fmt.Errorf("want %s or %s", rnic.WireUDP, rnic.WireShm)
		}
		o.RNIC.Wire.Kind = s
		return nil
	}},
	{"GOROCE_PCAP", func(o *Options, s string) error { o.Pcap = s; return nil }},
	{"GOROCE_PEER_MEMORY", flagSetting(func(o *Options) *bool { return &o.RNIC.PeerMemory })},
	{"GOROCE_SHM_DIR", func(o *Options, s string) error { o.RNIC.Wire.ShmDir = s; return nil }},
	{"GOROCE_TRACE", func(o *Options, s string) error { o.RNIC.Trace = os.Stderr; return nil }},
	{"GOROCE_VERIFY_ICRC", flagSetting(func(o *Options) *bool { return &o.RNIC.AlwaysVerifyICRC })},
	{"NCCL_ALGO", func(o *Options, s string) (err error) { o.Algo, err = parseAlgo(s); return err }},
	{"NCCL_COMM_ID", func(o *Options, s string) error {
		if _, port, err := net.SplitHostPort(s); err != nil || !isPort(port) {
			return errors.New("want host:port")
		}
		o.CommID = s
		return nil
	}},
	{"NCCL_DEBUG", func(o *Options, s string) error {
		if _, _, err := debugLevel(s); err != nil {
			return err
		}
		o.Debug = s
		return nil
	}},
	{"NCCL_DEBUG_FILE", func(o *Options, s string) error { o.DebugFile = s; return nil }},
	{"NCCL_IB_RETRY_CNT", codeSetting(1, 7, func(o *Options) *uint8 { return &o.IBRetryCnt })},
	{"NCCL_IB_TIMEOUT", codeSetting(1, 31, func(o *Options) *uint8 { return &o.IBTimeout })},
	{"NCCL_NET_GDR_LEVEL", func(o *Options, s string) error {
		if _, err := gpu.ParsePathType(s); err != nil {
			return errors.New("want LOC, PIX, PXB, PHB or SYS")
		}
		o.GDRLevel = s
		return nil
	}},
}

// flagSetting sets the field field points at from "1" (on) or "0" (off).
func flagSetting(field func(*Options) *bool) func(*Options, string) error {
	return func(o *Options, s string) error {
		switch s {
		case "0", "1":
			*field(o) = s == "1"
			return nil
		}
		return errors.New("want 1 (on) or 0 (off)")
	}
}

// codeSetting sets the field field points at from a number min to max.
func codeSetting(min, max uint64, field func(*Options) *uint8) func(*Options, string) error {
	return func(o *Options, s string) error {
		n, err := strconv.ParseUint(s, 10, 8)
		if err != nil || n < min || n > max {
			return fmt.Errorf("want %d to %d", min, max)
		}
		*field(o) = uint8(n)
		return nil
	}
}

// isPort reports whether s is a port number, 1 to 65535.
func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}

// launchers are the launchers whose variables readLaunch knows, in order
// of preference: each names a rank's rank, the job's size and the rank's
// index among the ranks of its host.
var launchers = []struct{ name, rank, size, local string }{
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
	{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
}

// localSizeVars name the number of ranks on this host, as launchers set
// them (torchrun, Open MPI).
var localSizeVars = []string{"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}

// readLaunch reads the launcher's variables into an Env (see Env for
// which); Env.Launcher is "" when no launcher's rank variable is set.
func readLaunch(getenv func(string) string) (Env, error) {
	var e Env
	var errs []error
	// count reads name as a whole number of at least min; false if it is
	// unset, or bad (which it reports).
	count := func(name string, min int) (int, bool) {
		s := getenv(name)
		if s == "" {
			return 0, false
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < min {
			errs = append(errs, fmt.Errorf("%w: %s=%q: want a whole number from %d", ErrInvalidArgument, name, s, min))
			return 0, false
		}
		return n, true
	}
	for _, k := range localSizeVars {
		if n, ok := count(k, 1); ok {
			e.LocalSize = n
			break
		}
	}
	e.Secret = getenv(JobSecretEnv)
	for _, k := range jobIDVars {
		if v := getenv(k); v != "" {
			e.JobIDs = append(e.JobIDs, k+"="+v)
		}
	}
	for _, l := range launchers {
		if getenv(l.rank) == "" {
			continue
		}
		e.Launcher = l.name
		rank, rankOK := count(l.rank, 0)
		size, sizeOK := count(l.size, 1)
		switch {
		case getenv(l.size) == "":
			errs = append(errs, fmt.Errorf("%w: %s=%q without %s", ErrInvalidArgument, l.rank, getenv(l.rank), l.size))
		case rankOK && sizeOK && rank >= size:
			errs = append(errs, fmt.Errorf("%w: %s=%d: want below %s=%d", ErrInvalidArgument, l.rank, rank, l.size, size))
		}
		e.Rank, e.Size, e.LocalRank = rank, size, rank
		for i, k := range []string{l.local, "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"} {
			if i > 0 && k == l.local {
				continue
			}
			if n, ok := count(k, 0); ok {
				e.LocalRank = n
				break
			}
		}
		e.Root = getenv("NCCL_COMM_ID")
		if e.Root == "" {
			host, port := getenv("MASTER_ADDR"), getenv("MASTER_PORT")
			if host == "" {
				host = "127.0.0.1"
			}
			switch {
			case port == "":
				port = "29500"
			case !isPort(port):
				errs = append(errs, fmt.Errorf("%w: MASTER_PORT=%q: want a port number, 1 to 65535", ErrInvalidArgument, port))
			}
			e.Root = net.JoinHostPort(host, port)
		}
		break
	}
	return e, errors.Join(errs...)
}
