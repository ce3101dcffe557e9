package ib

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// tally counts, from the packets on the simulated wire, the RDMA WRITEs
// the transports post: the payload bytes WRITE requests carry, by the
// rkey their RETH names, and the zero-length WRITE WITH IMMEDIATEs, which
// return credits and nothing else. It reads the wire, not the transport.
type tally struct {
	mu        sync.Mutex
	bytes     map[uint32]int // payload bytes by the rkey of the WRITE they belong to
	emptyImms int
	rkey      map[uint32]uint32 // a WRITE in progress: its rkey, by destination QPN
}

// observe returns a simlink configuration whose only rule counts into t
// and drops nothing.
func (t *tally) observe() simlink.Config {
	t.bytes, t.rkey = map[uint32]int{}, map[uint32]uint32{}
	return simlink.Config{Impairments: []simlink.Impairment{{Action: simlink.Drop, Match: func(p *simlink.Packet) bool {
		pkt, err := wire.Parse(p.Data)
		if err != nil || pkt.Info().Op != wire.OpWrite {
			return false
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		qpn := pkt.BTH().DestQP()
		if r := pkt.RETH(); r != nil {
			t.rkey[qpn] = r.RKey()
			if r.DMALen() == 0 && pkt.ImmDt() != nil {
				t.emptyImms++
			}
		}
		t.bytes[t.rkey[qpn]] += len(pkt.Payload())
		return false
	}}}}
}

func (t *tally) bytesTo(rkey uint32) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes[rkey]
}

func (t *tally) creditWrites() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.emptyImms
}

// awaitCTS drives both ranks until sender has read a CTS from its peer,
// or fails after a virtual minute.
func awaitCTS(t *testing.T, ts []*Transport, sender int) {
	t.Helper()
	c := ts[sender].conns[1-sender]
	for deadline := time.Now().Add(time.Minute); len(c.ctsIn) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("rank %d read no CTS from rank %d in a minute", sender, 1-sender)
		}
		ts[0].Progress()
		ts[1].Progress()
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		ts[sender].Wait(ctx)
		cancel()
	}
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*seed + 1)
	}
	return b
}

// A receive into a registered buffer tells the sender where it is (a
// CTS), and the sender writes the message there: not a byte crosses the
// FIFO's slots. Both directions, plain and reducing receives; an
// IrecvReduce whose output is its input cannot be written over before it
// is read, and takes the slots.
func TestDirectIntoRegisteredReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w tally
		ts, _ := fabricOn(t, w.observe(), 2, Config{Slots: 4, SlotSize: 1024})
		const n = 10_000 // ten fragments, more than the FIFO holds
		type side struct{ send, recv []byte }
		sides := [2]side{}
		for r := range 2 {
			sides[r] = side{send: pattern(n+500, 7+r), recv: make([]byte, n+3000)}
			for _, b := range [][]byte{sides[r].send, sides[r].recv} {
				if err := ts[r].Register(b); err != nil {
					t.Fatal(err)
				}
			}
		}
		slotKey := func(r int) uint32 { return ts[r].conns[1-r].recvMR.RKey() }

		// settle lets the CTS of the receives just posted reach their
		// senders: a send posted before it arrives starts through the
		// slots (TestDirectAfterSlots).
		settle := func(senders ...int) {
			t.Helper()
			for _, s := range senders {
				awaitCTS(t, ts, s)
			}
		}

		// Plain receives, both ways at once, inside their registrations.
		reqs := map[transport.Request]*Transport{}
		for r := range 2 {
			rq, err := ts[r].Irecv(1-r, sides[r].recv[1000:1000+n])
			if err != nil {
				t.Fatal(err)
			}
			reqs[rq] = ts[r]
		}
		settle(0, 1)
		for r := range 2 {
			sq, err := ts[r].Isend(1-r, sides[r].send[500:500+n])
			if err != nil {
				t.Fatal(err)
			}
			reqs[sq] = ts[r]
		}
		if err := waitAll(t, reqs); err != nil {
			t.Fatal(err)
		}
		for r := range 2 {
			if !bytes.Equal(sides[r].recv[1000:1000+n], sides[1-r].send[500:500+n]) {
				t.Fatalf("rank %d received other bytes than rank %d sent", r, 1-r)
			}
			if b := w.bytesTo(slotKey(r)); b != 0 {
				t.Errorf("rank %d: %d bytes written into its slots, want 0 (all into the receive buffer)", r, b)
			}
			if b := w.bytesTo(ts[r].registered(sides[r].recv).mr.RKey()); b != n {
				t.Errorf("rank %d: %d bytes written into its receive buffer, want %d", r, b, n)
			}
		}

		// An IrecvReduce into another buffer than its input: the
		// fragments land in the output and are combined there.
		local := pattern(n, 3)
		out := sides[1].recv[:n]
		var add adder
		msg := sides[0].send[:n]
		rq, _ := ts[1].IrecvReduce(0, out, local, 4, add.combine)
		settle(0)
		sq, _ := ts[0].Isend(1, msg)
		if err := waitAll(t, map[transport.Request]*Transport{rq: ts[1], sq: ts[0]}); err != nil {
			t.Fatal(err)
		}
		checkAdded(t, "out of place reduce", out, msg, local)
		if add.calls != 10 {
			t.Errorf("combine ran %d times, want once per fragment (10)", add.calls)
		}
		if b := w.bytesTo(slotKey(1)); b != 0 {
			t.Errorf("out of place reduce: %d bytes through the slots, want 0", b)
		}

		// In place: the output is the input, which the peer must not
		// overwrite before it is read.
		inout := sides[1].recv[:n]
		want := make([]byte, n)
		for i := range want {
			want[i] = inout[i] + msg[i]
		}
		rq, _ = ts[1].IrecvReduce(0, inout, inout, 4, add.combine)
		for range 4 { // no CTS to wait for: give one the time to come
			synctest.Wait()
			ts[0].Progress()
			ts[1].Progress()
		}
		if n := len(ts[0].conns[1].ctsIn); n != 0 {
			t.Fatalf("in place reduce: %d CTS, want none", n)
		}
		sq, _ = ts[0].Isend(1, msg)
		if err := waitAll(t, map[transport.Request]*Transport{rq: ts[1], sq: ts[0]}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(inout, want) {
			t.Fatal("in place reduce: wrong result")
		}
		if b := w.bytesTo(slotKey(1)); b != n {
			t.Errorf("in place reduce: %d bytes through the slots, want all %d", b, n)
		}
	})
}

