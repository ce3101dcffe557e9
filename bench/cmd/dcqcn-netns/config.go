package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/goroce/goroce/bench/experiment"
	"github.com/goroce/goroce/bench/qemurouter"
	cc "github.com/goroce/goroce/dcqcn"
)

// Defaults of a run.
const (
	// defaultRate is the bottleneck's rate: well below what goroce over
	// udplink sustains between namespaces on an unloaded 2-CPU machine
	// (see the README), so that the htb class, not the CPU, is the
	// bottleneck.
	defaultRate = 300 * cc.Mbps
	// defaultGuestRate is the bottleneck's rate with -router qemu: what
	// the guest, an emulated CPU (TCG), forwards without falling behind
	// (see the README).
	defaultGuestRate = 20 * cc.Mbps
	defaultDuration  = 6 * time.Second
	// defaultMTU is goroce's path MTU: 4096, not bench/experiment's 1024. In
	// real time the device's pacer lets a QP out in bursts of at least 4
	// packets per timer wake-up; with wake-ups a millisecond or more
	// apart, 1 KiB packets would hold a QP to 35 Mb/s or less.
	defaultMTU = 4096
	// defaultInterval is the sampling interval; each sample runs tc once.
	defaultInterval = 50 * time.Millisecond
	// minAckTimeout is the QPs' least local ACK timeout code: 4.096
	// µs·2^16 = 268 ms, above the deepest queue at 50 Mb/s (126 ms) plus
	// a goroutine descheduled for a while on a loaded machine. Slower
	// bottlenecks get more (ackTimeoutFor).
	minAckTimeout = 16
	// defaultStretch is the factor on DCQCN's timers (see paperParams).
	defaultStretch = 100
	// qpWindow is the RC window of goroce's QPs in packets
	// (rnic.Config.MaxUnackedPSNs left at its default).
	qpWindow = 128
	// linkMTU is every link's MTU: jumbo frames, above a 4096-byte path
	// MTU's packets.
	linkMTU = 9000
)

// Routers: where the bottleneck is (-router).
const (
	// routerNetns is a network namespace on this machine's kernel.
	routerNetns = "netns"
	// routerQEMU is a QEMU guest running Debian's kernel (guest.go).
	routerQEMU = "qemu"
)

// preflight checks what a run needs: root, ip and tc.
func preflight(context.Context) error {
	if os.Geteuid() != 0 {
		return errNeedsRoot
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s: %v", errNeedsTools, tool, err)
		}
	}
	return nil
}

// guestPreflight checks what -router qemu needs besides preflight's:
// qemu, /dev/net/tun and the rxe lab's image in dir.
func guestPreflight(dir string) (*qemurouter.Image, error) {
	return qemurouter.FindImage(dir, guestModules...)
}

// pickMarker resolves "auto" by probing for sch_red in a namespace made
// for the purpose.
func pickMarker(ctx context.Context, want string) (string, error) {
	switch want {
	case markerRED, markerNFT:
		return want, nil
	case "auto":
	default:
		return "", fmt.Errorf("-marker %q: want %q, %q or auto", want, markerRED, markerNFT)
	}
	fab, err := newFabric()
	if err != nil {
		return "", err
	}
	defer fab.remove()
	ns, err := fab.add(ctx, "probe")
	if err != nil {
		return "", err
	}
	if redAvailable(ctx, ns) {
		return markerRED, nil
	}
	return markerNFT, nil
}

