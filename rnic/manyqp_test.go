package rnic

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/rnic/simlink"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/udplink"
)

// TestManyQPsOverUDP runs 1,024 RC QPs between two devices over real UDP
// sockets on loopback, every one writing at once with the default timeout
// (14: 67 ms) and retry count (7), in each receive mode: the receive
// goroutine reads, or (as goroce perf runs) the device polls and the
// program's CQ polls drive the receive path. Each QP RDMA WRITEs its own
// pattern into its own slice of the peer's buffer, several 64 KiB
// messages deep; every write must complete and land, no QP may exhaust
// its retries, the sockets must drop nothing (the kernel's count,
// /proc/net/udp), and then no ACK timer may fire: with nothing lost, a
// timeout only means the responder was behind, which the QPs must wait
// out (qp.Path), not answer with retransmissions that deepen the queue
// in front of it.
func TestManyQPsOverUDP(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "moves 2 GiB over loopback, twice")
	}
	for _, c := range []struct {
		name string
		busy time.Duration
		ips  [2]string
	}{
		{"receive goroutine", 0, [2]string{"127.137.4.1", "127.137.4.2"}},
		{"polled", 200 * time.Microsecond, [2]string{"127.137.4.3", "127.137.4.4"}},
	} {
		t.Run(c.name, func(t *testing.T) { manyQPsOverUDP(t, Config{MTU: 4096, BusyPoll: c.busy}, c.ips) })
	}
}

func manyQPsOverUDP(t *testing.T, cfg Config, ips [2]string) {
	var devs [2]*Device
	var socks [2]netip.AddrPort
	for i, ip := range ips {
		l, err := udplink.Open(udplink.Config{Local: netip.AddrPortFrom(netip.MustParseAddr(ip), 0), EphemeralPort: true, RoCEv2GSO: true})
		if err != nil {
			t.Fatalf("udplink.Open(%s): %v", ip, err)
		}
		c := cfg
		c.Addr, c.Link = l.LocalAddr(), l
		d, err := Open(c)
		if err != nil {
			l.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i], socks[i] = d, l.LocalAddr()
	}
	dropsBefore := udpDrops(t, socks[:]...)
	manyQPsWrite(t, devs, 1024, 32, 1<<16)
	if drops := udpDrops(t, socks[:]...) - dropsBefore; drops != 0 {
		t.Fatalf("the sockets dropped %d datagrams: the budget of bytes in flight did not hold", drops)
	}
	checkNoTimeouts(t, devs[0])
}

// TestManyQPsBehindAQueue is the same in virtual time over a simulated
// switch: 1,000 QPs each put their window (the device's 32 MiB in flight,
// shared) into one egress queue that drains at 1 Gb/s and drops nothing,
// so the last request waits 268 ms there, four local ACK timeouts (14: 67
// ms). The responder answers in the order the requests arrive; no timer
// may fire and nothing may be resent. DCQCN is off: its pacer would let
// the first rounds out without a packet that asks for an ACK, and the
// responder, answering nothing for 100 ms, would look stalled to a QP that
// cannot see the switch's queue (a link that can, udplink's sockets,
// tells; simlink does not).
func TestManyQPsBehindAQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := simlink.NewNetwork(simlink.Config{})
		t.Cleanup(func() { network.Close() })
		var devs [2]*Device
		for i, addr := range []netip.AddrPort{addrA, addrB} {
			port, err := network.Attach(addr, simlink.PortConfig{Downlink: simlink.Wire{Rate: 1e9, Latency: 5 * time.Microsecond}})
			if err != nil {
				t.Fatal(err)
			}
			d, err := Open(Config{Addr: addr, Link: port, MTU: 4096, InflightBytes: 32 << 20, DCQCN: DCQCNConfig{Disable: true}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			devs[i] = d
		}
		manyQPsWrite(t, devs, 1000, 2, 16<<10)
		if q := network.Stats().Egress; q.TailDrops+q.ImpairDrops != 0 || q.MaxBytes < 16<<20 {
			t.Fatalf("the switch dropped %d packets, and its queue held at most %d bytes: want none, and a deep queue", q.TailDrops+q.ImpairDrops, q.MaxBytes)
		}
		checkNoTimeouts(t, devs[0])
		if n := devs[0].Counter("ack_timeout_deferred"); n == 0 {
			t.Errorf("ack_timeout_deferred = 0: no request waited a timeout in the queue; the test does not test")
		}
	})
}

