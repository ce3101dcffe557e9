package gpu

import (
	"sync"
	"time"
)

// Flow is the kind of a transfer, by the kinds of its two ends.
type Flow uint8

// Flows.
const (
	FlowGPUHost Flow = iota // a copy between device and host memory (HtoD, DtoH)
	FlowNICHost             // the NIC reading or writing host memory
	FlowNICGPU              // the NIC reading or writing device memory: GPUDirect RDMA, peer to peer
	FlowGPUGPU              // a copy between two GPUs (DtoD across devices)
	FlowOther               // anything else (host to host across sockets, NIC to NIC)
	numFlows
)

// String returns "GPU<->host", "NIC<->host", "NIC<->GPU", "GPU<->GPU" or "other".
func (f Flow) String() string {
	return [...]string{"GPU<->host", "NIC<->host", "NIC<->GPU", "GPU<->GPU", "other"}[f]
}

func flowOf(a, b NodeKind) Flow {
	if a > b {
		a, b = b, a
	}
	switch {
	case a == KindCPU && b == KindGPU:
		return FlowGPUHost
	case a == KindCPU && b == KindNIC:
		return FlowNICHost
	case a == KindGPU && b == KindNIC:
		return FlowNICGPU
	case a == KindGPU && b == KindGPU:
		return FlowGPUGPU
	}
	return FlowOther
}

// LinkStats is the traffic over the link above one node.
type LinkStats struct {
	Node     NodeID
	Name     string // the node below the link
	Link     Link
	Up, Down int64 // bytes toward the root and away from it
}

// FlowStats is the traffic of one Flow.
type FlowStats struct {
	Bytes     int64         // bytes moved
	Transfers int64         // transfers (copies, NIC reads or writes) counted
	Time      time.Duration // modelled time of those transfers, summed
}

// Meter counts the bytes that cross each simulated PCIe link and each
// Flow, and the modelled time of every transfer. Safe for concurrent use.
type Meter struct {
	sys *System

	mu    sync.Mutex
	up    []int64 // by node: bytes over the link above it, upward
	down  []int64
	flows [numFlows]FlowStats
}

func (m *Meter) grow(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.up) < n {
		m.up = append(m.up, 0)
		m.down = append(m.down, 0)
	}
}

// Transfer counts n bytes moving from node src to node dst (a CPU node
// stands for its host memory) and returns the modelled time; with
// Options.Emulate it also sleeps that long. Package nccl calls it for what
// the RNIC reads and writes; the copies of this package call it
// themselves.
func (s *System) Transfer(src, dst NodeID, n int64) (time.Duration, error) {
	if n < 0 {
		return 0, errorf(ErrInvalidArgument, "transfer of %d bytes", n)
	}
	s.mu.Lock()
	if err := s.valid(src); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	if err := s.valid(dst); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	var buf [16]hop
	_, hops := s.route(src, dst, buf[:0])
	d := s.model(hops, n)
	flow := flowOf(s.nodes[src].kind, s.nodes[dst].kind)
	s.mu.Unlock()

	m := &s.meter
	m.mu.Lock()
	for _, h := range hops {
		if h.up {
			m.up[h.node] += n
		} else {
			m.down[h.node] += n
		}
	}
	f := &m.flows[flow]
	f.Bytes += n
	f.Transfers++
	f.Time += d
	m.mu.Unlock()
	if s.opts.Emulate && d > 0 {
		time.Sleep(d)
	}
	return d, nil
}

// Link returns the traffic over the link above node.
func (m *Meter) Link(node NodeID) LinkStats {
	s := m.sys
	s.mu.Lock()
	var st LinkStats
	if node > 0 && int(node) < len(s.nodes) {
		st = LinkStats{Node: node, Name: s.nodes[node].name, Link: s.nodes[node].up}
	}
	s.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if node > 0 && int(node) < len(m.up) {
		st.Up, st.Down = m.up[node], m.down[node]
	}
	return st
}

// Links returns the traffic of every link, in the order the nodes were added.
func (m *Meter) Links() []LinkStats {
	m.sys.mu.Lock()
	n := len(m.sys.nodes)
	m.sys.mu.Unlock()
	out := make([]LinkStats, 0, n-1)
	for id := 1; id < n; id++ {
		out = append(out, m.Link(NodeID(id)))
	}
	return out
}

// Flow returns the traffic of one flow.
func (m *Meter) Flow(f Flow) FlowStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f >= numFlows {
		return FlowStats{}
	}
	return m.flows[f]
}

// Reset zeroes every counter.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.up)
	clear(m.down)
	m.flows = [numFlows]FlowStats{}
}
