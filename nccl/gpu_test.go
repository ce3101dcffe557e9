package nccl

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/goroce/goroce/mr/gpu"
	"github.com/goroce/goroce/nccl/transport"
)

// countingTransport counts the bytes this rank posts to send and to
// receive, independently of the GPU metering under test.
type countingTransport struct {
	transport.Transport
	sent, rcvd int64
}

func (c *countingTransport) Isend(peer int, data []byte) (transport.Request, error) {
	c.sent += int64(len(data))
	return c.Transport.Isend(peer, data)
}

func (c *countingTransport) Irecv(peer int, buf []byte) (transport.Request, error) {
	c.rcvd += int64(len(buf))
	return c.Transport.Irecv(peer, buf)
}

// gpuRig is n ranks, each with its own system (GPU and NIC under one PCIe
// switch, PIX), over an in-memory fabric.
type gpuRig struct {
	comms  []*Comm
	sys    []*gpu.System
	devs   []*gpu.Device
	counts []*countingTransport
}

func newGPURig(t *testing.T, n int, peerMemory bool, opts Options) *gpuRig {
	t.Helper()
	f := transport.NewMemFabric(n)
	g := &gpuRig{}
	for r := range n {
		sys, dev, nic, err := gpu.Preset(gpu.PathPIX, 1<<24, gpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ct := &countingTransport{Transport: f.Rank(r)}
		c, err := NewComm(ct, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Abort() })
		if err := c.UseGPU(GPU{Device: dev, NIC: nic, PeerMemory: peerMemory, GDRLevel: "PXB"}); err != nil {
			t.Fatal(err)
		}
		g.comms = append(g.comms, c)
		g.sys = append(g.sys, sys)
		g.devs = append(g.devs, dev)
		g.counts = append(g.counts, ct)
	}
	return g
}

// toDevice allocates a device buffer holding b (nil for an empty b).
func toDevice(t *testing.T, d *gpu.Device, b []byte) gpu.Ptr {
	t.Helper()
	if len(b) == 0 {
		return gpu.Ptr{}
	}
	p, err := d.Alloc(int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := gpu.CopyHtoD(p, b); err != nil {
		t.Fatal(err)
	}
	return p
}

// A collective case: buffer sizes for rank r of n (bytes), and the host and
// device calls.
type gpuCase struct {
	name    string
	in, out func(r, n int) int // elements
	host    func(c *Comm, s, d []byte) *Request
	device  func(c *Comm, s, d gpu.Ptr) *Request
}

const gpuCount = 96 // elements per block, divisible by 2 and 3

func gpuCases() []gpuCase {
	dt := Float32
	k := gpuCount
	all := func(r, n int) int { return k }
	blocks := func(r, n int) int { return n * k }
	rootOnly := func(f func(r, n int) int) func(r, n int) int {
		return func(r, n int) int {
			if r == 1 {
				return f(r, n)
			}
			return 0
		}
	}
	return []gpuCase{
		{"AllReduce", all, all,
			func(c *Comm, s, d []byte) *Request { return c.AllReduce(s, d, k, dt, Sum) },
			func(c *Comm, s, d gpu.Ptr) *Request { return c.AllReduceDevice(s, d, k, dt, Sum) }},
		{"Broadcast", rootOnly(all), all,
			func(c *Comm, s, d []byte) *Request { return c.Broadcast(s, d, k, dt, 1) },
			func(c *Comm, s, d gpu.Ptr) *Request { return c.BroadcastDevice(s, d, k, dt, 1) }},
		{"Reduce", all, rootOnly(all),
			func(c *Comm, s, d []byte) *Request { return c.Reduce(s, d, k, dt, Max, 1) },
			func(c *Comm, s, d gpu.Ptr) *Request { return c.ReduceDevice(s, d, k, dt, Max, 1) }},
		{"AllGather", all, blocks,
			func(c *Comm, s, d []byte) *Request { return c.AllGather(s, d, k, dt) },
			func(c *Comm, s, d gpu.Ptr) *Request { return c.AllGatherDevice(s, d, k, dt) }},
		{"ReduceScatter", blocks, all,
			func(c *Comm, s, d []byte) *Request { return c.ReduceScatter(s, d, k, dt, Sum) },
			func(c *Comm, s, d gpu.Ptr) *Request { return c.ReduceScatterDevice(s, d, k, dt, Sum) }},
		{"AlltoAll", blocks, blocks,
			func(c *Comm, s, d []byte) *Request { return c.AlltoAll(s, d, k, dt) },
			func(c *Comm, s, d gpu.Ptr) *Request { return c.AlltoAllDevice(s, d, k, dt) }},
		{"Gather", all, rootOnly(blocks),
			func(c *Comm, s, d []byte) *Request { return c.Gather(s, d, k, dt, 1) },
			func(c *Comm, s, d gpu.Ptr) *Request { return c.GatherDevice(s, d, k, dt, 1) }},
		{"Scatter", rootOnly(blocks), all,
			func(c *Comm, s, d []byte) *Request { return c.Scatter(s, d, k, dt, 1) },
			func(c *Comm, s, d gpu.Ptr) *Request { return c.ScatterDevice(s, d, k, dt, 1) }},
	}
}

// Every collective on device buffers, with GPUDirect RDMA on and off, gives
// the bytes the same collective gives on host buffers, and the PCIe
// counters of each rank match its path's formula for the S bytes it sent
// and R bytes it received:
//
//	GDR:    NIC<->GPU S+R; GPU link up S, down R; switch uplink 0;
//	        GPU<->host and NIC<->host 0.
//	staged: GPU<->host S+R and NIC<->host S+R; GPU link up S, down R;
//	        switch uplink up S+R and down S+R (each byte crosses the host
//	        bridge twice at each end: copy, then NIC DMA); NIC<->GPU 0.
func TestDeviceCollectives(t *testing.T) {
	const n = 3
	esz := Float32.Size()
	for _, gdr := range []bool{true, false} {
		for _, tc := range gpuCases() {
			name := tc.name + "/staged"
			if gdr {
				name = tc.name + "/GDR"
			}
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
				ins := make([][]byte, n)
				for r := range n {
					ins[r] = exactValues(rng, Float32, Sum, tc.in(r, n))
				}
				// Host reference.
				hostComms := memComms(t, n, Options{})
				hostOut := make([][]byte, n)
				mustAll(t, "host", onAll(t, hostComms, func(r int, c *Comm) *Request {
					hostOut[r] = make([]byte, tc.out(r, n)*esz)
					return tc.host(c, bytes.Clone(ins[r]), hostOut[r])
				}))

				rig := newGPURig(t, n, gdr, Options{})
				outs := make([]gpu.Ptr, n)
				ptrs := make([]gpu.Ptr, n)
				for r := range n {
					ptrs[r] = toDevice(t, rig.devs[r], ins[r])
					outs[r] = toDevice(t, rig.devs[r], make([]byte, tc.out(r, n)*esz))
					rig.sys[r].Meter().Reset()
				}
				mustAll(t, "device", onAll(t, rig.comms, func(r int, c *Comm) *Request {
					return tc.device(c, ptrs[r], outs[r])
				}))
				for r := range n {
					checkGPUCounters(t, r, rig, gdr)
					got := make([]byte, len(hostOut[r]))
					if len(got) > 0 {
						if err := gpu.CopyDtoH(got, outs[r]); err != nil {
							t.Fatal(err)
						}
					}
					if !bytes.Equal(got, hostOut[r]) {
						t.Errorf("rank %d: device result differs from host result", r)
					}
				}
			})
		}
	}
}

