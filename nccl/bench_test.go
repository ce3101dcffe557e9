package nccl

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkAllReduceMem measures the library above the transport: the
// schedules, the executor and the kernels, 4 ranks in memory.
func BenchmarkAllReduceMem(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		for _, algo := range []Algo{AlgoRing, AlgoRecursiveDoubling} {
			b.Run(fmt.Sprintf("%v/%dKiB", algo, size>>10), func(b *testing.B) {
				comms := memComms(b, 4, Options{Algo: algo})
				bufs := make([][]byte, 4)
				for r := range bufs {
					bufs[r] = make([]byte, size)
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				for b.Loop() {
					mustAll(b, "AllReduce", onAll(b, comms, func(r int, c *Comm) *Request {
						return c.AllReduce(bufs[r], bufs[r], size/4, Float32, Sum)
					}))
				}
			})
		}
	}
}

// BenchmarkAllReduceUDP is the whole stack on loopback: 2 ranks, RoCEv2
// over UDP. busbw for AllReduce is algbw × 2(n-1)/n = algbw here.
func BenchmarkAllReduceUDP(b *testing.B) {
	id, err := GetUniqueID(Options{})
	if err != nil {
		b.Fatal(err)
	}
	const n = 2
	comms := make([]*Comm, n)
	errs := make(chan error, n)
	for r := range n {
		go func() {
			c, err := CommInitRank(b.Context(), n, id, r, Options{Addr: fmt.Sprintf("127.61.9.%d", 20+r),
				BootstrapTimeout: 10 * time.Second, Timeout: 30 * time.Second})
			comms[r] = c
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, c := range comms {
			c.Destroy()
		}
	}()
	const size = 4 << 20
	bufs := [][]byte{make([]byte, size), make([]byte, size)}
	b.SetBytes(size)
	for b.Loop() {
		mustAll(b, "AllReduce", onAll(b, comms, func(r int, c *Comm) *Request {
			return c.AllReduce(bufs[r], bufs[r], size/4, Float32, Sum)
		}))
	}
}

// BenchmarkAllReduceBlocking8B is the pattern of the C API (and so of
// Python and torch), whose calls return when the operation is done: each
// of 2 ranks issues an 8-byte AllReduce and waits for it, over and over,
// with a context that is never done. Over RoCEv2 on loopback UDP, and
// in memory, where the library's own per-call cost is all there is.
func BenchmarkAllReduceBlocking8B(b *testing.B) {
	for _, net := range []string{"mem", "udp"} {
		b.Run(net, func(b *testing.B) {
			var comms []*Comm
			if net == "mem" {
				comms = memComms(b, 2, Options{})
			} else {
				comms = initComms(b, 2, 0, func(r int) Options { return Options{Addr: fmt.Sprintf("127.142.9.%d", 20+r)} })
			}
			var wg sync.WaitGroup
			errs := make([]error, len(comms))
			b.ResetTimer()
			for r, c := range comms {
				wg.Go(func() {
					buf := make([]byte, 8)
					for range b.N {
						if err := c.AllReduce(buf, buf, 2, Float32, Sum).Wait(context.Background()); err != nil {
							errs[r] = err
							return
						}
					}
				})
			}
			wg.Wait()
			mustAll(b, "AllReduce", errs)
		})
	}
}
