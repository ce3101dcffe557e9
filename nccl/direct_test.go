package nccl

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/goroce/goroce/nccl/transport/ib"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// placement counts, on the simulated wire, the payload bytes of RDMA
// WRITEs by where they land: inside one of the buffers it is told of, or
// elsewhere (the transport's slots). A WRITE's address is in its first
// packet's RETH; the packets after it continue from there.
type placement struct {
	mu     sync.Mutex
	bufs   [][2]uintptr      // [start, end) of the buffers
	next   map[uint32]uint64 // the address the next packet of a WRITE lands at, by destination QPN
	inside int
	other  int
}

// watch returns a port configuration that counts into p and changes
// nothing.
func (p *placement) watch() simlink.PortConfig {
	p.next = map[uint32]uint64{}
	return simlink.PortConfig{Send: []simlink.Impairment{{Action: simlink.Drop, Match: func(sp *simlink.Packet) bool {
		pkt, err := wire.Parse(sp.Data)
		if err != nil || pkt.Info().Op != wire.OpWrite {
			return false
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		qpn := pkt.BTH().DestQP()
		if r := pkt.RETH(); r != nil {
			p.next[qpn] = r.VA()
		}
		va, n := p.next[qpn], len(pkt.Payload())
		p.next[qpn] = va + uint64(n)
		for _, b := range p.bufs {
			if uintptr(va) >= b[0] && uintptr(va)+uintptr(n) <= b[1] {
				p.inside += n
				return false
			}
		}
		p.other += n
		return false
	}}}}
}

// track adds b to the buffers counted as inside.
func (p *placement) track(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p.bufs = append(p.bufs, [2]uintptr{start, start + uintptr(len(b))})
}

func (p *placement) counts() (inside, other int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inside, p.other
}

// Over RC QPs the ring AllReduce's all-gather writes each block straight
// into the receiving rank's output buffer, in place and out of place:
// each rank posts the receive a phase early, so that its CTS reaches the
// sender before the block does. With 4 ranks each rank receives 3 blocks
// in the all-gather; every byte of them lands in the output buffers, and
// the results are right.
func TestAllReduceIBDirect(t *testing.T) {
	for _, inPlace := range []bool{true, false} {
		t.Run(fmt.Sprintf("in place %v", inPlace), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var p placement
				const n = 4
				comms := ibComms(t, n, Options{Algo: AlgoRing}, p.watch())
				// One slice of four blocks of 8 fragments (the ring's chunk).
				block := 8 * comms[0].fragment
				count := n * block / 4
				rng := rand.New(rand.NewPCG(9, 9))
				ins := inputs(rng, n, Float32, Sum, count)
				want := expected(t, ins, Float32, Sum)
				outs := make([][]byte, n)
				sends := make([][]byte, n)
				for r := range n {
					sends[r] = bytes.Clone(ins[r])
					outs[r] = make([]byte, len(sends[r]))
					if inPlace {
						outs[r] = sends[r]
					}
					p.track(outs[r])
				}
				mustAll(t, "AllReduce", onAll(t, comms, func(r int, c *Comm) *Request {
					return c.AllReduce(sends[r], outs[r], count, Float32, Sum)
				}))
				for r := range n {
					if !bytes.Equal(outs[r], want) {
						t.Fatalf("rank %d: wrong result", r)
					}
				}
				inside, other := p.counts()
				t.Logf("%d bytes written into the output buffers, %d elsewhere", inside, other)
				if gathered := n * (n - 1) * block; inside < gathered {
					t.Errorf("%d bytes written into the output buffers, want at least the all-gather's %d", inside, gathered)
				}
			})
		})
	}
}

// Once an operation has failed, a peer that comes late cannot write into
// the buffers the call was given: the communicator drops their
// registrations before it reports the failure, so a receive's CTS the
// peer holds is worth nothing. Rank 0's Recv from rank 1 times out; rank
// 1, which has read the CTS meanwhile (exchanging with rank 2), then
// sends, and fails instead of landing in rank 0's buffer.
func TestNoWriteAfterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		comms := ibComms(t, 3, Options{Timeout: time.Second}, simlink.PortConfig{})
		count := 4 * comms[0].fragment // several fragments: a CTS names the buffer
		buf := make([]byte, count)
		err := comms[0].Recv(buf, count, Uint8, 1).Wait(t.Context())
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("rank 0's Recv with nobody sending: %v, want ErrTimeout", err)
		}
		mustAll(t, "rank 1 to rank 2", onAll(t, comms[1:], func(r int, c *Comm) *Request {
			b := make([]byte, 8)
			if r == 0 {
				return c.Send(b, 8, Uint8, 2)
			}
			return c.Recv(b, 8, Uint8, 1)
		}))
		data := bytes.Repeat([]byte{0xA5}, count)
		err = comms[1].Send(data, count, Uint8, 0).Wait(t.Context())
		if !bytes.Equal(buf, make([]byte, count)) {
			t.Fatalf("rank 1's late Send wrote into rank 0's buffer after its Recv had failed")
		}
		// Refused by rank 0's RNIC: the Send went for the buffer the CTS
		// named (through the slots it would have succeeded).
		if !errors.Is(err, ib.ErrWC) || !strings.Contains(err.Error(), "remote access") {
			t.Fatalf("rank 1's late Send: %v, want a remote access error", err)
		}
	})
}
