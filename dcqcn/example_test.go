package dcqcn_test

import (
	"fmt"
	"time"

	"github.com/goroce/goroce/dcqcn"
)

// A flow on a 25 Gb/s link gets one CNP and then recovers with the mlx5
// firmware defaults: one fast-recovery step (rpg_threshold is 1), then
// additive increase once the byte counter has passed it. The target stays at
// the line rate, so each step halves the distance to it; within 1 Mb/s the
// limiter is released. (Hyper increase would need the 300 µs timer to pass
// the threshold too; the flow is back before that.)
func ExampleReactionPoint() {
	t0 := time.Unix(0, 0)
	rp, err := dcqcn.NewReactionPoint(dcqcn.PresetMLX5(), 25*dcqcn.Gbps, t0)
	if err != nil {
		panic(err)
	}
	rp.SetTracer(func(e dcqcn.Event) {
		fmt.Printf("%6v  %v\n", e.At.Sub(t0), e)
	})

	rp.OnCNP(t0)
	for now := t0; rp.Limited() && now.Before(t0.Add(time.Millisecond)); now = now.Add(100 * time.Microsecond) {
		rp.OnSent(100_000, now) // about 3 byte-counter events
		rp.Advance(now)
	}
	fmt.Println("rate", rp.Rate(), "limited", rp.Limited())
	// Output:
	//     0s  rate 25 Gb/s→12.512 Gb/s (CNP, α=1.00)
	//     0s  rate 12.512 Gb/s→18.756 Gb/s (fast recovery, byte counter, T=0 BC=1, target 25 Gb/s)
	//     0s  rate 18.756 Gb/s→21.878 Gb/s (additive increase, byte counter, T=0 BC=2, target 25 Gb/s)
	//     0s  rate 21.878 Gb/s→23.439 Gb/s (additive increase, byte counter, T=0 BC=3, target 25 Gb/s)
	//  100µs  rate 23.439 Gb/s→24.22 Gb/s (additive increase, byte counter, T=0 BC=4, target 25 Gb/s)
	//  100µs  rate 24.22 Gb/s→24.61 Gb/s (additive increase, byte counter, T=0 BC=5, target 25 Gb/s)
	//  100µs  rate 24.61 Gb/s→24.805 Gb/s (additive increase, byte counter, T=0 BC=6, target 25 Gb/s)
	//  200µs  rate 24.805 Gb/s→24.902 Gb/s (additive increase, byte counter, T=0 BC=7, target 25 Gb/s)
	//  200µs  rate 24.902 Gb/s→24.951 Gb/s (additive increase, byte counter, T=0 BC=8, target 25 Gb/s)
	//  200µs  rate 24.951 Gb/s→24.976 Gb/s (additive increase, byte counter, T=0 BC=9, target 25 Gb/s)
	//  300µs  rate 24.976 Gb/s→24.988 Gb/s (additive increase, timer, T=1 BC=9, target 25 Gb/s)
	//  300µs  rate 24.988 Gb/s→24.994 Gb/s (additive increase, byte counter, T=1 BC=10, target 25 Gb/s)
	//  300µs  rate 24.994 Gb/s→24.997 Gb/s (additive increase, byte counter, T=1 BC=11, target 25 Gb/s)
	//  300µs  rate 24.997 Gb/s→24.998 Gb/s (additive increase, byte counter, T=1 BC=12, target 25 Gb/s)
	//  400µs  rate 24.998 Gb/s→25 Gb/s (additive increase, byte counter, T=1 BC=13, target 25 Gb/s)
	//  400µs  rate 25 Gb/s (line rate: limiter released)
	// rate 25 Gb/s limited false
}
