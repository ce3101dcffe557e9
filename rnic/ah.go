package rnic

import (
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
)

// AH is an address handle (struct ibv_ah): an address vector the device has
// checked, naming where UD sends go. Post it as SendWR.AH = &ah.AH. It
// belongs to a PD, which cannot be deallocated until the AH is destroyed.
// Do not change the embedded vector after CreateAH.
type AH struct {
	qp.AH
	pd   *mr.PD
	dead atomic.Bool
}

// CreateAH creates an address handle on pd (ibv_create_ah). The GID must be
// a unicast address of the device's own family: an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d, or a plain IPv4 address, which is mapped) on an IPv4
// device, a native IPv6 address on an IPv6 one; RoCEv2 cannot route between
// the two. Port 0 becomes 4791, the RoCEv2 port.
func (d *Device) CreateAH(pd *mr.PD, attr qp.AH) (*AH, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if pd == nil || pd.Table() != d.mem {
		return nil, fmt.Errorf("%w: PD of the address handle", ErrWrongDevice)
	}
	gid := attr.GID
	switch {
	case !gid.IsValid():
		return nil, fmt.Errorf("%w: address handle without a GID", ErrInvalidArg)
	case gid.Unmap().IsUnspecified() || gid.IsMulticast() || gid.Unmap().IsMulticast():
		return nil, fmt.Errorf("%w: GID %v is not a unicast address (multicast UD is not supported)", ErrInvalidArg, gid)
	case d.limits.IPv4 && !gid.Unmap().Is4():
		return nil, fmt.Errorf("%w: GID %v is IPv6, but device %v speaks IPv4: want an IPv4-mapped GID (::ffff:a.b.c.d)",
			ErrInvalidArg, gid, d.local.Addr())
	case !d.limits.IPv4 && gid.Unmap().Is4():
		return nil, fmt.Errorf("%w: GID %v is IPv4, but device %v speaks IPv6", ErrInvalidArg, gid, d.local.Addr())
	}
	if gid.Is4() {
		attr.GID = netip.AddrFrom16(gid.As16())
	}
	if attr.Port == 0 {
		attr.Port = link.RoCEv2Port
	}
	if err := pd.Hold(); err != nil {
		return nil, err
	}
	return &AH{AH: attr, pd: pd}, nil
}

// PD returns the protection domain the address handle belongs to.
func (ah *AH) PD() *mr.PD { return ah.pd }

// Destroy releases the address handle (ibv_destroy_ah) and its hold on the
// PD. Work requests already posted with it are unaffected: PostSend copied
// the vector. A second Destroy fails with ErrInvalidArg.
func (ah *AH) Destroy() error {
	if ah.dead.Swap(true) {
		return fmt.Errorf("%w: address handle for %v already destroyed", ErrInvalidArg, ah.GID)
	}
	return ah.pd.Release()
}
