package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime/pprof"
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
// usage to stdout and returns ExitOK; on a bad flag it prints the error and
// the usage to stderr and returns ExitUsage. Otherwise ok is true and the
// command goes on with fs.Args().
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
		stderr.Write(out.Bytes())
		return ExitUsage, false
	}
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
	def := os.Getenv("GOROCE_ADDR")
	if def == "" {
		def = "127.0.0.1"
	}
	return fs.String("addr", def, "the device's IP `address`, its GID (env GOROCE_ADDR)")
}

// ParseDeviceAddr reads the value of --addr.
func ParseDeviceAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("--addr %q is not an IP address", s)
	}
	return a.Unmap(), nil
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