// A CTS that arrives after the sender has begun the message through the
// slots takes the rest: the first fragments stay in the slots they were
// written to, the others go straight to the receive's buffer.
func TestDirectAfterSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w tally
		ts, _ := fabricOn(t, w.observe(), 2, Config{Slots: 4, SlotSize: 1024})
		const n = 10_000
		src, dst := pattern(n, 11), make([]byte, n)
		ts[0].Register(src)
		ts[1].Register(dst)
		sq, err := ts[0].Isend(1, src)
		if err != nil {
			t.Fatal(err)
		}
		// The receive is not posted: four fragments fill the FIFO and
		// the sender runs out of credits.
		for range 4 {
			synctest.Wait()
			ts[0].Progress()
			ts[1].Progress()
		}
		if got := sq.(*sendReq).posted; got != 4 {
			t.Fatalf("before the receive: %d fragments written, want the FIFO's 4", got)
		}
		rq, err := ts[1].Irecv(0, dst)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitAll(t, map[transport.Request]*Transport{rq: ts[1], sq: ts[0]}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, src) {
			t.Fatal("received other bytes than sent")
		}
		slots := ts[1].conns[0].recvMR.Bytes()
		if !bytes.Equal(slots, src[:4*1024]) {
			t.Error("the slots do not hold fragments 0-3: later fragments went through them")
		}
		if b, k := w.bytesTo(ts[1].conns[0].recvMR.RKey()), w.bytesTo(ts[1].registered(dst).mr.RKey()); b != 4*1024 || k != n-4*1024 {
			t.Errorf("%d bytes through the slots and %d into the buffer, want %d and %d", b, k, 4*1024, n-4*1024)
		}
	})
}

// A send from a buffer that is not registered goes through the slots
// even when the receive's CTS has come: its fragments are staged in the
// sender's slots, which a WRITE into the receive's buffer would not
// keep busy until it completes.
func TestDirectNeedsRegisteredSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w tally
		ts, _ := fabricOn(t, w.observe(), 2, Config{Slots: 4, SlotSize: 1024})
		const n = 10_000
		src, dst := pattern(n, 5), make([]byte, n)
		ts[1].Register(dst)
		rq, err := ts[1].Irecv(0, dst)
		if err != nil {
			t.Fatal(err)
		}
		awaitCTS(t, ts, 0)
		sq, err := ts[0].Isend(1, src)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitAll(t, map[transport.Request]*Transport{rq: ts[1], sq: ts[0]}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, src) {
			t.Fatal("received other bytes than sent")
		}
		if b, k := w.bytesTo(ts[1].conns[0].recvMR.RKey()), w.bytesTo(ts[1].registered(dst).mr.RKey()); b != n || k != 0 {
			t.Errorf("%d bytes through the slots and %d into the buffer, want %d and 0", b, k, n)
		}
	})
}

// A send whose receive is shorter is not written into the receive's
// buffer beyond its end: it goes through the slots, and the receive fails
// with ErrLength naming the sender, as without a CTS.
func TestDirectLengthMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts, _ := fabric(t, 2, Config{Slots: 4, SlotSize: 1024})
		src, dst := pattern(6000, 3), make([]byte, 8000)
		ts[0].Register(src)
		ts[1].Register(dst)
		rq, _ := ts[1].Irecv(0, dst[:5000])
		synctest.Wait()
		sq, _ := ts[0].Isend(1, src)
		err := waitAll(t, map[transport.Request]*Transport{rq: ts[1], sq: ts[0]})
		var pe *transport.PeerError
		if !errors.As(err, &pe) || pe.Peer != 0 || !errors.Is(err, transport.ErrLength) {
			t.Fatalf("%v, want ErrLength from peer 0", err)
		}
		if !bytes.Equal(dst[5000:], make([]byte, 3000)) {
			t.Error("bytes written past the end of the receive")
		}
	})
}

