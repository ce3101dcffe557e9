package lesson

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/clock"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// This file holds the lab the lessons run in: goroce devices A, B (and C)
// attached to one simulated switch (rnic/simlink), all on one virtual
// clock (labClock), a registered buffer on each, and the few verbs steps
// every lesson needs: connect a QP pair, post, wait for a completion, lose
// a chosen packet.

// labConfig is what a lesson needs of its lab.
type labConfig struct {
	hosts int // devices: 2 (A and B) unless a lesson needs more
}

// Lab constants. The MTU is small so that a few kilobytes make a
// multi-packet message; the buffer is large enough for every lesson's
// messages; the start PSNs make A's requests and B's easy to tell apart.
const (
	labMTU      = 1024 // the devices' MTU and the QPs' path MTU
	labBufSize  = 64 << 10
	labMaxWR    = 16
	labFirstPSN = 0x000a00 // host i sends from labFirstPSN + i*0x100
)

// labCable is every host's cable to the switch, both ways: a packet of the
// lab's MTU takes under a microsecond on the wire, then a microsecond to
// cross, so the trace shows sends, arrivals and answers a few
// microseconds apart instead of all at one instant.
var labCable = simlink.Wire{Rate: 10 * simlink.Gbps, Latency: time.Microsecond}

// lab is the world of one lesson.
type lab struct {
	clock *labClock
	out   *lessonOutput
	net   *simlink.Network
	hosts []*host
	a, b  *host // hosts[0] and hosts[1]
	mtu   qp.MTU
	drops dropper

	closePcap func() error
}

// host is one machine of the lab: a goroce device on a switch port, with
// a protection domain, one completion queue for all its QPs, and a buffer
// registered with every access right (lessons that need a refusal use a
// wrong key, not a missing right).
type host struct {
	name string // A, B, C
	dev  *rnic.Device
	pd   *mr.PD
	cq   *qp.CQ
	buf  []byte
	mr   *mr.MR
	psn  wire.PSN // the first PSN of this host's requests
}

// newLab attaches cfg.hosts devices to a new switch, all on clk; it must
// run in a goroutine of clk (inside clk.Run). With trace, every device
// writes its trace through out, each line prefixed with the host's name;
// with pcapPath, device A's packets go to that capture file, stamped with
// clk's virtual time.
func newLab(clk *labClock, cfg labConfig, out *lessonOutput, trace bool, pcapPath string) (*lab, error) {
	if cfg.hosts == 0 {
		cfg.hosts = 2
	}
	l := &lab{clock: clk, out: out, mtu: qp.MTUFromBytes(labMTU), drops: dropper{out: out}, closePcap: func() error { return nil }}
	// Every port's packets pass the dropper, which loses only what a
	// lesson asked it to.
	l.net = simlink.NewNetwork(simlink.Config{Seed: 1, Clock: clk,
		Impairments: []simlink.Impairment{{Action: simlink.Drop, Match: l.drops.match}}})
	for i := range cfg.hosts {
		name := string(rune('A' + i))
		dc := rnic.Config{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i)}), 4791), MTU: labMTU,
			Clock: clk}
		if trace {
			dc.Trace = out.deviceTrace(name)
		}
		if i == 0 && pcapPath != "" {
			w, closeFile, err := pcap.Create(pcapPath)
			if err != nil {
				l.close()
				return nil, fmt.Errorf("--pcap: %w", err)
			}
			dc.Tap, l.closePcap = w, closeFile
		}
		h, err := l.attach(name, dc)
		if err != nil {
			l.close()
			return nil, err
		}
		h.psn = wire.PSN(labFirstPSN + i*0x100)
		l.hosts = append(l.hosts, h)
	}
	l.a, l.b = l.hosts[0], l.hosts[1]
	return l, nil
}

