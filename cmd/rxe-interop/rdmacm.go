package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file holds the preloaded rdma_cm cases: Debian's librdmacm
// examples run unmodified on goroce with `goroce exec` (goroce's
// libibverbs and librdmacm preloaded) against the same program on rxe.
// They connect with CM MADs on QP1 (udaddy with SIDR REQ/REP, for UD):
//
//   - rping -V -v: checked as the rping cases are (rping.go): each side's
//     -v data lines, and on the wire the CM exchange and every READ
//     response and WRITE against rping's data;
//   - ucmatose and udaddy: each side must print "test complete" and
//     "return status 0" (each checks that its -C SENDs and receives
//     completed successfully);
//   - rdma_server and rdma_client: "rdma_server: end 0" and
//     "rdma_client: end 0" (the 16-byte SEND and its answer completed);
//   - fi_pingpong (libfabric's verbs provider, MSG endpoints: RC QPs
//     connected with rdma_cm): -c makes each side check every message it
//     receives, and each must print the row of its table with -I messages
//     sent and as many acknowledged.
//
// Their messages fit in one packet of 1024 bytes (rping -S 64, ucmatose
// and udaddy 100 bytes, rdma_client 16) but fi_pingpong's, 4096 bytes
// in four, so MTU 4096 would run the same packets: they run at MTU 1024
// only. fi_pingpong runs over IPv4 only: its server's address is the
// first libfabric finds for the device, and the guest's rxe0 has its
// IPv4 address first.

// rdmacmPreloaded are the -rdmacm items run preloaded on goroce against
// the same Debian program on rxe: "rping-preload", ucmatose, udaddy,
// rdma_server (with rdma_client as the client) and fi_pingpong.
var rdmacmPreloaded = []string{"rping" + preloadSuffix, "ucmatose", "udaddy", "rdma_server", "fi_pingpong"}

// fiPingpongSize is the one message size of the fi_pingpong cases (-S), a
// message of four packets at MTU 1024, and fiPingpongRow its row's first
// column in fi_pingpong's table.
const (
	fiPingpongSize = 4096
	fiPingpongRow  = "4k"
)

// rdmacmPreloadRuns reports whether -rdmacm item prog has a case in
// family f: fi_pingpong's in IPv4 only.
func rdmacmPreloadRuns(prog string, f family) bool { return prog != "fi_pingpong" || f == ipv4 }

// preloadSuffix marks -rdmacm's preloaded rping apart from goroce's own.
const preloadSuffix = "-preload"

// rdmacmPreloadMTU is the one path MTU of the preloaded rdma_cm cases.
const rdmacmPreloadMTU = 1024

// rdmacmPreloadCase is the preloaded case of -rdmacm item prog. Its size
// is the program's message size (rping's -S; the others' defaults:
// cmatose.c's and udaddy.c's message_size, rdma_client.c's send_msg).
func (p plan) rdmacmPreloadCase(prog string, r role, f family, port int) interopCase {
	c := interopCase{Transport: "rc", Rdmacm: strings.TrimSuffix(prog, preloadSuffix), Preload: true,
		RxeRole: r, Family: f, MTU: rdmacmPreloadMTU, Size: 100, Iters: p.iters, Port: port}
	switch c.Rdmacm {
	case "rping":
		c.Size = rpingSize
	case "rdma_server":
		c.Size = 16
	case "fi_pingpong":
		c.Size = fiPingpongSize
	}
	return c
}

// cmToolArgs is the case's librdmacm example with its arguments: as the
// server bound to addr, as the client connecting to addr from src ("":
// the route's source). udaddy has no port option (it uses 7174).
func (c interopCase) cmToolArgs(server bool, addr, src string) []string {
	iters, port := strconv.Itoa(c.Iters), strconv.Itoa(c.Port)
	var args []string
	switch c.Rdmacm {
	case "rping":
		args = c.rpingArgs(server, addr)
		if !server && src != "" {
			args = append(args, "-I", src)
		}
		return args
	case "ucmatose":
		args = []string{"ucmatose", "-C", iters, "-p", port}
	case "udaddy":
		args = []string{"udaddy", "-C", iters}
	case "rdma_server":
		if server {
			return []string{"rdma_server", "-s", addr, "-p", port}
		}
		return []string{"rdma_client", "-s", addr, "-p", port}
	case "fi_pingpong":
		// The server's addresses are the device's (libfabric finds
		// them); -B and -P are its TCP control channel's port.
		args = []string{"fi_pingpong", "-p", "verbs", "-e", "msg", "-c", "-I", iters, "-S", strconv.Itoa(c.Size)}
		if server {
			return append(args, "-B", port)
		}
		return append(args, "-P", port, addr)
	}
	if server {
		return append(args, "-b", addr)
	}
	args = append(args, "-s", addr)
	if src != "" {
		args = append(args, "-b", src)
	}
	return args
}