func checkGPUCounters(t *testing.T, r int, rig *gpuRig, gdr bool) {
	t.Helper()
	m := rig.sys[r].Meter()
	s, rc := rig.counts[r].sent, rig.counts[r].rcvd
	sw, _ := rig.sys[r].Lookup("SW0")
	gpuLink, uplink := m.Link(rig.devs[r].Node()), m.Link(sw)
	flow := func(f gpu.Flow) int64 { return m.Flow(f).Bytes }
	want := [5]int64{s + rc, 0, 0, 0, 0} // NIC<->GPU, GPU<->host, NIC<->host, uplink up, uplink down
	if !gdr {
		want = [5]int64{0, s + rc, s + rc, s + rc, s + rc}
	}
	got := [5]int64{flow(gpu.FlowNICGPU), flow(gpu.FlowGPUHost), flow(gpu.FlowNICHost), uplink.Up, uplink.Down}
	if got != want || gpuLink.Up != s || gpuLink.Down != rc {
		t.Errorf("rank %d (S=%d R=%d): NIC<->GPU, GPU<->host, NIC<->host, uplink up/down = %v, want %v; GPU link up %d down %d",
			r, s, rc, got, want, gpuLink.Up, gpuLink.Down)
	}
	if s+rc == 0 && r != 1 {
		t.Errorf("rank %d moved nothing", r)
	}
}

// The ring AllReduce of N bytes over n ranks sends and receives
// 2(n-1)/n × N bytes per rank: with GDR that is 2 × 2(n-1)/n × N bytes
// between NIC and GPU, and staged the same again between GPU and host.
func TestDeviceAllReduceRingFormula(t *testing.T) {
	const n, count = 4, 1024
	N := int64(count * Float32.Size())
	perDir := 2 * (n - 1) * N / n
	for _, gdr := range []bool{true, false} {
		rig := newGPURig(t, n, gdr, Options{Algo: AlgoRing})
		ptrs := make([]gpu.Ptr, n)
		for r := range n {
			ptrs[r] = toDevice(t, rig.devs[r], make([]byte, N))
			rig.sys[r].Meter().Reset()
		}
		mustAll(t, "AllReduce", onAll(t, rig.comms, func(r int, c *Comm) *Request {
			return c.AllReduceDevice(ptrs[r], ptrs[r], count, Float32, Sum)
		}))
		for r := range n {
			m := rig.sys[r].Meter()
			p2p, copies := m.Flow(gpu.FlowNICGPU).Bytes, m.Flow(gpu.FlowGPUHost).Bytes
			if gdr && (p2p != 2*perDir || copies != 0) || !gdr && (p2p != 0 || copies != 2*perDir) {
				t.Errorf("GDR %v rank %d: NIC<->GPU %d, GPU<->host %d; per direction %d", gdr, r, p2p, copies, perDir)
			}
		}
	}
}

