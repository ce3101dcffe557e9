package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file holds the cases of goroce's own C programs (-own): a verbs
// program of cmd/goroce-verbs/testdata, built on the host against Debian's
// libibverbs, run on goroce under `goroce exec` and on rxe in the guest
// (the lab copies it there, RXE_LAB_ADD: the guest has the same
// libibverbs), the two sides meeting on its own TCP side channel:
//
//   - ext_qp (testdata/ext_qp.c): the extended verbs (ibv_wr_* on RC, UC
//     and UD, the ibv_cq_ex poll API), RDMA READ and atomics, and memory
//     windows over an MR with LOCAL_WRITE|MW_BIND only, bound,
//     invalidated and rebound both ways; each side in turn the sender,
//     each checking what it received.
//
// A case passes when both programs exit 0 and say "result: N checks, 0
// failed" with the same N, when their "api:" lines (the extended verbs'
// errno values and answers) are the same on goroce and on rxe, and when
// the capture holds what each program says it sent and asked for (its
// "wire:" line): exactly its request packets, and from the peer exactly
// the READ response packets, atomic ACKs and NAKs (the deliberate
// remote access errors) its requests call for, with no retransmission and
// no duplicate from goroce. They run at MTU 1024 only, in both roles and
// both families.

// ownPrograms are the -own items.
var ownPrograms = []string{"ext_qp"}

// ownMTU is the one path MTU of the own programs' cases.
const ownMTU = 1024

// ownCase is program prog's case.
func (p plan) ownCase(prog string, r role, f family, port int) interopCase {
	return interopCase{Transport: "rc", Own: prog, Preload: true, RxeRole: r, Family: f, MTU: ownMTU, Iters: 1,
		Port: port}
}

// ownSource is program prog's C source, from the module root.
func ownSource(prog string) string {
	return filepath.Join("cmd", "goroce-verbs", "testdata", prog+".c")
}

// buildOwn builds the own programs the cases run into dir and gives each
// case its binary: gcc against Debian's libibverbs, as the goroce-verbs
// tests build them.
func buildOwn(ctx context.Context, dir string, cases []interopCase) ([]string, error) {
	var bins []string
	built := map[string]string{}
	for i, c := range cases {
		if c.Own == "" {
			continue
		}
		bin, ok := built[c.Own]
		if !ok {
			bin = filepath.Join(dir, c.Own)
			out, err := exec.CommandContext(ctx, "gcc", "-O2", "-Wall", "-Werror", "-o", bin, ownSource(c.Own),
				"-libverbs").CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("gcc %s (run from the module root; needs libibverbs-dev): %v\n%s",
					ownSource(c.Own), err, out)
			}
			built[c.Own] = bin
			bins = append(bins, bin)
		}
		cases[i].OwnBin = bin
	}
	return bins, nil
}

// ownArgs is the case's program on goroce0 (GID index 0) under goroce
// exec: as the client of the guest's side channel, or as the server.
func (c interopCase) ownArgs() []string {
	args := append(c.execArgs(), c.OwnBin, "-g", "0", "-p", strconv.Itoa(c.Port))
	if c.RxeRole == rxeServer {
		args = append(args, guestIPv4) // the side channel is IPv4 only
	}
	return args
}

// ownRxeCommand is the guest's side: the same program, copied to /add.
func (c interopCase) ownRxeCommand() string {
	gid := c.rxeGID()
	cmd := fmt.Sprintf("/add/%s -d rxe0 -g %s -p %d", c.Own, gid, c.Port)
	if c.RxeRole == rxeClient {
		cmd += " " + goroceIPv4
	}
	return cmd
}

var (
	reOwnResult = regexp.MustCompile(`^result: (\d+) checks, (\d+) failed$`)
	reOwnWire   = regexp.MustCompile(`^wire: requests=(\d+) read_responses=(\d+) atomic_acks=(\d+) naks=(\d+)$`)
)

// ownReport is what one side of an own program's case printed.
type ownReport struct {
	checks, failed                 int
	result                         bool
	requests, reads, atomics, naks int
	wire                           bool
	api, fails                     []string
}