// rdmacmPreloadArgs is goroce exec running the case's program on goroce0:
// as the server bound to goroce's address, as the client connecting to
// the guest's from it.
func (c interopCase) rdmacmPreloadArgs() []string {
	if c.RxeRole == rxeClient {
		return slices.Concat(c.execArgs(), c.cmToolArgs(true, c.goroceAddr(), ""))
	}
	return slices.Concat(c.execArgs(), c.cmToolArgs(false, c.guestAddr(), c.goroceAddr()))
}

// rdmacmPreloadRxeCommand is the guest's side: the server bound to the
// guest's address of the case's family, the client connecting to
// goroce's.
func (c interopCase) rdmacmPreloadRxeCommand() string {
	if c.RxeRole == rxeServer {
		return strings.Join(c.cmToolArgs(true, c.guestAddr(), ""), " ")
	}
	return strings.Join(c.cmToolArgs(false, c.goroceAddr(), ""), " ")
}

// cmDoneLines are the lines each side of a preloaded rdma_cm case must
// print, but rping's (see rpingProblems): server's, then client's.
func (c interopCase) cmDoneLines() (server, client []string) {
	if c.Rdmacm == "rdma_server" {
		return []string{"rdma_server: end 0"}, []string{"rdma_client: end 0"}
	}
	done := []string{"test complete", "return status 0"}
	return done, done
}

// rdmacmPreloadProblems checks a preloaded rdma_cm case beyond the exit
// statuses and ICRCs that judge checks, and says what it checked.
func rdmacmPreloadProblems(c interopCase, o observed) (problems []string, checked string) {
	if c.Rdmacm == "rping" {
		return rpingProblems(c, o)
	}
	if c.Rdmacm == "fi_pingpong" {
		return fiPingpongProblems(c, o)
	}
	server, client := c.cmDoneLines()
	goroceWant, rxeWant := client, server
	if c.RxeRole == rxeClient {
		goroceWant, rxeWant = server, client
	}
	has := func(lines []string, want string) bool {
		return slices.ContainsFunc(lines, func(l string) bool { return strings.TrimSpace(l) == want })
	}
	goroceLines := slices.Collect(strings.Lines(o.goroceOut))
	for _, w := range goroceWant {
		if !has(goroceLines, w) {
			problems = append(problems, fmt.Sprintf("goroce did not print %q", w))
		}
	}
	for _, w := range rxeWant {
		if !has(o.rxeOut, w) {
			problems = append(problems, fmt.Sprintf("rxe did not print %q", w))
		}
	}
	return problems, fmt.Sprintf(", checked: goroce printed %q, rxe %q", goroceWant, rxeWant)
}

// fiPingpongProblems checks a fi_pingpong case: each side (whose -c
// checked every message it received, and which exits non-zero when one
// is wrong) must print its table's row for the case's size with -I
// messages sent and as many acknowledged: "4k  5  =5  40k  0.01s ...".
func fiPingpongProblems(c interopCase, o observed) (problems []string, checked string) {
	row := regexp.MustCompile(`^` + fiPingpongRow + `\s+` + strconv.Itoa(c.Iters) + `\s+=` + strconv.Itoa(c.Iters) + `\s`)
	if !slices.ContainsFunc(slices.Collect(strings.Lines(o.goroceOut)), func(l string) bool { return row.MatchString(l) }) {
		problems = append(problems, fmt.Sprintf("goroce's fi_pingpong printed no row of %d x %s sent and acknowledged", c.Iters, fiPingpongRow))
	}
	if !slices.ContainsFunc(o.rxeOut, func(l string) bool { return row.MatchString(strings.TrimSpace(l)) }) {
		problems = append(problems, fmt.Sprintf("rxe's fi_pingpong printed no row of %d x %s sent and acknowledged", c.Iters, fiPingpongRow))
	}
	return problems, fmt.Sprintf(", data checked by both (fi_pingpong -c), each printed %d x %s sent and acknowledged", c.Iters, fiPingpongRow)
}
