package mr

import (
	"errors"
	"testing"
)

// newTable returns a table with limits or fails the test.
func newTable(t testing.TB, limits Limits) *Table {
	t.Helper()
	tab, err := NewTable(limits)
	if err != nil {
		t.Fatalf("NewTable(%+v): %v", limits, err)
	}
	return tab
}

// newPD returns a fresh table and one PD in it.
func newPD(t testing.TB) (*Table, *PD) {
	t.Helper()
	tab := newTable(t, Limits{})
	pd, err := tab.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD: %v", err)
	}
	return tab, pd
}

// regMR registers a new buffer of n bytes or fails the test.
func regMR(t testing.TB, pd *PD, n int, access Access) *MR {
	t.Helper()
	m, err := pd.RegMR(make([]byte, n), access)
	if err != nil {
		t.Fatalf("RegMR(%d bytes, %v): %v", n, access, err)
	}
	return m
}

// wantErr fails the test unless err wraps want (nil means no error).
func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("%s: unexpected error %v", what, err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// deviceMem is a fake device-memory buffer.
type deviceMem []byte

func (d deviceMem) Bytes() []byte      { return d }
func (d deviceMem) DeviceMemory() bool { return true }
