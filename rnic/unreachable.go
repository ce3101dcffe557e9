package rnic

import (
	"slices"

	"github.com/goroce/goroce/rnic/link"
)

// OnUnreachable makes the device call f for each datagram it sent that
// its link reports found no RoCEv2 endpoint at its destination
// (link.Unreachable: udplink hears the ICMP destination unreachable the
// peer's host answers with, shmlink finds no device at the address), after
// counting it (dest_unreachable), until stop is called. f runs in the
// goroutine that learned it, the receive path's or a sender's, possibly
// with the device's locks held: it must not block or call the device. The
// connection manager (rnic/cm) listens, to fail at once a connect to an
// address where no device answers.
func (d *Device) OnUnreachable(f func(link.Unreachable)) (stop func()) {
	p := &f
	d.unreachMu.Lock()
	defer d.unreachMu.Unlock()
	d.onUnreach.Store(ptrTo(append(d.listeners(), p)))
	return func() {
		d.unreachMu.Lock()
		defer d.unreachMu.Unlock()
		d.onUnreach.Store(ptrTo(slices.DeleteFunc(d.listeners(), func(q *func(link.Unreachable)) bool { return q == p })))
	}
}

// listeners returns a copy of OnUnreachable's functions; the caller holds
// unreachMu.
func (d *Device) listeners() []*func(link.Unreachable) {
	if l := d.onUnreach.Load(); l != nil {
		return slices.Clone(*l)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// unreachable is the link's report (link.UnreachableNotifier).
func (d *Device) unreachable(u link.Unreachable) {
	d.dev.DestUnreachable.Add(1)
	if l := d.onUnreach.Load(); l != nil {
		for _, f := range *l {
			(*f)(u)
		}
	}
}
