package qp

import (
	"slices"
	"testing"
)

// TestLine checks the line of QPs waiting for a turn against a plain
// slice: first in, first out, with removals from anywhere, and that a
// line which never holds more QPs than before reuses its array.
func TestLine(t *testing.T) {
	qs := make([]*QP, 8)
	for i := range qs {
		qs[i] = new(QP)
	}
	var l line
	var want []*QP
	check := func(step string) {
		t.Helper()
		got := slices.Clone(l.qs[l.head:])
		if !slices.Equal(got, want) || l.len() != len(want) {
			t.Fatalf("%s: the line holds %d QPs %v, want %d %v", step, l.len(), got, len(want), want)
		}
	}
	for i := 0; i < 5; i++ {
		l.push(qs[i])
		want = append(want, qs[i])
	}
	check("five pushed")
	l.pop()
	l.pop()
	want = want[2:]
	check("two popped")
	l.remove(qs[3])
	want = slices.DeleteFunc(want, func(q *QP) bool { return q == qs[3] })
	check("the middle one removed")
	l.remove(qs[7]) // not in line
	check("one not in line removed")
	if l.front() != qs[2] {
		t.Fatalf("front is not the first pushed of those left")
	}

	// Waiting and served in turn, never more than five at once: no
	// allocation once the array is as large as five need.
	round := func() {
		for i := 0; i < 8; i++ {
			if l.len() >= 5 {
				l.pop()
			}
			l.push(qs[i])
		}
	}
	round() // the array grows to what five need
	allocs := testing.AllocsPerRun(1, func() {
		for range 1000 {
			round()
		}
	})
	if allocs != 0 {
		t.Errorf("a line of at most five QPs allocated %.0f times in 1000 rounds", allocs)
	}
	for l.len() > 0 {
		l.pop()
	}
	if l.head != 0 || len(l.qs) != 0 {
		t.Errorf("an empty line keeps head %d and %d slots", l.head, len(l.qs))
	}
}
