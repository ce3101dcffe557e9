package experiment

import (
	"errors"
	"fmt"
	"io"
	"time"

	cc "github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/clock"
)

// ErrInvalidScenario is wrapped by every error Run returns for a Scenario
// field out of range; the message names the field.
var ErrInvalidScenario = errors.New("dcqcn bench: invalid scenario")

// Scenario describes one experiment. Zero fields take the defaults that
// Incast documents; Incast and Converge return complete scenarios.
type Scenario struct {
	// Name labels the output files ("incast", "converge").
	Name string
	// Flows is the number of senders; each has its own device and one RC
	// QP to the receiver.
	Flows int
	// Starts holds when each flow starts, from the beginning of the run;
	// flows beyond len(Starts) start at once.
	Starts []time.Duration

	// LineRate is the rate of every wire: each host's cable both ways, and
	// so the bottleneck, the switch's queue towards the receiver. It is
	// also the rate DCQCN starts every QP at.
	LineRate cc.Rate
	// Latency is each wire's one-way propagation delay; a round trip
	// crosses four wires.
	Latency time.Duration
	// Buffer is the bottleneck queue's capacity in bytes: a packet that
	// does not fit is dropped (tail drop).
	Buffer int
	// RED is the bottleneck queue's marking rule, DCQCN's congestion point.
	// Zero takes HPCC's DCQCN thresholds scaled to LineRate (see
	// dcqcn.PresetHPCC): at 10 Gb/s, Kmin 40 kB, Kmax 160 kB, Pmax 0.2.
	RED cc.RED
	// MarkOnEnqueue makes the congestion point judge each packet by the
	// queue it finds on arrival, instead of by the queue it leaves behind
	// on departure (simlink.MarkOnDequeue, the default, as in the DCQCN and
	// HPCC simulators). An arrival mark waits out the queue before the
	// receiver sees it, so the feedback is late by the queueing delay.
	MarkOnEnqueue bool

	// Preset names the DCQCN parameters (dcqcn.PresetByName): "paper"
	// (default), "mlx5" or "hpcc". The default is the paper's because at
	// 10 Gb/s with these thresholds it holds the queue lowest and the link
	// busiest (see the package doc). The paper's rate steps were chosen
	// for 40 Gb/s links; Run scales them to LineRate
	// (dcqcn.Params.ScaleRateSteps), as HPCC's preset scales its own.
	Preset string
	// FirstCNPRate is the rate a sender's QP drops to on its first CNP
	// (dcqcn.Params.RateToSetOnFirstCNP, the ConnectX firmware's
	// rate_to_set_on_first_cnp), applied on top of Preset. Zero takes a
	// tenth of LineRate; LineRate or more turns it off (the first CNP then
	// cuts like any other). Without it the senders of an incast, which all
	// start at the line rate, need several CNP intervals of cuts to come
	// down, and their start fills the buffer first.
	FirstCNPRate cc.Rate
	// Params, if not zero, are used instead of Preset and FirstCNPRate,
	// exactly as given.
	Params cc.Params
	// DisableDCQCN runs the devices with DCQCN off: no pacing, marks
	// counted but not answered. The queue is then bounded only by the
	// senders' windows and the buffer.
	DisableDCQCN bool

	// Duration is how long the run lasts; Interval how often it samples.
	Duration, Interval time.Duration

	// MessageSize is the length of each RDMA WRITE, Window how many a flow
	// keeps in flight: a flow has at most MessageSize·Window bytes
	// unacknowledged, its window.
	MessageSize, Window int
	// MTU is the devices' path MTU (256 ... 4096).
	MTU int
	// PostRate bounds how fast each sender posts its WRITEs, in message
	// bits per second, as perftest's software rate limiter does
	// (ib_write_bw --rate_limit_type=SW). Zero means LineRate. It stands
	// in for the NIC's scheduler: a goroce device hands whatever has been
	// posted to its link at once while DCQCN is not limiting it, and the
	// simulated uplink queues it without limit, so without this bound a
	// flow would put its whole window on the wire before a CNP could
	// slow it. Posting at line rate keeps the backlog in the send queue,
	// where the DCQCN pacer governs it.
	PostRate cc.Rate
	// AckTimeout is the QPs' local ACK timeout code (4.096 µs·2^code),
	// RetryCnt their transport retry count.
	AckTimeout, RetryCnt uint8

	// Seed seeds the switch's random draws (RED marking).
	Seed uint64

	// Tolerance is how close to its fair share (LineRate/Flows) every
	// flow's throughput must be for the run to count as converged: 0.1
	// means within 10 %. ConvergeWindow is the window throughput is
	// averaged over for that test; zero picks the time a fair share takes
	// to deliver 256 full packets, at least 10 intervals.
	Tolerance      float64
	ConvergeWindow time.Duration

	// OnSample, if set, is called with every Sample as the run records it,
	// from the run's sampling loop: a live view (goroce dcqcn --ui-addr)
	// watches the run through it. It must return quickly and must not
	// modify the Sample's slices, which the Result keeps.
	OnSample func(Sample)
	// Trace and Tap, if set, are every device's rnic.Config.Trace and Tap:
	// one decoded line per packet and QP event (CNPs and DCQCN rate
	// changes among them), and a capture of every packet.
	Trace io.Writer
	Tap   rnic.Tap
	// Clock is the run's time, shared by the network, the devices, the
	// flows and the sampler. Nil is clock.Real: virtual time inside a
	// testing/synctest bubble, real time elsewhere. A *clock.Virtual runs
	// the experiment in virtual time in any program: call Run inside the
	// clock's Run (see RunVirtual).
	Clock clock.Clock
}

