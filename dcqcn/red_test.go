package dcqcn

import (
	"errors"
	"testing"
)

func TestREDMarkProbability(t *testing.T) {
	r := RED{Kmin: 40000, Kmax: 1000000 + 40000, Pmax: 0.2}
	for _, c := range []struct {
		q    int
		want float64
	}{
		{0, 0},
		{39999, 0},
		{40000, 0},         // at Kmin: not yet
		{40001, 0.2 / 1e6}, // just above
		{540000, 0.1},      // half way: Pmax/2
		{1040000, 0.2},     // at Kmax: Pmax
		{1040001, 1},       // above Kmax: always
		{1 << 40, 1},
		{-5, 0},
	} {
		if got := r.MarkProbability(c.q); !approx(got, c.want) {
			t.Errorf("MarkProbability(%d) = %v, want %v", c.q, got, c.want)
		}
	}
}

func TestREDStepWhenKminEqualsKmax(t *testing.T) {
	r := RED{Kmin: 1000, Kmax: 1000, Pmax: 0.5}
	if r.MarkProbability(1000) != 0 || r.MarkProbability(1001) != 1 {
		t.Errorf("step at 1000: p(1000)=%v p(1001)=%v, want 0 and 1", r.MarkProbability(1000), r.MarkProbability(1001))
	}
}

func TestREDMark(t *testing.T) {
	r := RED{Kmin: 100, Kmax: 200, Pmax: 0.5}
	for _, c := range []struct {
		q    int
		u    float64
		want bool
	}{
		{100, 0, false},       // p = 0 never marks, even for u = 0
		{150, 0.2499, true},   // p = 0.25
		{150, 0.25, false},    // u < p is required
		{200, 0.4999, true},   // p = Pmax
		{201, 0.999999, true}, // p = 1 always marks
	} {
		if got := r.Mark(c.q, c.u); got != c.want {
			t.Errorf("Mark(%d, %v) = %v, want %v", c.q, c.u, got, c.want)
		}
	}
}

func TestREDValidate(t *testing.T) {
	for _, r := range []RED{{-1, 10, 0.1}, {10, 9, 0.1}, {0, 10, -0.1}, {0, 10, 1.1}} {
		if err := r.Validate(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%+v.Validate() = %v, want ErrInvalidParams", r, err)
		}
	}
	if err := (RED{0, 0, 1}).Validate(); err != nil {
		t.Errorf("step RED: %v", err)
	}
}
