package rnic_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goroce/goroce/rnic"
)

// node is one side of an example: a device with a PD, a CQ, a QP and a
// registered buffer. Real programs exchange what connect needs (GID, QPN,
// PSN, and for RDMA the buffer's address and rkey) over a side channel.
type node struct {
	dev *rnic.Device
	pd  *rnic.PD
	cq  *rnic.CQ
	qp  *rnic.QP
	buf []byte
	mr  *rnic.MR
}

// open opens a device on a loopback address (each example uses its own) and
// creates what a node needs.
func open(addr string, typ rnic.QPType) *node {
	dev, err := rnic.Open(rnic.Config{Addr: netip.MustParseAddrPort(addr)})
	if err != nil {
		log.Fatal(err)
	}
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(16)
	q, err := dev.CreateQP(pd, &rnic.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 4096)
	m, err := pd.RegMR(buf, rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessRemoteRead|rnic.AccessRemoteAtomic|rnic.AccessMWBind)
	if err != nil {
		log.Fatal(err)
	}
	return &node{dev: dev, pd: pd, cq: cq, qp: q, buf: buf, mr: m}
}

// connect moves n's RC QP through INIT, RTR and RTS towards peer: the
// attributes each transition requires, as ibv_modify_qp wants them.
func (n *node) connect(peer *node) {
	const psn = 0x1234 // both sides start here; tools draw it at random
	steps := []struct {
		attr rnic.QPAttr
		mask rnic.QPAttrMask
	}{
		{rnic.QPAttr{State: rnic.StateInit, PortNum: 1,
			AccessFlags: rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic},
			rnic.AttrState | rnic.AttrPKeyIndex | rnic.AttrPort | rnic.AttrAccessFlags},
		{rnic.QPAttr{State: rnic.StateRTR, AH: rnic.AHAttr{GID: peer.dev.GID()}, PathMTU: rnic.MTU4096,
			DestQPN: peer.qp.QPN(), RQPSN: psn, MaxDestRdAtomic: 4, MinRNRTimer: 12},
			rnic.AttrState | rnic.AttrAV | rnic.AttrPathMTU | rnic.AttrDestQPN | rnic.AttrRQPSN |
				rnic.AttrMaxDestRdAtomic | rnic.AttrMinRNRTimer},
		{rnic.QPAttr{State: rnic.StateRTS, SQPSN: psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			rnic.AttrState | rnic.AttrSQPSN | rnic.AttrTimeout | rnic.AttrRetryCnt | rnic.AttrRNRRetry | rnic.AttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := n.qp.Modify(&s.attr, s.mask); err != nil {
			log.Fatal(err)
		}
	}
}

// wait returns the next completion.
func (n *node) wait() rnic.WC {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wcs := make([]rnic.WC, 1)
	for n.cq.Poll(wcs) == 0 {
		if err := n.cq.Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	return wcs[0]
}

func (n *node) sge(off, length int) []rnic.SGE {
	return []rnic.SGE{{Addr: n.mr.Addr() + uint64(off), Length: uint32(length), LKey: n.mr.LKey()}}
}

func (n *node) close() { n.dev.Close() }

// pair opens two nodes on two loopback addresses, lets prepare fill their
// memory, and connects their RC QPs.
//
// Memory a peer will read must be written before the peer is told it may
// read it: a real program writes, then sends the go-ahead over its side
// channel. Here connecting is the go-ahead; Modify takes the QP's lock,
// which orders the writes before anything the device does for the peer.
func pair(a, b string, prepare func(x, y *node)) (*node, *node) {
	x, y := open(a, rnic.RC), open(b, rnic.RC)
	if prepare != nil {
		prepare(x, y)
	}
	x.connect(y)
	y.connect(x)
	return x, y
}

// A SEND consumes a receive the peer posted; both sides get a completion.
func Example_send() {
	client, server := pair("127.80.0.1:4791", "127.80.0.2:4791", nil)
	defer client.close()
	defer server.close()

	server.qp.PostRecv(&rnic.RecvWR{WRID: 7, SGL: server.sge(0, 4096)})
	copy(client.buf, "hello, RDMA")
	client.qp.PostSend(&rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: client.sge(0, 11)})

	sent, got := client.wait(), server.wait()
	fmt.Println("client:", sent.Opcode, sent.Status)
	fmt.Println("server:", got.Opcode, got.Status, "wr_id", got.WRID, "bytes", got.ByteLen)
	fmt.Printf("server buffer: %q\n", server.buf[:got.ByteLen])
	// Output:
	// client: SEND success
	// server: RECV success wr_id 7 bytes 11
	// server buffer: "hello, RDMA"
}

// An RDMA WRITE places data in the peer's memory without the peer's CPU;
// WITH_IMM also consumes a receive there, so the peer learns of it.
func Example_writeWithImmediate() {
	client, server := pair("127.80.1.1:4791", "127.80.1.2:4791", nil)
	defer client.close()
	defer server.close()

	// The server tells the client (over a side channel) its buffer's
	// address and rkey; here the client just reads them.
	addr, rkey := server.mr.Addr()+100, server.mr.RKey()
	server.qp.PostRecv(&rnic.RecvWR{WRID: 9})
	copy(client.buf, "written remotely")
	client.qp.PostSend(&rnic.SendWR{WRID: 2, Opcode: rnic.WRRDMAWriteWithImm, Imm: 0xC0FFEE, Flags: rnic.SendSignaled,
		SGL: client.sge(0, 16), RemoteAddr: addr, RKey: rkey})

	client.wait()
	wc := server.wait()
	fmt.Println("server:", wc.Opcode, "imm", fmt.Sprintf("%#x", wc.Imm), "bytes", wc.ByteLen)
	fmt.Printf("server buffer at 100: %q\n", server.buf[100:116])
	// Output:
	// server: RECV_RDMA_WITH_IMM imm 0xc0ffee bytes 16
	// server buffer at 100: "written remotely"
}

// An RDMA READ fetches the peer's memory; only the reader sees a completion.
func Example_read() {
	client, server := pair("127.80.2.1:4791", "127.80.2.2:4791", func(_, server *node) {
		copy(server.buf[200:], "read me")
	})
	defer client.close()
	defer server.close()

	client.qp.PostSend(&rnic.SendWR{WRID: 3, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
		SGL: client.sge(0, 7), RemoteAddr: server.mr.Addr() + 200, RKey: server.mr.RKey()})

	wc := client.wait()
	fmt.Println("client:", wc.Opcode, wc.Status, "bytes", wc.ByteLen)
	fmt.Printf("client buffer: %q\n", client.buf[:7])
	// Output:
	// client: RDMA_READ success bytes 7
	// client buffer: "read me"
}

// Atomics act on 8 aligned bytes of the peer's memory and return the value
// they found there.
func Example_atomics() {
	client, server := pair("127.80.3.1:4791", "127.80.3.2:4791", func(_, server *node) {
		binary.LittleEndian.PutUint64(server.buf[512:], 40)
	})
	defer client.close()
	defer server.close()

	counter := server.mr.Addr() + 512 // 8-byte aligned, as atomics require
	client.qp.PostSend(&rnic.SendWR{WRID: 4, Opcode: rnic.WRAtomicFetchAndAdd, CompareAdd: 2, Flags: rnic.SendSignaled,
		SGL: client.sge(0, 8), RemoteAddr: counter, RKey: server.mr.RKey()})
	client.wait()
	fmt.Println("fetch-and-add 2 found", binary.LittleEndian.Uint64(client.buf))

	client.qp.PostSend(&rnic.SendWR{WRID: 5, Opcode: rnic.WRAtomicCmpAndSwp, CompareAdd: 42, Swap: 7, Flags: rnic.SendSignaled,
		SGL: client.sge(8, 8), RemoteAddr: counter, RKey: server.mr.RKey()})
	client.wait()
	fmt.Println("compare 42, swap 7 found", binary.LittleEndian.Uint64(client.buf[8:]))
	// Output:
	// fetch-and-add 2 found 40
	// compare 42, swap 7 found 42
}

// UD sends datagrams to any QP through an address handle; every receive
// buffer starts with 40 bytes of GRH.
func Example_ud() {
	const qkey = 0x11111111
	a, b := open("127.80.4.1:4791", rnic.UD), open("127.80.4.2:4791", rnic.UD)
	defer a.close()
	defer b.close()
	for _, n := range []*node{a, b} {
		steps := []struct {
			attr rnic.QPAttr
			mask rnic.QPAttrMask
		}{
			{rnic.QPAttr{State: rnic.StateInit, PortNum: 1, QKey: qkey}, rnic.AttrState | rnic.AttrPKeyIndex | rnic.AttrPort | rnic.AttrQKey},
			{rnic.QPAttr{State: rnic.StateRTR}, rnic.AttrState},
			{rnic.QPAttr{State: rnic.StateRTS, SQPSN: 0}, rnic.AttrState | rnic.AttrSQPSN},
		}
		for _, s := range steps {
			if err := n.qp.Modify(&s.attr, s.mask); err != nil {
				log.Fatal(err)
			}
		}
	}
	ah, err := a.dev.CreateAH(a.pd, rnic.AHAttr{GID: b.dev.GID()})
	if err != nil {
		log.Fatal(err)
	}
	b.qp.PostRecv(&rnic.RecvWR{WRID: 1, SGL: b.sge(0, rnic.GRHLen+64)})
	copy(a.buf, "a datagram")
	a.qp.PostSend(&rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: a.sge(0, 10),
		AH: &ah.AH, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey})

	a.wait()
	wc := b.wait()
	fmt.Println("received", wc.ByteLen-rnic.GRHLen, "bytes from the right QP:", wc.SrcQP == a.qp.QPN(), "GRH:", wc.Flags&rnic.WCWithGRH != 0)
	fmt.Printf("payload after the GRH: %q\n", b.buf[rnic.GRHLen:rnic.GRHLen+10])
	// Output:
	// received 10 bytes from the right QP: true GRH: true
	// payload after the GRH: "a datagram"
}

// A type-2 memory window grants a peer access to part of a region, and
// LOCAL_INV takes it back: the next access through the old key fails.
func Example_memoryWindow() {
	client, server := pair("127.80.5.1:4791", "127.80.5.2:4791", nil)
	defer client.close()
	defer server.close()

	mw, err := server.pd.AllocMW(rnic.MWType2)
	if err != nil {
		log.Fatal(err)
	}
	rkey := rnic.IncKey(mw.RKey())
	server.qp.PostSend(&rnic.SendWR{WRID: 1, Opcode: rnic.WRBindMW, Flags: rnic.SendSignaled, Bind: &rnic.MWBind{
		MW: mw, RKey: rkey, MR: server.mr, Addr: server.mr.Addr() + 1024, Length: 64, Access: rnic.AccessRemoteWrite}})
	fmt.Println("bind:", server.wait().Status)

	copy(client.buf, "through the window")
	client.qp.PostSend(&rnic.SendWR{WRID: 2, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled, SGL: client.sge(0, 18),
		RemoteAddr: server.mr.Addr() + 1024, RKey: rkey})
	fmt.Println("write through the window:", client.wait().Status)

	server.qp.PostSend(&rnic.SendWR{WRID: 3, Opcode: rnic.WRLocalInv, Imm: rkey, Flags: rnic.SendSignaled})
	fmt.Println("invalidate:", server.wait().Status)
	// The server's own completion orders the peer's write before this read.
	fmt.Printf("server memory: %q\n", server.buf[1024:1042])
	client.qp.PostSend(&rnic.SendWR{WRID: 4, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled, SGL: client.sge(0, 18),
		RemoteAddr: server.mr.Addr() + 1024, RKey: rkey})
	fmt.Println("write after invalidation:", client.wait().Status)
	// Output:
	// bind: success
	// write through the window: success
	// invalidate: success
	// server memory: "through the window"
	// write after invalidation: remote access error
}
