package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/bench/experiment"
	"github.com/goroce/goroce/bench/qemurouter"
	cc "github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/udplink"
)

// config is one run: the scenario bench/experiment would simulate, with
// LineRate the bottleneck's rate, RED its thresholds and Buffer its queue
// limit, plus what only a real network has.
type config struct {
	sc      experiment.Scenario
	marker  string       // markerRED or markerNFT
	linkMTU int          // the veths' MTU
	guest   *guestRouter // the router guest (-router qemu), or nil: a router namespace
}

// outcome is a run's result in bench/experiment's terms, with the kernel's
// view of the bottleneck beside it.
type outcome struct {
	res    *experiment.Result
	queue  queueStats // the bottleneck's counters at the end
	marker string
	// ECNMarked counts the CE-marked packets the receiver saw.
	ECNMarked uint64
	// ICRCErrors counts the packets the receiver dropped for a bad ICRC:
	// the router's changes (TTL, TOS, header checksum) are all masked, so
	// it stays 0.
	ICRCErrors uint64
	// figures is tc -s's qdiscs and classes of the bottleneck at the end.
	figures string
	// drained reports that every WRITE posted completed before the
	// devices closed: nothing the senders sent was still on its way, so
	// every packet the bottleneck marked and did not drop reached the
	// receiver.
	drained bool
}

// frameBytes is the length of the Ethernet frame of a full RDMA WRITE
// packet at path MTU mtu: Ethernet 14, IPv4 20, UDP 8, BTH 12, payload,
// ICRC 4 (the first packet's RETH adds 16).
func frameBytes(mtu int) int { return 14 + 20 + 8 + 12 + mtu + 4 }

// netnsRun is one run's namespaces, bottleneck, devices and flows.
type netnsRun struct {
	cfg      config
	fab      *fabric
	topo     *topology
	neck     *bottleneck
	receiver *rnic.Device
	senders  []*rnic.Device
	flows    []*experiment.Flow
	counts   []*atomic.Uint64
	closed   bool
}

// runNetns builds the network in fresh namespaces, runs the flows for
// Duration while sampling, and removes everything again, whatever
// happens (the namespaces go with the deferred remove, also on a panic).
func runNetns(ctx context.Context, cfg config) (out *outcome, err error) {
	sc := &cfg.sc
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	params, err := sc.DCQCNParams()
	if err != nil {
		return nil, err
	}
	fab, err := newFabric()
	if err != nil {
		return nil, err
	}
	r := &netnsRun{cfg: cfg, fab: fab}
	defer func() {
		r.closeDevices()
		if r.neck != nil {
			r.neck.close()
		}
		if rmErr := fab.remove(); rmErr != nil && err == nil {
			err = fmt.Errorf("removing namespaces: %w", rmErr)
		}
	}()
	r.neck = &bottleneck{rate: sc.LineRate, limit: sc.Buffer, red: sc.RED, marker: cfg.marker,
		frame: frameBytes(sc.MTU)}
	if g := cfg.guest; g != nil {
		if r.topo, err = attachSenders(ctx, fab, g, sc.Flows, cfg.linkMTU); err != nil {
			return nil, err
		}
		// The senders' namespaces are new, their addresses not: the
		// guest forgets the last run's link-layer addresses.
		if _, err := g.Run(ctx, "/sbin/ip", "neigh", "flush", "dev", "tx"); err != nil {
			return nil, err
		}
		r.neck.dev = r.topo.bottleDev
		r.neck.inGuest(g)
		// The guest's timers wake late (an emulated CPU that the host
		// schedules among other work): a burst of guestBurst frames lets
		// htb catch up at each wake-up rather than send one frame.
		r.neck.burst = guestBurst * r.neck.frame
	} else {
		if r.topo, err = buildTopology(ctx, fab, sc.Flows, cfg.linkMTU); err != nil {
			return nil, err
		}
		r.neck.dev = r.topo.bottleDev
		r.neck.inNamespace(r.topo.sw)
	}
	if err := r.neck.setup(ctx); err != nil {
		return nil, err
	}
	if err := r.open(params); err != nil {
		return nil, err
	}
	res, drained, err := r.traffic(ctx)
	out = &outcome{res: res, marker: cfg.marker, drained: drained}
	out.queue, _ = r.neck.stats(context.Background())
	out.figures, _ = r.neck.figures(context.Background())
	out.ECNMarked = r.receiver.Counter("ecn_marked_packets")
	out.ICRCErrors = r.receiver.Counter("icrc_err")
	return out, err
}

// openDevice opens a udplink socket for addr inside namespace ns and a
// goroce device on it. count, if not nil, wraps the link to count bytes
// by sender.
func openDevice(ns string, addr netip.AddrPort, sc *experiment.Scenario, params cc.Params,
	count map[netip.AddrPort]*atomic.Uint64) (*rnic.Device, error) {
	var ul *udplink.Link
	// One datagram per packet (no RoCEv2GSO): the marker and the queue
	// see every packet as it is, not 64 KiB GSO bursts.
	if err := qemurouter.InNetns(ns, func() (err error) {
		ul, err = udplink.Open(udplink.Config{Local: addr})
		return err
	}); err != nil {
		return nil, fmt.Errorf("%s: udplink: %w", ns, err)
	}
	var l link.Link = ul
	if count != nil {
		l = &countingLink{Link: ul, from: count}
	}
	dev, err := rnic.Open(rnic.Config{Addr: addr, Link: l, MTU: sc.MTU, StrictICRC: true,
		DCQCN: rnic.DCQCNConfig{Disable: sc.DisableDCQCN, Params: params, LineRate: sc.LineRate}})
	if err != nil {
		ul.Close()
		return nil, fmt.Errorf("%s: %w", ns, err)
	}
	return dev, nil
}

