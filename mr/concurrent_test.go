package mr

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentLookupsDuringChurn runs data-path checks from several
// goroutines while another registers and deregisters MRs and binds and
// invalidates a type-2 window. A stable key must always resolve; a churning
// key must either resolve to its own memory or fail with a key error, never
// anything else. Run with -race.
func TestConcurrentLookupsDuringChurn(t *testing.T) {
	const (
		readers = 2
		rounds  = 2000
		qpn     = 5
	)
	tab, pd := newPD(t)
	stable := regMR(t, pd, 4096, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessMWBind)
	w, _ := pd.AllocMW(MWType2)

	// published holds rkey<<32 | round of the newest churned MR; window
	// holds the window's newest rkey.
	var published, window atomic.Uint64
	var done atomic.Bool
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 5 {
			t.Errorf(format, args...)
		}
	}

	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for !done.Load() {
				if _, err := tab.CheckRemote(pd, stable.RKey(), stable.Addr(), 4096, AccessRemoteWrite, qpn); err != nil {
					fail("stable key failed: %v", err)
				}
				if _, err := tab.CheckLocal(pd, stable.LKey(), stable.Addr(), 4096, AccessLocalWrite); err != nil {
					fail("stable lkey failed: %v", err)
				}
				if p := published.Load(); p != 0 {
					rkey, round := uint32(p>>32), byte(p)
					b, err := tab.CheckRemote(pd, rkey, 0, 16, AccessRemoteRead, qpn)
					switch {
					case err == nil && (len(b) != 16 || b[0] != round):
						fail("churned rkey %#x resolved to memory of round %d, want %d", rkey, b[0], round)
					case err != nil && !errors.Is(err, ErrInvalidKey):
						fail("churned rkey %#x: unexpected error %v", rkey, err)
					}
				}
				if k := uint32(window.Load()); k != 0 {
					b, err := tab.CheckRemote(pd, k, stable.Addr(), 64, AccessRemoteRead, qpn)
					switch {
					case err == nil && len(b) != 64:
						fail("window resolved to %d bytes", len(b))
					case err != nil && !errors.Is(err, ErrInvalidated) && !errors.Is(err, ErrInvalidKey):
						fail("window rkey %#x: unexpected error %v", k, err)
					}
				}
			}
		})
	}

	var prev *MR
	for round := range rounds {
		buf := make([]byte, 16)
		buf[0] = byte(round)
		m, err := pd.RegMR(buf, AccessRemoteRead|AccessZeroBased)
		if err != nil {
			t.Fatal(err)
		}
		published.Store(uint64(m.RKey())<<32 | uint64(byte(round)))
		if prev != nil {
			if err := prev.Dereg(); err != nil {
				t.Fatal(err)
			}
		}
		prev = m

		if round%2 == 0 {
			k, err := tab.BindMW2(pd, w, stable, stable.Addr(), 64, AccessRemoteRead, qpn, uint8(IncKey(w.RKey())))
			if err != nil {
				t.Fatal(err)
			}
			window.Store(uint64(k))
		} else if err := tab.Invalidate(w.RKey(), qpn); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()

	if got := tab.Stats(); got.MRs != 2 || got.MWs != 1 || got.BoundMWs != 0 {
		t.Errorf("Stats after churn = %+v, want 2 MRs, 1 unbound MW", got)
	}
}
