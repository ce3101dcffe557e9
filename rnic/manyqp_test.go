package rnic

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/udplink"
)

// TestManyQPsOverUDP is issue 25's item 3 at its size: 1,024 RC QPs
// between two devices over real UDP on loopback, every one writing at once
// with the default timeout (14: 67 ms) and retry count (7). Each QP RDMA
// WRITEs its own pattern into its own slice of the peer's buffer, several
// 64 KiB messages deep, and every write must complete successfully and
// land. Before the device shared its bytes in flight among its QPs
// (qp.WindowShare) and let other senders in between outbox flushes, the
// thousand full windows overran the receiver's socket buffer and the ACKs
// queued behind the worker's batch, and QPs failed with "transport retry
// counter exceeded".
func TestManyQPsOverUDP(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "moves 512 MiB over loopback")
	}
	const (
		nQP   = 1024
		depth = 32      // WRITEs in flight per QP
		size  = 1 << 16 // bytes per WRITE
	)
	var devs [2]*Device
	for i, ip := range []string{"127.77.2.1", "127.77.2.2"} {
		l, err := udplink.Open(udplink.Config{Local: netip.AddrPortFrom(netip.MustParseAddr(ip), 0), EphemeralPort: true, RoCEv2GSO: true})
		if err != nil {
			t.Fatalf("udplink.Open(%s): %v", ip, err)
		}
		d, err := Open(Config{Addr: l.LocalAddr(), Link: l, MTU: 4096})
		if err != nil {
			l.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	type side struct {
		pd  *mr.PD
		cq  *qp.CQ
		buf []byte
		mr  *mr.MR
		qps []*QP
	}
	var s [2]side
	access := mr.AccessLocalWrite | mr.AccessRemoteWrite
	for i, d := range devs {
		var err error
		if s[i].pd, err = d.AllocPD(); err != nil {
			t.Fatal(err)
		}
		if s[i].cq, err = d.CreateCQ(nQP * depth); err != nil {
			t.Fatal(err)
		}
		s[i].buf = make([]byte, nQP*size)
		if s[i].mr, err = s[i].pd.RegMR(s[i].buf, access); err != nil {
			t.Fatal(err)
		}
		for range nQP {
			q, err := d.CreateQP(s[i].pd, &qp.InitAttr{Type: qp.RC, SendCQ: s[i].cq, RecvCQ: s[i].cq,
				Cap: qp.Cap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatal(err)
			}
			s[i].qps = append(s[i].qps, q)
		}
	}
	pc := pairConfig{typ: qp.RC, mtu: 4096, timeout: 14, retry: 7, rnrRetry: 7, access: access}
	for j := range nQP {
		a := &end{dev: devs[0], qp: s[0].qps[j]}
		b := &end{dev: devs[1], qp: s[1].qps[j]}
		connect(t, a, b, pc)
		connect(t, b, a, pc)
	}
	if got := devs[0].share.Active(); got != nQP {
		t.Fatalf("%d QPs in RTS share the budget, want %d", got, nQP)
	}
	for j := range nQP {
		copy(s[0].buf[j*size:(j+1)*size], bytes.Repeat([]byte(fmt.Sprintf("qp%04d ", j)), size/7+1))
	}
	start := time.Now()
	for j, q := range s[0].qps {
		for k := range depth {
			off := uint64(j * size)
			err := q.PostSend(&qp.SendWR{WRID: uint64(j*depth + k), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL:        []qp.SGE{{Addr: s[0].mr.Addr() + off, Length: size, LKey: s[0].mr.LKey()}},
				RemoteAddr: s[1].mr.Addr() + off, RKey: s[1].mr.RKey()})
			if err != nil {
				t.Fatalf("QP %d: PostSend: %v", j, err)
			}
		}
	}
	wcs := make([]qp.WC, 256)
	deadline := time.Now().Add(2 * time.Minute) // a bound, not a measurement
	for done := 0; done < nQP*depth; {
		n := s[0].cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				t.Fatalf("after %d of %d WRITEs: wr_id %d (QP %d) completed with %q; counters: local_ack_timeouts=%d retransmitted_pkts=%d",
					done, nQP*depth, wc.WRID, wc.WRID/depth, wc.Status.String(), devs[0].Counter("local_ack_timeouts"), devs[0].Counter("retransmitted_pkts"))
			}
		}
		done += n
		if n == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d WRITEs completed in %v", done, nQP*depth, time.Since(start))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			s[0].cq.Wait(ctx)
			cancel()
		}
	}
	if !bytes.Equal(s[1].buf, s[0].buf) {
		t.Fatal("the peer's buffer differs from what the QPs wrote")
	}
	t.Logf("%d QPs × %d × %d B in %v: local_ack_timeouts=%d retransmitted_pkts=%d",
		nQP, depth, size, time.Since(start).Round(time.Millisecond), devs[0].Counter("local_ack_timeouts"), devs[0].Counter("retransmitted_pkts"))
}
