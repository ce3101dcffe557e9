package mr

import (
	"errors"
	"math"
	"testing"
	"unsafe"
)

func TestRegMRAddressAndAccessors(t *testing.T) {
	_, pd := newPD(t)
	buf := make([]byte, 4096)
	m, err := pd.RegMR(buf, AccessLocalWrite|AccessRemoteRead)
	wantErr(t, "RegMR", err, nil)
	if want := uint64(uintptr(unsafe.Pointer(&buf[0]))); m.Addr() != want {
		t.Errorf("Addr() = %#x, want &buf[0] = %#x", m.Addr(), want)
	}
	if m.Len() != 4096 || &m.Bytes()[0] != &buf[0] || m.PD() != pd || m.IsDeviceMemory() {
		t.Errorf("accessors disagree with registration: len %d, pd %p", m.Len(), m.PD())
	}
	if h, ok := m.Memory().(HostMemory); !ok || len(h) != 4096 {
		t.Errorf("Memory() = %T, want HostMemory", m.Memory())
	}
	if m.LKey() == m.RKey() {
		t.Errorf("lkey and rkey should differ, both %#x", m.LKey())
	}

	// A sub-slice registers at its own first byte.
	sub, err := pd.RegMR(buf[100:200], 0)
	wantErr(t, "RegMR sub-slice", err, nil)
	if sub.Addr() != m.Addr()+100 {
		t.Errorf("sub-slice Addr() = %#x, want %#x", sub.Addr(), m.Addr()+100)
	}
}

func TestRegMRZeroBased(t *testing.T) {
	tab, pd := newPD(t)
	buf := make([]byte, 64)
	m, err := pd.RegMR(buf, AccessZeroBased|AccessRemoteRead)
	wantErr(t, "RegMR", err, nil)
	if m.Addr() != 0 {
		t.Fatalf("zero-based Addr() = %#x, want 0", m.Addr())
	}
	buf[10] = 0xAB
	b, err := tab.CheckRemote(pd, m.RKey(), 10, 4, AccessRemoteRead, 1)
	wantErr(t, "CheckRemote offset 10", err, nil)
	if &b[0] != &buf[10] {
		t.Error("zero-based va 10 is not buf[10]")
	}
	b, err = tab.CheckLocal(pd, m.LKey(), 60, 4, 0)
	wantErr(t, "CheckLocal offset 60", err, nil)
	if &b[0] != &buf[60] {
		t.Error("zero-based local addr 60 is not buf[60]")
	}
	_, err = tab.CheckRemote(pd, m.RKey(), 61, 4, AccessRemoteRead, 1)
	wantErr(t, "CheckRemote past end", err, ErrOutOfBounds)
}

func TestRegMRIOVA(t *testing.T) {
	tab, pd := newPD(t)
	buf := make([]byte, 4096)
	m, err := pd.RegMRIOVA(buf, 0x1000_0000, AccessLocalWrite|AccessRemoteWrite)
	wantErr(t, "RegMRIOVA", err, nil)
	if m.Addr() != 0x1000_0000 {
		t.Errorf("Addr() = %#x", m.Addr())
	}
	b, err := tab.CheckRemote(pd, m.RKey(), 0x1000_0000+4000, 96, AccessRemoteWrite, 1)
	wantErr(t, "CheckRemote", err, nil)
	if &b[0] != &buf[4000] || len(b) != 96 || cap(b) != 96 {
		t.Errorf("got len %d cap %d, want buf[4000:4096] with no spare capacity", len(b), cap(b))
	}

	// The region may end exactly at 2^64 but not wrap.
	top, err := pd.RegMRIOVA(buf, math.MaxUint64-4095, 0)
	wantErr(t, "RegMRIOVA ending at 2^64", err, nil)
	wantErr(t, "Dereg", top.Dereg(), nil)
	_, err = pd.RegMRIOVA(buf, math.MaxUint64-4094, 0)
	wantErr(t, "RegMRIOVA wrapping 2^64", err, ErrInvalidArgument)
	_, err = pd.RegMRIOVA(buf, 0, AccessZeroBased)
	wantErr(t, "RegMRIOVA zero-based", err, ErrInvalidAccess)
}

func TestRegMRBadArguments(t *testing.T) {
	_, pd := newPD(t)
	_, err := pd.RegMR(nil, 0)
	wantErr(t, "RegMR nil", err, ErrInvalidArgument)
	_, err = pd.RegMR([]byte{}, 0)
	wantErr(t, "RegMR empty", err, ErrInvalidArgument)
	_, err = pd.RegMemory(nil, 0)
	wantErr(t, "RegMemory nil", err, ErrInvalidArgument)
}

func TestDeregRefusesKeys(t *testing.T) {
	tab, pd := newPD(t)
	m := regMR(t, pd, 64, AccessLocalWrite|AccessRemoteWrite)
	_, err := tab.CheckRemote(pd, m.RKey(), m.Addr(), 64, AccessRemoteWrite, 1)
	wantErr(t, "CheckRemote before Dereg", err, nil)
	wantErr(t, "Dereg", m.Dereg(), nil)
	_, err = tab.CheckRemote(pd, m.RKey(), m.Addr(), 64, AccessRemoteWrite, 1)
	wantErr(t, "CheckRemote after Dereg", err, ErrInvalidKey)
	_, err = tab.CheckLocal(pd, m.LKey(), m.Addr(), 64, AccessLocalWrite)
	wantErr(t, "CheckLocal after Dereg", err, ErrInvalidKey)
	wantErr(t, "Dereg twice", m.Dereg(), ErrDestroyed)
}

