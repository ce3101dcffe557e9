package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// verdict is a case's outcome.
type verdict string

const (
	pass verdict = "PASS"
	fail verdict = "FAIL"
	skip verdict = "SKIP"
)

// result is one case's outcome, its detail (the parenthesis of the
// result line) and, for a failure, the evidence printed under it.
type result struct {
	c        interopCase
	verdict  verdict
	detail   string
	evidence []string
}

// String is the case's result line.
func (r result) String() string {
	return fmt.Sprintf("interop: %s %s (%s)", r.c.Line(), r.verdict, r.detail)
}

// observed is everything the suite saw of one case.
type observed struct {
	peer      peerRun
	rxeEnded  bool
	rxeRC     int
	rxeTail   []string // rxe's last lines
	pcap      pcapReport
	pcapErr   error // no capture or no decode
	activeMTU int   // rxe's active_mtu after the guest set its eth0 MTU; 0 if not reported
	files     string
	rxeOut    []string  // everything rxe's side printed for the case
	goroceOut string    // goroce's output for the case (its log)
	wire      wireCount // the capture, parsed packet by packet
	pcapPath  string    // the capture's file
	wireErr   error
}

// reChecked finds goroce pingpong's report of its -c check.
var reChecked = regexp.MustCompile(`(\d+) received messages checked: (.*)`)

// maxEvidencePackets bounds the decoded packets shown under a failure:
// enough to see the first exchange go wrong.
const maxEvidencePackets = 10

// judge decides a case from what was observed. A case passes only if
// both programs succeeded and the wire shows RoCEv2 packets from both
// sides, each with an ICRC that verifies.
func judge(c interopCase, o observed) result {
	var problems []string
	if o.peer.err != nil {
		msg := o.peer.lastLine
		if msg == "" {
			msg = o.peer.err.Error()
		}
		problems = append(problems, "goroce: "+msg)
	}
	switch {
	case !o.rxeEnded:
		problems = append(problems, "rxe did not finish the case")
	case o.rxeRC == 124 || o.rxeRC == 143:
		problems = append(problems, fmt.Sprintf("rxe timed out (rc=%d)", o.rxeRC))
	case o.rxeRC != 0:
		problems = append(problems, fmt.Sprintf("rxe rc=%d", o.rxeRC))
	}
	for _, l := range o.rxeOut {
		if strings.Contains(l, "invalid data in page") {
			problems = append(problems, "rxe -c: "+strings.TrimSpace(l))
			break
		}
	}
	if c.Preload {
		for l := range strings.Lines(o.goroceOut) {
			if strings.Contains(l, "invalid data in page") {
				problems = append(problems, "goroce's preloaded -c: "+strings.TrimSpace(l))
				break
			}
		}
	}
	checked := ""
	if c.goroceChecks() {
		m := reChecked.FindStringSubmatch(o.goroceOut)
		switch {
		case m == nil:
			problems = append(problems, "goroce did not report its -c check")
		case m[1] != strconv.Itoa(c.Iters):
			problems = append(problems, fmt.Sprintf("goroce checked %s of %d messages", m[1], c.Iters))
		default:
			checked = fmt.Sprintf(", data checked by goroce (%s messages, %s) and rxe (-c)", m[1], m[2])
		}
	}
	if c.MTU > 1024 && o.activeMTU != c.MTU {
		problems = append(problems, fmt.Sprintf("rxe's active_mtu is %d, want %d", o.activeMTU, c.MTU))
	}
	p := o.pcap
	switch {
	case o.pcapErr != nil:
		problems = append(problems, "wire not checked: "+o.pcapErr.Error())
	default:
		if p.ICRCBad > 0 {
			problems = append(problems, fmt.Sprintf("%d of %d packets with a bad ICRC", p.ICRCBad, p.Packets))
		}
		if p.Malformed > 0 {
			problems = append(problems, fmt.Sprintf("%d malformed packets", p.Malformed))
		}
		if p.FromGoroce == 0 || p.FromRxe == 0 {
			problems = append(problems, fmt.Sprintf("packets on the wire: %d from goroce, %d from rxe", p.FromGoroce, p.FromRxe))
		}
	}

	if o.wireErr != nil {
		problems = append(problems, "capture not parsed: "+o.wireErr.Error())
	} else if o.pcapErr == nil {
		switch {
		case c.UCX != "":
			ps, what := ucxProblems(c, o)
			problems = append(problems, ps...)
			checked = what
		case c.Own != "":
			ps, what := ownProblems(c, o)
			problems = append(problems, ps...)
			checked = what
		case c.Rdmacm != "" && c.Preload:
			ps, what := rdmacmPreloadProblems(c, o)
			problems = append(problems, ps...)
			checked = what
		case c.Rdmacm != "":
			ps, what := rpingProblems(c, o)
			problems = append(problems, ps...)
			checked = what
		case c.Preload:
			problems = append(problems, wireProblems(c, o.wire)...)
			ps, what := preloadDataProblems(c, o.wire)
			problems = append(problems, ps...)
			checked = ", data checked: " + what
		case c.Perftest != "":
			problems = append(problems, wireProblems(c, o.wire)...)
			ps, what := dataProblems(c, o.wire, o.goroceOut)
			problems = append(problems, ps...)
			checked = ", data checked: " + what
		default:
			problems = append(problems, wireProblems(c, o.wire)...)
		}
	}
	if len(problems) == 0 {
		what := fmt.Sprintf("%d x %d B", c.Iters, c.Size)
		if c.Own != "" {
			what = "each side the sender in turn"
		}
		return result{c: c, verdict: pass, detail: fmt.Sprintf("%s%s; wire: goroce %v; rxe %v; ICRC ok on %d",
			what, checked, o.wire.goroce, o.wire.rxe, p.ICRCOK)}
	}
	r := result{c: c, verdict: fail, detail: strings.Join(problems, "; ")}
	for _, l := range o.rxeTail {
		r.evidence = append(r.evidence, "rxe| "+l)
	}
	if o.pcapErr == nil {
		lines := p.Lines
		if len(lines) > maxEvidencePackets {
			lines = lines[:maxEvidencePackets]
		}
		for _, l := range lines {
			r.evidence = append(r.evidence, "wire| "+l)
		}
		r.evidence = append(r.evidence, fmt.Sprintf("wire| summary: packets=%d (goroce %d, rxe %d) icrc_ok=%d icrc_bad=%d malformed=%d",
			p.Packets, p.FromGoroce, p.FromRxe, p.ICRCOK, p.ICRCBad, p.Malformed))
	}
	if o.files != "" {
		r.evidence = append(r.evidence, "files| "+o.files)
	}
	return r
}

// skipAll marks every case skipped, for why.
func skipAll(cases []interopCase, why string) []result {
	rs := make([]result, len(cases))
	for i, c := range cases {
		rs[i] = result{c: c, verdict: skip, detail: why}
	}
	return rs
}

// failAll marks every case failed, for why.
func failAll(cases []interopCase, why string) []result {
	rs := make([]result, len(cases))
	for i, c := range cases {
		rs[i] = result{c: c, verdict: fail, detail: why}
	}
	return rs
}