// Defaults of Incast, at 10 Gb/s.
const (
	DefaultLineRate    = 10 * cc.Gbps
	DefaultLatency     = time.Microsecond
	DefaultDuration    = 200 * time.Millisecond // the verdict looks at the second half
	DefaultInterval    = 100 * time.Microsecond
	DefaultMessageSize = 16 << 10
	DefaultWindow      = 32 // 512 KiB: more than the RC transport lets out (128 PSNs: 128 KiB at MTU 1024)
	DefaultMTU         = 1024
	DefaultAckTimeout  = 10 // 4.2 ms
	DefaultRetryCnt    = 7
	DefaultTolerance   = 0.1
)

// DefaultBuffer returns the bottleneck buffer Incast uses at rate: 800 kB
// at 10 Gb/s (a port's share of a shallow-buffer switch), in proportion to
// the rate, never below 64 kB. It is smaller than eight flows' windows (8 ×
// 128 PSNs of 1 KiB), so eight senders without congestion control
// overflow it; two cannot (their windows hold them to 256 KiB).
func DefaultBuffer(rate cc.Rate) int {
	return max(64_000, int(800_000*float64(rate)/float64(10*cc.Gbps)))
}

// Incast returns the N:1 incast: flows senders start together and write
// to one receiver. The defaults: 10 Gb/s wires of 1 µs, an 800 kB buffer
// whose RED marks leaving packets with HPCC's thresholds scaled to 10 Gb/s,
// the paper's preset with its rate steps scaled to 10 Gb/s and a first-CNP
// rate of 1 Gb/s, 200 ms sampled every 100 µs, WRITEs of 16 KiB posted at
// line rate with 32 in flight per flow, MTU 1024. The 200 ms leave DCQCN's
// even cuts and increases (AIMD) the time to even out the flows' shares
// before the second half, which the verdict measures: over 100 ms runs,
// four flows' Jain index ranged 0.989 ... 0.999 from run to run.
//
// MTU 1024 is what rxe runs RoCE at over a standard 1500-byte Ethernet, and
// the packet size (a 1000-byte payload) of the simulators the presets come
// from, whose thresholds count such packets. It matters to DCQCN: a flow
// hears of congestion only through its own packets crossing the queue, one
// per Flows·MTU/LineRate, and the CNPs to sixteen flows come four times as
// often with 1 KiB packets as with 4 KiB ones.
func Incast(flows int) Scenario {
	return Scenario{Name: "incast", Flows: flows}.WithDefaults()
}

// Converge returns the convergence experiment: two flows, the second
// starting a quarter of the way into the run, so the first has the link to
// itself and must then give half of it up.
func Converge() Scenario {
	s := Scenario{Name: "converge", Flows: 2}.WithDefaults()
	// The second flow joins at a quarter, so the second half, which the
	// test measures, shows the settled flows rather than the approach.
	s.Starts = []time.Duration{0, s.Duration / 4}
	return s
}