func TestRegMemoryDevice(t *testing.T) {
	// Peer memory off: device memory is refused, host memory is fine.
	_, pd := newPD(t)
	_, err := pd.RegMemory(deviceMem(make([]byte, 64)), AccessLocalWrite)
	wantErr(t, "RegMemory device without PeerMemory", err, ErrDeviceMemory)
	h, err := pd.RegMemory(HostMemory(make([]byte, 64)), AccessLocalWrite)
	wantErr(t, "RegMemory host", err, nil)
	if h.IsDeviceMemory() {
		t.Error("host memory reported as device memory")
	}

	// Peer memory on (GPUDirect RDMA): the NIC reaches device memory directly.
	tab := newTable(t, Limits{PeerMemory: true})
	pd2, _ := tab.AllocPD()
	dm := deviceMem(make([]byte, 64))
	m, err := pd2.RegMemory(dm, AccessLocalWrite|AccessRemoteWrite)
	wantErr(t, "RegMemory device with PeerMemory", err, nil)
	if !m.IsDeviceMemory() || m.Addr() != uint64(uintptr(unsafe.Pointer(&dm[0]))) {
		t.Errorf("device MR: IsDeviceMemory %v, Addr %#x", m.IsDeviceMemory(), m.Addr())
	}
	b, err := tab.CheckRemote(pd2, m.RKey(), m.Addr()+8, 8, AccessRemoteWrite, 3)
	wantErr(t, "CheckRemote device MR", err, nil)
	if &b[0] != &dm[8] {
		t.Error("CheckRemote did not resolve to the device buffer")
	}
}

// TestKeysRandomUnique registers 10,000 MRs and checks their 20,000 keys: none
// zero, all distinct (indices too), not in arithmetic progression, and
// spread over the whole 32-bit space.
func TestKeysRandomUnique(t *testing.T) {
	const n = 10000
	tab := newTable(t, Limits{})
	pd, _ := tab.AllocPD()
	buf := make([]byte, n)
	mrs := make([]*MR, n)
	var keys []uint32
	for i := range mrs {
		m, err := pd.RegMR(buf[i:i+1], AccessRemoteRead)
		if err != nil {
			t.Fatalf("RegMR %d: %v", i, err)
		}
		mrs[i] = m
		keys = append(keys, m.LKey(), m.RKey())
	}

	seenKey := map[uint32]bool{}
	seenIndex := map[uint32]bool{}
	var keyBytes [256]int
	var high int
	for _, k := range keys {
		if k == 0 || keyIndex(k) == 0 {
			t.Fatalf("key %#x has a zero index", k)
		}
		if seenKey[k] || seenIndex[keyIndex(k)] {
			t.Fatalf("key %#x (index %#x) handed out twice", k, keyIndex(k))
		}
		seenKey[k], seenIndex[keyIndex(k)] = true, true
		keyBytes[k&keyByteMask]++
		if k >= 1<<31 {
			high++
		}
	}

	// Sequential or strided keys have constant differences; random ones have
	// (almost) all different differences.
	diffs := map[uint32]bool{}
	for i := 1; i < len(keys); i++ {
		diffs[keys[i]-keys[i-1]] = true
	}
	if len(diffs) < len(keys)*9/10 {
		t.Errorf("only %d distinct differences between %d consecutive keys: keys look sequential", len(diffs), len(keys))
	}
	// Every key byte value appears (a miss has probability ~256·e^-78), and
	// about half the keys have the top bit set (|bias| > 5% has p < 1e-40).
	for b, c := range keyBytes {
		if c == 0 {
			t.Errorf("key byte %#02x never drawn in %d keys", b, len(keys))
		}
	}
	if high < len(keys)*45/100 || high > len(keys)*55/100 {
		t.Errorf("%d of %d keys have the top bit set, want about half", high, len(keys))
	}

	for _, m := range mrs {
		if err := m.Dereg(); err != nil {
			t.Fatal(err)
		}
	}
	if tab.keysInUse != 0 {
		t.Errorf("%d keys still in use after deregistering everything", tab.keysInUse)
	}
	for _, k := range keys[:100] {
		if _, err := tab.CheckRemote(pd, k, 0, 1, 0, 0); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("key %#x still resolves after Dereg: %v", k, err)
		}
	}
}

func TestIncKey(t *testing.T) {
	for _, c := range []struct{ in, want uint32 }{
		{0x12345600, 0x12345601},
		{0x123456fe, 0x123456ff},
		{0x123456ff, 0x12345600}, // the key byte wraps, the index stays
	} {
		if got := IncKey(c.in); got != c.want {
			t.Errorf("IncKey(%#x) = %#x, want %#x", c.in, got, c.want)
		}
	}
}
