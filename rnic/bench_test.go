package rnic

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/shmlink"
	"github.com/goroce/goroce/rnic/udplink"
)

const allAccess = mr.AccessLocalWrite | mr.AccessRemoteWrite | mr.AccessRemoteRead | mr.AccessRemoteAtomic

// udpPair opens two devices over real UDP on loopback and connects an RC
// QP pair between them.
func udpPair(b testing.TB, ips [2]string, mtu int, busy time.Duration) (x, y *end) {
	return linkPair(b, ips, mtu, busy, openUDP)
}

// openUDP opens a UDP link with GSO on an ephemeral port at ip.
func openUDP(ip string) (link.Link, error) {
	return udplink.Open(udplink.Config{Local: netip.AddrPortFrom(netip.MustParseAddr(ip), 0), EphemeralPort: true, RoCEv2GSO: true})
}

// shmPair opens two devices over shared-memory links (files in a
// directory of the benchmark's own) and connects an RC QP pair.
func shmPair(b testing.TB, ips [2]string, mtu int, busy time.Duration) (x, y *end) {
	dir := b.TempDir()
	return linkPair(b, ips, mtu, busy, func(ip string) (link.Link, error) {
		return shmlink.Open(shmlink.Config{Local: netip.AddrPortFrom(netip.MustParseAddr(ip), 0), Dir: dir})
	})
}

// linkPair opens two devices on the links open makes at ips and connects
// an RC QP pair between them.
func linkPair(b testing.TB, ips [2]string, mtu int, busy time.Duration, open func(ip string) (link.Link, error)) (x, y *end) {
	return configuredPair(b, ips, open, Config{MTU: mtu, BusyPoll: busy})
}

// configuredPair is linkPair for devices opened with cfg (its Addr and
// Link are filled in).
func configuredPair(b testing.TB, ips [2]string, open func(ip string) (link.Link, error), cfg Config) (x, y *end) {
	mtu := cfg.MTU
	var ends [2]*end
	for i, ip := range ips {
		l, err := open(ip)
		if err != nil {
			b.Fatalf("opening a link at %s: %v", ip, err)
		}
		c := cfg
		c.Addr, c.Link = l.LocalAddr(), l
		dev, err := Open(c)
		if err != nil {
			l.Close()
			b.Fatal(err)
		}
		b.Cleanup(func() { dev.Close() })
		ends[i] = newEnd(b, dev, pairConfig{typ: qp.RC, bufSize: 1 << 20, access: allAccess})
	}
	pc := pairConfig{typ: qp.RC, mtu: mtu, timeout: 14, retry: 7, rnrRetry: 7, access: allAccess}
	connect(b, ends[0], ends[1], pc)
	connect(b, ends[1], ends[0], pc)
	return ends[0], ends[1]
}

// BenchmarkWires puts the two wires between devices of one host side by
// side: write_bw of 64 KiB RDMA WRITEs (16 in flight) and send_lat of an
// 8-byte SEND round trip (blocking and busy-polling), over UDP on loopback
// and over shared memory (rnic/shmlink).
func BenchmarkWires(b *testing.B) {
	wires := []struct {
		name string
		pair func(testing.TB, [2]string, int, time.Duration) (*end, *end)
	}{{"udp", udpPair}, {"shm", shmPair}}
	for _, w := range wires {
		b.Run("write_bw_64KiB/"+w.name, func(b *testing.B) {
			x, y := w.pair(b, [2]string{"127.78.3.1", "127.78.3.2"}, 4096, 0)
			writeBW(b, x, y)
		})
	}
	for _, busy := range []time.Duration{0, 50 * time.Microsecond} {
		mode := map[bool]string{false: "blocking", true: "busypoll"}[busy > 0]
		for _, w := range wires {
			b.Run("send_lat_8B_"+mode+"/"+w.name, func(b *testing.B) {
				x, y := w.pair(b, [2]string{"127.78.4.1", "127.78.4.2"}, 4096, busy)
				pingPong(b, x, y)
			})
		}
	}
}

