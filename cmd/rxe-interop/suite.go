package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// suite runs the cases against one guest and reports each as it ends.
type suite struct {
	lab         *lab
	goroce      string // the goroce binary
	out         string // directory for logs and captures
	caseTimeout time.Duration
	report      func(result) // called once per case, in order
}

// run sets up the lab (cached), boots the guest with rxe's side of every
// case, plays goroce's side of each in turn, and returns the results.
func (s *suite) run(ctx context.Context, cases []interopCase) []result {
	emit := func(rs []result) []result {
		for _, r := range rs {
			s.report(r)
		}
		return rs
	}
	if _, err := s.lab.run(ctx, "setup"); err != nil {
		if errors.Is(err, errCannotRun) {
			return emit(skipAll(cases, err.Error()))
		}
		return emit(failAll(cases, err.Error()))
	}

	if err := s.preparePreload(ctx, cases); err != nil {
		return emit(failAll(cases, err.Error()))
	}
	bins, err := buildOwn(ctx, s.out, cases)
	if err != nil {
		return emit(failAll(cases, err.Error()))
	}
	if len(bins) > 0 {
		s.lab.env = append(s.lab.env, ownLabAdd(bins))
	}
	if err := writeUCXBatches(s.out, cases); err != nil {
		return emit(failAll(cases, err.Error()))
	}

	script := filepath.Join(s.out, "guest.sh")
	if err := os.WriteFile(script, []byte(guestScript(cases, s.caseTimeout)), 0o644); err != nil {
		return emit(failAll(cases, err.Error()))
	}
	serial := filepath.Join(s.out, "guest.log")
	pid, err := s.lab.bootGuest(ctx, script, serial, hasIPv6(cases))
	switch {
	case errors.Is(err, errCannotRun):
		return emit(skipAll(cases, err.Error()))
	case err != nil:
		return emit(failAll(cases, fmt.Sprintf("guest did not boot: %v (serial log %s)", err, serial)))
	}
	// The guest powers off when its script ends; stop it early only if
	// the suite is interrupted.
	defer func() {
		if ctx.Err() != nil && alive(pid) {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}()

	log := newSerialLog(serial, pid)
	var rs []result
	for _, c := range cases {
		r := s.runCase(ctx, log, c)
		s.report(r)
		rs = append(rs, r)
	}
	// Let the guest finish (it has nothing left but to power off).
	log.waitFor(ctx, s.caseTimeout+10*time.Second, func() bool { return log.done })
	return rs
}

// runCase plays goroce's side of case c while the guest plays rxe's, with
// a capture of the bridge.
func (s *suite) runCase(ctx context.Context, log *serialLog, c interopCase) result {
	name := c.Name()
	base := filepath.Join(s.out, name)
	if log.done {
		return result{c: c, verdict: fail, detail: "the guest ended before this case (serial log " + log.path + ")"}
	}
	logf, err := os.Create(base + ".goroce.log")
	if err != nil {
		return result{c: c, verdict: fail, detail: err.Error()}
	}
	defer logf.Close()

	var o observed
	o.files = base + ".{pcap,goroce.log}, " + log.path
	capt, capErr := startCapture(ctx, s.lab, base+".pcap")

	rxeEnded := func() bool { _, ok := log.ended[name]; return ok }
	patience := c.timeout(s.caseTimeout) + 15*time.Second
	if c.RxeRole == rxeServer {
		o.peer = runGoroceClient(ctx, s.lab, s.goroce, c, logf, patience, func() bool {
			log.refresh()
			return rxeEnded() || log.done
		})
	} else {
		o.peer = startGoroceServer(ctx, s.lab, s.goroce, c, logf, patience)()
	}
	// rxe's side ends by itself, at the latest by its own case timeout.
	o.rxeEnded = log.waitFor(ctx, c.timeout(s.caseTimeout)+10*time.Second, rxeEnded)
	o.rxeRC = log.ended[name]
	o.rxeTail = log.lastLines(name, 4)
	o.rxeOut = log.output[name]
	if b, err := os.ReadFile(base + ".goroce.log"); err == nil {
		o.goroceOut = string(b)
	}
	o.activeMTU = log.mtu[ethMTU(c.MTU)]
	if c.MTU <= 1024 {
		o.activeMTU = c.MTU // the boot MTU; only a raised one is reported
	}

	if capErr != nil {
		o.pcapErr = capErr
	} else {
		incomplete := capt.stop()
		o.pcap, o.pcapErr = decodePcap(ctx, s.goroce, capt.path, c.goroceAddr())
		if o.pcapErr == nil {
			o.pcapErr = incomplete
		}
		o.wire, o.wireErr = countWire(capt.path, c.goroceAddr(), c.ackTimeout(), c.Rdmacm == "")
		o.pcapPath = capt.path
	}
	return judge(c, o)
}

// preparePreload has goroce exec build the preloadable libibverbs into
// its cache now, if a case runs a preloaded program, so that the first
// such case does not spend its time building.
func (s *suite) preparePreload(ctx context.Context, cases []interopCase) error {
	if !slices.ContainsFunc(cases, func(c interopCase) bool { return c.Preload }) {
		return nil
	}
	out, err := exec.CommandContext(ctx, s.goroce, "exec", "--print-env").CombinedOutput()
	if err != nil {
		return fmt.Errorf("goroce exec cannot provide its preloadable libibverbs: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func hasIPv6(cases []interopCase) bool {
	for _, c := range cases {
		if c.Family == ipv6 {
			return true
		}
	}
	return false
}

// alive reports whether process pid exists.
func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// printResult writes a result line and its evidence.
func printResult(w io.Writer, r result) {
	fmt.Fprintln(w, r)
	for _, e := range r.evidence {
		fmt.Fprintln(w, "    "+e)
	}
}
