package flood

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/goroce/goroce/qp"
)

// phases are the run's phases, in order.
var phases = []struct {
	name         string
	legit, flood bool
}{
	{"baseline", true, false},
	{"flood", false, true},
	{"both", true, true},
}

// Run opens the victim, the peer and the attacker, runs the three phases
// (see the package documentation) and closes everything. It returns an
// error if the config is invalid, if something could not be set up or if
// ctx ended; an invariant the victim broke is not an error but a problem
// in the Result (see Result.OK).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoroutinesStart: runtime.NumGoroutine()}

	s := newSampler(time.Now())
	first := s.take()
	sampling, stopSampling := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.run(sampling, cfg.SampleEvery) })

	err = runPhases(ctx, cfg, s, res)

	s.begin("teardown")
	stopSampling()
	wg.Wait()
	res.GoroutinesEnd = settleGoroutines(res.GoroutinesStart, time.Second)
	last := s.take()
	res.Samples, res.Memory = s.all(), s.span(first, last)
	if err != nil {
		return nil, err
	}
	if res.GoroutinesEnd > res.GoroutinesStart {
		res.Problems = append(res.Problems, fmt.Sprintf("%d goroutines after the run, %d before: %d did not end",
			res.GoroutinesEnd, res.GoroutinesStart, res.GoroutinesEnd-res.GoroutinesStart))
	}
	return res, nil
}

// runPhases opens the parties, runs the phases and closes the parties.
func runPhases(ctx context.Context, cfg Config, s *sampler, res *Result) error {
	pr, err := openPair(cfg)
	if err != nil {
		return err
	}
	defer pr.close()
	vaddr := pr.v.dev.Addr()
	s.watchQueue(func() uint64 {
		rx, _, _ := udpSocket(vaddr) // 0 where /proc/net/udp is missing
		return rx
	})
	defer s.watchQueue(nil)
	res.VictimSocket, res.VictimQPN = pr.vlink.SocketBuffers(), pr.v.qp.QPN()
	t := target{victim: pr.v.dev.Addr(), qpn: pr.v.qp.QPN(), psn: pr.v.qp.Query().RQPSN,
		rkey: pr.v.mr.RKey(), va: pr.v.mr.Addr(), size: len(pr.v.buf), pathMTU: cfg.MTU}
	att, err := newAttacker(cfg, t)
	if err != nil {
		return err
	}
	defer att.close()
	b := &bench{cfg: cfg, pr: pr, att: att, w: newWriter(pr, cfg), s: s}
	for _, ph := range phases {
		p, err := b.phase(ctx, ph.name, ph.legit, ph.flood)
		if err != nil {
			return fmt.Errorf("phase %s: %w", ph.name, err)
		}
		res.Phases = append(res.Phases, p)
	}
	return nil
}

// bench is the parties of a run, open, and its sampler.
type bench struct {
	cfg Config
	pr  *pair
	att *attacker
	w   *writer
	s   *sampler
}

