package perf

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/qp"
)

// perf runs one side of a test and prints what perftest prints.
func perf(ctx context.Context, cfg perfConfig, stdout, stderr io.Writer) error {
	pc, err := openPerfDevice(cfg)
	if err != nil {
		return err
	}
	defer pc.closeObs() // runs after the device closes
	defer pc.dev.Close()
	sc, err := openPerfChannel(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer sc.conn.Close()
	if pc.cfg.exchange, err = sc.chooseExchange(cfg); err != nil {
		return err
	}
	if pc.cfg.exchange == exchangePerftest {
		return perfWithPerftest(ctx, pc, sc, stdout)
	}
	if err := pc.init(); err != nil {
		return err
	}
	cfg = pc.cfg
	pc.banner(stdout)
	if err := pc.exchange(ctx, sc); err != nil {
		return err
	}
	for i, q := range pc.qps {
		fmt.Fprintf(stdout, " local address:  %s\n", q.local.line(i))
	}
	for i, q := range pc.qps {
		fmt.Fprintf(stdout, " remote address: %s\n", q.remote.line(i))
	}
	fmt.Fprintln(stdout, perfLine)

	// The server reads the client's done line in the background from now
	// on: with -D it ends the server's loops.
	var done chan peerDone
	if !cfg.client() {
		done = make(chan peerDone, 1)
		go func() { done <- pc.peerFailed(<-sc.awaitDone(cfg.qps)) }()
	}
	passive := pc.passive()
	if passive {
		fmt.Fprintln(stdout, " (passive server: the client measures)")
	} else {
		pc.header(stdout)
	}

	var counts []int
	if !passive {
		for _, size := range cfg.sizes() {
			c, _, err := pc.runSize(ctx, size, done, stdout)
			if err != nil {
				return err
			}
			counts = c
		}
		fmt.Fprintln(stdout, perfLine)
	}
	if cfg.client() {
		pc.dataReport(stdout)
		return sc.finishClient(counts, cfg.stall)
	}
	d, err := pc.awaitClient(ctx, done)
	if err != nil {
		return err
	}
	pc.dataReport(stdout)
	if counts != nil && cfg.duration == 0 {
		for i, n := range d.counts {
			if n != counts[i] {
				return fmt.Errorf("QP %d: the client completed %d operations, the server %d", i, n, counts[i])
			}
		}
	}
	if err := sc.writeLines("done"); err != nil {
		return fmt.Errorf("couldn't send done: %w", err)
	}
	return nil
}

// peerFailed adds to a failed read of the client's done line what became
// of this side's QPs. A client that stops without its done line has, as
// a rule, just broken one of them: an invalid or forbidden request moves
// the responder's QP to ERR (the client's WR fails with the NAK), and the
// side channel's EOF alone says nothing of it. The async event that moved
// a QP to ERR says why.
func (pc *perfContext) peerFailed(d peerDone) peerDone {
	if d.err == nil {
		return d
	}
	moved := map[*qp.QP]qp.EventType{} // the first event of each QP
	for drained := false; !drained; {
		select {
		case ev := <-pc.dev.Events():
			if _, seen := moved[ev.QP]; ev.QP != nil && !seen {
				moved[ev.QP] = ev.Type
			}
		default:
			drained = true
		}
	}
	var why []string
	inErr := 0
	for _, q := range pc.qps {
		if q.qp.State() != qp.StateErr {
			continue
		}
		if inErr++; inErr > 3 {
			continue
		}
		s := fmt.Sprintf("QP %#x went to %v", q.qp.QPN(), qp.StateErr)
		if t, ok := moved[q.qp.QP]; ok {
			s += fmt.Sprintf(" on %v (%s)", t, eventCause(t))
		}
		why = append(why, s)
	}
	if inErr > 3 {
		why = append(why, fmt.Sprintf("%d more QPs in %v", inErr-3, qp.StateErr))
	}
	if len(why) > 0 {
		d.err = fmt.Errorf("%w; %s", d.err, strings.Join(why, "; "))
	}
	return d
}

// eventCause says what a QP's async error event means on a perf server.
func eventCause(t qp.EventType) string {
	switch t {
	case qp.EventQPAccessErr:
		return "a request of the client's broke this side's access rules: R_Key, bounds or rights"
	case qp.EventQPReqErr:
		return "the client sent an invalid request"
	case qp.EventQPFatal:
		return "a local error: this side's CQ overran or one of its WRs failed"
	}
	return "unexpected"
}

// passive reports whether this side is a server that only lends its
// memory: the client's READs, WRITEs and atomics need nothing of it.
func (pc *perfContext) passive() bool {
	op := pc.cfg.test.op
	return !pc.cfg.client() && (op == qp.WRRDMARead || op == qp.WRAtomicFetchAndAdd ||
		op == qp.WRRDMAWrite && !pc.cfg.test.lat)
}

// runSize runs and reports one message size; it returns each QP's
// operation count for the done line and, for a bandwidth test, the run.
func (pc *perfContext) runSize(ctx context.Context, size int, done chan peerDone, stdout io.Writer) ([]int, *bwRun, error) {
	cfg := pc.cfg
	if cfg.test.lat {
		run, err := pc.latLoop(ctx, size, done)
		if err != nil {
			return nil, nil, err
		}
		if cfg.duration > 0 {
			reportLatDuration(stdout, size, run.iters, run.elapsed, pc.rttFactor())
		} else {
			reportLat(stdout, size, run.iters, latencyStats(run.starts, pc.rttFactor()))
		}
		return []int{run.iters}, nil, nil
	}
	var run *bwRun
	var err error
	if cfg.client() {
		run, err = pc.bwClient(ctx, size)
	} else {
		var target []int
		if cfg.duration == 0 {
			target = make([]int, cfg.qps)
			for i := range target {
				target[i] = cfg.iters
			}
		}
		run, err = pc.bwServerRecv(ctx, size, target, done)
	}
	if err != nil {
		return nil, nil, err
	}
	run.report(stdout, cfg.gbits)
	counts := make([]int, cfg.qps)
	for i, q := range pc.qps {
		counts[i] = q.completed
		if !cfg.client() {
			counts[i] = run.iters // per QP in iteration mode
		}
	}
	return counts, run, nil
}

// rttFactor is 2 for the ping-pong tests, which time round trips and
// report one way, and 1 for read_lat, whose operation is a round trip.
func (pc *perfContext) rttFactor() int {
	if pc.cfg.test.op == qp.WRRDMARead {
		return 1
	}
	return 2
}

// banner prints perftest's test description block.
func (pc *perfContext) banner(w io.Writer) {
	cfg := pc.cfg
	fmt.Fprintln(w, perfLine)
	fmt.Fprintf(w, "                    %s\n", cfg.test.title)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", cfg.qps)
	fmt.Fprintf(w, " Connection type : RC\t\tUsing SRQ      : OFF\n")
	if !cfg.test.lat {
		fmt.Fprintf(w, " TX depth        : %d\n", cfg.txDepth)
		fmt.Fprintf(w, " CQ Moderation   : %d\n", pc.cqMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", cfg.mtu)
	if cfg.link == cli.LinkShm {
		fmt.Fprintf(w, " Link type       : Ethernet (goroce, RoCEv2 frames through shared memory)\n")
	} else {
		fmt.Fprintf(w, " Link type       : Ethernet (goroce, RoCEv2 over UDP)\n")
	}
	fmt.Fprintf(w, " GID             : %s\n", pc.dev.GID())
	if cfg.test.op == qp.WRRDMARead || cfg.test.op == qp.WRAtomicFetchAndAdd {
		fmt.Fprintf(w, " Outstand reads  : %d\n", perfRdAtomic)
	}
	if cfg.exchange == exchangePerftest {
		fmt.Fprintf(w, " Data ex. method : Ethernet (perftest's exchange, peer version %s)\n", cfg.perftestPeer)
	} else {
		fmt.Fprintf(w, " Data ex. method : goroce text lines over TCP\n")
	}
	if cfg.duration > 0 && !cfg.test.lat {
		fmt.Fprintln(w, " WARNING: BW peak won't be measured in this run.")
	}
	fmt.Fprintln(w, perfLine)
}

// header prints the result columns' header.
func (pc *perfContext) header(w io.Writer) {
	switch {
	case pc.cfg.test.lat && pc.cfg.duration > 0:
		fmt.Fprintln(w, latHeaderD)
	case pc.cfg.test.lat:
		fmt.Fprintln(w, latHeader)
	case pc.cfg.gbits:
		fmt.Fprintln(w, bwHeaderGb)
	default:
		fmt.Fprintln(w, bwHeaderMB)
	}
}
