package soak

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/goroce/goroce/rnic"
)

// ErrInvalidConfig is wrapped by the error Run returns for a Config field
// out of range; the message names the field.
var ErrInvalidConfig = errors.New("soak: invalid config")

// Config describes a soak run. The zero value of each field but Duration
// picks the default its comment gives.
type Config struct {
	// Duration is how long the workload runs (the issue asks for 10m).
	Duration time.Duration
	// Warmup is when the baseline sample is taken: what the end is
	// compared with. Default Duration/5, at most 30 s.
	Warmup time.Duration
	// SampleEvery is the interval between samples. Default 10 s.
	SampleEvery time.Duration
	// Loss is the probability that the simulated switch drops a packet.
	// Default 0; `goroce soak` passes 0.01. The UDP pair has no injected loss.
	Loss float64
	// Seed seeds the simulated network's loss. Default 1.
	Seed uint64
	// UDPAddrs are the loopback addresses of the UDP pair's two devices,
	// each on port 4791. Default 127.0.77.1 and 127.0.77.2.
	UDPAddrs [2]netip.Addr
	// Tolerance is how far the end may drift from the baseline.
	Tolerance Tolerance
	// Sampler measures RSS and goroutines. Default ProcSampler.
	Sampler Sampler
	// Trace and Tap, if set, are every device's rnic.Config.Trace and Tap:
	// the packet and QP event trace and a capture, for finding out why a
	// run failed.
	Trace io.Writer
	Tap   rnic.Tap
	// OnSample, if set, is called with each sample as it is taken, from
	// Run's goroutine.
	OnSample func(Sample)
}

// Tolerance bounds the growth Judge accepts between the baseline (after
// warm-up) and the end of the workload.
type Tolerance struct {
	// RSSFactor is the relative RSS growth allowed. Default 0.20 (+20%).
	RSSFactor float64
	// RSSBytes is allowed on top of RSSFactor, so a small process's GC
	// noise is not a leak. Default 8 MiB.
	RSSBytes uint64
	// Goroutines is the number of extra goroutines allowed. Default 0.
	Goroutines int
}

// DefaultTolerance is the Tolerance a zero Config.Tolerance means.
var DefaultTolerance = Tolerance{RSSFactor: 0.20, RSSBytes: 8 << 20, Goroutines: 0}

// withDefaults fills in defaults and checks the fields.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Duration <= 0:
		return c, fmt.Errorf("%w: Duration %v is not positive", ErrInvalidConfig, c.Duration)
	case c.Warmup < 0 || c.Warmup >= c.Duration && c.Warmup != 0:
		return c, fmt.Errorf("%w: Warmup %v is not in [0, Duration %v)", ErrInvalidConfig, c.Warmup, c.Duration)
	case c.SampleEvery < 0:
		return c, fmt.Errorf("%w: SampleEvery %v is negative", ErrInvalidConfig, c.SampleEvery)
	case !(c.Loss >= 0 && c.Loss < 1):
		return c, fmt.Errorf("%w: Loss %v is not in [0, 1)", ErrInvalidConfig, c.Loss)
	case c.Tolerance.RSSFactor < 0 || c.Tolerance.Goroutines < 0:
		return c, fmt.Errorf("%w: Tolerance %+v is negative", ErrInvalidConfig, c.Tolerance)
	}
	if c.Warmup == 0 {
		c.Warmup = min(c.Duration/5, 30*time.Second)
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = 10 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.UDPAddrs == [2]netip.Addr{} {
		c.UDPAddrs = [2]netip.Addr{netip.MustParseAddr("127.0.77.1"), netip.MustParseAddr("127.0.77.2")}
	}
	if c.Tolerance == (Tolerance{}) {
		c.Tolerance = DefaultTolerance
	}
	if c.Sampler == nil {
		c.Sampler = ProcSampler{}
	}
	return c, nil
}
