package rnic

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
)

func TestQueryDevicePortGID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, _ := newPair(t, pairConfig{mtu: 2048})
		d := a.dev
		attr := d.QueryDevice()
		if attr.MaxQP != MaxQP || attr.MaxSGE != MaxSGE || attr.MaxQPRdAtom != MaxRdAtomic || attr.PhysPortCnt != 1 || attr.MaxMRSize == 0 {
			t.Errorf("QueryDevice = %+v", attr)
		}
		port, err := d.QueryPort(1)
		if err != nil || port.State != PortActive || port.ActiveMTU != qp.MTU2048 || port.MaxMTU != qp.MTU4096 || port.LinkLayer != "Ethernet" {
			t.Errorf("QueryPort(1) = %+v, %v", port, err)
		}
		if _, err := d.QueryPort(2); !errors.Is(err, ErrInvalidArg) {
			t.Errorf("QueryPort(2) error %v, want ErrInvalidArg", err)
		}
		gid, err := d.QueryGID(1, 0)
		if err != nil || gid.String() != "::ffff:10.0.0.1" {
			t.Errorf("QueryGID(1, 0) = %v, %v", gid, err)
		}
		// rxe's table: 1024 entries, the empty ones ENODATA.
		if port.GIDTblLen != 1024 {
			t.Errorf("gid_tbl_len %d, want rxe's 1024", port.GIDTblLen)
		}
		for _, i := range []int{1, 1023} {
			if _, err := d.QueryGID(1, i); !errors.Is(err, ErrNoGID) {
				t.Errorf("QueryGID(1, %d) error %v, want ErrNoGID", i, err)
			}
		}
		for _, i := range []int{-1, 1024} {
			if _, err := d.QueryGID(1, i); !errors.Is(err, ErrInvalidArg) {
				t.Errorf("QueryGID(1, %d) error %v, want ErrInvalidArg", i, err)
			}
		}
		d.Close()
		if port, _ := d.QueryPort(1); port.State != PortDown {
			t.Errorf("after Close the port is %v, want PORT_DOWN", port.State)
		}
	})
}
