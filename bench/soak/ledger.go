package soak

import "fmt"

// ledger holds the work requests posted and not yet completed, by wr_id,
// so that a completion for a WR that was never posted, or a second
// completion for one, is caught. Not safe for concurrent use: each lane
// owns its ledgers.
type ledger struct {
	name        string
	outstanding map[uint64]struct{}
}

func newLedger(name string) *ledger {
	return &ledger{name: name, outstanding: make(map[uint64]struct{})}
}

// post records that wrID was posted.
func (l *ledger) post(wrID uint64) { l.outstanding[wrID] = struct{}{} }

// complete retires wrID; it fails if wrID is not outstanding.
func (l *ledger) complete(wrID uint64) error {
	if _, ok := l.outstanding[wrID]; !ok {
		return fmt.Errorf("%s: completion for wr_id %#x, which is not outstanding (never posted or completed twice)", l.name, wrID)
	}
	delete(l.outstanding, wrID)
	return nil
}

// len is the number of WRs posted and not completed.
func (l *ledger) len() int { return len(l.outstanding) }