// newConfig is the run of n flows the options describe, through the
// router guest g if not nil.
func newConfig(n int, o *options, off bool, marker string, g *guestRouter) config {
	red := scaledRED(o.rate, o.stretch)
	if o.red.Kmin > 0 {
		red.Kmin = o.red.Kmin
	}
	if o.red.Kmax > 0 {
		red.Kmax = o.red.Kmax
	}
	if o.red.Pmax > 0 {
		red.Pmax = o.red.Pmax
	}
	if marker == markerNFT { // a step halfway up RED's ramp
		k := (red.Kmin + red.Kmax) / 2
		red = cc.RED{Kmin: k, Kmax: k, Pmax: 1}
	}
	buffer := o.buffer
	if buffer == 0 {
		buffer = scaledBuffer(scaledRED(o.rate, o.stretch), o.mtu)
	}
	name := "netns-incast"
	if g != nil {
		name = "qemu-incast"
	}
	sc := experiment.Scenario{Name: name, Flows: n, LineRate: o.rate, Buffer: buffer, RED: red,
		DisableDCQCN: off, Duration: o.duration, Interval: o.interval, MTU: o.mtu,
		AckTimeout: ackTimeoutFor(buffer, o.rate), Params: paperParams(o.rate, o.stretch)}
	return config{sc: sc.WithDefaults(), marker: marker, linkMTU: linkMTU, guest: g}
}

// ackTimeoutFor returns the local ACK timeout code for a bottleneck of
// rate whose queue holds up to buffer bytes: at least minAckTimeout, and
// at least one and a half times the full queue's drain time, so that a
// packet waiting behind a full queue does not time out (at 20 Mb/s, 786
// kB drain in 315 ms: code 17, 537 ms).
func ackTimeoutFor(buffer int, rate cc.Rate) uint8 {
	drain := time.Duration(float64(buffer) * 8 / float64(rate) * float64(time.Second))
	code := uint8(minAckTimeout)
	for 4096*time.Nanosecond<<code < drain*3/2 {
		code++
	}
	return code
}

// paperParams is the DCQCN paper's preset for a bottleneck of rate: its
// rate steps and its minimum rate scaled from its 40 Gb/s links, its
// timers stretched by stretch, and a first CNP that drops a QP to a tenth
// of the rate (as bench/experiment's incast does).
func paperParams(rate cc.Rate, stretch float64) cc.Params {
	p := cc.PresetPaper().ScaleRateSteps(cc.PaperLineRate, rate)
	p.RPGMinRate = p.RPGMinRate * rate / cc.PaperLineRate
	p.RateToSetOnFirstCNP = rate / 10
	st := func(d time.Duration) time.Duration { return time.Duration(float64(d) * stretch) }
	p.RPGTimeReset, p.DCETCPRTT, p.MinTimeBetweenCNPs = st(p.RPGTimeReset), st(p.DCETCPRTT), st(p.MinTimeBetweenCNPs)
	return p
}

// scaledRED returns the marking thresholds for a bottleneck of rate: the
// paper's (PresetPaper: Kmin 40 and Kmax 1000 cells of 1030 bytes, Pmax
// 1, at 40 Gb/s) kept as queueing delays (8.24 µs and 206 µs) and
// stretched like DCQCN's timers: K = K_paper · (rate / 40 Gb/s) · stretch.
// At 100 Mb/s and stretch 100: Kmin 10300 bytes (824 µs of queue), Kmax
// 257500 bytes (20.6 ms).
func scaledRED(rate cc.Rate, stretch float64) cc.RED {
	p := cc.PresetPaper()
	f := float64(rate) / float64(cc.PaperLineRate) * stretch
	return cc.RED{Kmin: int(float64(p.Kmin) * f), Kmax: int(float64(p.Kmax) * f), Pmax: p.Pmax}
}

// scaledBuffer returns the bottleneck's queue limit, in bytes: three
// quarters of two flows' RC windows (2 × 128 packets of 4 KiB), so that
// without DCQCN even two flows overflow it, or a quarter above Kmax if
// that is more (RED needs its limit above Kmax): 786 kB at 50 Mb/s (126
// ms), 965 kB at 300 Mb/s (26 ms). A deep buffer for a slow link: the nft
// marker lets the queue stand above K (see markerNFT), and the buffer
// must outlast that.
func scaledBuffer(red cc.RED, mtu int) int {
	windows := 2 * qpWindow * mtu
	return max(windows*3/4, red.Kmax*5/4)
}