func parseOwn(lines []string) ownReport {
	var r ownReport
	for _, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "api: "):
			r.api = append(r.api, l)
		case strings.HasPrefix(l, "check ") && strings.Contains(l, ": FAIL"):
			r.fails = append(r.fails, l)
		}
		if m := reOwnResult.FindStringSubmatch(l); m != nil {
			r.checks, _ = strconv.Atoi(m[1])
			r.failed, _ = strconv.Atoi(m[2])
			r.result = true
		}
		if m := reOwnWire.FindStringSubmatch(l); m != nil {
			r.requests, _ = strconv.Atoi(m[1])
			r.reads, _ = strconv.Atoi(m[2])
			r.atomics, _ = strconv.Atoi(m[3])
			r.naks, _ = strconv.Atoi(m[4])
			r.wire = true
		}
	}
	return r
}

// ownProblems checks an own program's case beyond the exit statuses and
// ICRCs that judge checks (see the top of this file), and says what it
// checked.
func ownProblems(c interopCase, o observed) (problems []string, checked string) {
	g := parseOwn(slices.Collect(strings.Lines(lastRun(o.goroceOut))))
	x := parseOwn(o.rxeOut)
	for _, s := range []struct {
		who string
		r   ownReport
	}{{"goroce", g}, {"rxe", x}} {
		switch {
		case !s.r.result:
			problems = append(problems, s.who+" printed no result line")
		case s.r.failed > 0 || len(s.r.fails) > 0:
			problems = append(problems, fmt.Sprintf("%s: %d of %d checks failed: %s", s.who, s.r.failed, s.r.checks,
				strings.Join(s.r.fails, "; ")))
		}
		if !s.r.wire {
			problems = append(problems, s.who+" printed no wire line")
		}
	}
	if g.result && x.result && g.checks != x.checks {
		problems = append(problems, fmt.Sprintf("goroce ran %d checks, rxe %d", g.checks, x.checks))
	}
	if len(g.api) == 0 || !slices.Equal(g.api, x.api) {
		problems = append(problems, fmt.Sprintf("the api lines differ: goroce\n%s\nrxe\n%s",
			strings.Join(g.api, "\n"), strings.Join(x.api, "\n")))
	}
	if !g.wire || !x.wire {
		return problems, ""
	}
	w := o.wire
	for _, s := range []struct {
		who         string
		sent, other flow
		said, peer  ownReport
		dups        int
	}{{"goroce", w.goroce, w.rxe, g, x, 0}, {"rxe", w.rxe, w.goroce, x, g, maxRxeDuplicates}} {
		if s.sent.Requests-s.sent.Duplicates != s.said.requests || s.sent.Duplicates > s.dups {
			problems = append(problems, fmt.Sprintf("%s sent %d requests (%d duplicates), its program %d",
				s.who, s.sent.Requests, s.sent.Duplicates, s.said.requests))
		}
		if s.sent.Retransmits > 0 {
			problems = append(problems, fmt.Sprintf("%s retransmitted %d packets", s.who, s.sent.Retransmits))
		}
		// What s's requests ask of the other side.
		if s.other.ReadResponses-s.other.ReadRepeats != s.said.reads || s.other.AtomicACKs != s.said.atomics ||
			s.other.NAKs != s.said.naks {
			problems = append(problems, fmt.Sprintf("for %s's requests the peer sent %d read responses, %d atomic ACKs, "+
				"%d NAKs; want %d, %d, %d", s.who, s.other.ReadResponses, s.other.AtomicACKs, s.other.NAKs, s.said.reads,
				s.said.atomics, s.said.naks))
		}
	}
	return problems, fmt.Sprintf(", checked: %d checks each side, %d api lines alike, requests goroce %d rxe %d as "+
		"the programs say", g.checks, len(g.api), g.requests, x.requests)
}

// lastRun is the output of the last run in a case's goroce log, which
// holds every run of a client that was run again (its "$ command" line
// starts each).
func lastRun(log string) string {
	if i := strings.LastIndex(log, "\n$ "); i >= 0 {
		return log[i+1:]
	}
	return log
}

// ownLabAdd is the lab's RXE_LAB_ADD for the own programs' binaries.
func ownLabAdd(bins []string) string { return "RXE_LAB_ADD=" + strings.Join(bins, " ") }