// attach opens a device on a new switch port and gives it a PD, a CQ and
// a registered buffer.
func (l *lab) attach(name string, dc rnic.Config) (*host, error) {
	port, err := l.net.Attach(dc.Addr, simlink.PortConfig{Uplink: labCable, Downlink: labCable})
	if err != nil {
		return nil, err
	}
	dc.Link = port
	dev, err := rnic.Open(dc)
	if err != nil {
		port.Close()
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	h := &host{name: name, dev: dev, buf: make([]byte, labBufSize)}
	// A device about to be closed needs nothing released by hand.
	if h.pd, err = dev.AllocPD(); err == nil {
		if h.cq, err = dev.CreateCQ(4 * labMaxWR); err == nil {
			h.mr, err = h.pd.RegMR(h.buf, mr.AccessLocalWrite|mr.AccessRemoteWrite|mr.AccessRemoteRead|mr.AccessRemoteAtomic)
		}
	}
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	return h, nil
}

// close closes the devices, the switch and the capture.
func (l *lab) close() error {
	for _, h := range l.hosts {
		h.dev.Close()
	}
	l.net.Close()
	return l.closePcap()
}

// introduce says who is who.
func (l *lab) introduce() {
	var names []string
	for _, h := range l.hosts {
		names = append(names, fmt.Sprintf("%s = %v", h.name, h.dev.Addr()))
	}
	l.out.say("%s, on one simulated switch; path MTU %d bytes.", strings.Join(names, ", "), l.mtu.Bytes())
}

// qpOptions are the RC/UC attributes a lesson may change; the zero value
// takes the defaults in brackets.
type qpOptions struct {
	timeout     uint8 // local ACK timeout, 4.096 µs × 2^timeout [14: 67 ms]
	retryCnt    uint8 // [7]
	rnrRetry    uint8 // [7: retry for ever]
	minRNRTimer uint8 // the RNR NAK timer code the responder sends [12: 0.64 ms]
}

// connect creates a QP of type typ (RC or UC) on x and on y and moves both
// through INIT, RTR and RTS towards each other, as ibv_modify_qp wants it.
func (l *lab) connect(typ qp.Type, x, y *host, opt qpOptions) (qx, qy *rnic.QP, err error) {
	if opt.timeout == 0 {
		opt.timeout = 14
	}
	if opt.retryCnt == 0 {
		opt.retryCnt = 7
	}
	if opt.rnrRetry == 0 {
		opt.rnrRetry = 7
	}
	if opt.minRNRTimer == 0 {
		opt.minRNRTimer = 12
	}
	if qx, err = x.createQP(typ); err != nil {
		return nil, nil, err
	}
	if qy, err = y.createQP(typ); err != nil {
		return nil, nil, err
	}
	l.out.say("== %s creates %v QP %#06x, %s creates %v QP %#06x; both go RESET → INIT → RTR → RTS",
		x.name, typ, qx.QPN(), y.name, typ, qy.QPN())
	if err := l.modifyRTS(typ, x, qx, y, qy, opt); err != nil {
		return nil, nil, err
	}
	if err := l.modifyRTS(typ, y, qy, x, qx, opt); err != nil {
		return nil, nil, err
	}
	return qx, qy, nil
}

// createQP creates a QP of type typ on h, in RESET.
func (h *host) createQP(typ qp.Type) (*rnic.QP, error) {
	q, err := h.dev.CreateQP(h.pd, &qp.InitAttr{Type: typ, SendCQ: h.cq, RecvCQ: h.cq,
		Cap: qp.Cap{MaxSendWR: labMaxWR, MaxRecvWR: labMaxWR, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, fmt.Errorf("host %s: create %v QP: %w", h.name, typ, err)
	}
	return q, nil
}

// modifyRTS moves q (on h) to RTS towards peer's QP pq, with the
// attributes each transition requires for its type.
func (l *lab) modifyRTS(typ qp.Type, h *host, q *rnic.QP, peer *host, pq *rnic.QP, opt qpOptions) error {
	type step struct {
		attr qp.Attr
		mask qp.AttrMask
	}
	steps := []step{
		{qp.Attr{State: qp.StateInit, PortNum: 1, AccessFlags: mr.AccessRemoteWrite | mr.AccessRemoteRead | mr.AccessRemoteAtomic},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: peer.dev.GID()}, PathMTU: l.mtu, DestQPN: pq.QPN(), RQPSN: peer.psn},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN},
		{qp.Attr{State: qp.StateRTS, SQPSN: h.psn}, qp.AttrState | qp.AttrSQPSN},
	}
	if typ == qp.RC {
		steps[1].attr.MaxDestRdAtomic, steps[1].attr.MinRNRTimer = 4, opt.minRNRTimer
		steps[1].mask |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
		steps[2].attr.Timeout, steps[2].attr.RetryCnt, steps[2].attr.RNRRetry, steps[2].attr.MaxRdAtomic =
			opt.timeout, opt.retryCnt, opt.rnrRetry, 4
		steps[2].mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
	}
	for _, s := range steps {
		if err := q.Modify(&s.attr, s.mask); err != nil {
			return fmt.Errorf("host %s: %w", h.name, err)
		}
	}
	return nil
}

// udQP creates a UD QP on h with Q_Key qkey and moves it to RTS: a UD QP
// needs no peer, only its Q_Key.
func (l *lab) udQP(h *host, qkey uint32) (*rnic.QP, error) {
	q, err := h.createQP(qp.UD)
	if err != nil {
		return nil, err
	}
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, PortNum: 1, QKey: qkey}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey},
		{qp.Attr{State: qp.StateRTR}, qp.AttrState},
		{qp.Attr{State: qp.StateRTS, SQPSN: h.psn}, qp.AttrState | qp.AttrSQPSN},
	}
	for _, s := range steps {
		if err := q.Modify(&s.attr, s.mask); err != nil {
			return nil, fmt.Errorf("host %s: %w", h.name, err)
		}
	}
	return q, nil
}