// A peer that breaks the protocol fails the connection (ErrProtocol)
// instead of making this side write where nothing asked: a fragment that
// claims to be in the receive's buffer though no CTS named it, more CTS
// than the ring holds, more credits than slots.
func TestProtocolViolations(t *testing.T) {
	raw := func(t *testing.T, c *conn, imm uint32, addr uint64, rkey uint32, data []byte) {
		t.Helper()
		m, err := c.t.pd.RegMR(append([]byte{0}, data...), 0)
		if err != nil {
			t.Fatal(err)
		}
		wr := qp.SendWR{WRID: wrCredit, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled, Imm: imm,
			RemoteAddr: addr, RKey: rkey, SGL: []qp.SGE{{Addr: m.Addr() + 1, Length: uint32(len(data)), LKey: m.LKey()}}}
		if err := c.qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		c.sq++
	}
	cases := map[string]func(t *testing.T, ts []*Transport){
		"direct fragment without a CTS": func(t *testing.T, ts []*Transport) {
			ts[1].Irecv(0, make([]byte, 100))
			c := ts[0].conns[1]
			raw(t, c, immDirect, c.remoteAddr, c.remoteKey, make([]byte, 100))
		},
		"more CTS than the ring holds": func(t *testing.T, ts []*Transport) {
			c := ts[0].conns[1]
			for i := range 5 {
				e := make([]byte, ctsLen)
				e[3] = byte(i) // increasing numbers
				raw(t, c, immCTS, c.ctsRemoteAddr+uint64(i%4*ctsLen), c.ctsRemoteKey, e)
				// Each read before the next lands: only the count is wrong.
				synctest.Wait()
				ts[1].Progress()
			}
		},
		"CTS numbers going back": func(t *testing.T, ts []*Transport) {
			c := ts[0].conns[1]
			for i, seq := range []byte{5, 3} {
				e := make([]byte, ctsLen)
				e[3] = seq
				raw(t, c, immCTS, c.ctsRemoteAddr+uint64(i*ctsLen), c.ctsRemoteKey, e)
			}
		},
		"more credits than slots": func(t *testing.T, ts []*Transport) {
			c := ts[0].conns[1]
			raw(t, c, immCredit|1, c.remoteAddr, c.remoteKey, nil)
		},
	}
	for name, attack := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ts, _ := fabric(t, 2, Config{Slots: 4, SlotSize: 1024})
				attack(t, ts)
				for range 8 {
					synctest.Wait()
					ts[0].Progress()
					ts[1].Progress()
				}
				err := ts[1].conns[0].err
				var pe *transport.PeerError
				if !errors.As(err, &pe) || pe.Peer != 0 || !errors.Is(err, ErrProtocol) {
					t.Fatalf("rank 1's connection to rank 0: %v, want ErrProtocol naming peer 0", err)
				}
			})
		})
	}
}

// Credits ride on the data: two ranks that exchange small messages back
// and forth, as recursive doubling does, never post a WRITE only to
// return credits; a rank that only receives returns them in WRITEs of
// their own, half the FIFO at a time, and its sender never stalls for
// good.
func TestCreditsRideOnData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w tally
		ts, _ := fabricOn(t, w.observe(), 2, Config{Slots: 4, SlotSize: 1024})
		const rounds = 30
		for i := range rounds {
			reqs := map[transport.Request]*Transport{}
			got := [2][]byte{make([]byte, 100), make([]byte, 100)}
			for r := range 2 {
				s, _ := ts[r].Isend(1-r, pattern(100, i+r))
				q, _ := ts[r].Irecv(1-r, got[r])
				reqs[s], reqs[q] = ts[r], ts[r]
			}
			if err := waitAll(t, reqs); err != nil {
				t.Fatal(err)
			}
			for r := range 2 {
				if !bytes.Equal(got[r], pattern(100, i+1-r)) {
					t.Fatalf("round %d: rank %d got other bytes", i, r)
				}
			}
		}
		if n := w.creditWrites(); n != 0 {
			t.Errorf("exchanging %d rounds: %d WRITEs only for credits, want 0", rounds, n)
		}

		// One way only: rank 1 returns credits on their own, at least
		// every two fragments (half of four slots), never one at a time.
		before := w.creditWrites()
		reqs := map[transport.Request]*Transport{}
		for i := range rounds {
			s, _ := ts[0].Isend(1, pattern(100, i))
			q, _ := ts[1].Irecv(0, make([]byte, 100))
			reqs[s], reqs[q] = ts[0], ts[1]
		}
		if err := waitAll(t, reqs); err != nil {
			t.Fatal(err)
		}
		if n := w.creditWrites() - before; n < 1 || n > rounds/2 {
			t.Errorf("%d one-way messages: %d credit WRITEs, want between 1 and %d", rounds, n, rounds/2)
		}
	})
}
