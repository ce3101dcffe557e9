//go:build cgo

package main

/*
#include "core.h"
*/
import "C"

import (
	"fmt"
	"net/netip"
	"os"
	"sync"

	"github.com/goroce/goroce/rnic"
)

// What goroce0 reports of itself beside rnic's attributes, with the values
// rxe reports over a virtual netdev. goroce_query_device and
// goroce_query_port hand them to the shim, whose ibv_query_device and
// ibv_query_port report them and whose sysfs files (shim/sysfs.c) show
// them: one source for both.
const (
	// Port 1 as rxe's on a netdev of unknown speed: 1X SDR, "2.5 Gb/sec
	// (1X SDR)" in sysfs; the link up; the connection manager supported
	// (rnic/cm, its MADs on QP1). RoCE has no LIDs and no subnet manager:
	// LID, SM LID, SM SL and LMC are 0.
	portPhysState   = 5       // IB_PORT_PHYS_STATE_LINK_UP
	portActiveWidth = 1       // IB_WIDTH_1X
	portActiveSpeed = 1       // IB_SPEED_SDR
	portCapFlags    = 1 << 16 // IBV_PORT_CM_SUP

	// nodeDesc is the node description: the driver's name, as rxe's is
	// "rxe".
	nodeDesc = "goroce"
)

// linkLayer maps rnic.PortAttr.LinkLayer to enum ibv_link_layer.
func linkLayer(name string) int {
	switch name {
	case "InfiniBand":
		return 1 // IBV_LINK_LAYER_INFINIBAND
	case "Ethernet":
		return 2 // IBV_LINK_LAYER_ETHERNET
	}
	return 0 // IBV_LINK_LAYER_UNSPECIFIED
}

// attrs answers goroce0's queries: *rnic.Device and rnic.Description.
type attrs interface {
	QueryDevice() rnic.DeviceAttr
	QueryPort(port uint8) (rnic.PortAttr, error)
	QueryGID(port uint8, index int) (netip.Addr, error)
}

// described is the description of the device goroce_open opens, made once.
var described struct {
	once sync.Once
	s    rnic.Description
	err  error
}

// queries returns what answers goroce0's queries: the open device, or
// before the first ibv_open_device the description of the device it opens
// (rnic.Describe, from GOROCE_ADDR and GOROCE_MTU), so that a program that
// reads sysfs without opening the device (ibstat) sees what the verbs
// report, and no socket is bound for it.
func queries() (attrs, error) {
	if d := device(); d != nil {
		return d, nil
	}
	described.once.Do(func() {
		addr, err := deviceAddr()
		if err != nil {
			described.err = err
		} else if mtu, err := deviceMTU(addr.Addr()); err != nil {
			described.err = err
		} else {
			described.s, described.err = rnic.Describe(rnic.Config{Addr: addr, MTU: mtu})
		}
		if described.err != nil {
			fmt.Fprintln(os.Stderr, "goroce-verbs: goroce0:", described.err)
		}
	})
	return described.s, described.err
}

// cString copies s into dst as a NUL-terminated C string, cut to fit.
func cString(dst []C.char, s string) {
	n := min(len(s), len(dst)-1)
	for i := range n {
		dst[i] = C.char(s[i])
	}
	dst[n] = 0
}
