package flood

import (
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/udplink"
)

// Counts are a device's counters by name, as rnic.Device.Counters names
// them (after rxe's `rdma statistic`).
type Counts map[string]uint64

// countsOf reads dev's counters.
func countsOf(dev *rnic.Device) Counts {
	c := Counts{}
	for _, x := range dev.Counters() {
		c[x.Name] = x.Value
	}
	return c
}

// sub returns c − before, counter by counter.
func (c Counts) sub(before Counts) Counts {
	d := Counts{}
	for k, v := range c {
		d[k] = v - before[k]
	}
	return d
}

// DropCounters are the counters of a datagram the device read and dropped
// before any QP accepted it. Each datagram the device reads
// (link_rcvd_pkts) lands in exactly one of these or in cnp_received or
// rcvd_pkts. drop_bad_qkey and drop_unexpected are not among them: they
// count packets a QP had already accepted (rcvd_pkts), so adding them
// would count a packet twice. Read-only.
var DropCounters = []string{"malformed", "icrc_err", "unknown_qpn", "drop_bad_source", "drop_bad_state"}

// Dropped returns the sum of the DropCounters.
func (c Counts) Dropped() uint64 {
	var n uint64
	for _, name := range DropCounters {
		n += c[name]
	}
	return n
}

// Unaccounted returns the datagrams the device read (link_rcvd_pkts) that
// no disposition counter took: not dropped, not a CNP, not accepted by a
// QP. It is 0 when the device accounts for every datagram.
func (c Counts) Unaccounted() int64 {
	return int64(c["link_rcvd_pkts"]) - int64(c.Dropped()+c["cnp_received"]+c["rcvd_pkts"])
}

// Phase is what one phase of the run measured.
type Phase struct {
	Name         string // "baseline", "flood" or "both"
	Legit, Flood bool   // whether the peer's WRITEs and the attacker ran
	// Elapsed is the phase's length: from starting the traffic to telling
	// it to stop. Rates are per second of Elapsed.
	Elapsed time.Duration
	// Drain is how long after the phase the WRITEs still in flight took to
	// complete and the victim took to empty its socket.
	Drain time.Duration

	// Writes and WriteBytes are the legitimate WRITEs that completed with
	// success during Elapsed; WritesAll includes those that completed
	// during Drain. SlotsVerified is how many of the victim's slots were
	// compared with the peer's after the drain.
	Writes, WriteBytes, WritesAll uint64
	SlotsVerified                 int

	// Sent are the hostile datagrams the attacker handed to the kernel, by
	// kind; SendErrors those the kernel refused (FirstSendError says why).
	Sent           map[Kind]uint64
	SendErrors     uint64
	FirstSendError string

	// Victim are the victim's counters over Elapsed; VictimAll over the
	// phase and its drain: every datagram of the phase that reached the
	// victim. Peer are the peer's over the phase and its drain.
	Victim, VictimAll, Peer Counts
	// Kernel are the drops Linux counted over the phase and its drain.
	Kernel KernelCounts
	// VictimQPState is the state of the victim's QP after the drain.
	VictimQPState qp.State
	// Memory sums up the samples taken during the phase and its drain.
	Memory MemSpan
	// Problems are the invariants the phase broke, in words; none if
	// it held them all.
	Problems []string
}

func (p *Phase) perSecond(n uint64) float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(n) / p.Elapsed.Seconds()
}

// BandwidthGBps returns the legitimate WRITEs' goodput in GB/s (1e9 bytes).
func (p *Phase) BandwidthGBps() float64 { return p.perSecond(p.WriteBytes) / 1e9 }

// ValidPPS returns the packets per second that the victim's QP accepted
// (rcvd_pkts): the rate at which it handles real traffic.
func (p *Phase) ValidPPS() float64 { return p.perSecond(p.Victim["rcvd_pkts"]) }

// SentTotal returns the hostile datagrams handed to the kernel.
func (p *Phase) SentTotal() uint64 {
	var n uint64
	for _, c := range p.Sent {
		n += c
	}
	return n
}

// SentPPS returns the rate at which the attacker handed datagrams to the
// kernel.
func (p *Phase) SentPPS() float64 { return p.perSecond(p.SentTotal()) }

// DroppedPPS returns the rate at which the victim counted and dropped
// datagrams during Elapsed.
func (p *Phase) DroppedPPS() float64 { return p.perSecond(p.Victim.Dropped()) }

// KernelLost returns the hostile datagrams that never reached the victim's
// receive loop: sent, minus those it counted as dropped by the end of the
// drain (the peer's packets are never dropped that way).
func (p *Phase) KernelLost() int64 { return int64(p.SentTotal()) - int64(p.VictimAll.Dropped()) }

// Result is what Run measured.
type Result struct {
	Config Config // with defaults filled in
	// CPUs is runtime.NumCPU and GOMAXPROCS runtime.GOMAXPROCS(0): the
	// attacker, the victim and the peer share them.
	CPUs, GOMAXPROCS int
	// VictimSocket are the victim's socket buffer sizes asked for and
	// granted.
	VictimSocket udplink.SocketBuffers
	// VictimQPN is the QPN the attacker aimed at.
	VictimQPN uint32
	// Phases are baseline, flood and both, in that order.
	Phases []Phase
	// Samples are every memory sample, from before the devices opened to
	// after they closed; Memory sums them up.
	Samples []MemSample
	Memory  MemSpan
	// GoroutinesStart is the goroutine count when Run began, before it
	// opened anything; GoroutinesEnd after it closed everything.
	GoroutinesStart, GoroutinesEnd int
	// Problems are the run's broken invariants beyond its phases'.
	Problems []string
}

// Phase returns the phase of that name, or nil.
func (r *Result) Phase(name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

// OK reports whether every invariant held: no problem in any phase or in
// the run.
func (r *Result) OK() bool {
	for _, p := range r.Phases {
		if len(p.Problems) > 0 {
			return false
		}
	}
	return len(r.Problems) == 0
}

// FloodHeapGrowth returns how far the heap in use grew while the attacker
// ran: the largest HeapInuse sampled in a flood phase minus HeapInuse at
// the start of the first one. Bounded memory means it does not grow with
// the flood's length.
func (r *Result) FloodHeapGrowth() int64 {
	var start, peak uint64
	first := true
	for _, p := range r.Phases {
		if !p.Flood {
			continue
		}
		if first {
			start, first = p.Memory.Start.HeapInuse, false
		}
		peak = max(peak, p.Memory.MaxHeapInuse)
	}
	return int64(peak) - int64(start)
}
