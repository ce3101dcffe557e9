package nccl

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/nccl/transport"
)

// A rank that never calls the collective makes its neighbours fail after
// Options.Timeout with an error naming the operation, its sequence number
// and the silent peer; nobody hangs. Virtual time.
func TestHungPeerTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		comms := memComms(t, n, Options{Timeout: 3 * time.Second, Algo: AlgoRing})
		buf := func() []byte { return make([]byte, 4*n*10) }
		// One AllReduce everybody joins, then one rank 2 skips.
		mustAll(t, "first", onAll(t, comms, func(r int, c *Comm) *Request { return c.AllReduce(buf(), buf(), 10*n, Float32, Sum) }))
		start := time.Now()
		reqs := map[int]*Request{}
		for r, c := range comms {
			if r != 2 {
				reqs[r] = c.AllReduce(buf(), buf(), 10*n, Float32, Sum)
			}
		}
		for r, q := range reqs {
			err := q.Wait(t.Context())
			var oe *OpError
			if !errors.As(err, &oe) || oe.Op != "AllReduce" || oe.Seq != 2 {
				t.Fatalf("rank %d: %v, want an AllReduce #2 OpError", r, err)
			}
			if r == 3 && (oe.Peer != 2 || !errors.Is(err, ErrTimeout)) {
				t.Errorf("rank 3 (waits for 2): %v, want a timeout naming peer 2", err)
			}
		}
		if took := time.Since(start); took < 3*time.Second || took > 4*n*time.Second {
			t.Errorf("failed after %v, want about the 3 s timeout", took)
		}
		// The communicator is broken now: the next call fails at once.
		if err := comms[0].AllReduce(buf(), buf(), 1, Float32, Sum).Wait(t.Context()); !errors.Is(err, ErrBroken) {
			t.Errorf("after a failure: %v, want ErrBroken", err)
		}
	})
}

// A rank whose transport dies makes the ranks receiving from it fail with
// the peer named, long before the timeout.
func TestDeadPeerNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3
		f := transport.NewMemFabric(n)
		var comms []*Comm
		for r := range n {
			c, err := NewComm(f.Rank(r), Options{Timeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Abort()
			comms = append(comms, c)
		}
		f.Rank(1).Close() // rank 1 dies before sending anything
		req := comms[2].Broadcast(make([]byte, 8), make([]byte, 8), 2, Int32, 1)
		err := req.Wait(t.Context())
		var oe *OpError
		if !errors.As(err, &oe) || oe.Peer != 1 || !errors.Is(err, transport.ErrPeerGone) {
			t.Fatalf("%v, want an OpError naming peer 1 with ErrPeerGone", err)
		}
	})
}

// Abort fails the running and the queued operations at once.
func TestAbortUnblocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		comms := memComms(t, 2, Options{Timeout: time.Hour})
		running := comms[0].AllReduce(make([]byte, 4), make([]byte, 4), 1, Int32, Sum)
		queued := comms[0].AllGather(make([]byte, 4), make([]byte, 8), 1, Int32)
		synctest.Wait()
		if err := comms[0].Abort(); err != nil {
			t.Fatal(err)
		}
		for _, q := range []*Request{running, queued} {
			if err := q.Wait(t.Context()); !errors.Is(err, ErrAborted) {
				t.Errorf("%s: %v, want ErrAborted", q.op, err)
			}
		}
		if err := comms[0].Broadcast(nil, nil, 0, Int32, 0).Wait(t.Context()); !errors.Is(err, ErrAborted) {
			t.Errorf("after Abort: %v", err)
		}
	})
}

func TestDestroyDrains(t *testing.T) {
	comms := memComms(t, 2, Options{})
	outs := [][]byte{make([]byte, 4), make([]byte, 4)}
	var reqs []*Request
	for r, c := range comms {
		in := []byte{byte(r + 1), 0, 0, 0}
		reqs = append(reqs, c.AllReduce(in, outs[r], 1, Int32, Sum))
	}
	for _, c := range comms {
		go c.Destroy()
	}
	for r, q := range reqs {
		if err := q.Wait(t.Context()); err != nil || outs[r][0] != 3 {
			t.Fatalf("rank %d: %v, out %v", r, err, outs[r])
		}
	}
}
