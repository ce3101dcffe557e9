package dcqcn

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func TestPresetsValidate(t *testing.T) {
	for _, name := range Presets() {
		for _, line := range []Rate{10 * Gbps, 25 * Gbps, 100 * Gbps, 400 * Gbps} {
			p, err := PresetByName(name, line)
			if err != nil {
				t.Fatalf("PresetByName(%q): %v", name, err)
			}
			if p.Name != name {
				t.Errorf("preset %q has Name %q", name, p.Name)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("preset %q at %v: %v", name, line, err)
			}
			if _, err := NewReactionPoint(p, line, t0); err != nil {
				t.Errorf("preset %q at %v: NewReactionPoint: %v", name, line, err)
			}
		}
	}
}

func TestPresetByNameUnknown(t *testing.T) {
	_, err := PresetByName("timely", 25*Gbps)
	if !errors.Is(err, ErrUnknownPreset) {
		t.Errorf("PresetByName(timely) = %v, want ErrUnknownPreset", err)
	}
	if !slices.Equal(Presets(), []string{"paper", "mlx5", "hpcc"}) {
		t.Errorf("Presets() = %q", Presets())
	}
}

// TestPresetValues pins the values the presets cite, so that a change to one
// is a deliberate change to its source comment too.
func TestPresetValues(t *testing.T) {
	paper := PresetPaper()
	if paper.RPGTimeReset != 60*us || paper.RPGByteReset != 300000 || paper.RPGThreshold != 5 ||
		paper.RPGAIRate != 40*Mbps || paper.RPGHAIRate != 200*Mbps || paper.DCETCPG != 1.0/256 ||
		paper.DCETCPRTT != 55*us || paper.MinTimeBetweenCNPs != 50*us ||
		paper.Kmin != 41200 || paper.Kmax != 1030000 || paper.Pmax != 1 || !paper.ClampTargetRate {
		t.Errorf("PresetPaper = %+v", paper)
	}
	mlx := PresetMLX5()
	if mlx.RPGTimeReset != 300*us || mlx.RPGByteReset != 32767 || mlx.RPGThreshold != 1 ||
		mlx.RPGAIRate != 5*Mbps || mlx.RPGHAIRate != 50*Mbps || mlx.RPGMinDecFac != 50 ||
		mlx.RPGMinRate != 1*Mbps || mlx.DCETCPG != 5.0/1024 || mlx.DCETCPRTT != 1*us ||
		mlx.RateReduceMonitorPeriod != 4*us || mlx.InitialAlpha != 1023.0/1024 ||
		mlx.MinTimeBetweenCNPs != 4*us || mlx.ClampTargetRate || !mlx.ClampTargetRateAfterTimeInc {
		t.Errorf("PresetMLX5 = %+v", mlx)
	}
	for _, c := range []struct {
		line             Rate
		ai, hai          Rate
		kmin, kmax       int
		minRate          Rate
		wantMonitor, rtt time.Duration
	}{
		{25 * Gbps, 5 * Mbps, 50 * Mbps, 100000, 400000, 1000 * Mbps, 4 * us, 1 * us},
		{100 * Gbps, 20 * Mbps, 200 * Mbps, 400000, 1600000, 1000 * Mbps, 4 * us, 1 * us},
		{500 * Mbps, 0.1 * Mbps, 1 * Mbps, 2000, 8000, 500 * Mbps, 4 * us, 1 * us},
	} {
		h := PresetHPCC(c.line)
		if !approx(float64(h.RPGAIRate), float64(c.ai)) || !approx(float64(h.RPGHAIRate), float64(c.hai)) ||
			h.Kmin != c.kmin || h.Kmax != c.kmax || h.RPGMinRate != c.minRate || h.Pmax != 0.2 ||
			h.RateReduceMonitorPeriod != c.wantMonitor || h.DCETCPRTT != c.rtt || h.RPGByteReset != 0 {
			t.Errorf("PresetHPCC(%v) = %+v", c.line, h)
		}
	}
}