// phase runs one phase: the legitimate WRITEs if legit, the flood if
// flood, for Config.Duration; then it waits for the drain and checks the
// invariants.
func (b *bench) phase(ctx context.Context, name string, legit, flood bool) (Phase, error) {
	cfg, pr, att, w, s := b.cfg, b.pr, b.att, b.w, b.s
	p := Phase{Name: name, Legit: legit, Flood: flood}
	first := s.begin(name)
	v0, p0, k0 := countsOf(pr.v.dev), countsOf(pr.p.dev), readKernel(pr.v.dev.Addr())
	sent0, errs0 := att.sentByKind(), att.sendErrs.Load()
	bytes0, writes0 := w.bytes.Load(), w.count.Load()

	stop, cancelStop := context.WithTimeout(ctx, cfg.Duration)
	defer cancelStop()
	done, cancelDone := context.WithTimeout(ctx, cfg.Duration+cfg.DrainTimeout)
	defer cancelDone()
	var wg sync.WaitGroup
	var werr error
	start := time.Now()
	if flood {
		wg.Go(func() { att.run(stop) })
	}
	if legit {
		wg.Go(func() { werr = w.run(stop, done) })
	}
	<-stop.Done()
	p.Elapsed = time.Since(start)
	p.Victim = countsOf(pr.v.dev).sub(v0)
	p.WriteBytes, p.Writes = w.bytes.Load()-bytes0, w.count.Load()-writes0
	wg.Wait()
	if ctx.Err() != nil {
		return p, ctx.Err()
	}

	sent := att.sentByKind()
	p.Sent = map[Kind]uint64{}
	for _, k := range cfg.Kinds {
		if flood {
			p.Sent[k] = sent[k] - sent0[k]
		}
	}
	p.SendErrors = att.sendErrs.Load() - errs0
	if e := att.firstErr.Load(); e != nil && p.SendErrors > 0 {
		p.FirstSendError = (*e).Error()
	}
	drained := drainVictim(ctx, pr, cfg.DrainTimeout)
	p.Drain = time.Since(start) - p.Elapsed
	p.VictimAll, p.Peer = countsOf(pr.v.dev).sub(v0), countsOf(pr.p.dev).sub(p0)
	p.Kernel = readKernel(pr.v.dev.Addr()).sub(k0)
	p.WritesAll = w.count.Load() - writes0
	p.VictimQPState = pr.v.qp.State()
	if ctx.Err() != nil {
		return p, ctx.Err()
	}

	fail := func(format string, args ...any) { p.Problems = append(p.Problems, fmt.Sprintf(format, args...)) }
	if werr != nil {
		fail("legitimate WRITEs: %v", werr)
	}
	if !drained {
		fail("the victim's socket still held %d bytes %v after the phase", p.Kernel.RxQueue, cfg.DrainTimeout)
	}
	if werr == nil || !errors.Is(werr, context.DeadlineExceeded) {
		// Nothing is in flight: the victim's region can be compared.
		var problems []string
		p.SlotsVerified, problems = w.verify()
		p.Problems = append(p.Problems, problems...)
	}
	if p.VictimQPState != qp.StateRTS {
		fail("the victim's QP is in %v, not RTS", p.VictimQPState)
	}
	if n := p.VictimAll.Unaccounted(); n != 0 {
		fail("%d datagrams the victim read are in none of its disposition counters", n)
	}
	if flood && !legit && p.VictimAll["rcvd_pkts"] != 0 {
		fail("the victim's QP accepted %d packets while only the attacker sent", p.VictimAll["rcvd_pkts"])
	}
	if flood {
		for _, k := range cfg.Kinds {
			if c := k.Counter(); p.Sent[k] > 0 && p.VictimAll[c] == 0 {
				fail("the attacker sent %d %v datagrams and the victim's %s did not move", p.Sent[k], k, c)
			}
		}
	}
	p.Memory = s.span(first, s.take())
	return p, nil
}

// drainVictim waits until the victim's socket is empty and its receive loop
// has stopped counting datagrams, for at most timeout. It reports whether
// that happened.
func drainVictim(ctx context.Context, pr *pair, timeout time.Duration) bool {
	const settle = 20 * time.Millisecond
	deadline := time.Now().Add(timeout)
	last := pr.v.dev.Counter("link_rcvd_pkts")
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(settle)
		n := pr.v.dev.Counter("link_rcvd_pkts")
		k := readKernel(pr.v.dev.Addr())
		if n == last && (!k.Known || k.RxQueue == 0) {
			return true
		}
		last = n
	}
	return false
}

// settleGoroutines returns the goroutine count once it is at most want, or
// the least count seen within timeout: goroutines that were told to end
// may take a moment to do so.
func settleGoroutines(want int, timeout time.Duration) int {
	least := runtime.NumGoroutine()
	for deadline := time.Now().Add(timeout); least > want && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		least = min(least, runtime.NumGoroutine())
	}
	return least
}
