package main

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
)

// This file holds the command-line conventions the RDMA tools share:
// verbs tools' short and long flag names, the device address flag, and
// getopt's freedom to put the HOST argument among the flags.

// intFlag defines an int flag under a short and a long name, as the
// verbs tools' getopt_long tables do (-s and --size).
func intFlag(fs *flag.FlagSet, p *int, short, long string, value int, usage string) {
	fs.IntVar(p, short, value, usage)
	fs.IntVar(p, long, value, "same as -"+short)
}

// addrFlag defines --addr, the device's IP address, which is also its GID.
// Its default is $GOROCE_ADDR, else 127.0.0.1.
func addrFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("GOROCE_ADDR")
	if def == "" {
		def = "127.0.0.1"
	}
	return fs.String("addr", def, "the device's IP `address`, its GID (env GOROCE_ADDR)")
}

// parseDeviceAddr reads the value of --addr.
func parseDeviceAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("--addr %q is not an IP address", s)
	}
	return a.Unmap(), nil
}

// parseWithHosts parses args with fs, allowing flags and positional
// arguments in any order as getopt does, and returns the positional ones.
// code and ok are as parseFlags returns them.
func parseWithHosts(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (hosts []string, code int, ok bool) {
	for rest := args; ; {
		if code, ok := parseFlags(fs, rest, stdout, stderr); !ok {
			return nil, code, false
		}
		rest = fs.Args()
		if len(rest) == 0 {
			return hosts, exitOK, true
		}
		hosts, rest = append(hosts, rest[0]), rest[1:]
	}
}
