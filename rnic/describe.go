package rnic

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
)

// A Description answers the queries of a device before it is opened: what
// QueryDevice, QueryPort and QueryGID of a device opened with the same
// Config return while it is open. It is for what looks at a device without
// using it (the preloaded libibverbs shows goroce0 in sysfs to programs
// that never open it, such as ibstat), so it binds no socket and starts no
// goroutine. Its answers are the device's own: the same methods, on a
// Device that holds what Open derives from the Config but was never
// opened.
type Description struct {
	d *Device
}

// Describe returns the description of a device opened with cfg, whose
// address is cfg.Addr (as udplink binds it). It refuses what Open refuses
// of cfg's address and MTU.
func Describe(cfg Config) (Description, error) {
	mtu, err := cfg.addrMTU()
	if err != nil {
		return Description{}, err
	}
	mem, err := newMemTable(cfg)
	if err != nil {
		return Description{}, err
	}
	d := &Device{cfg: cfg, local: cfg.Addr, mem: mem}
	d.limits = deviceLimits(cfg, d.local, mtu)
	return Description{d}, nil
}

// QueryDevice is Device.QueryDevice of the described device.
func (s Description) QueryDevice() DeviceAttr { return s.d.QueryDevice() }

// QueryPort is Device.QueryPort of the described device while it is open:
// port 1 is PORT_ACTIVE.
func (s Description) QueryPort(port uint8) (PortAttr, error) { return s.d.QueryPort(port) }

// QueryGID is Device.QueryGID of the described device.
func (s Description) QueryGID(port uint8, index int) (netip.Addr, error) {
	return s.d.QueryGID(port, index)
}

// addrMTU checks cfg's address and MTU and gives them Open's defaults
// (port 4791 for a device on a UDP socket, MTU 4096); it returns the MTU.
func (cfg *Config) addrMTU() (qp.MTU, error) {
	if !cfg.Addr.Addr().IsValid() {
		return 0, fmt.Errorf("%w: Config.Addr %v is not an IP address", ErrInvalidArg, cfg.Addr)
	}
	if cfg.Addr.Port() == 0 && cfg.Link == nil {
		cfg.Addr = netip.AddrPortFrom(cfg.Addr.Addr(), link.RoCEv2Port)
	}
	if cfg.MTU == 0 {
		cfg.MTU = 4096
	}
	mtu := qp.MTUFromBytes(cfg.MTU)
	if mtu == 0 {
		return 0, fmt.Errorf("%w: MTU %d (want 256, 512, 1024, 2048 or 4096)", ErrInvalidArg, cfg.MTU)
	}
	return mtu, nil
}

// newMemTable makes the memory-registration table of a device with cfg.
func newMemTable(cfg Config) (*mr.Table, error) {
	return mr.NewTable(mr.Limits{PeerMemory: cfg.PeerMemory})
}

// deviceLimits are the QP limits of a device with cfg at address local and
// the port MTU mtu.
func deviceLimits(cfg Config, local netip.AddrPort, mtu qp.MTU) qp.Limits {
	return qp.Limits{MaxMTU: mtu, MaxRdAtomic: MaxRdAtomic, MaxSendWR: MaxQPWR, MaxSGE: MaxSGE,
		MaxInline: MaxInline, MaxMsgSize: MaxMsgSize, IPv4: local.Addr().Unmap().Is4(), MaxUnackedPSNs: cfg.MaxUnackedPSNs}
}
