package cpucoll

import (
	"math"
	"strings"
	"testing"
)

func TestBusBW(t *testing.T) {
	for _, tc := range []struct {
		bytes, ranks int
		usec, want   float64
	}{
		{1 << 20, 2, 1000, 1.048576},       // factor 1
		{1 << 20, 4, 1000, 1.048576 * 1.5}, // factor 2(n-1)/n = 1.5
		{8, 2, 0, 0},
	} {
		if got := BusBW(tc.bytes, tc.usec, tc.ranks); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("BusBW(%d, %v, %d) = %v, want %v", tc.bytes, tc.usec, tc.ranks, got, tc.want)
		}
	}
}

func TestSizeLabel(t *testing.T) {
	for bytes, want := range map[int]string{8: "8 B", 1000: "1000 B", 1024: "1 KiB", 1536: "1536 B", 64 << 10: "64 KiB", 16 << 20: "16 MiB", 3 << 19: "1536 KiB"} {
		if got := SizeLabel(bytes); got != want {
			t.Errorf("SizeLabel(%d) = %q, want %q", bytes, got, want)
		}
	}
}

// result makes a Result whose in-place times are usec[i] at sizes[i];
// out of place is N/A when oop is false.
func result(name string, ranks int, oop bool, sizes []int, usec []float64) Result {
	libs, err := Select(name)
	if err != nil || len(libs) != 1 {
		panic(name)
	}
	res := Result{Library: libs[0], Ranks: ranks}
	for i, s := range sizes {
		m := Measurement{Usec: usec[i], Valid: true}
		r := Row{Bytes: s, Count: s / 4, InPlace: m, OutOfPlace: Measurement{Wrong: -1}}
		if oop {
			r.OutOfPlace = m
		}
		res.Rows = append(res.Rows, r)
	}
	return res
}

func TestWriteSummary(t *testing.T) {
	sizes := []int{8, 16 << 20}
	results := []Result{
		result("goroce", 2, true, sizes, []float64{100, 10000}),
		result("openmpi-tcp", 2, true, sizes, []float64{10, 20000}),
		result("openmpi-shm", 2, true, sizes, []float64{1, 2500}),
		result("gloo-ring", 2, false, sizes, []float64{50, 5000}),
		result("gloo-ring-chunked", 2, false, sizes, []float64{200, 4000}),
		result("goroce", 4, true, sizes[:1], []float64{300}),
	}
	var b strings.Builder
	WriteSummary(&b, results)
	out := b.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"AllReduce float32 sum, 2 ranks, in place: time of one call (us) at 8 B, busbw (GB/s) at the other sizes",
		"goroce                               100.0      1.68\n",                   // 16 MiB / 10 ms, factor 1
		"openmpi-tcp                          10.00     0.839\n",                   // 16 MiB / 20 ms
		"goroce / openmpi-tcp                10.00x     2.00x\n",                   // time ratio, then busbw ratio
		"goroce / gloo-ring-chunked           0.50x     0.40x\n",                   //
		"issue 5 target at 16 MiB, goroce busbw 1.68 GB/s:\n",                      //
		"  >= openmpi-tcp 0.839 GB/s: met, goroce 2.00x\n",                         //
		"  >= the best gloo, gloo-ring-chunked 4.19 GB/s: not met, goroce 0.40x\n", // the faster Gloo
		"  beside shared memory, openmpi-shm 6.71 GB/s: goroce 0.25x\n",            // no goal
		"AllReduce float32 sum, 4 ranks",                                           // a table per rank count
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if strings.Count(out, "target at 16 MiB") != 1 || strings.Count(out, "(goroce / other") != 1 {
		t.Errorf("want one target and one legend (4 ranks measured goroce alone, without 16 MiB)")
	}
}

func TestWriteSummaryWithoutGoroce(t *testing.T) {
	var b strings.Builder
	WriteSummary(&b, []Result{result("openmpi-tcp", 2, true, []int{8, 1024}, []float64{10, 20})})
	out := b.String()
	if !strings.Contains(out, "openmpi-tcp") || strings.Contains(out, "goroce /") || strings.Contains(out, "target") {
		t.Errorf("a summary without goroce shows the library and no ratio:\n%s", out)
	}
}

func TestWriteFull(t *testing.T) {
	var b strings.Builder
	WriteFull(&b, []Result{
		result("goroce", 4, true, []int{1 << 20}, []float64{1000}),
		result("gloo-ring", 4, false, []int{1 << 20}, []float64{2000}),
	})
	out := b.String()
	for _, want := range []string{
		"    4  goroce                    1 MiB      1000.0      1.57      1000.0      1.57       0\n",
		"    4  gloo-ring                 1 MiB         N/A       N/A      2000.0     0.786       0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("full table lacks %q:\n%s", want, out)
		}
	}
}

// Over rounds, the target table gives each round's ratio, the median and
// the rounds that met the goal; the verdict is the median's.
func TestWriteRepeats(t *testing.T) {
	sizes := []int{8, 16 << 20}
	round := func(goroce, tcp, gloo, shm float64) []Result {
		return []Result{
			result("goroce", 4, true, sizes, []float64{100, goroce}),
			result("openmpi-tcp", 4, true, sizes, []float64{10, tcp}),
			result("openmpi-shm", 4, true, sizes, []float64{1, shm}),
			result("gloo-ring", 4, false, sizes, []float64{50, gloo}),
		}
	}
	rounds := [][]Result{
		round(10000, 8000, 20000, 4000),  // 0.80x TCP
		round(10000, 12500, 20000, 4000), // 1.25x: a slow spell of Open MPI
		round(10000, 9000, 10000, 4000),  // 0.90x; 1.00x the best Gloo
	}
	var b strings.Builder
	WriteRepeats(&b, rounds)
	t.Log("\n" + b.String())
	wantLines(t, b.String(),
		"issue 5 target at 16 MiB, 4 ranks, over 3 rounds: goroce's busbw over the other's, round by round\n",
		"  >= openmpi-tcp          0.80x  1.25x  0.90x   median 0.90x: not met (1 of 3 rounds)\n",
		"  >= the best gloo        2.00x  2.00x  1.00x   median 2.00x: met (3 of 3 rounds)\n",
		"  beside shared memory    0.40x  0.40x  0.40x   median 0.40x\n",
	)
}

// wantLines reports each of lines that out lacks.
func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("output lacks %q", l)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
