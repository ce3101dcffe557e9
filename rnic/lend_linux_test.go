package rnic

import (
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// lendingPort is a simlink port that says it lends what it reads
// (link.Lender) and counts the calls, for the receive path's side of the
// contract.
type lendingPort struct {
	*simlink.Port
	lendReads, releases atomic.Int32
}

func (p *lendingPort) LendReads()    { p.lendReads.Add(1) }
func (p *lendingPort) ReleaseBatch() { p.releases.Add(1) }

// TestLentBatchThatFaults delivers a lent batch whose first frame lies in
// memory that faults when read (a ring file truncated under the mapping)
// and whose second is well-formed, for a QPN the device does not have:
// the fault drops the first packet instead of crashing the process, the
// second is still looked at, and the batch goes back to the link once.
func TestLentBatchThatFaults(t *testing.T) {
	network := simlink.NewNetwork(simlink.Config{Seed: 1})
	t.Cleanup(func() { network.Close() })
	port, err := network.Attach(addrA, simlink.PortConfig{})
	if err != nil {
		t.Fatal(err)
	}
	lp := &lendingPort{Port: port}
	dev, err := Open(Config{Addr: addrA, Link: lp, MTU: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	if lp.lendReads.Load() != 1 {
		t.Fatalf("LendReads called %d times, want once", lp.lendReads.Load())
	}

	frame := make([]byte, 64)
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, DestQP: 0x123456}}
	n, err := wire.Build(frame, &h, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	frame = frame[:n]
	e := wire.Endpoints{Src: addrB, Dst: addrA}
	wire.SetICRC(frame, e.ICRC(frame[:n-wire.ICRCLen]))
	page, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(page)
	copy(page, frame)
	if err := unix.Mprotect(page, unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}

	rx := newRxPath(dev)
	rx.pkts[0] = link.Packet{Buf: page[:n], Addr: addrB}
	rx.pkts[1] = link.Packet{Buf: frame, Addr: addrB}
	dev.deliverBatch(rx, 2)
	if got := dev.Counter("malformed"); got != 1 {
		t.Errorf("malformed = %d, want 1 (the frame that faulted)", got)
	}
	if got := dev.Counter("unknown_qpn"); got != 1 {
		t.Errorf("unknown_qpn = %d, want 1 (the frame after it)", got)
	}
	if got := lp.releases.Load(); got != 1 {
		t.Errorf("ReleaseBatch called %d times, want once", got)
	}
}
