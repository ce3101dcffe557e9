package experiment

import (
	"context"
	"math"
	"reflect"
	"testing"
)

// TestRunVirtualMatchesSynctest runs the 4:1 incast on a virtual clock
// (RunVirtual) in the test's own goroutine, no synctest bubble, and checks
// it against the same scenario in a synctest bubble, where the runtime
// decides when time moves: the oracle. Both must meet the criteria
// TestIncastDCQCN holds the scenario to, and agree with each other within
// the spread of synctest's own runs (whose goroutines run in parallel, so
// its numbers move from run to run: Jain 0.992 to 1.000 seen, queue p99
// within a few kB).
func TestRunVirtualMatchesSynctest(t *testing.T) {
	sc := Incast(4)
	res, err := RunVirtual(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	got := Summarize(res)
	t.Log("virtual clock:", got)
	if !res.VirtualTime {
		t.Error("Result.VirtualTime is false on a virtual clock")
	}
	if res.Elapsed != res.Scenario.Duration {
		t.Errorf("ran for %v, want %v", res.Elapsed, res.Scenario.Duration)
	}
	oracle, want := run(t, sc)
	for name, s := range map[string]Summary{"virtual clock": got, "synctest": want} {
		if s.Jain < 0.99 || s.Utilization < 0.95 || s.QueueP99 >= oracle.Scenario.RED.Kmax || s.Drops != 0 {
			t.Errorf("%s: %v, want jain ≥ 0.99, utilization ≥ 0.95, queue p99 < %d B, no drops", name, s, oracle.Scenario.RED.Kmax)
		}
	}
	if math.Abs(got.Jain-want.Jain) > 0.01 || math.Abs(got.Utilization-want.Utilization) > 0.005 {
		t.Errorf("jain %.4f and utilization %.4f, synctest's %.4f and %.4f: want within 0.01 and 0.005",
			got.Jain, got.Utilization, want.Jain, want.Utilization)
	}
	if d := math.Abs(float64(got.QueueP99-want.QueueP99)) / float64(want.QueueP99); d > 0.2 {
		t.Errorf("queue p99 %d B, synctest's %d B: want within 20 %%", got.QueueP99, want.QueueP99)
	}
	if r := float64(res.Totals.CNPsSent) / float64(oracle.Totals.CNPsSent); r < 0.8 || r > 1.25 {
		t.Errorf("%d CNPs, synctest's %d: want within 20 %%", res.Totals.CNPsSent, oracle.Totals.CNPsSent)
	}
}

// TestRunVirtualRepeatable: two runs of one scenario on virtual clocks
// record the same samples and totals, to the byte, because the clock runs
// the simulation's goroutines one at a time in an order of its own.
func TestRunVirtualRepeatable(t *testing.T) {
	sc := Incast(2)
	sc.Duration /= 4
	var runs [2]*Result
	for i := range runs {
		res, err := RunVirtual(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = res
		t.Log(Summarize(res))
	}
	a, b := runs[0], runs[1]
	if Summarize(a) != Summarize(b) {
		t.Errorf("summaries differ:\n%v\n%v", Summarize(a), Summarize(b))
	}
	if !reflect.DeepEqual(a.Totals, b.Totals) || !reflect.DeepEqual(a.Delivered, b.Delivered) ||
		!reflect.DeepEqual(a.Samples, b.Samples) || !reflect.DeepEqual(a.ArrivalQueue, b.ArrivalQueue) {
		t.Errorf("the runs differ: totals %+v and %+v, delivered %v and %v", a.Totals, b.Totals, a.Delivered, b.Delivered)
	}
}
