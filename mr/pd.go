package mr

// PD is a protection domain (ibv_pd). Every MR, memory window, QP and
// address handle belongs to one PD, and a key only works for a QP of the same
// PD: CheckRemote and CheckLocal refuse a key from another PD with
// ErrPDMismatch. A PD is created by Table.AllocPD and is safe for concurrent
// use.
type PD struct {
	table *Table

	// guarded by table.mu
	mrs, mws, holds int  // objects using the PD
	dead            bool // Dealloc succeeded
}

// AllocPD allocates a protection domain (ibv_alloc_pd). It fails with
// ErrLimit when Limits.MaxPD domains exist.
func (t *Table) AllocPD() (*PD, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pds >= t.limits.MaxPD {
		return nil, errorf(ErrLimit, "AllocPD: %d protection domains allocated, MaxPD is %d", t.pds, t.limits.MaxPD)
	}
	t.pds++
	return &PD{table: t}, nil
}

// Table returns the table (device) the PD belongs to.
func (pd *PD) Table() *Table { return pd.table }

// Dealloc frees the protection domain (ibv_dealloc_pd). Like verbs it fails
// with ErrBusy while memory regions, memory windows or held references (QPs,
// address handles) still use the PD, and with ErrDestroyed if the PD was
// already deallocated.
func (pd *PD) Dealloc() error {
	t := pd.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if pd.dead {
		return errorf(ErrDestroyed, "Dealloc PD: already deallocated")
	}
	if pd.mrs > 0 || pd.mws > 0 || pd.holds > 0 {
		return errorf(ErrBusy, "Dealloc PD: still used by %d MRs, %d MWs and %d other objects (QPs, AHs)",
			pd.mrs, pd.mws, pd.holds)
	}
	pd.dead = true
	t.pds--
	return nil
}

// Hold records that another object (a QP, an address handle, an SRQ) uses
// the PD, so Dealloc fails with ErrBusy until the matching Release. The
// device calls it when it creates such an object. Hold fails with
// ErrDestroyed on a deallocated PD.
func (pd *PD) Hold() error {
	t := pd.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if pd.dead {
		return errorf(ErrDestroyed, "Hold PD: already deallocated")
	}
	pd.holds++
	return nil
}

// Release undoes one Hold. It fails with ErrInvalidState if nothing is held.
func (pd *PD) Release() error {
	t := pd.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if pd.holds == 0 {
		return errorf(ErrInvalidState, "Release PD: no matching Hold")
	}
	pd.holds--
	return nil
}

// usable reports an error if the PD cannot take new objects. t.mu must be held.
func (pd *PD) usable(op string) error {
	if pd == nil {
		return errorf(ErrInvalidArgument, "%s: nil PD", op)
	}
	if pd.dead {
		return errorf(ErrDestroyed, "%s: PD already deallocated", op)
	}
	return nil
}
