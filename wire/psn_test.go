package wire

import "testing"

func TestPSNArithmetic(t *testing.T) {
	tests := []struct {
		a, b PSN
		diff int32
	}{
		{0, 0, 0},
		{1, 0, 1},
		{0, 1, -1},
		{0, 0xFFFFFF, 1},        // wrap forward
		{0xFFFFFF, 0, -1},       // wrap backward
		{0x7FFFFF, 0, 0x7FFFFF}, // edge of the window
		{0x800000, 0, -0x800000},
		{0x123456, 0x123000, 0x456},
	}
	for _, tt := range tests {
		if got := tt.a.Diff(tt.b); got != tt.diff {
			t.Errorf("%v.Diff(%v) = %d, want %d", tt.a, tt.b, got, tt.diff)
		}
		if got := tt.a.Less(tt.b); got != (tt.diff < 0) {
			t.Errorf("%v.Less(%v) = %v", tt.a, tt.b, got)
		}
		if got := tt.b.Add(tt.diff); got != tt.a {
			t.Errorf("%v.Add(%d) = %v, want %v", tt.b, tt.diff, got, tt.a)
		}
	}
	if got := PSN(0xFFFFFF).Next(); got != 0 {
		t.Errorf("0xffffff.Next() = %v", got)
	}
	if !PSN(2).InWindow(0xFFFFFE, 5) || PSN(3).InWindow(0xFFFFFE, 5) {
		t.Error("InWindow across the wrap is wrong")
	}
	if s := PSN(0x9d1434).String(); s != "0x9d1434" {
		t.Errorf("String = %q", s)
	}
}
