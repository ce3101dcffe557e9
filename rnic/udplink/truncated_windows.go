package udplink

import (
	"errors"

	"golang.org/x/sys/windows"
)

// truncated reports whether a read returned part of a longer datagram:
// Windows says so with an error rather than a flag.
func truncated(_ int, err error) bool { return errors.Is(err, windows.WSAEMSGSIZE) }
