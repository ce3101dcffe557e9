package experiment

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	cc "github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/clock"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/simlink"
)

// Result is what a run recorded.
type Result struct {
	// Scenario is the scenario as run, defaults filled in.
	Scenario Scenario
	// VirtualTime reports whether the run was in virtual time: in a
	// synctest bubble, or on a virtual clock (Scenario.Clock).
	VirtualTime bool
	// Elapsed is the run's length on its clock (Duration, or less if the
	// context ended it early).
	Elapsed time.Duration
	// Samples is the time series, one per Interval.
	Samples []Sample
	// Delivered is each flow's bytes delivered to the receiver in all.
	Delivered []uint64
	// FlowErrors holds, per flow, the failure that stopped it (a work
	// completion with an error status, such as RETRY_EXC_ERR after too
	// many timeouts), or nil.
	FlowErrors []error
	// ArrivalQueue holds, in order, the bottleneck queue depth (bytes)
	// that each packet arriving in the second half of the run found: the
	// depth the congestion point judged it by (or the full buffer that
	// dropped it).
	ArrivalQueue []int
	// Totals at the end of the run.
	Totals Totals
}

// Totals are the run's counters at its end.
type Totals struct {
	Marked         uint64 // packets the bottleneck's RED marked CE
	TailDrops      uint64 // packets dropped for want of buffer, at any queue
	QueueMaxBytes  int    // the deepest the bottleneck queue got
	CNPsSent       uint64 // by the receiver's notification points
	CNPsHandled    uint64 // by the senders' reaction points
	RateReductions uint64 // rate cuts at the senders
	Retransmitted  uint64 // packets the senders sent again (go-back-N)
	Timeouts       uint64 // local ACK timeouts at the senders
}

// Sample is the state of the experiment at one instant.
type Sample struct {
	// At is the time since the run began.
	At time.Duration
	// Throughput is each flow's delivered rate over the interval ending
	// at At (datagram bytes: BTH to ICRC).
	Throughput []cc.Rate
	// Goodput is the flows' goodput, all together, over the interval
	// ending at At: the payload bytes of the WRITEs that completed
	// successfully, so that a packet sent twice counts once and headers
	// not at all.
	Goodput cc.Rate
	// Rate is each flow's DCQCN rate at At (QP.Rate: the line rate when
	// DCQCN is off or the flow is not limited).
	Rate []cc.Rate
	// QueueBytes is the bottleneck queue's depth at At; QueueMax the
	// largest it was during the interval.
	QueueBytes, QueueMax int
	// Running totals at At.
	Marked, CNPs, TailDrops, Retransmitted uint64
}

// Run performs the experiment sc and returns what it recorded. It builds a
// simulated network, one receiver device and sc.Flows sender devices, runs
// the traffic for sc.Duration while sampling, then closes everything. For
// virtual time, call it inside a synctest bubble or with a virtual
// sc.Clock (see the package doc and RunVirtual). If
// ctx ends first, Run stops early and returns what it has with ctx's error.
// Invalid scenarios return an error matching ErrInvalidScenario.
func Run(ctx context.Context, sc Scenario) (*Result, error) {
	sc = sc.WithDefaults()
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	params, err := sc.DCQCNParams()
	if err != nil {
		return nil, err
	}
	clk := clock.Or(sc.Clock)
	e := &experiment{sc: sc, clock: clk, t0: clk.Now(), exited: make(chan struct{}, sc.Flows)}
	defer e.close()
	if err := e.build(params); err != nil {
		return nil, err
	}
	res := &Result{Scenario: sc, VirtualTime: inBubble(e.t0), FlowErrors: make([]error, sc.Flows)}
	flowCtx, stop := context.WithCancel(ctx)
	for i, f := range e.flows {
		clk.Go(func() {
			defer func() { e.exited <- struct{}{} }()
			res.FlowErrors[i] = f.Run(flowCtx, e.t0.Add(sc.start(i)))
		})
	}
	runErr := e.sample(ctx, res)
	stop()
	e.closeDevices()
	exited := clk.NewWaiter(e.exited) // a wait the clock sees
	for range e.flows {
		exited.Wait()
	}
	e.finish(res)
	return res, runErr
}

// RunVirtual performs sc in virtual time in any program: on a new
// clock.Virtual, whose Run drives it from the calling goroutine. The run
// is repeatable: the same Scenario (Seed included) gives the same Result.
// sc.Clock is replaced.
func RunVirtual(ctx context.Context, sc Scenario) (*Result, error) {
	v := clock.NewVirtual(time.Time{})
	sc.Clock = v
	var res *Result
	var err error
	if verr := v.Run(func() { res, err = Run(ctx, sc) }); verr != nil {
		return nil, verr
	}
	return res, err
}

