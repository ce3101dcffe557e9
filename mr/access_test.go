package mr

import "testing"

func TestAccessValuesMatchLibibverbs(t *testing.T) {
	// enum ibv_access_flags in rdma-core's libibverbs/verbs.h.
	for _, c := range []struct {
		a    Access
		want uint32
	}{
		{AccessLocalWrite, 1},
		{AccessRemoteWrite, 2},
		{AccessRemoteRead, 4},
		{AccessRemoteAtomic, 8},
		{AccessMWBind, 16},
		{AccessZeroBased, 32},
		{AccessOnDemand, 64},
		{AccessHugeTLB, 128},
		{AccessFlushGlobal, 256},
		{AccessFlushPersistent, 512},
		{AccessRelaxedOrdering, 1 << 20},
	} {
		if uint32(c.a) != c.want {
			t.Errorf("%v = %d, want %d", c.a, uint32(c.a), c.want)
		}
	}
}

func TestAccessString(t *testing.T) {
	for _, c := range []struct {
		a    Access
		want string
	}{
		{0, "NONE"},
		{AccessLocalWrite, "LOCAL_WRITE"},
		{AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite, "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ"},
		{AccessMWBind | AccessZeroBased, "MW_BIND|ZERO_BASED"},
		{AccessRelaxedOrdering, "RELAXED_ORDERING"},
		{AccessRemoteAtomic | 1<<12, "REMOTE_ATOMIC|0x1000"},
		{1 << 30, "0x40000000"},
	} {
		if got := c.a.String(); got != c.want {
			t.Errorf("Access(%#x).String() = %q, want %q", uint32(c.a), got, c.want)
		}
	}
}

func TestAccessHas(t *testing.T) {
	a := AccessLocalWrite | AccessRemoteRead
	if !a.Has(AccessRemoteRead) || !a.Has(0) || !a.Has(a) {
		t.Errorf("%v should have REMOTE_READ, NONE and itself", a)
	}
	if a.Has(AccessRemoteWrite) || a.Has(AccessRemoteRead|AccessRemoteWrite) {
		t.Errorf("%v should not have REMOTE_WRITE", a)
	}
}

func TestRegMRAccessRules(t *testing.T) {
	_, pd := newPD(t)
	for _, c := range []struct {
		a    Access
		want error
	}{
		{0, nil},
		{AccessLocalWrite, nil},
		{AccessRemoteRead, nil}, // remote read needs no local write
		{AccessLocalWrite | AccessRemoteWrite, nil},
		{AccessLocalWrite | AccessRemoteAtomic, nil},
		{AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessMWBind, nil},
		{AccessZeroBased | AccessRemoteRead, nil},
		{AccessOnDemand | AccessHugeTLB | AccessRelaxedOrdering, nil},
		{AccessRemoteWrite, ErrInvalidAccess},
		{AccessRemoteAtomic, ErrInvalidAccess},
		{AccessRemoteWrite | AccessRemoteRead, ErrInvalidAccess},
		{AccessFlushGlobal, ErrInvalidAccess},
		{AccessFlushPersistent, ErrInvalidAccess},
		{1 << 15, ErrInvalidAccess},
	} {
		m, err := pd.RegMR(make([]byte, 64), c.a)
		wantErr(t, "RegMR "+c.a.String(), err, c.want)
		if err == nil {
			if m.Access() != c.a {
				t.Errorf("Access() = %v, want %v", m.Access(), c.a)
			}
			if err := m.Dereg(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