// sge is one scatter/gather element of h's buffer.
func (h *host) sge(off, length int) []qp.SGE {
	return []qp.SGE{{Addr: h.mr.Addr() + uint64(off), Length: uint32(length), LKey: h.mr.LKey()}}
}

// post posts wr on q, which belongs to h.
func (h *host) post(q *rnic.QP, wr *qp.SendWR) error {
	if err := q.PostSend(wr); err != nil {
		return fmt.Errorf("host %s: post %v: %w", h.name, wr.Opcode, err)
	}
	return nil
}

// postRecv posts a receive of length bytes at off in h's buffer on q.
func (h *host) postRecv(q *rnic.QP, wrID uint64, off, length int) error {
	if err := q.PostRecv(&qp.RecvWR{WRID: wrID, SGL: h.sge(off, length)}); err != nil {
		return fmt.Errorf("host %s: post receive: %w", h.name, err)
	}
	return nil
}

// completionWait bounds, in the lab's virtual time, each thing a lesson
// waits for: a completion, a counter, a state, an event. The slowest the
// lessons stage is an ACK timeout of 67 ms; virtual seconds cost no real
// time when the lab has nothing else to do.
const completionWait = 5 * time.Second

// errNoCompletion: a completion the lesson waited for did not come.
var errNoCompletion = errors.New("no completion")

// nextCompletion waits for h's next completion and returns it; what says
// what the lesson waits for, in the error if none comes.
func (l *lab) nextCompletion(ctx context.Context, h *host, what string) (qp.WC, error) {
	wcs := make([]qp.WC, 1)
	err := l.waitUntil(ctx, func() bool { return h.cq.Poll(wcs) == 1 }, func() error {
		return fmt.Errorf("host %s: %w within %v (%s)", h.name, errNoCompletion, completionWait, what)
	})
	return wcs[0], err
}

// wait returns h's next completion, says what it is, and checks its
// status; a wrong status is an error naming what was expected.
func (l *lab) wait(ctx context.Context, h *host, want qp.WCStatus) (qp.WC, error) {
	wc, err := l.nextCompletion(ctx, h, fmt.Sprintf("want one with status %q", want))
	if err != nil {
		return wc, err
	}
	l.out.say("-> %s: completion wr_id=%d %v %q, %d bytes", h.name, wc.WRID, wc.Opcode, wc.Status.String(), wc.ByteLen)
	if wc.Status != want {
		return wc, fmt.Errorf("host %s: wr_id %d completed with %q, want %q", h.name, wc.WRID, wc.Status.String(), want.String())
	}
	return wc, nil
}

