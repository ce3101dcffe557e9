package gpu

import (
	"fmt"
	"time"
)

// Link is one edge of the topology: a PCIe link of a generation and a
// width, or (for the inter-socket link) an explicit bandwidth.
type Link struct {
	Gen   int // PCIe generation 1..6
	Width int // lanes: 1, 2, 4, 8, 16 or 32
	// Latency is the one-way time a transfer spends crossing the link
	// (switch or root-complex traversal included). Zero: DefaultLatency.
	Latency time.Duration
	// Bandwidth in bytes per second, if positive, overrides Gen × Width
	// (use it for the inter-socket link, UPI / Infinity Fabric).
	Bandwidth float64
}

// DefaultLatency is a Link's latency when none is given: about what one
// PCIe switch hop or root-complex traversal costs.
const DefaultLatency = 500 * time.Nanosecond

// laneRate is the usable bytes per second of one lane, by generation:
// 2.5 and 5 GT/s with 8b/10b coding, 8, 16 and 32 GT/s with 128b/130b,
// 64 GT/s (Gen6, PAM4 with FLITs) counted as twice Gen5.
var laneRate = [...]float64{
	1: 2.5e9 * 8 / 10 / 8,
	2: 5e9 * 8 / 10 / 8,
	3: 8e9 * 128 / 130 / 8,
	4: 16e9 * 128 / 130 / 8,
	5: 32e9 * 128 / 130 / 8,
	6: 64e9 * 128 / 130 / 8,
}

// Common links.
var (
	Gen3x16 = Link{Gen: 3, Width: 16}
	Gen4x16 = Link{Gen: 4, Width: 16}
	Gen5x16 = Link{Gen: 5, Width: 16}
	// UPI is an inter-socket link of about 20.8 GB/s each way, 1 µs.
	UPI = Link{Bandwidth: 20.8e9, Latency: time.Microsecond}
)

func (l Link) check() error {
	if l.Bandwidth > 0 {
		return nil
	}
	if l.Gen < 1 || l.Gen >= len(laneRate) {
		return errorf(ErrInvalidArgument, "PCIe generation %d (want 1..%d)", l.Gen, len(laneRate)-1)
	}
	switch l.Width {
	case 1, 2, 4, 8, 16, 32:
		return nil
	}
	return errorf(ErrInvalidArgument, "PCIe width x%d (want 1, 2, 4, 8, 16 or 32)", l.Width)
}

// BytesPerSecond is the link's bandwidth in each direction.
func (l Link) BytesPerSecond() float64 {
	if l.Bandwidth > 0 {
		return l.Bandwidth
	}
	if l.Gen < 1 || l.Gen >= len(laneRate) {
		return 0
	}
	return laneRate[l.Gen] * float64(l.Width)
}

func (l Link) latency() time.Duration {
	if l.Latency > 0 {
		return l.Latency
	}
	return DefaultLatency
}

// String is "Gen4 x16" or "20.8 GB/s".
func (l Link) String() string {
	if l.Bandwidth > 0 {
		return fmt.Sprintf("%.1f GB/s", l.Bandwidth/1e9)
	}
	return fmt.Sprintf("Gen%d x%d", l.Gen, l.Width)
}
