package mr

import (
	"strings"
	"testing"
)

func TestPDDeallocBusy(t *testing.T) {
	_, pd := newPD(t)
	m := regMR(t, pd, 8, 0)
	err := pd.Dealloc()
	wantErr(t, "Dealloc with MR", err, ErrBusy)
	if !strings.Contains(err.Error(), "1 MRs") {
		t.Errorf("message should count MRs: %v", err)
	}
	wantErr(t, "Dereg", m.Dereg(), nil)

	w, err := pd.AllocMW(MWType2)
	wantErr(t, "AllocMW", err, nil)
	wantErr(t, "Dealloc with MW", pd.Dealloc(), ErrBusy)
	wantErr(t, "Dealloc MW", w.Dealloc(), nil)

	// QPs and AHs hold the PD through Hold/Release.
	wantErr(t, "Hold", pd.Hold(), nil)
	wantErr(t, "Hold", pd.Hold(), nil)
	wantErr(t, "Dealloc held twice", pd.Dealloc(), ErrBusy)
	wantErr(t, "Release", pd.Release(), nil)
	wantErr(t, "Dealloc held once", pd.Dealloc(), ErrBusy)
	wantErr(t, "Release", pd.Release(), nil)
	wantErr(t, "Release without Hold", pd.Release(), ErrInvalidState)

	wantErr(t, "Dealloc idle", pd.Dealloc(), nil)
	wantErr(t, "Dealloc twice", pd.Dealloc(), ErrDestroyed)
	wantErr(t, "Hold after Dealloc", pd.Hold(), ErrDestroyed)
	_, err = pd.RegMR(make([]byte, 8), 0)
	wantErr(t, "RegMR after Dealloc", err, ErrDestroyed)
	_, err = pd.AllocMW(MWType1)
	wantErr(t, "AllocMW after Dealloc", err, ErrDestroyed)
}

func TestPDTable(t *testing.T) {
	tab, pd := newPD(t)
	if pd.Table() != tab {
		t.Error("PD.Table() is not the allocating table")
	}
}
