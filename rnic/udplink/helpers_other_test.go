//go:build !linux

package udplink

import "testing"

// turnOffGRO: outside Linux the link never uses UDP GRO.
func turnOffGRO(testing.TB, *Link) {}