// waitAll polls one completion per status in wants, in order, and only
// then prints them, so that the transcript shows the device's lines of
// every one before the program's.
func (l *lab) waitAll(ctx context.Context, h *host, wants ...qp.WCStatus) error {
	got := make([]qp.WC, 0, len(wants))
	for len(got) < len(wants) {
		wc, err := l.nextCompletion(ctx, h, fmt.Sprintf("%d of %d completions", len(got), len(wants)))
		if err != nil {
			return err
		}
		got = append(got, wc)
	}
	for i, wc := range got {
		l.out.say("-> %s: completion wr_id=%d %v %q, %d bytes", h.name, wc.WRID, wc.Opcode, wc.Status.String(), wc.ByteLen)
		if wc.Status != wants[i] {
			return fmt.Errorf("host %s: wr_id %d completed with %q, want %q", h.name, wc.WRID, wc.Status.String(), wants[i].String())
		}
	}
	return nil
}

// settleTime is how long expectNoCompletion lets the lab run first:
// thousands of round trips on the lab's cables.
const settleTime = 20 * time.Millisecond

// expectNoCompletion checks that h's CQ is empty, after letting the lab
// run for settleTime of virtual time, so that anything in flight lands.
func (l *lab) expectNoCompletion(ctx context.Context, h *host, why string) error {
	if err := l.sleep(ctx, settleTime); err != nil {
		return err
	}
	wcs := make([]qp.WC, 1)
	if h.cq.Poll(wcs) > 0 {
		return fmt.Errorf("host %s: unexpected completion wr_id=%d %v %q (%s)", h.name, wcs[0].WRID, wcs[0].Opcode, wcs[0].Status.String(), why)
	}
	l.out.say("-> %s: no completion (%s)", h.name, why)
	return nil
}

// waitCounter waits until h's counter name reaches at least want.
func (l *lab) waitCounter(ctx context.Context, h *host, name string, want uint64) error {
	return l.waitUntil(ctx, func() bool { return h.dev.Counter(name) >= want }, func() error {
		return fmt.Errorf("host %s: counter %s stayed at %d, want %d", h.name, name, h.dev.Counter(name), want)
	})
}

// waitState waits until q is in state want.
func (l *lab) waitState(ctx context.Context, q *rnic.QP, want qp.State) error {
	return l.waitUntil(ctx, func() bool { return q.State() == want }, func() error {
		return fmt.Errorf("QP %#06x stayed %v, want %v", q.QPN(), q.State(), want)
	})
}

// qpEvent returns the next QP event on h's device, skipping port events.
func (l *lab) qpEvent(ctx context.Context, h *host) (qp.Event, error) {
	var ev qp.Event
	err := l.waitUntil(ctx, func() bool {
		for {
			select {
			case ev = <-h.dev.Events():
				if ev.QP != nil {
					return true
				}
			default:
				return false
			}
		}
	}, func() error { return fmt.Errorf("host %s: no QP event", h.name) })
	return ev, err
}

// waitUntil waits until cond holds. It checks cond each time the lab has
// moved (see labClock), so it sees every state the devices and the switch
// pass through, and returns before the virtual time moves on from the
// instant cond came true: what the script does next happens before any
// timer that was still pending then. If cond does not hold within
// completionWait of virtual time, waitUntil returns the error failed
// makes; if ctx ends first (the lesson's time in real time is up, or the
// program is interrupted), ctx's error.
func (l *lab) waitUntil(ctx context.Context, cond func() bool, failed func() error) error {
	if cond() {
		return nil
	}
	expired := make(chan struct{})
	deadline := l.clock.Virtual.AfterFunc(completionWait, func() { close(expired) })
	defer deadline.Stop()
	// The script's own waiter, which is not a labClock's: its waking is
	// not the lab moving.
	w := l.clock.Virtual.NewWaiter(l.clock.moved, expired, ctx.Done())
	for !cond() {
		switch w.Wait() {
		case 1:
			if cond() {
				return nil
			}
			return failed()
		case 2:
			return fmt.Errorf("%w (%v)", ctx.Err(), failed())
		}
	}
	return nil
}