// open creates the devices, one per namespace, and connects the flows.
func (r *netnsRun) open(params cc.Params) error {
	sc := &r.cfg.sc
	count := make(map[netip.AddrPort]*atomic.Uint64, sc.Flows)
	for _, a := range r.topo.txAddrs {
		c := new(atomic.Uint64)
		count[a] = c
		r.counts = append(r.counts, c)
	}
	var err error
	if r.receiver, err = openDevice(r.topo.rx, r.topo.rxAddr, sc, params, count); err != nil {
		return err
	}
	rx, err := experiment.NewHost(r.receiver, 16, sc.MessageSize)
	if err != nil {
		return err
	}
	for i, ns := range r.topo.senders {
		dev, err := openDevice(ns, r.topo.txAddrs[i], sc, params, nil)
		if err != nil {
			return err
		}
		r.senders = append(r.senders, dev)
		h, err := experiment.NewHost(dev, 2*sc.Window, sc.MessageSize)
		if err != nil {
			return err
		}
		f, err := experiment.NewFlow(h, rx, sc, r.counts[i])
		if err != nil {
			return fmt.Errorf("flow %d: %w", i, err)
		}
		r.flows = append(r.flows, f)
	}
	return nil
}

// traffic runs the flows for Duration and samples every Interval.
func (r *netnsRun) traffic(ctx context.Context) (res *experiment.Result, drained bool, err error) {
	sc := &r.cfg.sc
	res = &experiment.Result{Scenario: *sc, FlowErrors: make([]error, sc.Flows)}
	t0 := time.Now()
	flowCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, f := range r.flows {
		start := time.Duration(0)
		if i < len(sc.Starts) {
			start = sc.Starts[i]
		}
		wg.Go(func() { res.FlowErrors[i] = f.Run(flowCtx, t0.Add(start)) })
	}
	err = r.sample(ctx, t0, res)
	stop()
	wg.Wait()
	drained = r.drain(ctx)
	r.closeDevices()
	t := &res.Totals
	for _, c := range r.counts {
		res.Delivered = append(res.Delivered, c.Load())
	}
	q, qerr := r.neck.stats(context.Background())
	if err == nil {
		err = qerr
	}
	t.Marked, t.TailDrops = q.Marked, q.Drops
	for _, s := range res.Samples {
		t.QueueMaxBytes = max(t.QueueMaxBytes, s.QueueMax)
	}
	t.CNPsSent = r.receiver.Counter("cnp_sent")
	for _, d := range r.senders {
		t.CNPsHandled += d.Counter("cnp_handled")
		t.RateReductions += d.Counter("rate_reductions")
		t.Retransmitted += d.Counter("retransmitted_pkts")
		t.Timeouts += d.Counter("local_ack_timeouts")
	}
	return res, drained, err
}

// drainTime bounds the wait for the WRITEs in flight when the flows stop:
// a full queue at the slowest bottleneck drains in well under a second,
// and a go-back-N resend after a drop takes the QP's ACK timeout.
const drainTime = 3 * time.Second

// drain waits, at most drainTime, for the WRITEs the flows left in flight
// to complete, so that the receiver's counters and the bottleneck's are
// read with nothing on the way between them (a packet the bottleneck
// counted but the receiver never saw is one its close cut off). It
// reports whether they all completed.
func (r *netnsRun) drain(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, drainTime)
	defer cancel()
	ok := true
	for _, f := range r.flows {
		if f.Drain(ctx) != nil {
			ok = false
		}
	}
	return ok
}

// sample records a Sample every Interval until Duration has passed: the
// flows' delivered bytes and rates from goroce, the queue from tc. The
// backlog tc reports at each sample in the second half goes into
// ArrivalQueue, so queue_p99_bytes is a percentile of sampled depths (a
// real queue cannot report the depth each packet found).
func (r *netnsRun) sample(ctx context.Context, t0 time.Time, res *experiment.Result) error {
	sc := &r.cfg.sc
	tick := time.NewTicker(sc.Interval)
	defer tick.Stop()
	prev, prevAt := make([]uint64, sc.Flows), time.Duration(0)
	var prevDone uint64
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		q, err := r.neck.stats(ctx)
		if err != nil {
			return err
		}
		at := time.Since(t0)
		s := experiment.Sample{At: at, Throughput: make([]cc.Rate, sc.Flows), Rate: make([]cc.Rate, sc.Flows)}
		dt := (at - prevAt).Seconds()
		for i, f := range r.flows {
			d := r.counts[i].Load()
			s.Throughput[i] = cc.Rate(float64(d-prev[i]) * 8 / dt)
			s.Rate[i] = f.QP().Rate()
			prev[i] = d
		}
		var done uint64
		for _, f := range r.flows {
			done += f.Completed()
		}
		s.Goodput = cc.Rate(float64(done-prevDone) * 8 / dt)
		prevDone = done
		prevAt = at
		s.QueueBytes, s.QueueMax = q.Backlog, q.Backlog
		s.Marked, s.TailDrops = q.Marked, q.Drops
		s.CNPs = r.receiver.Counter("cnp_sent")
		for _, d := range r.senders {
			s.Retransmitted += d.Counter("retransmitted_pkts")
		}
		if at >= sc.Duration/2 {
			res.ArrivalQueue = append(res.ArrivalQueue, q.Backlog)
		}
		res.Samples = append(res.Samples, s)
		res.Elapsed = at
		if at >= sc.Duration {
			return nil
		}
	}
}

// closeDevices closes every device (their counters stay readable); safe
// to call twice.
func (r *netnsRun) closeDevices() {
	if r.closed {
		return
	}
	r.closed = true
	for _, d := range append([]*rnic.Device{r.receiver}, r.senders...) {
		if d != nil {
			d.Close()
		}
	}
}
