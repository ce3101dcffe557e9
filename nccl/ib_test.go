package nccl

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/nccl/transport/ib"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/simlink"
)

// ibComms opens n goroce devices on a simulated network and builds a
// communicator over ib transports on them, exchanging the connection
// details directly (the bootstrap is tested over TCP separately).
func ibComms(t testing.TB, n int, opts Options, link simlink.PortConfig) []*Comm {
	comms, _ := ibCommsNet(t, n, opts, link)
	return comms
}

func ibCommsNet(t testing.TB, n int, opts Options, link simlink.PortConfig) ([]*Comm, *simlink.Network) {
	t.Helper()
	comms, network, _ := ibCommsDevs(t, n, opts, link)
	return comms, network
}

// ibCommsDevs is ibCommsNet that also returns each rank's device, for
// tests that kill one.
func ibCommsDevs(t testing.TB, n int, opts Options, link simlink.PortConfig) ([]*Comm, *simlink.Network, []*rnic.Device) {
	t.Helper()
	devs := make([]*rnic.Device, n)
	network := simlink.NewNetwork(simlink.Config{Seed: 1})
	t.Cleanup(func() { network.Close() })
	trs := make([]*ib.Transport, n)
	for r := range n {
		addr := netip.MustParseAddrPort(fmt.Sprintf("10.1.0.%d:4791", r+1))
		port, err := network.Attach(addr, link)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := rnic.Open(rnic.Config{Addr: addr, Link: port, MTU: 1024, StrictICRC: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		devs[r] = dev
		slotSize := 4096
		if opts.SlotSize > 0 {
			slotSize = opts.SlotSize
		}
		if trs[r], err = ib.New(ib.Config{Device: dev, Rank: r, Size: n, Slots: 4, SlotSize: slotSize, MTU: 1024,
			Timeout: 10, RetryCnt: 3}); err != nil {
			t.Fatal(err)
		}
	}
	infos := make([][]byte, n)
	for r, tr := range trs {
		infos[r] = tr.LocalInfo()
	}
	comms := make([]*Comm, n)
	for r, tr := range trs {
		if err := tr.Connect(infos); err != nil {
			t.Fatal(err)
		}
		c, err := NewComm(tr, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Abort() })
		comms[r] = c
	}
	return comms, network, devs
}

// TestCollectivesIB runs every collective over goroce RC QPs on a
// simulated network in virtual time: 1, 2, 3 and 5 ranks, three data types,
// three ops, counts from 0 to several times the slot FIFO (so messages
// stream through the credits).
func TestCollectivesIB(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		for _, algo := range []Algo{AlgoRing, AlgoRecursiveDoubling} {
			t.Run(fmt.Sprintf("n=%d/%v", n, algo), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					comms := ibComms(t, n, Options{Algo: algo, SliceBytes: 3000}, simlink.PortConfig{})
					rng := rand.New(rand.NewPCG(uint64(n), 1))
					for _, mc := range matrix {
						if algo == AlgoRecursiveDoubling && mc.name != "AllReduce" {
							continue
						}
						ops := []Op{Sum}
						if mc.reduces {
							ops = []Op{Sum, Max, Avg}
						}
						for _, dt := range []DataType{Float32, BFloat16, Int64} {
							for _, op := range ops {
								for _, count := range []int{0, 1, 1000 + n, 9000} {
									name := fmt.Sprintf("%s/%v/%v/%d", mc.name, dt, op, count)
									// No t.Run inside a bubble: name the case in failures.
									mc.run(named{t, name}, comms, rng, dt, op, count, count%2 == 1)
								}
							}
						}
					}
				})
			})
		}
	}
}

// Slots whose size is no multiple of the element size cannot stream the
// ring's reductions (a fragment would cut an element in two): the executor
// stages them instead, with the same results.
func TestAllReduceIBOddSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		comms := ibComms(t, 3, Options{Algo: AlgoRing, SlotSize: 1002}, simlink.PortConfig{})
		rng := rand.New(rand.NewPCG(4, 4))
		for _, dt := range []DataType{Int64, Float32, BFloat16} {
			for _, inPlace := range []bool{false, true} {
				testAllReduce(t, comms, rng, dt, Sum, 5000, inPlace)
			}
		}
	})
}

