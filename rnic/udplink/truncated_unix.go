//go:build unix && !linux

package udplink

import "syscall"

// truncated reports whether a read returned part of a longer datagram.
func truncated(flags int, err error) bool { return err == nil && flags&syscall.MSG_TRUNC != 0 }
