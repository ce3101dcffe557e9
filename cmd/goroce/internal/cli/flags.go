package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// This file holds the command-line conventions every command shares: exit
// statuses, flag sets with a usage message, verbs tools' short and long flag
// names, the device address flag, and getopt's freedom to put the HOST
// argument among the flags.

// Exit statuses shared by all commands.
const (
	ExitOK    = 0 // success
	ExitFail  = 1 // the command ran and found a problem (bad packets, failed test)
	ExitUsage = 2 // bad arguments, or an input that could not be read
)

// NewFlagSet returns a flag set for a subcommand whose usage message is
// synopsis (e.g. "goroce pcap [flags] FILE..."), then about, then the flags.
// Flags take one dash or two (-json, --json), as the flag package allows.
func NewFlagSet(synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(synopsis, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n%s\n", synopsis, about)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// ParseFlags parses args with fs. Asked for help (-h, --help) it prints the
// usage to stdout and returns ExitOK. On a bad flag it prints to stderr a
// hint line (the synopsis, and where the flags are listed) and then the
// error, last, and returns ExitUsage. Otherwise ok is true and the command
// goes on with fs.Args().
func ParseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return ExitOK, true
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(out.Bytes())
		return ExitOK, false
	default:
		UsageError(fs, stderr, "%v", err)
		return ExitUsage, false
	}
}

// UsageError prints a command's usage error as every command does: a hint
// line, then the error, last, naming the flag. The flag set's name is its
// synopsis, "goroce CMD [flags] ...".
func UsageError(fs *flag.FlagSet, stderr io.Writer, format string, a ...any) {
	name := commandName(fs)
	fmt.Fprintf(stderr, "usage: %s (\"%s -h\" lists the flags)\n", fs.Name(), name)
	fmt.Fprintf(stderr, "%s: %s\n", name, fmt.Sprintf(format, a...))
}

// commandName is "goroce CMD", the synopsis's first two words.
func commandName(fs *flag.FlagSet) string {
	if f := strings.Fields(fs.Name()); len(f) >= 2 {
		return f[0] + " " + f[1]
	}
	return fs.Name()
}

// IntFlag defines an int flag under a short and a long name, as the
// verbs tools' getopt_long tables do (-s and --size).
func IntFlag(fs *flag.FlagSet, p *int, short, long string, value int, usage string) {
	fs.IntVar(p, short, value, usage)
	fs.IntVar(p, long, value, "same as -"+short)
}

// AddrFlag defines --addr, the device's IP address, which is also its GID.
// Its default is $GOROCE_ADDR, else 127.0.0.1.
func AddrFlag(fs *flag.FlagSet) *string {
	def := os.Getenv(AddrEnv)
	if def == "" {
		def = "127.0.0.1"
	}
	return fs.String("addr", def, "the device's IP `address`, its GID (env "+AddrEnv+")")
}

// AddrEnv is the environment variable that gives --addr its default.
const AddrEnv = "GOROCE_ADDR"

// ParseDeviceAddr reads the value of --addr. Its error names GOROCE_ADDR
// when the value is that variable's, --addr's default.
func ParseDeviceAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		if env := os.Getenv(AddrEnv); env != "" && env == s {
			return netip.Addr{}, fmt.Errorf("%s=%q (the default of --addr) is not an IP address", AddrEnv, s)
		}
		return netip.Addr{}, fmt.Errorf("--addr %q is not an IP address", s)
	}
	return a.Unmap(), nil
}

// ListenAddrFlag defines a flag whose value is a TCP address to listen on,
// HOST:PORT (HOST may be empty, PORT 0 picks a free one), its form checked
// as the flags are parsed.
func ListenAddrFlag(fs *flag.FlagSet, p *string, name, value, usage string) {
	*p = value
	fs.Func(name, usage, func(s string) error {
		if s != "" {
			if err := checkListenAddr(s); err != nil {
				return err
			}
		}
		*p = s
		return nil
	})
}

// checkListenAddr checks the form of HOST:PORT.
func checkListenAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want HOST:PORT (such as 127.0.0.1:9464): %v", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q of host %q: want 0..65535", port, host)
	}
	return nil
}

// ParseSize reads a byte count: a number with an optional K, M or G
// (powers of 1024, as nccl-tests' parsesize and perftest read them), also
// spelled KB, KiB, MB, MiB, GB or GiB, in either case.
func ParseSize(s string) (int, error) {
	num, mult := s, 1
	lower := strings.ToLower(s)
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30},
		{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}} {
		if strings.HasSuffix(lower, u.suffix) {
			num, mult = s[:len(s)-len(u.suffix)], u.mult
			break
		}
	}
	v, err := strconv.Atoi(num)
	if err != nil || v < 0 || v > (1<<40)/mult {
		return 0, fmt.Errorf("%q is not a size (bytes, with an optional K, M or G)", s)
	}
	return v * mult, nil
}

// sizeValue is a flag.Value read by ParseSize.
type sizeValue struct{ p *int }

func (v sizeValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return errors.New("want bytes, with an optional K, M or G (powers of 1024)")
	}
	*v.p = n
	return nil
}

// SizeFlag defines a size flag under a short and a long name (-s and
// --size; no long one if long is ""): bytes, with an optional K, M or G
// suffix (ParseSize).
func SizeFlag(fs *flag.FlagSet, p *int, short, long string, value int, usage string) {
	*p = value
	fs.Var(sizeValue{p}, short, usage)
	if long != "" {
		fs.Var(sizeValue{p}, long, "same as -"+short)
	}
}

// ParseWithHosts parses args with fs, allowing flags and positional
// arguments in any order as getopt does, and returns the positional ones.
// code and ok are as ParseFlags returns them.
func ParseWithHosts(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (hosts []string, code int, ok bool) {
	for rest := args; ; {
		if code, ok := ParseFlags(fs, rest, stdout, stderr); !ok {
			return nil, code, false
		}
		rest = fs.Args()
		if len(rest) == 0 {
			return hosts, ExitOK, true
		}
		hosts, rest = append(hosts, rest[0]), rest[1:]
	}
}

// StartCPUProfile writes a CPU profile of this process to path until the
// returned function is called (--cpuprofile).
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
