package mr

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCheckRemoteMR(t *testing.T) {
	tab, pd := newPD(t)
	otherPD, _ := tab.AllocPD()
	buf := make([]byte, 4096)
	const base = 0x7000_0000_0000
	m, err := pd.RegMRIOVA(buf, base, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	wantErr(t, "RegMRIOVA", err, nil)
	ro := regMR(t, pd, 64, AccessRemoteRead)
	wo := regMR(t, pd, 64, AccessLocalWrite|AccessRemoteWrite)
	dead := regMR(t, pd, 64, AccessRemoteRead)
	wantErr(t, "Dereg", dead.Dereg(), nil)

	for _, c := range []struct {
		name    string
		pd      *PD
		rkey    uint32
		va      uint64
		length  int
		need    Access
		want    error
		wantOff int // offset into buf on success
		msg     string
	}{
		{name: "whole region", pd: pd, rkey: m.RKey(), va: base, length: 4096, need: AccessRemoteWrite},
		{name: "middle", pd: pd, rkey: m.RKey(), va: base + 100, length: 10, need: AccessRemoteRead, wantOff: 100},
		{name: "last byte", pd: pd, rkey: m.RKey(), va: base + 4095, length: 1, need: AccessRemoteWrite, wantOff: 4095},
		{name: "read+write", pd: pd, rkey: m.RKey(), va: base, length: 1, need: AccessRemoteRead | AccessRemoteWrite},
		{name: "unknown key", pd: pd, rkey: m.RKey() ^ 0x8000_0000, va: base, length: 1, want: ErrInvalidKey, msg: "invalid key"},
		{name: "wrong key byte", pd: pd, rkey: m.RKey() ^ 1, va: base, length: 1, want: ErrInvalidKey},
		{name: "lkey as rkey", pd: pd, rkey: m.LKey(), va: base, length: 1, want: ErrInvalidKey},
		{name: "zero key", pd: pd, rkey: 0, va: base, length: 1, want: ErrInvalidKey},
		{name: "deregistered", pd: pd, rkey: dead.RKey(), va: dead.Addr(), length: 1, want: ErrInvalidKey},
		{name: "other PD", pd: otherPD, rkey: m.RKey(), va: base, length: 1, need: AccessRemoteRead, want: ErrPDMismatch},
		{name: "nil PD", pd: nil, rkey: m.RKey(), va: base, length: 1, want: ErrPDMismatch},
		{name: "no atomic right", pd: pd, rkey: m.RKey(), va: base, length: 8, need: AccessRemoteAtomic, want: ErrAccessDenied,
			msg: "need REMOTE_ATOMIC, key grants LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ"},
		{name: "write to read-only", pd: pd, rkey: ro.RKey(), va: ro.Addr(), length: 1, need: AccessRemoteWrite, want: ErrAccessDenied},
		{name: "read without remote read", pd: pd, rkey: wo.RKey(), va: wo.Addr(), length: 1, need: AccessRemoteRead, want: ErrAccessDenied,
			msg: "need REMOTE_READ, key grants LOCAL_WRITE|REMOTE_WRITE"},
		{name: "before start", pd: pd, rkey: m.RKey(), va: base - 1, length: 2, want: ErrOutOfBounds,
			msg: "[0x6fffffffffff, 0x6fffffffffff+2) not inside [0x700000000000, 0x700000000000+4096)"},
		{name: "past end", pd: pd, rkey: m.RKey(), va: base + 4095, length: 2, want: ErrOutOfBounds},
		{name: "too long", pd: pd, rkey: m.RKey(), va: base, length: 4097, want: ErrOutOfBounds},
		{name: "starts after end", pd: pd, rkey: m.RKey(), va: base + 4096, length: 1, want: ErrOutOfBounds},
		{name: "va near 2^64", pd: pd, rkey: m.RKey(), va: math.MaxUint64 - 2, length: 8, want: ErrOutOfBounds},
		{name: "length wraps va", pd: pd, rkey: m.RKey(), va: base + 8, length: math.MaxInt, want: ErrOutOfBounds},
		{name: "negative length", pd: pd, rkey: m.RKey(), va: base, length: -1, want: ErrOutOfBounds, msg: "negative length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := tab.CheckRemote(c.pd, c.rkey, c.va, c.length, c.need, 7)
			wantErr(t, "CheckRemote", err, c.want)
			if c.want != nil {
				var ae *AccessError
				if !errors.As(err, &ae) || !ae.Remote || ae.Key != c.rkey {
					t.Fatalf("error %v is not an *AccessError for rkey %#x", err, c.rkey)
				}
				if !strings.Contains(err.Error(), "rkey") || !strings.Contains(err.Error(), c.msg) {
					t.Errorf("message %q should name the rkey and contain %q", err, c.msg)
				}
				if b != nil {
					t.Errorf("failed check returned %d bytes", len(b))
				}
				return
			}
			if len(b) != c.length || cap(b) != c.length || &b[0] != &buf[c.wantOff] {
				t.Errorf("got len %d cap %d, want buf[%d:%d]", len(b), cap(b), c.wantOff, c.wantOff+c.length)
			}
		})
	}
}