// Over a lossy simulated link (1% of packets dropped) RC retransmission
// keeps the collectives exact.
func TestAllReduceIBLossy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loss := simlink.PortConfig{Send: []simlink.Impairment{{Action: simlink.Drop, Probability: 0.01}}}
		comms, network := ibCommsNet(t, 4, Options{Algo: AlgoRing}, loss)
		rng := rand.New(rand.NewPCG(3, 3))
		for range 5 {
			testAllReduce(t, comms, rng, Float32, Sum, 20000, false)
		}
		if st := network.Stats(); st.Egress.ImpairDrops == 0 {
			t.Errorf("no packet was dropped (%d sent): the test tests nothing", st.SentPackets)
		} else {
			t.Logf("%d of %d packets dropped", st.Egress.ImpairDrops, st.SentPackets)
		}
	})
}

// A rank that stops taking part makes the others fail within the timeout
// with the operation, its sequence number and the peer named; over RC QPs
// in virtual time.
func TestHungPeerIB(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		comms := ibComms(t, 3, Options{Algo: AlgoRing, Timeout: 2 * time.Second}, simlink.PortConfig{})
		buf := func() []byte { return make([]byte, 4*3000) }
		start := time.Now()
		r0 := comms[0].AllReduce(buf(), buf(), 3000, Float32, Sum)
		r1 := comms[1].AllReduce(buf(), buf(), 3000, Float32, Sum)
		for i, r := range []*Request{r0, r1} {
			err := r.Wait(t.Context())
			var oe *OpError
			if !errors.As(err, &oe) || oe.Seq != 1 || oe.Op != "AllReduce" {
				t.Fatalf("rank %d: %v", i, err)
			}
			if i == 0 && (oe.Peer != 2 || !errors.Is(err, ErrTimeout)) {
				t.Errorf("rank 0 waits for rank 2: %v", err)
			}
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("took %v", took)
		}
	})
}

// TestCommInitRankUDP is the whole path: GetUniqueID, a TCP bootstrap,
// goroce devices on loopback addresses speaking RoCEv2 over UDP, and
// collectives on them, all ranks in one process.
func TestCommInitRankUDP(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	comms := initComms(t, 3, 7, func(int) Options { return Options{Slots: 4, SlotSize: 16 << 10} })
	testCollectivesAndDestroy(t, comms, rand.New(rand.NewPCG(5, 5)))
}

// testCollectivesAndDestroy runs every collective of the matrix and an
// AllReduce in bfloat16 on comms, checking the results, then destroys them.
func testCollectivesAndDestroy(t *testing.T, comms []*Comm, rng *rand.Rand) {
	t.Helper()
	for _, mc := range matrix {
		t.Run(mc.name, func(t *testing.T) { mc.run(t, comms, rng, Float32, Sum, 50000, false) })
	}
	testAllReduce(t, comms, rng, BFloat16, Avg, 10, true)
	for _, c := range comms {
		if err := c.Destroy(); err != nil {
			t.Errorf("destroy: %v", err)
		}
	}
}

// A rank missing from the bootstrap makes CommInitRank fail on the others
// within the bootstrap timeout, naming it.
func TestCommInitMissingRank(t *testing.T) {
	const n = 3
	id, err := GetUniqueID(Options{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 { // rank 2 never comes
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := CommInitRank(t.Context(), n, id, r, Options{Addr: fmt.Sprintf("127.61.8.%d", 20+r),
				BootstrapTimeout: 300 * time.Millisecond})
			if c != nil {
				c.Abort()
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("ranks [2] of 3 did not show up")) {
			t.Errorf("rank %d: %v, want rank 2 named", r, err)
		}
	}
}

// named prefixes a test case's name to its fatal failures.
type named struct {
	testing.TB
	name string
}

func (n named) Fatalf(format string, args ...any) {
	n.TB.Helper()
	n.TB.Fatalf("%s: "+format, append([]any{n.name}, args...)...)
}
