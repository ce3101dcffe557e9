package rnic

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/qp"
)

// DeviceAttr describes the device (struct ibv_device_attr), with limits
// after Linux rxe's (rxe_param.h).
type DeviceAttr struct {
	FWVer           string
	NodeGUID        uint64
	VendorID        uint32
	MaxMRSize       uint64
	MaxQP           int
	MaxQPWR         int
	MaxSGE          int
	MaxInlineData   int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int // outstanding READs/atomics per QP as responder
	MaxQPInitRdAtom int // ... as requester
	MaxSRQWR        int
	MaxMsgSize      uint64
	PhysPortCnt     int
}

// QueryDevice returns the device's attributes (ibv_query_device).
func (d *Device) QueryDevice() DeviceAttr {
	l := d.mem.Limits()
	gid := d.GID().As16()
	return DeviceAttr{
		FWVer:     "goroce",
		NodeGUID:  binary.BigEndian.Uint64(gid[8:]), // the GID's interface half
		VendorID:  0xFFFFFF,                         // no IEEE OUI: a software device
		MaxMRSize: l.MaxMRSize, MaxQP: MaxQP, MaxQPWR: MaxQPWR, MaxSGE: MaxSGE,
		MaxInlineData: MaxInline, MaxCQ: MaxQP, MaxCQE: MaxCQE, MaxMR: l.MaxMR, MaxPD: l.MaxPD,
		MaxQPRdAtom: MaxRdAtomic, MaxQPInitRdAtom: MaxRdAtomic, MaxSRQWR: 1 << 16, MaxMsgSize: MaxMsgSize,
		PhysPortCnt: 1,
	}
}

// PortState is a port's state, numbered as enum ibv_port_state.
type PortState uint8

// Port states.
const (
	PortDown   PortState = 1 // IBV_PORT_DOWN
	PortActive PortState = 4 // IBV_PORT_ACTIVE
)

func (s PortState) String() string {
	switch s {
	case PortDown:
		return "PORT_DOWN"
	case PortActive:
		return "PORT_ACTIVE"
	}
	return fmt.Sprintf("PortState(%d)", uint8(s))
}

// PortAttr describes the device's one port (struct ibv_port_attr).
type PortAttr struct {
	State       PortState
	MaxMTU      qp.MTU // always 4096
	ActiveMTU   qp.MTU // Config.MTU
	GIDTblLen   int
	LinkLayer   string // "Ethernet": RoCE
	MaxMsgSize  uint64
	PKeyTblLen  int
	ActiveSpeed string
}

// QueryPort returns the attributes of port 1, the only one
// (ibv_query_port).
func (d *Device) QueryPort(port uint8) (PortAttr, error) {
	if port != 1 {
		return PortAttr{}, fmt.Errorf("%w: port %d (the device has port 1 only)", ErrInvalidArg, port)
	}
	state := PortActive
	if d.closed.Load() {
		state = PortDown
	}
	return PortAttr{State: state, MaxMTU: qp.MTU4096, ActiveMTU: d.limits.MaxMTU, GIDTblLen: GIDTableLen, LinkLayer: "Ethernet",
		MaxMsgSize: MaxMsgSize, PKeyTblLen: 1, ActiveSpeed: "software"}, nil
}

// GIDTableLen is the length of port 1's GID table, rxe's
// (RXE_PORT_GID_TBL_LEN): index 0 holds the device's GID, the others are
// empty.
const GIDTableLen = 1024

// QueryGID returns the GID at index (ibv_query_gid): index 0 is the only
// one, the device's address as a RoCEv2 GID (IPv4-mapped for IPv4). The
// other indexes of the table (up to GIDTableLen) hold none: ErrNoGID;
// beyond it, or on another port, ErrInvalidArg.
func (d *Device) QueryGID(port uint8, index int) (netip.Addr, error) {
	switch {
	case port != 1 || index < 0 || index >= GIDTableLen:
		return netip.Addr{}, fmt.Errorf("%w: GID %d of port %d (the table has %d entries, of port 1)", ErrInvalidArg, index, port, GIDTableLen)
	case index != 0:
		return netip.Addr{}, fmt.Errorf("%w: GID %d of port %d (only index 0 holds one)", ErrNoGID, index, port)
	}
	return d.GID(), nil
}
