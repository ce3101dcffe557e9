package pairrun

import "testing"

// TestMedian: the middle value, the lower middle of an even count, and
// the input left as it was.
func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2}, {[]float64{7}, 7}} {
		in := append([]float64(nil), c.v...)
		if got := Median(c.v); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", in, got, c.want)
		}
		for i := range in {
			if in[i] != c.v[i] {
				t.Errorf("Median reordered its input: %v", c.v)
			}
		}
	}
	if got := Spread([]float64{3, 1, 2}); got != "1.00 / 2.00 / 3.00" {
		t.Errorf("Spread = %q", got)
	}
}