// inBubble reports whether t, read at the start of a run, comes from a
// synctest bubble's clock, which starts at midnight UTC 2000-01-01 (as the
// testing/synctest documentation guarantees), or from a virtual clock
// started there (clock.Epoch). No real clock reads that.
func inBubble(t time.Time) bool {
	return t.Before(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
}

// experiment is one run's network, devices and flows.
type experiment struct {
	sc       Scenario
	clock    clock.Clock
	t0       time.Time
	net      *simlink.Network
	queue    *queueRecorder
	rxPort   *simlink.Port
	receiver *Host
	senders  []*Host
	flows    []*Flow
	exited   chan struct{} // a send per flow goroutine that returned
	closed   bool
}

// build creates the network, the devices and the connected QPs.
func (e *experiment) build(params cc.Params) error {
	sc := &e.sc
	e.queue = &queueRecorder{port: receiverAddr, from: e.t0.Add(sc.Duration / 2)}
	e.net = simlink.NewNetwork(simlink.Config{Seed: sc.Seed, Observer: e.queue.observe, Clock: e.clock})
	wire := simlink.Wire{Rate: int64(sc.LineRate), Latency: sc.Latency}
	cable := simlink.PortConfig{Uplink: wire, Downlink: wire, Buffer: sc.Buffer, Marker: sc.RED,
		MarkAt: simlink.MarkOnDequeue}
	if sc.MarkOnEnqueue {
		cable.MarkAt = simlink.MarkOnEnqueue
	}
	cfg := rnic.DCQCNConfig{Disable: sc.DisableDCQCN, Params: params, LineRate: sc.LineRate}

	// The receiver counts what it reads from each sender.
	delivered := make(map[netip.AddrPort]*atomic.Uint64, sc.Flows)
	counters := make([]*atomic.Uint64, sc.Flows)
	for i := range counters {
		counters[i] = new(atomic.Uint64)
		delivered[senderAddr(i)] = counters[i]
	}
	open := func(addr netip.AddrPort, count bool, cqe, bufSize int) (*Host, *simlink.Port, error) {
		port, err := e.net.Attach(addr, cable)
		if err != nil {
			return nil, nil, err
		}
		var l link.Link = port
		if count {
			l = &countingPort{Port: port, from: delivered}
		}
		dev, err := rnic.Open(rnic.Config{Addr: addr, Link: l, MTU: sc.MTU, StrictICRC: true, DCQCN: cfg,
			Trace: sc.Trace, Tap: sc.Tap, Clock: e.clock})
		if err != nil {
			port.Close()
			return nil, nil, err
		}
		h, err := NewHost(dev, cqe, bufSize)
		if err != nil {
			dev.Close()
			return nil, nil, err
		}
		return h, port, nil
	}
	var err error
	if e.receiver, e.rxPort, err = open(receiverAddr, true, 16, sc.MessageSize); err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	for i := range sc.Flows {
		s, _, err := open(senderAddr(i), false, 2*sc.Window, sc.MessageSize)
		if err != nil {
			return fmt.Errorf("sender %d: %w", i, err)
		}
		e.senders = append(e.senders, s)
		f, err := NewFlow(s, e.receiver, sc, counters[i])
		if err != nil {
			return fmt.Errorf("flow %d: %w", i, err)
		}
		e.flows = append(e.flows, f)
	}
	return nil
}

// sample records a Sample every Interval until Duration has passed.
func (e *experiment) sample(ctx context.Context, res *Result) error {
	sc := &e.sc
	sleep := newSleeper(e.clock, ctx)
	defer sleep.stop()
	prev, prevAt := make([]uint64, sc.Flows), time.Duration(0)
	var prevDone uint64
	for k := 1; ; k++ {
		if !sleep.until(e.t0.Add(time.Duration(k) * sc.Interval)) {
			return ctx.Err()
		}
		at := e.clock.Now().Sub(e.t0)
		s := Sample{At: at, Throughput: make([]cc.Rate, sc.Flows), Rate: make([]cc.Rate, sc.Flows)}
		dt := (at - prevAt).Seconds()
		for i, f := range e.flows {
			d := f.delivered.Load()
			s.Throughput[i] = cc.Rate(float64(d-prev[i]) * 8 / dt)
			s.Rate[i] = f.qp.Rate()
			prev[i] = d
		}
		var done uint64
		for _, f := range e.flows {
			done += f.completed.Load()
		}
		s.Goodput = cc.Rate(float64(done-prevDone) * 8 / dt)
		prevDone = done
		prevAt = at
		ps := e.rxPort.Stats()
		s.QueueBytes = ps.Egress.Bytes
		s.QueueMax = max(e.queue.takeMax(), s.QueueBytes)
		s.Marked = ps.Egress.Marked
		s.TailDrops = e.net.Stats().Egress.TailDrops
		s.CNPs = e.receiver.dev.Counter("cnp_sent")
		for _, h := range e.senders {
			s.Retransmitted += h.dev.Counter("retransmitted_pkts")
		}
		res.Samples = append(res.Samples, s)
		if sc.OnSample != nil {
			sc.OnSample(s)
		}
		res.Elapsed = at
		if at >= sc.Duration {
			return nil
		}
	}
}

// finish fills in the totals. Called when the devices are closed.
func (e *experiment) finish(res *Result) {
	for _, f := range e.flows {
		res.Delivered = append(res.Delivered, f.delivered.Load())
	}
	ns := e.net.Stats()
	ps := e.rxPort.Stats()
	t := &res.Totals
	t.Marked, t.TailDrops, t.QueueMaxBytes = ps.Egress.Marked, ns.Egress.TailDrops, ps.Egress.MaxBytes
	t.CNPsSent = e.receiver.dev.Counter("cnp_sent")
	for _, h := range e.senders {
		t.CNPsHandled += h.dev.Counter("cnp_handled")
		t.RateReductions += h.dev.Counter("rate_reductions")
		t.Retransmitted += h.dev.Counter("retransmitted_pkts")
		t.Timeouts += h.dev.Counter("local_ack_timeouts")
	}
	res.ArrivalQueue = e.queue.arrivals()
}

// closeDevices closes every device (and so its port).
func (e *experiment) closeDevices() {
	if e.closed {
		return
	}
	e.closed = true
	for _, h := range append([]*Host{e.receiver}, e.senders...) {
		if h != nil {
			h.dev.Close()
		}
	}
}

// close releases everything; safe after a partial build.
func (e *experiment) close() {
	e.closeDevices()
	if e.net != nil {
		e.net.Close()
	}
}
