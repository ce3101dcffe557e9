package simlink

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/goroce/goroce/rnic/clock"
	"github.com/goroce/goroce/rnic/link"
)

// Errors returned by the package. Each error returned wraps one of these, so
// callers can test with errors.Is.
var (
	// ErrClosed is returned after the port or its network has been closed.
	// It is link.ErrClosed, so device code need not know which link it has.
	ErrClosed = link.ErrClosed
	// ErrAddrInUse: Attach was given an address a port already has.
	ErrAddrInUse = errors.New("simlink: address already attached")
	// ErrInvalidAddr: an address is not a valid IP address with a non-zero
	// UDP port.
	ErrInvalidAddr = errors.New("simlink: invalid address")
	// ErrInvalidConfig: a Config or PortConfig field is out of range; the
	// message names the field.
	ErrInvalidConfig = errors.New("simlink: invalid config")
	// ErrDatagramTooLarge: WriteBatch was given a datagram longer than
	// MaxDatagram.
	ErrDatagramTooLarge = errors.New("simlink: datagram too large")
)

// MaxDatagram is the largest datagram (UDP payload) a port carries, the
// IPv4 UDP limit.
const MaxDatagram = 65507

// Rates in bits per second, for Wire.Rate: 25 * Gbps.
const (
	Kbps = 1_000
	Mbps = 1_000_000
	Gbps = 1_000_000_000
)

// Config configures a Network.
type Config struct {
	// Seed seeds the random streams that probability-based impairments and
	// ECN markers draw from. The same seed with the same sends gives the
	// same outcome.
	Seed uint64
	// Impairments apply to every packet crossing the switch, before the
	// sending port's Send rules and the receiving port's Receive rules.
	Impairments []Impairment
	// Observer, if not nil, is called for every enqueue, dequeue and tail
	// drop at every egress queue, so experiments can record a queue time
	// series without polling. It runs with the network locked: it must be
	// quick and must not call methods of the Network or its Ports.
	Observer func(Event)
	// Clock is the network's time: when packets leave, cross and arrive,
	// its one timer, and how a port's reader waits. Nil is clock.Real (the
	// time package, virtual inside a testing/synctest bubble); a
	// *clock.Virtual runs the network in virtual time in any program. The
	// devices on the network and the goroutines that use it must share it.
	Clock clock.Clock
}

// Network is a simulated switch and the cables to its ports. Its methods are
// safe for concurrent use.
type Network struct {
	clock    clock.Clock
	epoch    time.Time // virtual or real time zero of the simulation
	observer func(Event)
	rules    []Impairment
	seed     uint64
	cfgErr   error // what is wrong with Config, reported by Attach

	mu      sync.Mutex
	closed  bool
	ports   map[netip.AddrPort]*Port // open ports, by address
	all     []*Port                  // every port ever attached, for Stats
	events  eventQueue               // what happens next, earliest first
	timer   clock.Timer              // fires n.run at the earliest event
	armed   bool                     // timer is set to fire at armedAt
	armedAt time.Duration
	// unroutable counts packets that reached the switch for an address no
	// open port has.
	unroutable uint64
}

// NewNetwork returns an empty network. With clock.Real, call it inside the
// synctest bubble that will use it, if any. NewNetwork does not fail: if cfg is invalid, every
// Attach returns an error that says what is wrong.
func NewNetwork(cfg Config) *Network {
	clk := clock.Or(cfg.Clock)
	return &Network{
		clock:    clk,
		epoch:    clk.Now(),
		observer: cfg.Observer,
		rules:    cfg.Impairments,
		seed:     cfg.Seed,
		cfgErr:   validateRules("Config.Impairments", cfg.Impairments),
		ports:    make(map[netip.AddrPort]*Port),
	}
}