// checkNoTimeouts fails the test if d's QPs exhausted a retry count, or an
// ACK timer fired, or a packet went twice.
func checkNoTimeouts(t *testing.T, d *Device) {
	t.Helper()
	for _, name := range []string{"retry_exceeded_err", "local_ack_timeouts", "retransmitted_pkts"} {
		if n := d.Counter(name); n != 0 {
			t.Errorf("%s = %d with nothing lost: ACK timers fired while the responder was behind (%s)", name, n, manyQPsCounters(d))
		}
	}
}

func manyQPsCounters(d *Device) string {
	return fmt.Sprintf("local_ack_timeouts=%d ack_timeout_deferred=%d retry_exceeded_err=%d retransmitted_pkts=%d",
		d.Counter("local_ack_timeouts"), d.Counter("ack_timeout_deferred"),
		d.Counter("retry_exceeded_err"), d.Counter("retransmitted_pkts"))
}

// manyQPsWrite connects nQP RC QP pairs between devs[0] and devs[1] and
// has each QP of devs[0] RDMA WRITE its own pattern into its own slice of
// devs[1]'s buffer, depth messages of size bytes at once; every WRITE
// must complete successfully, within a bound, and land.
func manyQPsWrite(t *testing.T, devs [2]*Device, nQP, depth, size int) {
	t.Helper()
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
				Cap: qp.Cap{MaxSendWR: uint32(depth), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
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
				SGL:        []qp.SGE{{Addr: s[0].mr.Addr() + off, Length: uint32(size), LKey: s[0].mr.LKey()}},
				RemoteAddr: s[1].mr.Addr() + off, RKey: s[1].mr.RKey()})
			if err != nil {
				t.Fatalf("QP %d: PostSend: %v", j, err)
			}
		}
	}
	wcs := make([]qp.WC, 256)
	deadline := time.Now().Add(3 * time.Minute) // a bound, not a measurement
	for done := 0; done < nQP*depth; {
		n := s[0].cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				t.Fatalf("after %d of %d WRITEs: wr_id %d (QP %d) completed with %q; %s",
					done, nQP*depth, wc.WRID, wc.WRID/uint64(depth), wc.Status.String(), manyQPsCounters(devs[0]))
			}
		}
		done += n
		if n == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d WRITEs completed in %v; %s", done, nQP*depth, time.Since(start), manyQPsCounters(devs[0]))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			s[0].cq.Wait(ctx)
			cancel()
		}
	}
	if !bytes.Equal(s[1].buf, s[0].buf) {
		t.Fatal("the peer's buffer differs from what the QPs wrote")
	}
	t.Logf("%d QPs × %d × %d B in %v: %s", nQP, depth, size, time.Since(start).Round(time.Millisecond), manyQPsCounters(devs[0]))
}

// udpDrops returns the datagrams the kernel dropped at the UDP sockets
// bound to addrs (IPv4), from /proc/net/udp's drops column.
func udpDrops(t *testing.T, addrs ...netip.AddrPort) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		testenv.SkipOrFailf(t, "the sockets' drops are not visible: %v", err)
	}
	want := map[string]bool{}
	for _, a := range addrs {
		b := a.Addr().As4()
		want[fmt.Sprintf("%02X%02X%02X%02X:%04X", b[3], b[2], b[1], b[0], a.Port())] = true
	}
	var drops uint64
	found := 0
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 13 || !want[f[1]] {
			continue
		}
		n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
		if err != nil {
			t.Fatalf("/proc/net/udp: %q: %v", line, err)
		}
		drops += n
		found++
	}
	if found != len(addrs) {
		t.Fatalf("found %d of the sockets %v in /proc/net/udp", found, addrs)
	}
	return drops
}
