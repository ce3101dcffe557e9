package perf

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/qp"
)

// perfWithPerftest runs one side of a test against a perftest peer over
// sc, in the order perftest's programs trade their messages (see
// perftestFlow), and prints what perftest prints.
func perfWithPerftest(ctx context.Context, pc *perfContext, sc *sideChannel, stdout io.Writer) error {
	cfg := pc.cfg
	if cfg.all || cfg.duration > 0 {
		return fmt.Errorf("the client speaks perftest's exchange: -a and -D are not supported with it")
	}
	pt := &perftestChannel{sc: sc, client: cfg.client(), stall: cfg.stall}
	fail := func(err error) error { return cli.CtxErr(ctx, err) }
	cfg, err := pt.prelude(cfg)
	if err != nil {
		return fail(err)
	}
	pc.cfg = cfg
	if err := pc.init(); err != nil {
		return err
	}
	pc.banner(stdout)

	flow := perftestFlowOf(cfg.test)
	first := pc.qps[0].local
	barrier := func() error {
		_, err := pt.handshake(first)
		return err
	}
	// trade sends each QP's message; the peer's become the remote sides.
	trade := func() error {
		for _, q := range pc.qps {
			d, err := pt.handshake(q.local)
			if err != nil {
				return err
			}
			if d.gid.Is4In6() != q.local.gid.Is4In6() {
				return fmt.Errorf("%w: GID %v and this side's %v are not of one IP version", errPerftest, d.gid, q.local.gid)
			}
			d.size = q.local.size // perftest does not say; its buffer is at least the message
			q.remote = d
		}
		return nil
	}
	steps := []func() error{}
	if flow.early {
		steps = append(steps, barrier)
	}
	steps = append(steps, trade, func() error {
		for _, q := range pc.qps {
			if err := pc.connect(q); err != nil {
				return err
			}
		}
		return nil
	})
	if flow.syncFirst {
		steps = append(steps, barrier, trade)
	} else {
		steps = append(steps, trade, barrier)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fail(err)
		}
	}
	for _, q := range pc.qps {
		fmt.Fprintln(stdout, perftestAddr("local", q.local, cfg.test))
	}
	for _, q := range pc.qps {
		fmt.Fprintln(stdout, perftestAddr("remote", q.remote, cfg.test))
	}
	fmt.Fprintln(stdout, perfLine)
	if flow.startSync { // the receives are posted (newPerfContext)
		if err := barrier(); err != nil {
			return fail(err)
		}
	}

	var run *bwRun
	if pc.passive() {
		// The client's next message ends its run; until then, watch that
		// its packets keep coming.
		if _, err := pc.awaitClient(ctx, pt.awaitMessage()); err != nil {
			return fail(err)
		}
	} else {
		pc.header(stdout)
		if _, run, err = pc.runSize(ctx, cfg.size, nil, stdout); err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, perfLine)
	}

	pc.dataReport(stdout)
	if flow.reports {
		if err := barrier(); err != nil {
			return fail(err)
		}
		var mine perftestReport // a passive server's is zero, as perftest's
		if run != nil {
			mine.size, mine.iters = uint64(run.size), uint64(run.iters)
			mine.peak, mine.avg, mine.msgRate = run.rates(cfg.gbits)
		}
		peer, err := pt.xchgReport(mine)
		if err != nil {
			return fail(err)
		}
		if !cfg.client() {
			fmt.Fprintln(stdout, " (the client's results)")
			pc.header(stdout)
			reportBW(stdout, int(peer.size), int(peer.iters), peer.peak, peer.avg, peer.msgRate, cfg.gbits)
			fmt.Fprintln(stdout, perfLine)
		}
	}
	switch {
	case flow.closing:
		return fail(pt.close(first))
	case !cfg.client():
		pt.awaitHangUp()
	}
	return nil
}

// awaitMessage waits in the background for the peer's next message,
// leaving it unread. The channel delivers one value, as awaitClient
// wants it.
func (p *perftestChannel) awaitMessage() chan peerDone {
	ch := make(chan peerDone, 1)
	p.sc.conn.SetDeadline(time.Time{})
	go func() {
		_, err := p.sc.rd.Peek(1)
		if err != nil {
			err = fmt.Errorf("couldn't read the client's message after its run: %w", err)
		}
		ch <- peerDone{err: err}
	}()
	return ch
}

// perftestAddr is perftest's "local address" or "remote address" line and
// its GID line (perftest prints the GID's bytes in decimal).
func perftestAddr(side string, d perfDest, t perfTest) string {
	s := fmt.Sprintf(" %s address: LID %#04x QPN %#06x PSN %#06x", side, 0, d.qpn, uint32(d.psn))
	if t.op == qp.WRRDMARead {
		s += fmt.Sprintf(" OUT %#04x", d.outReads)
	}
	if t.op != qp.WRSend {
		s += fmt.Sprintf(" RKey %#08x VAddr %#016x", d.rkey, d.addr)
	}
	var g []string
	for _, b := range d.gid.As16() {
		g = append(g, fmt.Sprintf("%02d", b))
	}
	return s + "\n GID: " + strings.Join(g, ":")
}
