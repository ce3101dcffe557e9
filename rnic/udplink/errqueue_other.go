//go:build !linux

package udplink

import (
	"net"
	"net/netip"

	"github.com/goroce/goroce/rnic/link"
)

// errQueue: outside Linux a socket has no error queue, and the link asks
// for no ICMP errors; see errqueue_linux.go.
type errQueue struct{}

func newErrQueue(*net.UDPConn, *counters) *errQueue { return &errQueue{} }

func (*errQueue) notify(func(link.Unreachable)) {}
func (*errQueue) absorb(error) bool             { return false }
func (*errQueue) sendFailed(error) bool         { return false }

func (*errQueue) sendFailedTo(netip.AddrPort, error) {}
