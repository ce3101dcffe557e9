package mr

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"unsafe"
)

func TestAtomicAligned(t *testing.T) {
	for va, want := range map[uint64]bool{0: true, 8: true, 0x1000: true, 1: false, 4: false, 7: false, 0xfffffffffffffff8: true} {
		if AtomicAligned(va) != want {
			t.Errorf("AtomicAligned(%#x) = %v, want %v", va, !want, want)
		}
		err := CheckAtomicVA(va)
		if want != (err == nil) || (err != nil && !errors.Is(err, ErrMisaligned)) {
			t.Errorf("CheckAtomicVA(%#x) = %v", va, err)
		}
	}
}

// alignedAndNot returns an 8-byte aligned and an unaligned 8-byte window.
func alignedAndNot() (aligned, unaligned []byte) {
	buf := make([]byte, 32) // Go allocates 32-byte objects 8-byte aligned
	off := int(-uintptr(unsafe.Pointer(&buf[0])) % 8)
	return buf[off : off+8], buf[off+11 : off+19]
}

func TestFetchAddCompareSwap(t *testing.T) {
	aligned, unaligned := alignedAndNot()
	for name, b := range map[string][]byte{"aligned": aligned, "unaligned": unaligned} {
		// Host byte order: the memory holds what the CPU reads as a uint64.
		binary.NativeEndian.PutUint64(b, 40)
		if orig := FetchAdd(b, 2); orig != 40 {
			t.Errorf("%s: FetchAdd returned %d, want 40", name, orig)
		}
		if got := binary.NativeEndian.Uint64(b); got != 42 {
			t.Errorf("%s: after FetchAdd memory holds %d, want 42", name, got)
		}
		if orig := FetchAdd(b, ^uint64(0)); orig != 42 { // adding 2^64-1 wraps: minus one
			t.Errorf("%s: FetchAdd returned %d", name, orig)
		}
		if orig := CompareSwap(b, 7, 100); orig != 41 {
			t.Errorf("%s: failing CompareSwap returned %d, want 41", name, orig)
		}
		if got := binary.NativeEndian.Uint64(b); got != 41 {
			t.Errorf("%s: failing CompareSwap wrote %d", name, got)
		}
		if orig := CompareSwap(b, 41, 100); orig != 41 {
			t.Errorf("%s: CompareSwap returned %d, want 41", name, orig)
		}
		if got := binary.NativeEndian.Uint64(b); got != 100 {
			t.Errorf("%s: after CompareSwap memory holds %d, want 100", name, got)
		}
	}
}

// TestAtomicsConcurrent: concurrent FetchAdds lose no update and a CAS-based
// counter stays exact, on aligned and unaligned memory (run with -race).
func TestAtomicsConcurrent(t *testing.T) {
	const goroutines, iters = 4, 1000
	aligned, unaligned := alignedAndNot()
	for name, b := range map[string][]byte{"aligned": aligned, "unaligned": unaligned} {
		binary.NativeEndian.PutUint64(b, 0)
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range iters {
					FetchAdd(b, 1)
					for {
						old := FetchAdd(b, 0)
						if CompareSwap(b, old, old+1) == old {
							break
						}
					}
				}
			})
		}
		wg.Wait()
		if got := FetchAdd(b, 0); got != 2*goroutines*iters {
			t.Errorf("%s: counter %d, want %d", name, got, 2*goroutines*iters)
		}
	}
}

// TestAtomicThroughCheckRemote runs the responder's path: check the rkey for
// an 8-byte atomic, check alignment, then operate.
func TestAtomicThroughCheckRemote(t *testing.T) {
	tab, pd := newPD(t)
	m := regMR(t, pd, 64, AccessLocalWrite|AccessRemoteAtomic)
	va := m.Addr() + 16
	if !AtomicAligned(va) {
		t.Fatalf("test buffer not aligned: %#x", va)
	}
	b, err := tab.CheckRemote(pd, m.RKey(), va, AtomicSize, AccessRemoteAtomic, 1)
	wantErr(t, "CheckRemote atomic", err, nil)
	FetchAdd(b, 5)
	if got := binary.NativeEndian.Uint64(m.Bytes()[16:]); got != 5 {
		t.Errorf("MR holds %d at offset 16, want 5", got)
	}
}

func TestAtomicShortOperandPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("FetchAdd on 4 bytes did not panic")
		}
	}()
	FetchAdd(make([]byte, 4), 1)
}
