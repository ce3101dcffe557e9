package cli

import (
	"flag"
	"fmt"
	"os"

	"github.com/goroce/goroce/rnic"
)

// The wires a device can use (--link, GOROCE_LINK).
const (
	// LinkUDP is RoCEv2 over UDP sockets (rnic/udplink), the default of a
	// device on its own.
	LinkUDP = rnic.WireUDP
	// LinkShm is the same RoCEv2 frames through shared-memory rings
	// (rnic/shmlink), for devices on one host.
	LinkShm = rnic.WireShm
)

// LinkEnv is the environment variable that names the wire of the devices
// a process opens (nccl.OptionsFromEnv reads it); --link passes it to the
// ranks a command starts.
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

// Wire is the wire s (--link) for a device this process opens, its
// shared-memory files in $GOROCE_SHM_DIR, else shmlink.DefaultDir.
func Wire(s string) rnic.Wire {
	return rnic.Wire{Kind: s, ShmDir: os.Getenv("GOROCE_SHM_DIR")}
}
