package nccl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/mr/gpu"
)

// initComms runs CommInitRank for n ranks over loopback UDP, RNICs at
// 127.61.<net>.(20+rank) unless opts(r), rank r's options, names another.
func initComms(t testing.TB, n, net int, opts func(r int) Options) []*Comm {
	t.Helper()
	id, err := GetUniqueID(Options{})
	if err != nil {
		t.Fatal(err)
	}
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			o := opts(r)
			o.Addr = cmp.Or(o.Addr, fmt.Sprintf("127.61.%d.%d", net, 20+r))
			o.BootstrapTimeout, o.Timeout = 10*time.Second, 10*time.Second
			comms[r], errs[r] = CommInitRank(t.Context(), n, id, r, o)
		})
	}
	wg.Wait()
	mustAll(t, "CommInitRank", errs)
	t.Cleanup(func() {
		for _, c := range comms {
			c.Destroy()
		}
	})
	return comms
}

// CommSplit: 4 ranks; colors rank%2, except rank 3 which opts out; keys
// reverse the order. Ranks 2 and 0 form one communicator (in that order),
// rank 1 one of its own, and each runs an AllReduce on the parents' RNICs.
func TestCommSplit(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	const n = 4
	comms := initComms(t, n, 12, func(int) Options { return Options{} })
	subs := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			color := r % 2
			if r == 3 {
				color = SplitNoColor
			}
			subs[r], errs[r] = c.CommSplit(t.Context(), color, -r, Options{})
		})
	}
	wg.Wait()
	mustAll(t, "CommSplit", errs)
	defer func() {
		for _, s := range subs {
			if s != nil {
				s.Destroy()
			}
		}
	}()
	want := [n][2]int{{1, 2}, {0, 1}, {0, 2}, {-1, 0}} // new rank, size
	for r, s := range subs {
		if s == nil {
			if want[r][0] != -1 {
				t.Fatalf("rank %d: no communicator", r)
			}
			continue
		}
		if got := [2]int{s.Rank(), s.Size()}; got != want[r] {
			t.Errorf("rank %d: new rank/size %v, want %v", r, got, want[r])
		}
		if s.Device() != comms[r].Device() {
			t.Errorf("rank %d: the split communicator has its own RNIC, want the parent's", r)
		}
	}
	var active []*Comm
	for _, s := range subs {
		if s != nil {
			active = append(active, s)
		}
	}
	bufs := make([][]byte, len(active))
	mustAll(t, "AllReduce", onAll(t, active, func(i int, s *Comm) *Request {
		bufs[i] = make([]byte, 4)
		bufs[i][0] = byte(1 + s.Rank()) // int32 1 on the new rank 0, 2 on rank 1
		return s.AllReduce(bufs[i], bufs[i], 1, Int32, Sum)
	}))
	for i, s := range active {
		if want := byte(s.Size() * (s.Size() + 1) / 2); bufs[i][0] != want {
			t.Errorf("communicator of size %d, rank %d: sum %d, want %d", s.Size(), s.Rank(), bufs[i][0], want)
		}
	}
	if _, err := comms[0].CommSplit(t.Context(), -2, 0, Options{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("color -2: %v, want ErrInvalidArgument", err)
	}
}

// With Options.GPU and GPUDirect RDMA, CommInitRank puts the connection
// FIFOs in GPU memory (registered through peer memory); staged, they stay
// in host memory. Both give the same AllReduce, and the meter's bytes
// follow each path's formula.
func TestGDRFIFOInDeviceMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	const n, slots, slotSize, count = 2, 4, 16 << 10, 8192
	for i, peer := range []bool{true, false} {
		devs := make([]*gpu.Device, n)
		systems := make([]*gpu.System, n)
		nics := make([]gpu.NodeID, n)
		for r := range n {
			sys, dev, nic, err := gpu.Preset(gpu.PathPIX, 8<<20, gpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			devs[r], systems[r], nics[r] = dev, sys, nic
		}
		comms := initComms(t, n, 13+i, func(r int) Options {
			return Options{Slots: slots, SlotSize: slotSize,
				GPU: &GPU{Device: devs[r], NIC: nics[r], PeerMemory: peer}}
		})
		wantFIFO := int64(0)
		if peer {
			wantFIFO = 2 * slots * slotSize // the receive and the send FIFO of the one peer
		}
		ptrs := make([]gpu.Ptr, n)
		for r, c := range comms {
			free, total := devs[r].MemInfo()
			if used := total - free; used != wantFIFO {
				t.Errorf("peer memory %v rank %d: %d bytes of GPU memory in use after init, want %d", peer, r, used, wantFIFO)
			}
			if path, _, _ := c.GPUPath(1 - r); (path == PathGDR) != peer {
				t.Errorf("peer memory %v rank %d: path %v", peer, r, path)
			}
			in := make([]byte, count*4)
			for e := range count {
				in[4*e] = byte(r + 1)
			}
			ptrs[r] = toDevice(t, devs[r], in)
			systems[r].Meter().Reset()
		}
		mustAll(t, "AllReduceDevice", onAll(t, comms, func(r int, c *Comm) *Request {
			return c.AllReduceDevice(ptrs[r], ptrs[r], count, Int32, Sum)
		}))
		for r := range n {
			m := systems[r].Meter()
			// Ring of 2: each rank sends and receives half the buffer
			// twice (reduce-scatter, all-gather): 2 × N in all.
			moved := int64(2 * count * 4)
			p2p, copies := m.Flow(gpu.FlowNICGPU).Bytes, m.Flow(gpu.FlowGPUHost).Bytes
			if peer && (p2p != moved || copies != 0) || !peer && (p2p != 0 || copies != moved) {
				t.Errorf("peer memory %v rank %d: NIC<->GPU %d, GPU<->host %d bytes; want %d on the path", peer, r, p2p, copies, moved)
			}
			out := make([]byte, count*4)
			if err := gpu.CopyDtoH(out, ptrs[r]); err != nil {
				t.Fatal(err)
			}
			for e := range count {
				if out[4*e] != 3 {
					t.Fatalf("peer memory %v rank %d: element %d = %d, want 3", peer, r, e, out[4*e])
				}
			}
		}
	}
}

// A GPU that asks for GPUDirect RDMA on an RNIC opened without peer
// memory fails at init with the verbs error, not later.
func TestGDRFIFONeedsPeerMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	parent := initComms(t, 2, 15, func(int) Options { return Options{} })
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range parent {
		wg.Go(func() {
			_, dev, nic, err := gpu.Preset(gpu.PathPIX, 8<<20, gpu.Options{})
			if err != nil {
				errs[r] = err
				return
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var sub *Comm
			sub, errs[r] = c.CommSplit(ctx, 0, r, Options{GPU: &GPU{Device: dev, NIC: nic, PeerMemory: true}})
			if sub != nil {
				sub.Destroy()
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, mr.ErrDeviceMemory) {
			t.Errorf("rank %d: %v, want mr.ErrDeviceMemory", r, err)
		}
	}
}
