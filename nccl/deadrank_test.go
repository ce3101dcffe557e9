package nccl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/rnic/simlink"
)

// linkBoards connects the communicators' notice boards as the bootstrap
// connections do after CommInitRank: a notice one rank reports reaches all
// the others, except that a killed rank says nothing any more.
func linkBoards(comms []*Comm, killed func(r int) bool) {
	for r, c := range comms {
		c.board.send = func(n notice) {
			if killed(r) {
				return
			}
			for q, o := range comms {
				if q != r {
					o.board.record(n)
				}
			}
		}
	}
}

// killed is a set of ranks, safe for concurrent use.
type killed struct {
	mu    sync.Mutex
	ranks map[int]bool
}

func (k *killed) add(r int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ranks == nil {
		k.ranks = map[int]bool{}
	}
	k.ranks[r] = true
}

func (k *killed) has(r int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ranks[r]
}

// checkSurvivors checks that every rank but victim failed with an OpError
// whose Peer and message name the victim.
func checkSurvivors(t *testing.T, what string, errs []error, victim int) {
	t.Helper()
	for r, err := range errs {
		if r == victim {
			continue
		}
		var oe *OpError
		if !errors.As(err, &oe) {
			t.Errorf("%s: rank %d: %v, want an OpError", what, r, err)
			continue
		}
		if oe.Peer != victim || !strings.Contains(err.Error(), fmt.Sprintf("peer %d: ", victim)) {
			t.Errorf("%s: rank %d names peer %d, want the dead rank %d: %v", what, r, oe.Peer, victim, err)
		}
		if strings.Count(err.Error(), "nccl:") != 1 {
			t.Errorf("%s: rank %d: %q: want one \"nccl:\" prefix", what, r, err)
		}
	}
}

// Four ranks on the in-memory fabric run ring AllReduces; one rank dies
// (its transport closes) before the k-th. Its ring neighbours see the
// broken connection; the rank two hops away only times out waiting for a
// live neighbour, and must still name the dead rank, from a notice.
// Every victim, several kill points; virtual time.
func TestDeadRankNamedMem(t *testing.T) {
	const n, timeout = 4, 2 * time.Second
	for victim := range n {
		for k := range 3 {
			synctest.Test(t, func(t *testing.T) {
				what := fmt.Sprintf("rank %d killed before op %d", victim, k)
				f := transport.NewMemFabric(n)
				comms := make([]*Comm, n)
				for r := range n {
					c, err := NewComm(f.Rank(r), Options{Timeout: timeout, Algo: AlgoRing})
					if err != nil {
						t.Fatal(err)
					}
					defer c.Abort()
					comms[r] = c
				}
				var dead killed
				linkBoards(comms, dead.has)
				buf := func() []byte { return make([]byte, 4*n*16) }
				for range k {
					mustAll(t, what, onAll(t, comms, func(r int, c *Comm) *Request { return c.AllReduce(buf(), buf(), 16*n, Float32, Sum) }))
				}
				dead.add(victim)
				f.Rank(victim).Close()
				start := time.Now()
				reqs := make([]*Request, n)
				for r, c := range comms {
					if r != victim {
						reqs[r] = c.AllReduce(buf(), buf(), 16*n, Float32, Sum)
					}
				}
				errs := make([]error, n)
				for r, q := range reqs {
					if q != nil {
						errs[r] = q.Wait(t.Context())
					}
				}
				checkSurvivors(t, what, errs, victim)
				if t.Failed() {
					t.Log(errs)
				}
				// A rank that timed out may wait one more Timeout for notices.
				if took := time.Since(start); took > 2*timeout {
					t.Errorf("%s: survivors took %v, bound %v", what, took, 2*timeout)
				}
				for r, err := range errs {
					var oe *OpError
					if errors.As(err, &oe) && oe.Seq != uint64(k+1) {
						t.Errorf("%s: rank %d: Seq %d, want %d", what, r, oe.Seq, k+1)
					}
				}
			})
		}
	}
}