func TestGainFromDCETCPG(t *testing.T) {
	for _, c := range []struct {
		reg  int
		want float64
	}{{1019, 5.0 / 1024}, {1020, 1.0 / 256}, {1024, 0}, {0, 1}} {
		if got := GainFromDCETCPG(c.reg); got != c.want {
			t.Errorf("GainFromDCETCPG(%d) = %v, want %v", c.reg, got, c.want)
		}
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		field string
		set   func(*Params)
	}{
		{"RPGTimeReset", func(p *Params) { p.RPGTimeReset = -1 }},
		{"RPGByteReset", func(p *Params) { p.RPGByteReset = -1 }},
		{"RPGThreshold", func(p *Params) { p.RPGThreshold = 32 }},
		{"RPGAIRate", func(p *Params) { p.RPGAIRate = 0 }},
		{"RPGHAIRate", func(p *Params) { p.RPGHAIRate = Rate(nan) }},
		{"RPGMinDecFac", func(p *Params) { p.RPGMinDecFac = 101 }},
		{"RPGMinRate", func(p *Params) { p.RPGMinRate = Rate(math.Inf(1)) }},
		{"RateToSetOnFirstCNP", func(p *Params) { p.RateToSetOnFirstCNP = -1 }},
		{"RateToSetOnFirstCNP", func(p *Params) { p.RateToSetOnFirstCNP = Rate(nan) }},
		{"RateToSetOnFirstCNP", func(p *Params) { p.RateToSetOnFirstCNP = Rate(math.Inf(1)) }},
		{"RateReduceMonitorPeriod", func(p *Params) { p.RateReduceMonitorPeriod = -us }},
		{"DCETCPG", func(p *Params) { p.DCETCPG = 1.5 }},
		{"DCETCPG", func(p *Params) { p.DCETCPG = nan }},
		{"DCETCPRTT", func(p *Params) { p.DCETCPRTT = 0 }},
		{"InitialAlpha", func(p *Params) { p.InitialAlpha = -0.1 }},
		{"MinTimeBetweenCNPs", func(p *Params) { p.MinTimeBetweenCNPs = -us }},
		{"Kmin", func(p *Params) { p.Kmin = -1 }},
		{"Kmax", func(p *Params) { p.Kmax = p.Kmin - 1 }},
		{"Pmax", func(p *Params) { p.Pmax = 2 }},
	} {
		p := testParams()
		c.set(&p)
		err := p.Validate()
		var pe *ParamError
		if !errors.Is(err, ErrInvalidParams) || !errors.As(err, &pe) || pe.Field != c.field {
			t.Errorf("%s: Validate() = %v, want a *ParamError for that field", c.field, err)
		}
	}
	if err := testParams().Validate(); err != nil {
		t.Errorf("testParams: %v", err)
	}
}

// TestScaleRateSteps: the paper's steps, chosen for 40 Gb/s links, become a
// quarter at 10 Gb/s; nothing else changes, and bad rates change nothing.
func TestScaleRateSteps(t *testing.T) {
	paper := PresetPaper()
	at10 := paper.ScaleRateSteps(PaperLineRate, 10*Gbps)
	if at10.RPGAIRate != 10*Mbps || at10.RPGHAIRate != 50*Mbps {
		t.Errorf("at 10 Gb/s: R_AI %v, R_HAI %v, want 10 Mb/s and 50 Mb/s", at10.RPGAIRate, at10.RPGHAIRate)
	}
	at10.RPGAIRate, at10.RPGHAIRate = paper.RPGAIRate, paper.RPGHAIRate
	if at10 != paper {
		t.Errorf("ScaleRateSteps changed more than the steps: %+v", at10)
	}
	if got := paper.ScaleRateSteps(PaperLineRate, PaperLineRate); got != paper {
		t.Errorf("scaling 40 Gb/s to 40 Gb/s changed the preset: %+v", got)
	}
	for _, bad := range []Rate{0, -1, Rate(math.Inf(1)), Rate(math.NaN())} {
		if got := paper.ScaleRateSteps(bad, 10*Gbps); got != paper {
			t.Errorf("ScaleRateSteps(%v, 10 Gb/s) = %+v, want the preset unchanged", bad, got)
		}
		if got := paper.ScaleRateSteps(PaperLineRate, bad); got != paper {
			t.Errorf("ScaleRateSteps(40 Gb/s, %v) = %+v, want the preset unchanged", bad, got)
		}
	}
}

func TestRateString(t *testing.T) {
	for _, c := range []struct {
		r    Rate
		want string
	}{
		{25 * Gbps, "25 Gb/s"},
		{12.5 * Gbps, "12.5 Gb/s"},
		{40 * Mbps, "40 Mb/s"},
		{781.25 * Mbps, "781.25 Mb/s"},
		{1.5625 * Gbps, "1.562 Gb/s"}, // an exact half rounds to even
		{999, "999 b/s"},
		{2 * Kbps, "2 kb/s"},
		{0, "0 b/s"},
		{-3 * Gbps, "-3 Gb/s"},
		{Rate(math.Inf(1)), "+Inf b/s"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("Rate(%g).String() = %q, want %q", float64(c.r), got, c.want)
		}
	}
}
