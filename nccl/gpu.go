package nccl

import (
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/mr/gpu"
	"github.com/goroce/goroce/nccl/transport"
)

// DefaultGDRLevel is NCCL_NET_GDR_LEVEL's default: GPUDirect RDMA is used
// when the GPU and the NIC share a PCIe switch, or several, but not when
// the path goes through a CPU root complex.
const DefaultGDRLevel = gpu.PathPXB

// GPU tells a communicator which simulated GPU holds this rank's device
// buffers and how its network connections reach that GPU.
type GPU struct {
	// Device is the GPU (cudaSetDevice).
	Device *gpu.Device
	// NIC is the network device of the rank's connections, a node of
	// Device's system.
	NIC gpu.NodeID
	// PeerMemory says GPUDirect RDMA is available: the NIC may register
	// device memory (nvidia_peermem loaded; the RNIC opened with
	// rnic.Config.PeerMemory).
	PeerMemory bool
	// GDRLevel is the farthest GPU–NIC path over which GPUDirect RDMA is
	// used: LOC, PIX, PXB, PHB or SYS. Empty: the communicator's
	// Options.GDRLevel (NCCL_NET_GDR_LEVEL), else DefaultGDRLevel.
	GDRLevel string
}

// NetPath is how a connection moves device buffers through the NIC.
type NetPath uint8

// Network paths for device buffers.
const (
	// PathStaged copies through pinned host bounce buffers: DtoH, RDMA
	// from host memory; RDMA into host memory, HtoD.
	PathStaged NetPath = iota
	// PathGDR lets the NIC read and write device memory directly
	// (GPUDirect RDMA).
	PathGDR
)

// String returns "GDR" or "staged".
func (p NetPath) String() string {
	if p == PathGDR {
		return "GDR"
	}
	return "staged"
}

// gpuRank is a rank's GPU as the communicator uses it.
type gpuRank struct {
	dev            *gpu.Device
	sys            *gpu.System
	nic, host      gpu.NodeID
	paths          []NetPath // by peer
	why            string
	net            *gpuTransport
	distance, gdrL gpu.PathType
}

// UseGPU attaches a GPU to the communicator so that the *Device
// collectives accept its buffers, and chooses, as NCCL does, how each peer
// connection moves them: GPUDirect RDMA if peer memory is available and the
// GPU–NIC distance is within the GDR level, otherwise staging through host
// memory. With NCCL_DEBUG=INFO it logs the choice and the reason for every
// peer. Call it once, before issuing device operations, from the goroutine
// that issues operations.
//
// UseGPU is for a communicator that exists already (NewComm). The
// connections' receive FIFOs were made before it, in host memory; to have
// them in GPU memory when GPUDirect RDMA is chosen, as NCCL does, give the
// GPU to CommInitRank (Options.GPU) instead.
func (c *Comm) UseGPU(g GPU) error {
	if c.gpu != nil {
		return fmt.Errorf("%w: UseGPU: %s already attached", ErrInvalidArgument, c.gpu.dev.Name())
	}
	r, err := newGPURank(g, c.opts.GDRLevel, c.rank, c.size, c.log)
	if err != nil {
		return err
	}
	c.attachGPU(r)
	return nil
}

// attachGPU makes r the communicator's GPU.
func (c *Comm) attachGPU(r *gpuRank) {
	r.net = &gpuTransport{Transport: c.exec.t, r: r}
	c.gpu = r
}

// newGPURank chooses the network path of device buffers for every peer of
// rank (of size), with GPUDirect RDMA up to g.GDRLevel, else level (the
// communicator's Options.GDRLevel), and logs the choice.
func newGPURank(g GPU, level string, rank, size int, log *zap.Logger) (*gpuRank, error) {
	if g.Device == nil {
		return nil, fmt.Errorf("%w: UseGPU: no device", ErrInvalidArgument)
	}
	sys := g.Device.System()
	src := "NCCL_NET_GDR_LEVEL"
	if g.GDRLevel != "" {
		level, src = g.GDRLevel, "GDRLevel"
	}
	gdrL := DefaultGDRLevel
	if strings.TrimSpace(level) != "" {
		var err error
		if gdrL, err = gpu.ParsePathType(level); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidArgument, src, err)
		}
	}
	dist, err := sys.PathType(g.Device.Node(), g.NIC)
	if err != nil {
		return nil, fmt.Errorf("%w: UseGPU: %v", ErrInvalidArgument, err)
	}
	host, err := sys.Host(g.Device.Node())
	if err != nil {
		return nil, fmt.Errorf("%w: UseGPU: %v", ErrInvalidArgument, err)
	}
	nicName, _, _ := sys.Node(g.NIC)
	path, why := PathStaged, ""
	switch {
	case !g.PeerMemory:
		why = "peer memory (GPUDirect RDMA) not enabled on the NIC"
	case dist > gdrL:
		why = fmt.Sprintf("%s-%s distance %v is beyond NCCL_NET_GDR_LEVEL %v", g.Device.Name(), nicName, dist, gdrL)
	default:
		path = PathGDR
		why = fmt.Sprintf("%s-%s distance %v is within NCCL_NET_GDR_LEVEL %v", g.Device.Name(), nicName, dist, gdrL)
	}
	r := &gpuRank{dev: g.Device, sys: sys, nic: g.NIC, host: host, paths: make([]NetPath, size),
		why: why, distance: dist, gdrL: gdrL}
	for p := range size {
		if p == rank {
			continue
		}
		r.paths[p] = path
		log.Info("NET/IB: peer connection path for device buffers", zap.Int("peer", p),
			zap.Stringer("path", path), zap.String("why", why),
			zap.String("gpu", g.Device.Name()), zap.String("nic", nicName))
	}
	return r, nil
}

