package rnic

import (
	"context"
	"runtime"
	"testing"

	"github.com/goroce/goroce/qp"
)

// BenchmarkIdleQPMemory reports the heap an idle RC QP costs (send and
// receive queues of 64 WRs with 1 SGE each, responder state, timer), from
// 1,024 QPs created on one device.
func BenchmarkIdleQPMemory(b *testing.B) {
	const n = 1024
	for range b.N {
		x, _ := udpPair(b, [2]string{"127.78.3.1", "127.78.3.2"}, 4096, 0)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		qps := make([]*QP, 0, n)
		for range n {
			q, err := x.dev.CreateQP(x.pd, &qp.InitAttr{Type: qp.RC, SendCQ: x.cq, RecvCQ: x.cq,
				Cap: qp.Cap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				b.Fatal(err)
			}
			qps = append(qps, q)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/QP")
		runtime.KeepAlive(qps)
		x.dev.Close()
	}
}

// BenchmarkWriteBW1024QPs measures aggregate RDMA WRITE bandwidth of 64 KiB
// messages spread over 1,024 RC QP pairs between two devices over real UDP
// on loopback (the QPs of each device share one CQ; at most 2 WRITEs in
// flight per QP), to compare with BenchmarkRCWriteBW's single QP.
func BenchmarkWriteBW1024QPs(b *testing.B) {
	const nqp, size, depth = 1024, 64 << 10, 2
	x, y := udpPair(b, [2]string{"127.78.4.1", "127.78.4.2"}, 4096, 0)
	pc := pairConfig{typ: qp.RC, mtu: 4096, timeout: 14, retry: 7, rnrRetry: 7, access: allAccess}
	mk := func(e *end) *end {
		q, err := e.dev.CreateQP(e.pd, &qp.InitAttr{Type: qp.RC, SendCQ: e.cq, RecvCQ: e.cq,
			Cap: qp.Cap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			b.Fatal(err)
		}
		return &end{dev: e.dev, pd: e.pd, cq: e.cq, qp: q, buf: e.buf, mr: e.mr}
	}
	xs := []*QP{x.qp}
	for len(xs) < nqp {
		xe, ye := mk(x), mk(y)
		connect(b, xe, ye, pc)
		connect(b, ye, xe, pc)
		xs = append(xs, xe.qp)
	}
	byQPN := make(map[uint32]int, nqp) // outstanding WRITEs per QP
	post := func(q *QP, i int) {
		err := q.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{x.sge(0, size)}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()})
		if err != nil {
			b.Fatal(err)
		}
		byQPN[q.QPN()]++
	}
	wcs := make([]qp.WC, 256)
	b.SetBytes(size)
	b.ResetTimer()
	posted, done, next := 0, 0, 0
	for done < b.N {
		for tries := 0; posted < b.N && tries < nqp; tries++ {
			q := xs[next]
			next = (next + 1) % nqp
			if byQPN[q.QPN()] < depth {
				post(q, posted)
				posted++
			}
		}
		if x.cq.Len() == 0 {
			x.cq.Wait(context.Background())
		}
		n := x.cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				b.Fatalf("completion %+v", wc)
			}
			byQPN[wc.QPNum]--
		}
		done += n
	}
}
