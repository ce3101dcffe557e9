package dcqcn

import (
	"math"
	"strconv"
	"strings"
)

// Rate is a data rate in bits per second. Reaction points hold their current
// and target rates as Rates, and a Pacer turns a Rate into send budget.
type Rate float64

// Units for writing rates the way NIC documentation does: 25*Gbps, 40*Mbps.
const (
	BitPerSecond Rate = 1
	Kbps              = 1e3 * BitPerSecond
	Mbps              = 1e6 * BitPerSecond
	Gbps              = 1e9 * BitPerSecond
)

// String formats r with the largest unit that keeps the number at or above
// one and at most three decimals, trailing zeros dropped: "25 Gb/s",
// "12.5 Gb/s", "40 Mb/s", "781.25 Mb/s".
func (r Rate) String() string {
	v := float64(r)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64) + " b/s"
	}
	unit, scale := "b/s", 1.0
	switch abs := math.Abs(v); {
	case abs >= 1e9:
		unit, scale = "Gb/s", 1e9
	case abs >= 1e6:
		unit, scale = "Mb/s", 1e6
	case abs >= 1e3:
		unit, scale = "kb/s", 1e3
	}
	s := strconv.FormatFloat(v/scale, 'f', 3, 64)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return s + " " + unit
}

// valid reports whether r is a usable positive, finite rate.
func (r Rate) valid() bool {
	return r > 0 && !math.IsInf(float64(r), 1)
}