// The path follows NCCL's rule: GDR only with peer memory and a GPU-NIC
// distance within NCCL_NET_GDR_LEVEL (default PXB); INFO logs say which
// and why for every peer.
func TestGPUPathChoice(t *testing.T) {
	cases := []struct {
		layout gpu.PathType
		peer   bool
		level  string // GPU.GDRLevel
		env    string // Options.GDRLevel, NCCL_NET_GDR_LEVEL
		want   NetPath
		why    string
	}{
		{gpu.PathPIX, true, "", "", PathGDR, "PIX is within NCCL_NET_GDR_LEVEL PXB"},
		{gpu.PathPXB, true, "", "", PathGDR, "PXB is within NCCL_NET_GDR_LEVEL PXB"},
		{gpu.PathPHB, true, "", "", PathStaged, "PHB is beyond NCCL_NET_GDR_LEVEL PXB"},
		{gpu.PathSYS, true, "", "", PathStaged, "SYS is beyond"},
		{gpu.PathPHB, true, "", "PHB", PathGDR, "PHB is within NCCL_NET_GDR_LEVEL PHB"},
		{gpu.PathSYS, true, "", "sys", PathGDR, "within NCCL_NET_GDR_LEVEL SYS"},
		{gpu.PathPIX, true, "", "LOC", PathStaged, "PIX is beyond NCCL_NET_GDR_LEVEL LOC"},
		{gpu.PathPIX, true, "LOC", "SYS", PathStaged, "beyond NCCL_NET_GDR_LEVEL LOC"},
		{gpu.PathPIX, false, "", "", PathStaged, "peer memory (GPUDirect RDMA) not enabled"},
	}
	for _, tc := range cases {
		core, logs := observer.New(zapcore.InfoLevel)
		comms := memComms(t, 2, Options{Logger: zap.New(core), GDRLevel: tc.env})
		_, dev, nic, err := gpu.Preset(tc.layout, 1<<20, gpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := comms[0].UseGPU(GPU{Device: dev, NIC: nic, PeerMemory: tc.peer, GDRLevel: tc.level}); err != nil {
			t.Fatal(err)
		}
		path, why, err := comms[0].GPUPath(1)
		if err != nil || path != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%v peer memory %v level %q env %q: %v (%q), %v; want %v (%q)",
				tc.layout, tc.peer, tc.level, tc.env, path, why, err, tc.want, tc.why)
		}
		entries := logs.FilterMessage("NET/IB: peer connection path for device buffers").All()
		if len(entries) != 1 || entries[0].ContextMap()["path"] != tc.want.String() ||
			entries[0].ContextMap()["peer"] != int64(1) {
			t.Errorf("%v: INFO log %v", tc.layout, entries)
		}
	}
}

func TestDeviceErrors(t *testing.T) {
	comms := memComms(t, 2, Options{GDRLevel: "NVL"})
	_, dev, nic, _ := gpu.Preset(gpu.PathPIX, 1<<20, gpu.Options{})
	p, _ := dev.Alloc(64)
	if err := comms[0].AllReduceDevice(p, p, 16, Float32, Sum).Err(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("device op without UseGPU: %v", err)
	}
	if err := comms[0].UseGPU(GPU{Device: dev, NIC: nic}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Options.GDRLevel NVL: %v", err)
	}
	if err := comms[0].UseGPU(GPU{Device: dev, NIC: nic, GDRLevel: "PXB"}); err != nil {
		t.Fatal(err)
	}
	if err := comms[0].UseGPU(GPU{Device: dev, NIC: nic, GDRLevel: "PXB"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("UseGPU twice: %v", err)
	}
	_, other, _, _ := gpu.Preset(gpu.PathPIX, 1<<20, gpu.Options{})
	q, _ := other.Alloc(64)
	if err := comms[0].AllReduceDevice(q, q, 16, Float32, Sum).Err(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("buffer of another GPU: %v", err)
	}
	dev.Free(p)
	if err := comms[0].AllReduceDevice(p, p, 16, Float32, Sum).Err(); !errors.Is(err, ErrInvalidArgument) || !errors.Is(err, gpu.ErrUseAfterFree) {
		t.Errorf("freed buffer: %v", err)
	}
	small, _ := dev.Alloc(8)
	if err := comms[0].AllReduceDevice(small, small, 16, Float32, Sum).Err(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("buffer too small: %v", err)
	}
}