// slotMemory is the transport's Config.SlotMemory for a rank with a GPU:
// the FIFOs of a GPUDirect RDMA connection live in device memory, where
// the NIC writes and reads them directly and the GPU copies them to and
// from the user's buffers without crossing PCIe (NCCL's GDR FIFO);
// those of a staged connection in host memory, the bounce buffers.
func (r *gpuRank) slotMemory(peer, n int) (mr.Memory, func() error, error) {
	if r.paths[peer] != PathGDR {
		return mr.HostMemory(make([]byte, n)), func() error { return nil }, nil
	}
	p, err := r.dev.Alloc(int64(n))
	if err != nil {
		return nil, nil, fmt.Errorf("GDR FIFO in %s memory: %w", r.dev.Name(), err)
	}
	m, err := r.dev.Memory(p)
	if err != nil {
		return nil, nil, errors.Join(err, r.dev.Free(p))
	}
	return m, func() error { return r.dev.Free(p) }, nil
}

// GPUPath returns the path the connection to peer uses for device buffers
// and why, once UseGPU has been called.
func (c *Comm) GPUPath(peer int) (NetPath, string, error) {
	if c.gpu == nil {
		return 0, "", fmt.Errorf("%w: no GPU attached (UseGPU)", ErrInvalidArgument)
	}
	if err := transport.CheckPeer(c.rank, c.size, peer); err != nil {
		return 0, "", fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return c.gpu.paths[peer], c.gpu.why, nil
}

// onGPU runs issue, one of the host-buffer collectives, on the device views
// of ptrs: the operation's transfers then go through the GPU's paths.
func (c *Comm) onGPU(name string, ptrs []gpu.Ptr, issue func(bufs [][]byte) *Request) *Request {
	if c.gpu == nil {
		return c.failed(name, fmt.Errorf("%w: %s on device buffers without a GPU (UseGPU)", ErrInvalidArgument, name))
	}
	bufs := make([][]byte, len(ptrs))
	for i, p := range ptrs {
		if p.IsNil() {
			continue
		}
		if p.Device() != c.gpu.dev {
			return c.failed(name, fmt.Errorf("%w: %s: buffer %v is not on %s", ErrInvalidArgument, name, p, c.gpu.dev.Name()))
		}
		m, err := c.gpu.dev.Memory(p)
		if err != nil {
			return c.failed(name, fmt.Errorf("%w: %s: %w", ErrInvalidArgument, name, err))
		}
		bufs[i] = m.Bytes()
	}
	c.issuing = c.gpu.net
	defer func() { c.issuing = nil }()
	return issue(bufs)
}

// AllReduceDevice is AllReduce on device buffers.
func (c *Comm) AllReduceDevice(send, recv gpu.Ptr, count int, dt DataType, op Op) *Request {
	return c.onGPU("AllReduce", []gpu.Ptr{send, recv}, func(b [][]byte) *Request {
		return c.AllReduce(b[0], b[1], count, dt, op)
	})
}

// BroadcastDevice is Broadcast on device buffers; send may be nil off the root.
func (c *Comm) BroadcastDevice(send, recv gpu.Ptr, count int, dt DataType, root int) *Request {
	return c.onGPU("Broadcast", []gpu.Ptr{send, recv}, func(b [][]byte) *Request {
		return c.Broadcast(b[0], b[1], count, dt, root)
	})
}

// ReduceDevice is Reduce on device buffers; recv may be nil off the root.
func (c *Comm) ReduceDevice(send, recv gpu.Ptr, count int, dt DataType, op Op, root int) *Request {
	return c.onGPU("Reduce", []gpu.Ptr{send, recv}, func(b [][]byte) *Request {
		return c.Reduce(b[0], b[1], count, dt, op, root)
	})
}

// AllGatherDevice is AllGather on device buffers.
func (c *Comm) AllGatherDevice(send, recv gpu.Ptr, sendcount int, dt DataType) *Request {
	return c.onGPU("AllGather", []gpu.Ptr{send, recv}, func(b [][]byte) *Request {
		return c.AllGather(b[0], b[1], sendcount, dt)
	})
}

// ReduceScatterDevice is ReduceScatter on device buffers.
func (c *Comm) ReduceScatterDevice(send, recv gpu.Ptr, recvcount int, dt DataType, op Op) *Request {
	return c.onGPU("ReduceScatter", []gpu.Ptr{send, recv}, func(b [][]byte) *Request {
		return c.ReduceScatter(b[0], b[1], recvcount, dt, op)
	})
}

// AlltoAllDevice is AlltoAll on device buffers.
func (c *Comm) AlltoAllDevice(send, recv gpu.Ptr, count int, dt DataType) *Request {
	return c.onGPU("AlltoAll", []gpu.Ptr{send, recv}, func(b [][]byte) *Request {
		return c.AlltoAll(b[0], b[1], count, dt)
	})
}

// GatherDevice is Gather on device buffers; recv may be nil off the root.
func (c *Comm) GatherDevice(send, recv gpu.Ptr, sendcount int, dt DataType, root int) *Request {
	return c.onGPU("Gather", []gpu.Ptr{send, recv}, func(b [][]byte) *Request {
		return c.Gather(b[0], b[1], sendcount, dt, root)
	})
}

// ScatterDevice is Scatter on device buffers; send may be nil off the root.
func (c *Comm) ScatterDevice(send, recv gpu.Ptr, recvcount int, dt DataType, root int) *Request {
	return c.onGPU("Scatter", []gpu.Ptr{send, recv}, func(b [][]byte) *Request {
		return c.Scatter(b[0], b[1], recvcount, dt, root)
	})
}
