package flood

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/udplink"
)

// ErrInvalidConfig is wrapped by the error Run (or ParseKinds) returns for
// a Config field out of range; the message names the field.
var ErrInvalidConfig = errors.New("flood: invalid config")

// Config describes a flood run. The zero value of each field picks the
// default its comment gives.
type Config struct {
	// Duration is the length of each of the three phases. Default 2 s.
	Duration time.Duration
	// Batch is how many hostile datagrams the attacker hands to the kernel
	// per sendmmsg call: 1 to udplink.MaxBatchSize. Default 64.
	Batch int
	// Kinds are the hostile packets the attacker sends, in equal shares.
	// Default AllKinds().
	Kinds []Kind
	// Victim, Peer and Attacker are the IPv4 loopback addresses of the
	// victim device, its legitimate peer and the attacker; the devices use
	// port 4791. They must differ. Defaults 127.77.10.1, 127.77.10.2 and
	// 127.77.10.66.
	Victim, Peer, Attacker netip.Addr
	// WriteSize is the length of each legitimate RDMA WRITE: 64 bytes to
	// 1 MiB, a multiple of 8. Default 64 KiB.
	WriteSize int
	// Outstanding is how many WRITEs the peer keeps in flight, each from
	// and to its own slot: 1 to 64. Default 16.
	Outstanding int
	// MTU is both devices' MTU and the RC QPs' path MTU: 256, 512, 1024,
	// 2048 or 4096. Default 4096.
	MTU int
	// StrictICRC is the victim's rnic.Config.StrictICRC. Off (the device's
	// default), an ICRC that fails is checked a second time by solving for
	// the IPv4 Identification, which costs the victim a second CRC per bad
	// packet.
	StrictICRC bool
	// SampleEvery is the interval between memory samples. Default 100 ms.
	SampleEvery time.Duration
	// DrainTimeout bounds the wait after each phase for the WRITEs still in
	// flight to complete and for the victim's socket to empty. Default 10 s.
	DrainTimeout time.Duration
}

// Settings of the legitimate RC connection.
const (
	startPSN   = 0xFFFF00 // near the 24-bit wrap, so the PSNs wrap during the run
	ackTimeout = 14       // local ACK timeout code: 4.096 µs << 14 ≈ 67 ms
	retryCnt   = 7
	rnrRetry   = 7 // infinite (WRITEs never need a receive WQE anyway)
)

// withDefaults fills in defaults and checks the fields.
func (c Config) withDefaults() (Config, error) {
	if c.Duration == 0 {
		c.Duration = 2 * time.Second
	}
	if c.Batch == 0 {
		c.Batch = 64
	}
	if c.Kinds == nil {
		c.Kinds = AllKinds()
	}
	def := func(a *netip.Addr, s string) {
		if !a.IsValid() {
			*a = netip.MustParseAddr(s)
		}
	}
	def(&c.Victim, "127.77.10.1")
	def(&c.Peer, "127.77.10.2")
	def(&c.Attacker, "127.77.10.66")
	if c.WriteSize == 0 {
		c.WriteSize = 64 << 10
	}
	if c.Outstanding == 0 {
		c.Outstanding = 16
	}
	if c.MTU == 0 {
		c.MTU = 4096
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = 100 * time.Millisecond
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}

	bad := func(field string, v any, want string) (Config, error) {
		return c, fmt.Errorf("%w: %s %v (want %s)", ErrInvalidConfig, field, v, want)
	}
	switch {
	case c.Duration < 0:
		return bad("Duration", c.Duration, "a positive duration")
	case c.Batch < 1 || c.Batch > udplink.MaxBatchSize:
		return bad("Batch", c.Batch, fmt.Sprintf("1 to %d", udplink.MaxBatchSize))
	case len(c.Kinds) == 0:
		return bad("Kinds", c.Kinds, "at least one kind")
	case c.WriteSize < 64 || c.WriteSize > 1<<20 || c.WriteSize%8 != 0:
		return bad("WriteSize", c.WriteSize, "64 bytes to 1 MiB, a multiple of 8")
	case c.Outstanding < 1 || c.Outstanding > 64:
		return bad("Outstanding", c.Outstanding, "1 to 64")
	case qp.MTUFromBytes(c.MTU) == 0:
		return bad("MTU", c.MTU, "256, 512, 1024, 2048 or 4096")
	case c.SampleEvery < 0:
		return bad("SampleEvery", c.SampleEvery, "a positive duration")
	case c.DrainTimeout < 0:
		return bad("DrainTimeout", c.DrainTimeout, "a positive duration")
	}
	seen := [numKinds]bool{}
	for _, k := range c.Kinds {
		if k >= numKinds || seen[k] {
			return bad("Kinds", c.Kinds, "distinct kinds from AllKinds")
		}
		seen[k] = true
	}
	for _, a := range []struct {
		field string
		addr  netip.Addr
	}{{"Victim", c.Victim}, {"Peer", c.Peer}, {"Attacker", c.Attacker}} {
		if !a.addr.Is4() || !a.addr.IsLoopback() {
			return bad(a.field, a.addr, "an IPv4 loopback address, 127.x.y.z")
		}
	}
	if c.Victim == c.Peer || c.Victim == c.Attacker || c.Peer == c.Attacker {
		return bad("addresses", []netip.Addr{c.Victim, c.Peer, c.Attacker}, "three different addresses")
	}
	return c, nil
}
