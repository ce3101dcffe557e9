package nccl

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/nccl/transport/ib"
)

// A CommInitRank that fails after it opened the RNIC (here the transport
// refuses 2000 slots) undoes its steps: the RNIC's UDP port is free
// again and the capture is flushed to its file. The same address then
// serves a communicator that works.
func TestCommInitRankUndoesItsSteps(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "real sockets")
	}
	const addr = "127.143.2.10"
	capture := filepath.Join(t.TempDir(), "init")
	opts := Options{Addr: addr, Pcap: capture, BootstrapTimeout: 10 * time.Second, Timeout: 10 * time.Second}
	id, err := GetUniqueID(Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad := opts
	bad.Slots = 2000
	if c, err := CommInitRank(t.Context(), 1, id, 0, bad); !errors.Is(err, ib.ErrConfig) {
		if c != nil {
			c.Destroy()
		}
		t.Fatalf("2000 slots: %v, want ib.ErrConfig", err)
	}
	if u, err := net.ListenPacket("udp", addr+":4791"); err != nil {
		t.Errorf("the failed rank's RNIC still holds its port: %v", err)
	} else {
		u.Close()
	}
	if fi, err := os.Stat(capture + ".rank0.pcap"); err != nil {
		t.Errorf("the failed rank's capture: %v", err)
	} else if fi.Size() < 24 {
		t.Errorf("the failed rank's capture holds %d bytes, want at least a pcap header's 24: not flushed", fi.Size())
	}

	id, err = GetUniqueID(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := CommInitRank(t.Context(), 1, id, 0, opts)
	if err != nil {
		t.Fatalf("the same address after the failure: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Error(err)
	}
}
