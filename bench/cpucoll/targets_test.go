package cpucoll

import (
	"slices"
	"strings"
	"testing"
)

// The speed targets' table: each goal's ratio per round from figures worked out
// by hand, the median's verdict, "not measured" where a library or rank
// count is missing, and the scale table's medians.
func TestWriteGoals(t *testing.T) {
	sizes := []int{8, 16 << 20}
	round := func(udp, shm, tcp, mpishm [2]float64) []Result {
		return []Result{
			result("goroce", 2, true, sizes, udp[:]),
			result("goroce-shm", 2, true, sizes, shm[:]),
			result("openmpi-tcp", 2, true, sizes, tcp[:]),
			result("openmpi-shm", 2, true, sizes, mpishm[:]),
			result("goroce", 8, true, sizes, []float64{100, 16777.216}), // busbw 16777216 B / 16777.216 us × 2·7/8 = 1.75 GB/s
		}
	}
	rounds := [][]Result{
		// UDP: 8 B 12/10 = 1.2x (met, <= 1.5), 16 MiB 10000 vs 12000 us: busbw 1.2x (met, >= 1.0).
		// shm: 8 B 11/10 = 1.1x (not met, <= 1.0), 16 MiB 6000 vs 12000: 2.0x TCP (met), vs 4000: 0.67x shm (not met).
		round([2]float64{12, 10000}, [2]float64{11, 6000}, [2]float64{10, 12000}, [2]float64{2, 4000}),
		round([2]float64{30, 20000}, [2]float64{9, 5000}, [2]float64{10, 12000}, [2]float64{2, 4000}),
		round([2]float64{14, 11000}, [2]float64{10, 6000}, [2]float64{10, 12000}, [2]float64{2, 4000}),
	}
	var b strings.Builder
	WriteGoals(&b, rounds)
	t.Log("\n" + b.String())
	// Compared word by word: the columns' widths are not the point.
	var got []string
	for _, l := range strings.Split(b.String(), "\n") {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	for _, want := range []string{
		"  2 ranks: goroce 16 MiB busbw >= 1.0x openmpi-tcp          1.20x  0.60x  1.09x   median 1.09x: met\n",
		"  2 ranks: goroce 8 B time <= 1.5x openmpi-tcp              1.20x  3.00x  1.40x   median 1.40x: met\n",
		"  2 ranks: goroce-shm 16 MiB busbw >= 1.5x openmpi-tcp      2.00x  2.40x  2.00x   median 2.00x: met\n",
		"  2 ranks: goroce-shm 16 MiB busbw >= 0.8x openmpi-shm      0.67x  0.80x  0.67x   median 0.67x: not met\n",
		"  2 ranks: goroce-shm 8 B time <= 1.0x openmpi-tcp          1.10x  0.90x  1.00x   median 1.00x: met\n",
		"  4 ranks: goroce 16 MiB busbw >= 0.9x openmpi-tcp         not measured\n",
		"library          2 ranks   8 ranks\n",
		"goroce              1.53      1.75\n", // 16 MiB in 11000 us (1.525 GB/s), the median round
		"goroce-shm          2.80         -\n", // in 6000 us
		"openmpi-tcp         1.40         -\n",
		"openmpi-shm         4.19         -\n",
	} {
		if !slices.Contains(got, strings.Join(strings.Fields(want), " ")) {
			t.Errorf("output lacks %q", want)
		}
	}
}
