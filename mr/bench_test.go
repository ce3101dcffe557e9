package mr

import (
	"fmt"
	"testing"
)

// benchTable returns a table holding n MRs besides the one measured, so map
// lookups see a realistic population.
func benchTable(b *testing.B, n int) (*Table, *PD, *MR) {
	tab, pd := newPD(b)
	for range n {
		regMR(b, pd, 64, AccessRemoteRead)
	}
	return tab, pd, regMR(b, pd, 1<<20, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessMWBind)
}

// BenchmarkCheckRemote measures the responder's key check for one 4 KiB
// RDMA WRITE packet.
func BenchmarkCheckRemote(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("MRs=%d", n+1), func(b *testing.B) {
			tab, pd, m := benchTable(b, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				va := m.Addr() + uint64(i&255)*4096
				if _, err := tab.CheckRemote(pd, m.RKey(), va, 4096, AccessRemoteWrite, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckRemoteParallel runs the check from every P at once, as the
// NIC's workers do.
func BenchmarkCheckRemoteParallel(b *testing.B) {
	tab, pd, m := benchTable(b, 1000)
	b.ReportAllocs()
	b.RunParallel(func(p *testing.PB) {
		for p.Next() {
			if _, err := tab.CheckRemote(pd, m.RKey(), m.Addr(), 4096, AccessRemoteWrite, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCheckRemoteMW measures the check through a bound type-2 window.
func BenchmarkCheckRemoteMW(b *testing.B) {
	tab, pd, m := benchTable(b, 1000)
	w, _ := pd.AllocMW(MWType2)
	k, err := tab.BindMW2(pd, w, m, m.Addr(), 1<<20, AccessRemoteWrite, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tab.CheckRemote(pd, k, m.Addr()+4096, 4096, AccessRemoteWrite, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckRemoteFailure measures a refused key (one *AccessError).
func BenchmarkCheckRemoteFailure(b *testing.B) {
	tab, pd, m := benchTable(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tab.CheckRemote(pd, m.RKey()^1, m.Addr(), 4096, AccessRemoteWrite, 1); err == nil {
			b.Fatal("forged key accepted")
		}
	}
}

// BenchmarkCheckLocal measures the check of one scatter/gather element.
func BenchmarkCheckLocal(b *testing.B) {
	tab, pd, m := benchTable(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tab.CheckLocal(pd, m.LKey(), m.Addr()+64, 4096, AccessLocalWrite); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegDereg measures a registration and deregistration with 1000
// other MRs registered (the copy-on-write cost of the control path).
func BenchmarkRegDereg(b *testing.B) {
	_, pd, _ := benchTable(b, 1000)
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		m, err := pd.RegMR(buf, AccessLocalWrite)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Dereg(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetchAdd measures the responder's FETCH_AND_ADD on memory.
func BenchmarkFetchAdd(b *testing.B) {
	aligned, _ := alignedAndNot()
	for b.Loop() {
		FetchAdd(aligned, 1)
	}
}