// WithDefaults returns s with its zero fields filled in with the defaults
// Incast documents, as Run fills them.
func (s Scenario) WithDefaults() Scenario {
	if s.Name == "" {
		s.Name = "incast"
	}
	if s.LineRate == 0 {
		s.LineRate = DefaultLineRate
	}
	if s.Latency == 0 {
		s.Latency = DefaultLatency
	}
	if s.Buffer == 0 {
		s.Buffer = DefaultBuffer(s.LineRate)
	}
	if s.RED == (cc.RED{}) {
		s.RED = cc.PresetHPCC(s.LineRate).RED()
	}
	if s.Preset == "" {
		s.Preset = cc.PresetNamePaper
	}
	if s.Duration == 0 {
		s.Duration = DefaultDuration
	}
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	if s.MessageSize == 0 {
		s.MessageSize = DefaultMessageSize
	}
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	if s.MTU == 0 {
		s.MTU = DefaultMTU
	}
	if s.PostRate == 0 {
		s.PostRate = s.LineRate
	}
	if s.FirstCNPRate == 0 {
		s.FirstCNPRate = s.LineRate / 10
	}
	if s.AckTimeout == 0 {
		s.AckTimeout = DefaultAckTimeout
	}
	if s.RetryCnt == 0 {
		s.RetryCnt = DefaultRetryCnt
	}
	if s.Tolerance == 0 {
		s.Tolerance = DefaultTolerance
	}
	if s.ConvergeWindow == 0 && s.Flows > 0 && s.LineRate > 0 {
		fair := float64(s.LineRate) / float64(s.Flows)
		w := time.Duration(256 * float64((s.MTU+datagramOverhead)*8) / fair * float64(time.Second))
		s.ConvergeWindow = max(w, 10*s.Interval)
	}
	return s
}

// datagramOverhead is what a full RDMA WRITE packet carries besides its
// payload: BTH 12 and ICRC 4 (RETH only on the first packet).
const datagramOverhead = 16

// DCQCNParams returns the DCQCN parameters the devices run with: Params if
// set, else Preset (its rate steps scaled to LineRate for "paper") with
// FirstCNPRate. An unknown preset returns an error matching
// ErrInvalidScenario.
func (s *Scenario) DCQCNParams() (cc.Params, error) {
	if s.Params != (cc.Params{}) {
		return s.Params, nil
	}
	p, err := cc.PresetByName(s.Preset, s.LineRate)
	if err != nil {
		return cc.Params{}, fmt.Errorf("%w: Preset: %v", ErrInvalidScenario, err)
	}
	if s.Preset == cc.PresetNamePaper {
		p = p.ScaleRateSteps(cc.PaperLineRate, s.LineRate)
	}
	p.RateToSetOnFirstCNP = s.FirstCNPRate
	if err := p.Validate(); err != nil {
		return cc.Params{}, fmt.Errorf("%w: FirstCNPRate: %v", ErrInvalidScenario, err)
	}
	return p, nil
}

// Validate reports the first field out of range. Call it after
// WithDefaults. Run calls it; a program that measures a scenario elsewhere
// (on real links) calls it to check the fields it shares.
func (s *Scenario) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidScenario, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Flows < 1 || s.Flows > maxFlows:
		return bad("Flows %d: want 1 ... %d", s.Flows, maxFlows)
	case len(s.Starts) > s.Flows:
		return bad("%d Starts for %d flows", len(s.Starts), s.Flows)
	case !(s.LineRate >= cc.Mbps && s.LineRate <= cc.MaxPacerRate):
		return bad("LineRate %v: want 1 Mb/s ... %v", s.LineRate, cc.MaxPacerRate)
	case s.Latency < 0:
		return bad("Latency %v is negative", s.Latency)
	case s.Buffer < 0:
		return bad("Buffer %d is negative", s.Buffer)
	case s.Duration <= 0 || s.Interval <= 0 || s.Interval > s.Duration:
		return bad("Duration %v, Interval %v: want 0 < Interval ≤ Duration", s.Duration, s.Interval)
	case s.MessageSize < 1 || s.MessageSize > 1<<30:
		return bad("MessageSize %d: want 1 ... 1 GiB", s.MessageSize)
	case !(s.PostRate > 0):
		return bad("PostRate %v: want a positive rate", s.PostRate)
	case !(s.FirstCNPRate > 0):
		return bad("FirstCNPRate %v: want a positive rate", s.FirstCNPRate)
	case s.Window < 1 || s.Window > 4096:
		return bad("Window %d: want 1 ... 4096", s.Window)
	case !(s.Tolerance > 0 && s.Tolerance < 1):
		return bad("Tolerance %v: want a fraction in (0, 1)", s.Tolerance)
	case s.ConvergeWindow < 0:
		return bad("ConvergeWindow %v is negative", s.ConvergeWindow)
	}
	for i, at := range s.Starts {
		if at < 0 || at >= s.Duration {
			return bad("Starts[%d] %v: want 0 ≤ start < Duration %v", i, at, s.Duration)
		}
	}
	if err := s.RED.Validate(); err != nil {
		return bad("RED: %v", err)
	}
	return nil
}

// maxFlows bounds Flows: each sender has its own address in 10.0.1.0/24.
const maxFlows = 254

// start returns when flow i starts.
func (s *Scenario) start(i int) time.Duration {
	if i < len(s.Starts) {
		return s.Starts[i]
	}
	return 0
}

// lastStart is when the last flow starts.
func (s *Scenario) lastStart() time.Duration {
	var last time.Duration
	for i := range s.Flows {
		last = max(last, s.start(i))
	}
	return last
}
