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

// TestLoopbackPair: -server and -client must be two distinct IPv4
// loopback addresses (each device binds UDP port 4791 at its own).
func TestLoopbackPair(t *testing.T) {
	for _, c := range []struct {
		server, client string
		ok             bool
	}{
		{"127.0.0.1", "127.0.0.2", true},
		{"127.0.9.1", "127.0.9.2", true},
		{"127.0.0.1", "127.0.0.1", false}, // one address for both devices
		{"10.0.0.1", "127.0.0.2", false},  // not loopback
		{"::1", "127.0.0.2", false},       // IPv6 has one loopback address: not two devices
		{"127.0.0.1", "localhost", false},
	} {
		a, err := LoopbackPair(c.server, c.client)
		if (err == nil) != c.ok {
			t.Errorf("LoopbackPair(%q, %q) = %v, %v; want ok %v", c.server, c.client, a, err, c.ok)
		}
		if err == nil && (a[0].String() != c.server || a[1].String() != c.client) {
			t.Errorf("LoopbackPair(%q, %q) = %v", c.server, c.client, a)
		}
	}
}