// sleep lets the lab run for d of virtual time.
func (l *lab) sleep(ctx context.Context, d time.Duration) error {
	rang := make(chan struct{})
	t := l.clock.Virtual.AfterFunc(d, func() { close(rang) })
	defer t.Stop()
	if l.clock.Virtual.NewWaiter(rang, ctx.Done()).Wait() == 1 {
		return ctx.Err()
	}
	return nil
}

// counters prints the named counters of h, as `rdma statistic` names
// them, and returns their values.
func (l *lab) counters(h *host, names ...string) []uint64 {
	var vals []uint64
	var parts []string
	for _, n := range names {
		v := h.dev.Counter(n)
		vals = append(vals, v)
		parts = append(parts, fmt.Sprintf("%s=%d", n, v))
	}
	l.out.say("-> %s's counters: %s", h.name, strings.Join(parts, " "))
	return vals
}

// dropper is the switch's one programmed impairment: it loses the packets
// lessons ask it to, one each, and says so on an S line.
type dropper struct {
	out *lessonOutput

	mu      sync.Mutex
	pending []dropRule
}

// A dropRule loses the next packet from src for which match is true.
type dropRule struct {
	src   netip.AddrPort
	match func(p wire.Packet) bool
}

// dropNext makes the switch lose the next packet from h for which match
// is true.
func (l *lab) dropNext(h *host, match func(p wire.Packet) bool) {
	l.drops.mu.Lock()
	defer l.drops.mu.Unlock()
	l.drops.pending = append(l.drops.pending, dropRule{src: h.dev.Addr(), match: match})
}

// match is the switch's Match for the Drop impairment; it runs for every
// packet, with the network locked.
func (d *dropper) match(sp *simlink.Packet) bool {
	p, err := wire.Parse(sp.Data)
	if err != nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range d.pending {
		if r.src == sp.Src && r.match(p) {
			d.pending = append(d.pending[:i], d.pending[i+1:]...)
			d.out.trace("S", fmt.Sprintf("drop %v > %v %v", sp.Src, sp.Dst, p))
			return true
		}
	}
	return false
}

// isOpcode returns a match for packets with opcode op.
func isOpcode(op wire.Opcode) func(p wire.Packet) bool {
	return func(p wire.Packet) bool { return p.Opcode() == op }
}

// lessonOutput is where a lesson prints: its narration and the trace
// lines of the devices and the switch, each line written whole. Trace
// lines are stamped with the seconds since the lab started, on the lab's
// virtual clock, read as the line is printed (in the goroutine of the
// lab that acts, at the instant it acts): one clock for every device,
// increasing down the page, the same on every run.
type lessonOutput struct {
	clock clock.Clock
	start time.Time

	mu sync.Mutex
	w  io.Writer
}

// say prints one line of narration.
func (o *lessonOutput) say(format string, a ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, format+"\n", a...)
}

// trace prints a trace line: who (A, B, S), the time, and what.
func (o *lessonOutput) trace(who, what string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, "%s %.6f %s\n", who, o.clock.Now().Sub(o.start).Seconds(), what)
}

// deviceTrace returns the writer for the trace of device who. The device
// writes lines "SECONDS EVENT"; each is printed as a trace line of who,
// on the lab's clock.
func (o *lessonOutput) deviceTrace(who string) io.Writer {
	return &traceWriter{o: o, who: who}
}

// traceWriter is lessonOutput.deviceTrace's writer. A device's tracer
// writes whole lines, one per Write; a partial line waits for its end.
type traceWriter struct {
	o   *lessonOutput
	who string

	mu   sync.Mutex
	part []byte
}

func (t *traceWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, b...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(t.part[:i])
		t.part = t.part[i+1:]
		// Drop the device's own clock: the lab's replaces it.
		if _, event, ok := strings.Cut(line, " "); ok {
			line = event
		}
		t.o.trace(t.who, line)
	}
}
