package soak

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Sample is one look at a running soak.
type Sample struct {
	Elapsed time.Duration
	Resources
	Lanes []LaneCounts
}

// Report is the result of a soak.
type Report struct {
	Config   Config // with defaults filled in
	Baseline Sample // taken at Config.Warmup
	Final    Sample // taken at Config.Duration, before the workload stops
	Samples  []Sample
	// Lanes are the counts after the workload stopped and every receive
	// left posted was flushed.
	Lanes   []LaneCounts
	Verdict Verdict
	// DeviceCounters, when the verdict is FAIL, holds each device's
	// non-zero error, drop and recovery counters, one line per device:
	// what the devices saw, for finding out why.
	DeviceCounters []string
}

// Run opens the devices, runs the workload for cfg.Duration (less if ctx
// ends first) while sampling, stops it, accounts for every WR and closes
// everything. It returns an error only if the devices or QPs could not be
// set up; what went wrong during the run is in the Report's Verdict.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The simulated pair runs in real time, its goroutines handing packets
	// to one another over channels. With a single P those hand-offs keep
	// it (each inherits the time slice), while the netpoller queues the
	// UDP devices' receive goroutines on the global run queue, which the
	// scheduler looks at every 61st tick: with GOMAXPROCS=1 a 1 s soak saw
	// the UDP RC lane's packets wait 375 ms and its QP run out of retries.
	// So the soak keeps two Ps at least.
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	sim, err := openSim(cfg.Loss, cfg.Seed, cfg.Trace, cfg.Tap)
	if err != nil {
		return nil, err
	}
	defer sim.close()
	udp, err := openUDP(cfg.UDPAddrs, cfg.Trace, cfg.Tap)
	if err != nil {
		return nil, err
	}
	defer udp.close()
	var lanes []*lane
	for _, f := range []*fabric{sim, udp} {
		ls, err := f.lanes()
		if err != nil {
			return nil, err
		}
		lanes = append(lanes, ls...)
	}

	work, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Go(func() { l.run(work) })
	}

	rep := &Report{Config: cfg}
	start := time.Now()
	take := func() Sample {
		s := Sample{Elapsed: time.Since(start), Resources: cfg.Sampler.Sample()}
		for _, l := range lanes {
			s.Lanes = append(s.Lanes, l.t.snapshot())
		}
		rep.Samples = append(rep.Samples, s)
		if cfg.OnSample != nil {
			cfg.OnSample(s)
		}
		return s
	}
	tick := time.NewTicker(cfg.SampleEvery)
	defer tick.Stop()
	warm := time.NewTimer(cfg.Warmup)
	defer warm.Stop()
	end := time.NewTimer(cfg.Duration)
	defer end.Stop()
	take()
	warmedUp := false
loop:
	for {
		select {
		case <-tick.C:
			take()
		case <-warm.C:
			rep.Baseline, warmedUp = take(), true
		case <-end.C:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	rep.Final = take()
	if !warmedUp {
		rep.Baseline = rep.Final // ended early: nothing to compare
	}
	stop()
	wg.Wait()
	for _, l := range lanes {
		rep.Lanes = append(rep.Lanes, l.t.snapshot())
	}
	rep.Verdict = Judge(rep.Lanes, rep.Baseline.Resources, rep.Final.Resources, cfg.Tolerance)
	if !rep.Verdict.OK {
		for _, f := range []*fabric{sim, udp} {
			rep.DeviceCounters = append(rep.DeviceCounters, f.counterLines()...)
		}
	}
	return rep, nil
}