// TestCheckRemoteTopOfAddressSpace registers a region whose last byte is
// 2^64-1, where any va+len arithmetic would overflow.
func TestCheckRemoteTopOfAddressSpace(t *testing.T) {
	tab, pd := newPD(t)
	buf := make([]byte, 4096)
	const base = math.MaxUint64 - 4095
	m, err := pd.RegMRIOVA(buf, base, AccessRemoteRead)
	wantErr(t, "RegMRIOVA", err, nil)
	for _, c := range []struct {
		va     uint64
		length int
		want   error
	}{
		{base, 4096, nil},
		{math.MaxUint64, 1, nil},
		{math.MaxUint64 - 7, 8, nil},
		{math.MaxUint64, 2, ErrOutOfBounds},     // va+len wraps to 1
		{math.MaxUint64 - 7, 9, ErrOutOfBounds}, // wraps to 1
		{base, 4097, ErrOutOfBounds},
		{base, math.MaxInt, ErrOutOfBounds},
		{0, 1, ErrOutOfBounds}, // wrapped-around address
		{base - 1, 1, ErrOutOfBounds},
	} {
		b, err := tab.CheckRemote(pd, m.RKey(), c.va, c.length, AccessRemoteRead, 1)
		wantErr(t, "CheckRemote", err, c.want)
		if err == nil && (len(b) != c.length || &b[len(b)-1] != &buf[c.va-base+uint64(c.length)-1]) {
			t.Errorf("va %#x len %d: wrong bytes", c.va, c.length)
		}
	}
}

// TestZeroLengthSkipsKeyCheck: IBTA C9-88 (as rxe): a zero-length RDMA READ
// or WRITE carries no meaningful va or rkey, so nothing is validated.
func TestZeroLengthSkipsKeyCheck(t *testing.T) {
	tab, pd := newPD(t)
	b, err := tab.CheckRemote(pd, 0xdeadbeef, math.MaxUint64, 0, AccessRemoteWrite, 1)
	if b != nil || err != nil {
		t.Errorf("zero-length CheckRemote = %v, %v; want nil, nil", b, err)
	}
	b, err = tab.CheckLocal(nil, 0, 0, 0, AccessLocalWrite)
	if b != nil || err != nil {
		t.Errorf("zero-length CheckLocal = %v, %v; want nil, nil", b, err)
	}
}

func TestCheckLocal(t *testing.T) {
	tab, pd := newPD(t)
	otherPD, _ := tab.AllocPD()
	rw := regMR(t, pd, 256, AccessLocalWrite)
	ro := regMR(t, pd, 256, AccessRemoteRead) // local read only
	w, _ := pd.AllocMW(MWType1)

	for _, c := range []struct {
		name   string
		pd     *PD
		lkey   uint32
		addr   uint64
		length int
		need   Access
		want   error
	}{
		{"read", pd, ro.LKey(), ro.Addr(), 256, 0, nil},
		{"write", pd, rw.LKey(), rw.Addr() + 16, 16, AccessLocalWrite, nil},
		{"write read-only", pd, ro.LKey(), ro.Addr(), 1, AccessLocalWrite, ErrAccessDenied},
		{"rkey as lkey", pd, rw.RKey(), rw.Addr(), 1, 0, ErrInvalidKey},
		{"window key as lkey", pd, w.RKey(), rw.Addr(), 1, 0, ErrInvalidKey},
		{"unknown", pd, rw.LKey() ^ 0x100, rw.Addr(), 1, 0, ErrInvalidKey},
		{"other PD", otherPD, rw.LKey(), rw.Addr(), 1, 0, ErrPDMismatch},
		{"past end", pd, rw.LKey(), rw.Addr() + 200, 57, 0, ErrOutOfBounds},
		{"negative", pd, rw.LKey(), rw.Addr(), -5, 0, ErrOutOfBounds},
	} {
		b, err := tab.CheckLocal(c.pd, c.lkey, c.addr, c.length, c.need)
		wantErr(t, "CheckLocal "+c.name, err, c.want)
		if err != nil {
			var ae *AccessError
			if !errors.As(err, &ae) || ae.Remote || !strings.Contains(err.Error(), "lkey") {
				t.Errorf("%s: %v should be an lkey *AccessError", c.name, err)
			}
		} else if len(b) != c.length {
			t.Errorf("%s: got %d bytes, want %d", c.name, len(b), c.length)
		}
	}
}

// TestChecksDoNotAllocate: the data path allocates nothing when a check
// passes, for MRs and both window types, and one *AccessError when it fails.
func TestChecksDoNotAllocate(t *testing.T) {
	tab, pd := newPD(t)
	m := regMR(t, pd, 4096, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessMWBind)
	w1, _ := pd.AllocMW(MWType1)
	k1, err := w1.Bind(m, m.Addr(), 1024, AccessRemoteRead)
	wantErr(t, "Bind", err, nil)
	w2, _ := pd.AllocMW(MWType2)
	k2, err := tab.BindMW2(pd, w2, m, m.Addr()+1024, 1024, AccessRemoteWrite|AccessZeroBased, 9, 1)
	wantErr(t, "BindMW2", err, nil)

	var sink []byte
	for _, c := range []struct {
		name string
		f    func()
		want float64
	}{
		{"CheckRemote MR", func() { sink, _ = tab.CheckRemote(pd, m.RKey(), m.Addr()+64, 1024, AccessRemoteWrite, 9) }, 0},
		{"CheckRemote type-1 MW", func() { sink, _ = tab.CheckRemote(pd, k1, m.Addr()+8, 64, AccessRemoteRead, 9) }, 0},
		{"CheckRemote type-2 MW", func() { sink, _ = tab.CheckRemote(pd, k2, 8, 64, AccessRemoteWrite, 9) }, 0},
		{"CheckLocal", func() { sink, _ = tab.CheckLocal(pd, m.LKey(), m.Addr(), 4096, AccessLocalWrite) }, 0},
		{"CheckRemote failing", func() { sink, _ = tab.CheckRemote(pd, m.RKey()^1, 0, 1, AccessRemoteWrite, 9) }, 1},
	} {
		if got := testing.AllocsPerRun(1000, c.f); got != c.want {
			t.Errorf("%s: %v allocations per run, want %v", c.name, got, c.want)
		}
	}
	_ = sink
}