// Attach connects a new port with address addr to the switch. The address
// may be IPv4 or IPv6 (an IPv4-mapped IPv6 address is the same as the IPv4
// address) and must carry a non-zero UDP port. Attach fails if the address
// is taken, cfg is invalid, or the network is closed.
func (n *Network) Attach(addr netip.AddrPort, cfg PortConfig) (*Port, error) {
	if n.cfgErr != nil {
		return nil, fmt.Errorf("attach %v: %w", addr, n.cfgErr)
	}
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	if !addr.Addr().IsValid() || addr.Port() == 0 {
		return nil, fmt.Errorf("attach %v: %w", addr, ErrInvalidAddr)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("attach %v: %w", addr, err)
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("attach %v: %w", addr, ErrClosed)
	}
	if n.ports[addr] != nil {
		return nil, fmt.Errorf("attach %v: %w", addr, ErrAddrInUse)
	}
	p := &Port{
		net:      n,
		addr:     addr,
		cfg:      cfg,
		uplink:   serializer{rate: cfg.Uplink.Rate},
		rng:      rand.New(rand.NewPCG(n.seed, streamID(addr))),
		readable: make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	p.wait = n.clock.NewWaiter(p.readable, p.done)
	p.egress.line.rate = cfg.Downlink.Rate
	n.ports[addr] = p
	n.all = append(n.all, p)
	return p, nil
}

// streamID derives a port's random stream from its address (FNV-1a), so a
// port's draws do not depend on the order ports were attached in.
func streamID(addr netip.AddrPort) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	ip := addr.Addr().As16()
	for _, b := range ip {
		h = (h ^ uint64(b)) * prime
	}
	h = (h ^ uint64(addr.Port()>>8)) * prime
	return (h ^ uint64(addr.Port()&0xff)) * prime
}

// Close closes every port (their readers get ErrClosed) and discards every
// packet in flight. It is idempotent and leaves no goroutine or pending
// timer behind.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	for _, p := range n.ports {
		p.closeLocked()
	}
	// Packets in flight are left to the garbage collector rather than the
	// pool: a frame in an egress queue is also held by its dequeue event.
	n.events = eventQueue{}
	for _, p := range n.all {
		p.egress.frames = fifo[*frame]{}
		p.egress.bytes = 0
		p.held = nil
	}
	if n.timer != nil {
		n.timer.Stop()
	}
	n.armed = false
	return nil
}

// Stats returns the counters of all ports ever attached, summed (MaxBytes is
// the largest of them), and the count of unroutable packets.
func (n *Network) Stats() NetworkStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	var s NetworkStats
	for _, p := range n.all {
		ps := p.statsLocked()
		s.add(&ps)
	}
	s.Unroutable = n.unroutable
	return s
}

// now is the simulation time: how long since the network was created.
func (n *Network) now() time.Duration { return n.clock.Now().Sub(n.epoch) }

// schedule adds an event; the caller holds n.mu and calls n.advance (or is
// inside it) before unlocking, which arms the timer.
func (n *Network) schedule(at time.Duration, kind eventKind, f *frame) {
	n.events.push(event{at: at, kind: kind, f: f})
}

// advance runs every event due at or before now, in order, then arms the
// timer for the next one. Called with n.mu held, by the timer callback and
// by WriteBatch (so packets with no delay move without waiting for a timer).
func (n *Network) advance(now time.Duration) {
	for len(n.events.heap) > 0 && n.events.heap[0].at <= now {
		ev := n.events.pop()
		switch ev.kind {
		case evArrive:
			n.arrive(ev.at, ev.f)
		case evRelease:
			n.pass(ev.at, ev.f)
		case evDequeue:
			n.dequeue(ev.at, ev.f)
		case evDeliver:
			n.deliver(ev.f)
		}
	}
	if len(n.events.heap) == 0 {
		return
	}
	next := n.events.heap[0].at
	if n.armed && n.armedAt <= next {
		return
	}
	if n.timer == nil {
		n.timer = n.clock.AfterFunc(next-now, n.run)
	} else {
		n.timer.Reset(next - now)
	}
	n.armed, n.armedAt = true, next
}

// run is the timer callback: it moves the simulation up to the present.
func (n *Network) run() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.armed = false
	n.advance(n.now())
}

// observe reports a queue event to the observer, if there is one.
func (n *Network) observe(at time.Duration, p *Port, kind EventKind, size int, marked bool) {
	if n.observer == nil {
		return
	}
	n.observer(Event{
		Time:       n.epoch.Add(at),
		Port:       p.addr,
		Kind:       kind,
		Len:        size,
		QueueBytes: p.egress.bytes,
		Marked:     marked,
	})
}
