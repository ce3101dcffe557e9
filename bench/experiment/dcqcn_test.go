package experiment

import (
	"context"
	"errors"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// run performs sc in a synctest bubble, in virtual time. With DCQCN_OUT set
// to a directory, it writes the run's CSV and PNG there (WriteFiles).
func run(t *testing.T, sc Scenario) (*Result, Summary) {
	t.Helper()
	var res *Result
	synctest.Test(t, func(t *testing.T) {
		var err error
		if res, err = Run(context.Background(), sc); err != nil {
			t.Fatal(err)
		}
	})
	if res == nil {
		t.FailNow()
	}
	s := Summarize(res)
	t.Log(FileStem(&res.Scenario), s)
	if !res.VirtualTime {
		t.Error("Result.VirtualTime is false inside a synctest bubble")
	}
	for i, err := range res.FlowErrors {
		if err != nil {
			t.Logf("flow %d stopped: %v", i, err)
		}
	}
	if dir := os.Getenv("DCQCN_OUT"); dir != "" {
		csvPath, pngPath, err := WriteFiles(dir, res)
		if err != nil {
			t.Errorf("DCQCN_OUT: %v", err)
		}
		t.Logf("wrote %s and %s", csvPath, pngPath)
	}
	return res, s
}

// TestIncastDCQCN: N:1 incast with DCQCN on: fair, busy, a short queue
// over the second half of the run, and no drops at all, the start included.
func TestIncastDCQCN(t *testing.T) {
	for _, n := range []int{2, 4, 8, 16} {
		t.Run(FileStem(&Scenario{Name: "incast", Flows: n, Preset: "paper"}), func(t *testing.T) {
			if n > 4 && testing.Short() {
				t.Skip("-short: the 8- and 16-flow incasts take a second each")
			}
			res, s := run(t, Incast(n))
			for i, err := range res.FlowErrors {
				if err != nil {
					t.Errorf("flow %d stopped: %v", i, err)
				}
			}
			if s.Jain < 0.99 {
				t.Errorf("Jain index %.4f, want ≥ 0.99", s.Jain)
			}
			if s.Utilization < 0.95 {
				t.Errorf("utilization %.4f, want ≥ 0.95", s.Utilization)
			}
			if kmax := res.Scenario.RED.Kmax; s.QueueP99 >= kmax {
				t.Errorf("queue p99 %d B, want below Kmax %d B", s.QueueP99, kmax)
			}
			if s.Drops != 0 {
				t.Errorf("%d drops, want none", s.Drops)
			}
			if res.Totals.CNPsSent == 0 || res.Totals.RateReductions == 0 {
				t.Errorf("%d CNPs, %d rate cuts: DCQCN never engaged", res.Totals.CNPsSent, res.Totals.RateReductions)
			}
		})
	}
}

// TestIncastWithoutDCQCN: the same incast with DCQCN off. Nothing slows the
// senders but their RC windows (128 PSNs each, as rxe's): two flows hold a
// standing queue above Kmax; eight and sixteen fill the buffer, lose
// packets and retransmit (go-back-N).
func TestIncastWithoutDCQCN(t *testing.T) {
	for _, n := range []int{2, 8, 16} {
		sc := Incast(n)
		sc.DisableDCQCN = true
		sc.Duration /= 2 // no need to wait for fairness
		t.Run(FileStem(&sc), func(t *testing.T) {
			res, s := run(t, sc)
			if res.Totals.CNPsSent != 0 {
				t.Errorf("%d CNPs with DCQCN off", res.Totals.CNPsSent)
			}
			if kmax := res.Scenario.RED.Kmax; s.QueueP99 < kmax {
				t.Errorf("queue p99 %d B, want a standing queue above Kmax %d B", s.QueueP99, kmax)
			}
			if n < 8 {
				return // the windows (n × 128 KiB) fit in the buffer
			}
			if full := sc.Buffer - (sc.MTU + 64); res.Totals.QueueMaxBytes < full {
				t.Errorf("queue peaked at %d B, want the buffer (%d B) full", res.Totals.QueueMaxBytes, sc.Buffer)
			}
			if s.Drops == 0 || res.Totals.Retransmitted == 0 {
				t.Errorf("%d drops, %d retransmitted packets: want both", s.Drops, res.Totals.Retransmitted)
			}
		})
	}
}

// TestIncastMarkOnEnqueue: the 16:1 incast with a switch that marks packets
// by the queue they find on arrival. Each mark then waits out the queue it
// reports before any receiver sees it, and the senders learn too late: the
// start overflows the buffer, where marking on departure (the default)
// loses nothing.
func TestIncastMarkOnEnqueue(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 16-flow incast takes a second")
	}
	sc := Incast(16)
	sc.MarkOnEnqueue = true
	sc.Duration /= 2 // the drops come at the start
	res, s := run(t, sc)
	if s.Drops == 0 {
		t.Errorf("no drops with marks on enqueue (queue peaked at %d B of %d B)", res.Totals.QueueMaxBytes, sc.Buffer)
	}
}

// TestConverge: a second flow joins a running one; both settle within 10 %
// of half the link and stay there.
func TestConverge(t *testing.T) {
	res, _ := run(t, Converge())
	fair := float64(res.Scenario.LineRate) / 2
	for i, b := range secondHalf(res) {
		if got := b / fair; got < 0.9 || got > 1.1 {
			t.Errorf("flow %d: %.3f of the fair share over the second half, want 0.9 ... 1.1", i, got)
		}
	}
}

// secondHalf returns each flow's mean throughput over the second half.
func secondHalf(r *Result) []float64 {
	out := make([]float64, r.Scenario.Flows)
	var span time.Duration
	prev := time.Duration(0)
	for _, s := range r.Samples {
		if prev >= r.Scenario.Duration/2 {
			span += s.At - prev
			for i, tp := range s.Throughput {
				out[i] += float64(tp) * (s.At - prev).Seconds()
			}
		}
		prev = s.At
	}
	for i := range out {
		out[i] /= span.Seconds()
	}
	return out
}

func TestInvalidScenario(t *testing.T) {
	for _, sc := range []Scenario{
		{Flows: 0},
		{Flows: 2, Starts: []time.Duration{0, 0, 0}},
		{Flows: 2, Preset: "nope"},
		{Flows: 2, FirstCNPRate: -1},
		{Flows: 2, Interval: time.Second, Duration: time.Millisecond},
	} {
		if _, err := Run(context.Background(), sc); !errors.Is(err, ErrInvalidScenario) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidScenario", sc, err)
		}
	}
}

func TestJainAndPercentile(t *testing.T) {
	if j := Jain([]float64{1, 1, 1, 1}); j != 1 {
		t.Errorf("Jain(equal) = %v", j)
	}
	if j := Jain([]float64{1, 0, 0, 0}); j != 0.25 {
		t.Errorf("Jain(one of four) = %v, want 0.25", j)
	}
	xs := make([]int, 100)
	for i := range xs {
		xs[i] = 100 - i
	}
	if p := Percentile(xs, 0.99); p != 99 {
		t.Errorf("p99 of 1..100 = %d, want 99", p)
	}
}
