package cli

import (
	"flag"
	"fmt"
	"net/netip"
	"os"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/shmlink"
)

// The wires a device can use (--link, GOROCE_LINK).
const (
	// LinkUDP is RoCEv2 over UDP sockets (rnic/udplink), the default of a
	// device on its own.
	LinkUDP = "udp"
	// LinkShm is the same RoCEv2 frames through shared-memory rings
	// (rnic/shmlink), for devices on one host.
	LinkShm = "shm"
)

// LinkEnv is the environment variable that names the wire of the devices
// a process opens; package nccl reads it, and --link passes it to ranks.
const LinkEnv = "GOROCE_LINK"

// LinkFlag defines --link, the device's wire, whose default is def.
func LinkFlag(fs *flag.FlagSet, def string) *string {
	return fs.String("link", def, "the device's `wire`: udp (RoCEv2 over UDP sockets) or shm (the same frames "+
		"through shared-memory rings in $GOROCE_SHM_DIR, every device on this host)")
}

// DefaultLink is the default of --link for a device on its own: $GOROCE_LINK,
// else udp.
func DefaultLink() string {
	if s := os.Getenv(LinkEnv); s != "" {
		return s
	}
	return LinkUDP
}

// HostLink is the wire of a job whose ranks are all on this host, as
// `goroce run` launches them: $GOROCE_LINK if set, else udp if
// NCCL_SHM_DISABLE=1 (as NCCL then leaves its SHM transport), else shm,
// as NCCL picks SHM between the ranks of one node.
func HostLink() string {
	if s := os.Getenv(LinkEnv); s != "" {
		return s
	}
	if os.Getenv("NCCL_SHM_DISABLE") == "1" {
		return LinkUDP
	}
	return LinkShm
}

// CheckLink reports whether s names a wire.
func CheckLink(s string) error {
	if s != LinkUDP && s != LinkShm {
		return fmt.Errorf("--link %q: want udp or shm", s)
	}
	return nil
}

// OpenLink opens the wire s for a device at addr: nil for udp, which
// rnic.Open then opens itself, a shared-memory link for shm (its files in
// $GOROCE_SHM_DIR, else shmlink.DefaultDir).
func OpenLink(s string, addr netip.AddrPort) (link.Link, error) {
	if err := CheckLink(s); err != nil {
		return nil, err
	}
	if s == LinkUDP {
		return nil, nil
	}
	l, err := shmlink.Open(shmlink.Config{Local: addr, Dir: os.Getenv("GOROCE_SHM_DIR")})
	if err != nil {
		return nil, fmt.Errorf("opening the shared-memory link at %v: %w", addr, err)
	}
	return l, nil
}
