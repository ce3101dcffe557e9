package shmlink

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/goroce/goroce/rnic/link"
)

// Defaults used when a Config field is left zero.
const (
	// DefaultSlots is the number of slots of each ring: room for a
	// window of 1024 PSNs (twice nccl's default) and the ACKs the
	// other direction owes, so that a receiver descheduled for a while
	// on a busy host does not make its senders wait.
	DefaultSlots = 2048
	// DefaultSlotSize holds an MTU-4096 RoCEv2 packet with every
	// extension header and its IPv6 and UDP headers (4180 bytes at most;
	// a slot holds 4344), so a ring of DefaultSlots is 8.5 MiB.
	DefaultSlotSize = 4352
	// DefaultFullWait is how long a sender waits for room in a full ring
	// before it drops the packet: long enough for a receiver that the
	// scheduler left out for a few time slices on a busy host, short
	// enough that a dead one costs each sender one wait (a stalled ring
	// drops at once).
	DefaultFullWait = 100 * time.Millisecond
	// MaxSlots is the largest ring accepted, from a Config or a file.
	MaxSlots = 1 << 16
)

// Errors of Open and WriteBatch.
var (
	ErrBadConfig    = errors.New("shmlink: bad config")
	ErrAddrInUse    = errors.New("shmlink: address in use by another open link")
	ErrEmptyPacket  = errors.New("shmlink: empty packet")
	ErrPacketTooBig = errors.New("shmlink: packet larger than a ring slot")
	ErrBadAddr      = errors.New("shmlink: bad destination address")
	ErrNoICRCRoom   = errors.New("shmlink: no room for the ICRC the link is to write")
	ErrUnsupported  = errors.New("shmlink: shared-memory links need Linux")
	// ErrUntrusted refuses a directory or file that another user could
	// have planted or may write: a directory not this user's own with
	// mode 0700, a symbolic link, a file of another user's, or one open
	// to others. The error names it and says what to do.
	ErrUntrusted = errors.New("shmlink: refusing a file or directory another user could have planted")
)

// Config says where and how to open a link. The zero value of every field
// but Local means "use the default".
type Config struct {
	// Local is the device's IP address and UDP port, as for udplink; it
	// names the link's files. Port 0 means link.RoCEv2Port.
	Local netip.AddrPort
	// Dir is the directory of the port and ring files; every link that
	// talks to this one must use the same. Default /dev/shm/goroce-<uid>
	// (or the temporary directory where /dev/shm is missing). Open makes
	// it, mode 0700, and refuses one that is not this user's own, or that
	// others may write (ErrUntrusted): another user could have planted
	// files in it. One of this user's that others may only read is made
	// 0700.
	Dir string
	// Slots is the number of slots in each ring this link sends on, a
	// power of two (default DefaultSlots, at most MaxSlots).
	Slots int
	// SlotSize is the size of each slot in bytes, a multiple of 64 and at
	// least 256 (default DefaultSlotSize): a slot holds 8 bytes of length
	// and the IP datagram.
	SlotSize int
	// Spin is how long a blocked receiver (ReadBatch, WaitReadable) looks
	// for packets before it sleeps; default 0, sleep at once. A device
	// that should spin says so with rnic.Config.BusyPoll, which polls
	// through TryReadBatch; spinning here too only takes CPU from the
	// other ranks when they outnumber the CPUs.
	Spin time.Duration
	// FullWait is how long a sender waits for room in a full ring before
	// it drops the packet (default DefaultFullWait; negative means never
	// wait).
	FullWait time.Duration
	// Logger receives the link's few log lines. Nil means zap.NewNop().
	Logger *zap.Logger
}

// DefaultDir is the directory Config.Dir defaults to.
func DefaultDir() string {
	base := "/dev/shm"
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
		base = os.TempDir()
	}
	return filepath.Join(base, "goroce-"+strconv.Itoa(os.Getuid()))
}

// withDefaults checks c and returns it with defaults filled in and Local
// normalised.
func (c Config) withDefaults() (Config, error) {
	addr := c.Local.Addr()
	if !addr.IsValid() {
		return c, fmt.Errorf("%w: Local has no IP address", ErrBadConfig)
	}
	addr = addr.Unmap()
	if addr.IsUnspecified() {
		return c, fmt.Errorf("%w: Local %v is a wildcard; give the device's own address", ErrBadConfig, addr)
	}
	port := c.Local.Port()
	if port == 0 {
		port = link.RoCEv2Port
	}
	c.Local = netip.AddrPortFrom(addr, port)
	if c.Dir == "" {
		c.Dir = DefaultDir()
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.Slots < 2 || c.Slots > MaxSlots || c.Slots&(c.Slots-1) != 0 {
		return c, fmt.Errorf("%w: Slots %d is not a power of two in 2..%d", ErrBadConfig, c.Slots, MaxSlots)
	}
	if c.SlotSize == 0 {
		c.SlotSize = DefaultSlotSize
	}
	if c.SlotSize < 256 || c.SlotSize%64 != 0 || c.SlotSize > maxSlotSize {
		return c, fmt.Errorf("%w: SlotSize %d is not a multiple of 64 in 256..%d", ErrBadConfig, c.SlotSize, maxSlotSize)
	}
	if c.Spin < 0 {
		return c, fmt.Errorf("%w: negative Spin %v", ErrBadConfig, c.Spin)
	}
	if c.FullWait == 0 {
		c.FullWait = DefaultFullWait
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c, nil
}