// BenchmarkOwnership measures the ways a posted WR reaches the wire,
// side by side on UDP loopback: inline (Config.PostInline: the posting
// goroutine transmits), through the QP's worker (Config.PostToWorker,
// the single-owner model, the default without polling) and batched
// (Config.PostBatched: inline when lone, through the worker when posts
// stream, the default in polling mode), for an 8-byte SEND round trip
// and for 64 KiB RDMA WRITEs, 16 in flight, each with blocking and
// busy-polling waits. docs/performance.md quotes its figures.
func BenchmarkOwnership(b *testing.B) {
	for _, post := range []PostMode{PostInline, PostToWorker, PostBatched} {
		for _, busy := range []time.Duration{0, 50 * time.Microsecond} {
			mode := map[bool]string{false: "blocking", true: "busypoll"}[busy > 0]
			cfg := Config{MTU: 4096, BusyPoll: busy, PostMode: post}
			b.Run("send_lat_8B_"+mode+"/"+post.String(), func(b *testing.B) {
				x, y := configuredPair(b, [2]string{"127.78.5.1", "127.78.5.2"}, openUDP, cfg)
				pingPong(b, x, y)
			})
			b.Run("write_bw_64KiB_"+mode+"/"+post.String(), func(b *testing.B) {
				x, y := configuredPair(b, [2]string{"127.78.5.3", "127.78.5.4"}, openUDP, cfg)
				writeBW(b, x, y)
			})
		}
	}
}

// BenchmarkRCSendPingPong measures the round trip of an 8-byte RC SEND
// answered by an 8-byte SEND, over real UDP on loopback: ns/op is one
// round trip, as ib_send_lat reports twice its t_typical. Both devices run
// in this process, so each side's waits are the test goroutine's; with
// busy-polling each wait runs its device's receive path itself (polling
// mode, Config.BusyPoll).
func BenchmarkRCSendPingPong(b *testing.B) {
	b.Run("blocking", func(b *testing.B) { sendPingPong(b, 0) })
	b.Run("busypoll", func(b *testing.B) { sendPingPong(b, 50*time.Microsecond) })
}

func sendPingPong(b *testing.B, busy time.Duration) {
	x, y := udpPair(b, [2]string{"127.78.1.1", "127.78.1.2"}, 4096, busy)
	pingPong(b, x, y)
}

// pingPong bounces an 8-byte SEND between x and y b.N times.
func pingPong(b *testing.B, x, y *end) {
	send := func(e *end, id uint64) {
		e.postSend(b, qp.SendWR{WRID: id, Opcode: qp.WRSend, SGL: []qp.SGE{e.sge(0, 8)}})
	}
	wait := func(e *end) {
		for {
			if e.cq.Len() == 0 {
				e.cq.Wait(context.Background())
			}
			if n := e.cq.Poll(e.wcs[:4]); n > 0 {
				for _, wc := range e.wcs[:n] {
					if wc.Status != qp.WCSuccess {
						b.Fatalf("completion %+v", wc)
					}
					if wc.Opcode == qp.WCRecv {
						return
					}
				}
			}
		}
	}
	for i := range 2 {
		x.postRecv(b, uint64(i), 4096, 4096)
		y.postRecv(b, uint64(i), 4096, 4096)
	}
	done := make(chan struct{})
	go func() { // y echoes
		defer close(done)
		for i := 0; i < b.N; i++ {
			wait(y)
			y.postRecv(b, 0, 4096, 4096)
			send(y, 0)
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		send(x, 0)
		wait(x)
		x.postRecv(b, 0, 4096, 4096)
	}
	b.StopTimer()
	<-done
}

// BenchmarkRCWriteBW measures RDMA WRITE bandwidth of 64 KiB messages over
// real UDP on loopback, 16 in flight, MTU 4096 (bytes/s is payload).
func BenchmarkRCWriteBW(b *testing.B) {
	x, y := udpPair(b, [2]string{"127.78.2.1", "127.78.2.2"}, 4096, 0)
	writeBW(b, x, y)
}

// writeBW posts b.N RDMA WRITEs of 64 KiB from x to y, 16 in flight.
func writeBW(b *testing.B, x, y *end) {
	const size, depth = 64 << 10, 16
	post := func(i int) {
		x.postSend(b, qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{x.sge(0, size)}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()})
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	posted := 0
	for ; posted < depth && posted < b.N; posted++ {
		post(posted)
	}
	for done := 0; done < b.N; {
		if x.cq.Len() == 0 {
			x.cq.Wait(context.Background())
		}
		n := x.cq.Poll(x.wcs)
		for _, wc := range x.wcs[:n] {
			if wc.Status != qp.WCSuccess {
				b.Fatalf("completion %+v", wc)
			}
		}
		done += n
		for ; n > 0 && posted < b.N; n-- {
			post(posted)
			posted++
		}
	}
}
