package nccl

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/mr/gpu"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// GPUDirect RDMA end to end: device memory registers with an RNIC opened
// with peer memory (and fails with mr.ErrDeviceMemory, the verbs error,
// without it), and a peer's RDMA WRITE and READ then reach the GPU's
// allocation directly, as a DtoH copy shows.
func TestGPUDirectRDMA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := simlink.NewNetwork(simlink.Config{Seed: 1})
		defer network.Close()
		open := func(i int, peerMem bool) *rnic.Device {
			addr := netip.MustParseAddrPort(fmt.Sprintf("10.6.0.%d:4791", i))
			port, err := network.Attach(addr, simlink.PortConfig{})
			if err != nil {
				t.Fatal(err)
			}
			d, err := rnic.Open(rnic.Config{Addr: addr, Link: port, MTU: 1024, PeerMemory: peerMem})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			return d
		}
		gpuNIC, hostNIC := open(1, true), open(2, false)
		_, dev, _, _ := gpu.Preset(gpu.PathPIX, 1<<20, gpu.Options{})
		p, _ := dev.Alloc(8192)
		mem, err := dev.Memory(p)
		if err != nil {
			t.Fatal(err)
		}
		access := mr.AccessLocalWrite | mr.AccessRemoteWrite | mr.AccessRemoteRead
		hostPD, _ := hostNIC.AllocPD()
		if _, err := hostPD.RegMemory(mem, access); !errors.Is(err, mr.ErrDeviceMemory) {
			t.Fatalf("RegMemory of device memory without peer memory: %v, want mr.ErrDeviceMemory", err)
		}
		gpuPD, _ := gpuNIC.AllocPD()
		devMR, err := gpuPD.RegMemory(mem, access)
		if err != nil {
			t.Fatal(err)
		}
		host := make([]byte, 2*5000)
		for i := range 5000 {
			host[i] = byte(i*13 + 1)
		}
		hostMR, _ := hostPD.RegMR(host, access)

		hostQP, cq := connectedQPs(t, gpuNIC, gpuPD, hostNIC, hostPD)
		post := func(op qp.WROpcode, sge qp.SGE, remote uint64) {
			t.Helper()
			wr := qp.SendWR{WRID: 1, Opcode: op, Flags: qp.SendSignaled, SGL: []qp.SGE{sge}, RemoteAddr: remote, RKey: devMR.RKey()}
			if err := hostQP.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			if err := cq.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			var wc [1]qp.WC
			if cq.Poll(wc[:]) != 1 || wc[0].Status != qp.WCSuccess {
				t.Fatalf("%v: completion %+v", op, wc[0])
			}
		}
		// WRITE 5000 bytes into device memory at offset 100.
		post(qp.WRRDMAWrite, qp.SGE{Addr: hostMR.Addr(), Length: 5000, LKey: hostMR.LKey()}, devMR.Addr()+100)
		got := make([]byte, 5000)
		at, _ := p.Slice(100, 5000)
		if err := gpu.CopyDtoH(got, at); err != nil || !bytes.Equal(got, host[:5000]) {
			t.Fatalf("device memory after RDMA WRITE differs (%v)", err)
		}
		// READ them back from device memory into the second half.
		post(qp.WRRDMARead, qp.SGE{Addr: hostMR.Addr() + 5000, Length: 5000, LKey: hostMR.LKey()}, devMR.Addr()+100)
		if !bytes.Equal(host[5000:], host[:5000]) {
			t.Errorf("RDMA READ of device memory differs")
		}
	})
}

// connectedQPs makes one RC QP on each device, connected to each other,
// and returns b's QP and its CQ.
func connectedQPs(t *testing.T, a *rnic.Device, pa *mr.PD, b *rnic.Device, pb *mr.PD) (*rnic.QP, *qp.CQ) {
	t.Helper()
	mk := func(d *rnic.Device, pd *mr.PD) (*rnic.QP, *qp.CQ) {
		cq, err := d.CreateCQ(16)
		if err != nil {
			t.Fatal(err)
		}
		q, err := d.CreateQP(pd, &qp.InitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq,
			Cap: qp.Cap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		init := qp.Attr{State: qp.StateInit, AccessFlags: mr.AccessLocalWrite | mr.AccessRemoteWrite | mr.AccessRemoteRead, PortNum: 1}
		if err := q.Modify(&init, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
			t.Fatal(err)
		}
		return q, cq
	}
	qa, _ := mk(a, pa)
	qb, cqb := mk(b, pb)
	link := func(q *rnic.QP, peer *rnic.Device, dest uint32) {
		rtr := qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: peer.GID(), Port: peer.Addr().Port()}, PathMTU: qp.MTUFromBytes(1024),
			DestQPN: dest, RQPSN: wire.PSN(1), MaxDestRdAtomic: 1, MinRNRTimer: 1}
		if err := q.Modify(&rtr, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|
			qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
			t.Fatal(err)
		}
		rts := qp.Attr{State: qp.StateRTS, SQPSN: wire.PSN(1), Timeout: 10, RetryCnt: 3, RNRRetry: 7, MaxRdAtomic: 1}
		if err := q.Modify(&rts, qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|
			qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic); err != nil {
			t.Fatal(err)
		}
	}
	link(qa, b, qb.QPN())
	link(qb, a, qa.QPN())
	return qb, cqb
}