// With nobody to report a death (every survivor only times out), the
// error says the rank blamed stalled and does not claim it is dead; the
// rank whose neighbour is stuck learns the real culprit from the first.
func TestStalledRankNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, timeout = 3, time.Second
		comms := memComms(t, n, Options{Timeout: timeout})
		linkBoards(comms, func(int) bool { return false })
		buf := make([]byte, 4)
		// A chain: 0 waits for 2, which waits for 1, which never sends.
		r0 := comms[0].Recv(buf, 1, Int32, 2)
		r2 := comms[2].Recv(make([]byte, 4), 1, Int32, 1)
		synctest.Wait()
		for r, q := range map[int]*Request{0: r0, 2: r2} {
			err := q.Wait(t.Context())
			var oe *OpError
			if !errors.As(err, &oe) || oe.Peer != 1 || !errors.Is(err, ErrTimeout) || errors.Is(err, ErrRankDead) ||
				!strings.Contains(err.Error(), "stalled") || strings.Contains(err.Error(), "1 dead") {
				t.Errorf("rank %d: %v, want a timeout naming rank 1 as stalled", r, err)
			}
		}
	})
}

// Three ranks over goroce RC QPs on a simulated network run a mix of
// collectives; one rank's device closes at some virtual time into the
// loop, in the middle of whatever collective is running. Every survivor
// fails within the bound naming the dead rank, whether its own QP to it
// failed (retry exceeded), it timed out on a live peer, or it waited for
// data that never came.
func TestDeadRankNamedIB(t *testing.T) {
	const n, timeout = 3, time.Second
	for victim := range n {
		for _, delay := range []time.Duration{0, 200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond} {
			synctest.Test(t, func(t *testing.T) {
				what := fmt.Sprintf("rank %d killed after %v", victim, delay)
				comms, _, devs := ibCommsDevs(t, n, Options{Timeout: timeout, SliceBytes: 4096}, simlink.PortConfig{})
				var dead killed
				linkBoards(comms, dead.has)
				const count = 6000
				errs := make([]error, n)
				var wg sync.WaitGroup
				for r, c := range comms {
					wg.Go(func() {
						send, recv := make([]byte, 4*count*n), make([]byte, 4*count*n)
						for i := 0; i < 200000; i++ { // until the kill fails an operation
							var q *Request
							switch i % 4 {
							case 0:
								q = c.AllReduce(send[:4*count], recv[:4*count], count, Float32, Sum)
							case 1:
								q = c.Broadcast(send[:4*count], recv[:4*count], count, Float32, i%n)
							case 2:
								q = c.AllGather(send[:4*count], recv, count, Float32)
							case 3:
								q = c.Reduce(send[:4*count], recv[:4*count], count, Float32, Sum, i%n)
							}
							if errs[r] = q.Wait(context.Background()); errs[r] != nil {
								return
							}
						}
					})
				}
				time.Sleep(delay) // the kill point, in virtual time; the collectives run meanwhile
				dead.add(victim)
				devs[victim].Close()
				comms[victim].Abort()
				killedAt := time.Now()
				wg.Wait()
				checkSurvivors(t, what, errs, victim)
				// Retry exceeded takes about (3+1) × 4.2 ms here; a timeout
				// may wait one more Timeout for notices.
				if took := time.Since(killedAt); took > 2*timeout+time.Second {
					t.Errorf("%s: survivors took %v", what, took)
				}
			})
		}
	}
}

// #N counts the operations in the order the stream runs them: a rejected
// call gets none, and a group's fused sends and receives are numbered at
// GroupEnd, after the group's collectives.
func TestSeqNumbering(t *testing.T) {
	comms := memComms(t, 2, Options{})
	bad := comms[0].AllReduce(nil, nil, 4, Float32, Sum)
	var oe *OpError
	if err := bad.Wait(t.Context()); !errors.As(err, &oe) || oe.Seq != 0 || bad.Seq() != 0 ||
		!strings.Contains(err.Error(), "AllReduce (not issued) on rank 0: invalid argument") {
		t.Errorf("rejected call: %v (seq %d), want Seq 0 and one nccl: prefix", err, bad.Seq())
	}
	reqs := make([][2]*Request, 2)
	for r, c := range comms {
		c.GroupStart()
		p2p := c.Send(make([]byte, 4), 1, Int32, 1-r)
		c.Recv(make([]byte, 4), 1, Int32, 1-r)
		coll := c.AllReduce(make([]byte, 4), make([]byte, 4), 1, Int32, Sum)
		if p2p.Seq() != 0 {
			t.Errorf("rank %d: numbered %d before GroupEnd", r, p2p.Seq())
		}
		if err := c.GroupEnd(); err != nil {
			t.Fatal(err)
		}
		reqs[r] = [2]*Request{coll, p2p}
	}
	for r, rs := range reqs {
		for i, q := range rs {
			if err := q.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if q.Seq() != uint64(i+1) {
				t.Errorf("rank %d: %s is #%d, want #%d", r, q.op, q.Seq(), i+1)
			}
		}
	}
}
