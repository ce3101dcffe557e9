package mr

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestNewTableLimits(t *testing.T) {
	tab := newTable(t, Limits{})
	if got, want := tab.Limits(), DefaultLimits(); got != want {
		t.Errorf("zero Limits: got %+v, want defaults %+v", got, want)
	}
	tab = newTable(t, Limits{MaxMR: 5, PeerMemory: true})
	if l := tab.Limits(); l.MaxMR != 5 || !l.PeerMemory || l.MaxPD != DefaultLimits().MaxPD {
		t.Errorf("partial Limits not merged with defaults: %+v", l)
	}
	for _, bad := range []Limits{
		{MaxPD: -1},
		{MaxMR: -1},
		{MaxMW: -1},
		{MaxMR: 1<<22 + 1, MaxMW: 1},       // 2^23 + 3 keys
		{MaxMR: 1 << 21, MaxMW: 1<<22 + 1}, // 2^23 + 1 keys
		{MaxMR: math.MaxInt},               // 2*MaxMR overflows
		{MaxMR: 1, MaxMW: math.MaxInt},     // the sum overflows
	} {
		if _, err := NewTable(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewTable(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	// Exactly half the 24-bit index space is allowed.
	newTable(t, Limits{MaxMR: 1 << 21, MaxMW: 1 << 22})
}

func TestLimitsEnforced(t *testing.T) {
	tab := newTable(t, Limits{MaxPD: 2, MaxMR: 2, MaxMW: 1, MaxMRSize: 100})
	pd, err := tab.AllocPD()
	wantErr(t, "AllocPD 1", err, nil)
	_, err = tab.AllocPD()
	wantErr(t, "AllocPD 2", err, nil)
	_, err = tab.AllocPD()
	wantErr(t, "AllocPD 3", err, ErrLimit)

	_, err = pd.RegMR(make([]byte, 101), 0)
	wantErr(t, "RegMR above MaxMRSize", err, ErrLimit)
	if err != nil && !strings.Contains(err.Error(), "MaxMRSize 100") {
		t.Errorf("message should name the limit: %v", err)
	}
	m1 := regMR(t, pd, 100, 0)
	regMR(t, pd, 1, 0)
	_, err = pd.RegMR(make([]byte, 1), 0)
	wantErr(t, "RegMR above MaxMR", err, ErrLimit)
	wantErr(t, "Dereg", m1.Dereg(), nil)
	regMR(t, pd, 1, 0) // room again

	_, err = pd.AllocMW(MWType1)
	wantErr(t, "AllocMW 1", err, nil)
	_, err = pd.AllocMW(MWType2)
	wantErr(t, "AllocMW above MaxMW", err, ErrLimit)
}

func TestStats(t *testing.T) {
	tab := newTable(t, Limits{PeerMemory: true})
	pd, _ := tab.AllocPD()
	m := regMR(t, pd, 1000, AccessLocalWrite|AccessMWBind|AccessRemoteRead)
	dev, err := pd.RegMemory(deviceMem(make([]byte, 24)), AccessLocalWrite)
	wantErr(t, "RegMemory", err, nil)
	w, _ := pd.AllocMW(MWType1)
	if _, err := w.Bind(m, m.Addr(), 10, AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	want := Stats{PDs: 1, MRs: 2, MWs: 1, BoundMWs: 1, RegisteredBytes: 1024, DeviceBytes: 24}
	if got := tab.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	wantErr(t, "Dealloc MW", w.Dealloc(), nil)
	wantErr(t, "Dereg", m.Dereg(), nil)
	wantErr(t, "Dereg device", dev.Dereg(), nil)
	wantErr(t, "Dealloc PD", pd.Dealloc(), nil)
	if got := tab.Stats(); got != (Stats{}) {
		t.Errorf("Stats after freeing everything = %+v, want zero", got)
	}
}
