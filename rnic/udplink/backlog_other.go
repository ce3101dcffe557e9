//go:build !linux

package udplink

import "net/netip"

// backlogs: outside Linux the link cannot see other sockets' queues.
type backlogs struct{}

// PeerBacklog reports that the link cannot tell outside Linux
// (link.BacklogReporter).
func (l *Link) PeerBacklog(peer netip.AddrPort) (int, bool) { return 0, false }
