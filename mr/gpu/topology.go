package gpu

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// NodeID names a node of a System's topology: a CPU socket (with its host
// memory), a PCIe switch, a GPU or a NIC. The link above a node is named
// after the node.
type NodeID int

// NodeKind is what a topology node is.
type NodeKind uint8

// Node kinds.
const (
	KindSystem NodeKind = iota // the root: the inter-socket interconnect
	KindCPU                    // a socket: PCIe root complex (host bridge) and its host memory
	KindSwitch                 // a PCIe switch
	KindGPU
	KindNIC
)

// String returns "SYS", "CPU", "PCI-SW", "GPU" or "NIC".
func (k NodeKind) String() string {
	return [...]string{"SYS", "CPU", "PCI-SW", "GPU", "NIC"}[k]
}

// PathType is how far apart two nodes are, with NCCL's names (the
// NCCL_NET_GDR_LEVEL and NCCL_P2P_LEVEL values, and the legend of
// nvidia-smi topo -m), nearest first.
type PathType uint8

// Path types.
const (
	PathLOC PathType = iota // the same device
	PathPIX                 // through at most one PCIe switch
	PathPXB                 // through several PCIe switches, not the host bridge
	PathPHB                 // through a PCIe host bridge (a CPU root complex)
	PathSYS                 // across the inter-socket (SMP) interconnect
)

var pathNames = [...]string{"LOC", "PIX", "PXB", "PHB", "SYS"}

// String returns the NCCL name: LOC, PIX, PXB, PHB or SYS.
func (p PathType) String() string {
	if int(p) < len(pathNames) {
		return pathNames[p]
	}
	return fmt.Sprintf("PathType(%d)", p)
}

// ParsePathType reads a path name as NCCL_NET_GDR_LEVEL takes it: LOC, PIX,
// PXB, PHB or SYS in any case (NODE, which NCCL places between PXB and PHB,
// reads as PHB), or NCCL's legacy integers 0..4.
func ParsePathType(s string) (PathType, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if s == "NODE" {
		return PathPHB, nil
	}
	for i, n := range pathNames {
		if s == n || s == fmt.Sprint(i) {
			return PathType(i), nil
		}
	}
	return 0, errorf(ErrInvalidArgument, "path type %q (want LOC, PIX, PXB, PHB or SYS)", s)
}

type node struct {
	name   string
	kind   NodeKind
	parent NodeID // -1 for the root
	up     Link   // the link to parent
	depth  int
}

// Options configure a System.
type Options struct {
	// Emulate makes every metered transfer take its modelled time
	// (time.Sleep) on top of counting it: emulated timing for experiments.
	Emulate bool
}

// System is one host's simulated PCIe topology, its GPUs and the meter of
// the traffic between them. Build the topology (AddCPU, AddSwitch, AddGPU,
// AddNIC) before moving data; all methods are safe for concurrent use.
type System struct {
	opts  Options
	meter Meter

	mu      sync.Mutex // guards nodes and devices
	nodes   []node
	devices []*Device
}

// NewSystem returns a System with only its root, the inter-socket
// interconnect. Add at least one CPU.
func NewSystem(opts Options) *System {
	s := &System{opts: opts, nodes: []node{{name: "SYS", kind: KindSystem, parent: -1}}}
	s.meter.sys = s
	return s
}

func (s *System) add(name string, kind NodeKind, parent NodeID, up Link, parentKinds ...NodeKind) (NodeID, error) {
	if err := up.check(); err != nil {
		return -1, fmt.Errorf("%s %q: %w", kind, name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if parent < 0 || int(parent) >= len(s.nodes) {
		return -1, errorf(ErrInvalidArgument, "%s %q: no parent node %d", kind, name, parent)
	}
	pk := s.nodes[parent].kind
	ok := false
	for _, k := range parentKinds {
		ok = ok || k == pk
	}
	if !ok {
		return -1, errorf(ErrInvalidArgument, "%s %q cannot sit under %s %q", kind, name, pk, s.nodes[parent].name)
	}
	for _, n := range s.nodes {
		if n.name == name {
			return -1, errorf(ErrInvalidArgument, "node name %q used twice", name)
		}
	}
	s.nodes = append(s.nodes, node{name: name, kind: kind, parent: parent, up: up, depth: s.nodes[parent].depth + 1})
	s.meter.grow(len(s.nodes))
	return NodeID(len(s.nodes) - 1), nil
}

// AddCPU adds a CPU socket, its root complex and host memory; socket is its
// link to the other sockets (UPI if zero).
func (s *System) AddCPU(name string, socket Link) (NodeID, error) {
	if socket == (Link{}) {
		socket = UPI
	}
	return s.add(name, KindCPU, 0, socket, KindSystem)
}

// AddSwitch adds a PCIe switch under a CPU or another switch.
func (s *System) AddSwitch(name string, parent NodeID, up Link) (NodeID, error) {
	return s.add(name, KindSwitch, parent, up, KindCPU, KindSwitch)
}

// AddNIC adds a NIC under a CPU (root port) or a switch.
func (s *System) AddNIC(name string, parent NodeID, up Link) (NodeID, error) {
	return s.add(name, KindNIC, parent, up, KindCPU, KindSwitch)
}

// AddGPU adds a GPU with memBytes of device memory under a CPU (root port)
// or a switch, and returns the opened device.
func (s *System) AddGPU(name string, parent NodeID, up Link, memBytes int64) (*Device, error) {
	if memBytes <= 0 {
		return nil, errorf(ErrInvalidArgument, "GPU %q: memory size %d", name, memBytes)
	}
	id, err := s.add(name, KindGPU, parent, up, KindCPU, KindSwitch)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &Device{sys: s, index: len(s.devices), node: id, name: name, total: memBytes, allocs: map[uint64]*allocation{}, next: 1}
	s.devices = append(s.devices, d)
	return d, nil
}

// Devices returns the GPUs in the order they were added (CUDA device
// ordinals).
func (s *System) Devices() []*Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Device(nil), s.devices...)
}

// Meter returns the system's traffic meter.
func (s *System) Meter() *Meter { return &s.meter }

// Node returns a node's name and kind; ok is false for an unknown ID.
func (s *System) Node(id NodeID) (name string, kind NodeKind, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || int(id) >= len(s.nodes) {
		return "", 0, false
	}
	return s.nodes[id].name, s.nodes[id].kind, true
}

// Lookup finds a node by name.
func (s *System) Lookup(name string) (NodeID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range s.nodes {
		if n.name == name {
			return NodeID(i), true
		}
	}
	return -1, false
}

// Host returns the CPU socket above a node: where its pinned host buffers
// live (NUMA-local). For a CPU it is the CPU itself.
func (s *System) Host(id NodeID) (NodeID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.valid(id); err != nil {
		return -1, err
	}
	for s.nodes[id].kind != KindCPU {
		id = s.nodes[id].parent
		if id <= 0 {
			return -1, errorf(ErrInvalidArgument, "node %d has no CPU above it", id)
		}
	}
	return id, nil
}

func (s *System) valid(id NodeID) error {
	if id <= 0 || int(id) >= len(s.nodes) {
		return errorf(ErrInvalidArgument, "no topology node %d", id)
	}
	return nil
}

// hop is one link crossed: the link above node, upward or downward.
type hop struct {
	node NodeID
	up   bool
}

// route lists the links from a to b: up from a to the lowest common
// ancestor, then down to b. Called with s.mu held.
func (s *System) route(a, b NodeID, hops []hop) (lca NodeID, _ []hop) {
	var down []hop
	for a != b {
		if s.nodes[a].depth >= s.nodes[b].depth {
			hops = append(hops, hop{a, true})
			a = s.nodes[a].parent
		} else {
			down = append(down, hop{b, false})
			b = s.nodes[b].parent
		}
	}
	for i := len(down) - 1; i >= 0; i-- {
		hops = append(hops, down[i])
	}
	return a, hops
}

// PathType classifies the path between two nodes as NCCL does: LOC for the
// same node, PIX through one PCIe switch, PXB through several, PHB through a
// CPU root complex, SYS across sockets.
func (s *System) PathType(a, b NodeID) (PathType, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.valid(a); err != nil {
		return 0, err
	}
	if err := s.valid(b); err != nil {
		return 0, err
	}
	if a == b {
		return PathLOC, nil
	}
	lca, hops := s.route(a, b, nil)
	switch s.nodes[lca].kind {
	case KindSystem:
		return PathSYS, nil
	case KindCPU:
		return PathPHB, nil
	}
	// Count the switches the path passes through (the nodes between a
	// and b: the parent of each upward hop, the target of each downward
	// hop but the last).
	switches := 0
	for _, h := range hops {
		mid := h.node
		if h.up {
			mid = s.nodes[h.node].parent
		}
		if mid != b && s.nodes[mid].kind == KindSwitch {
			switches++
		}
	}
	if switches <= 1 {
		return PathPIX, nil
	}
	return PathPXB, nil
}

// model returns the modelled time of n bytes over hops: the links'
// latencies plus n over the slowest bandwidth. Called with s.mu held.
func (s *System) model(hops []hop, n int64) time.Duration {
	var lat time.Duration
	bw := 0.0
	for _, h := range hops {
		l := s.nodes[h.node].up
		lat += l.latency()
		if b := l.BytesPerSecond(); bw == 0 || b < bw {
			bw = b
		}
	}
	if bw == 0 {
		return lat
	}
	return lat + time.Duration(float64(n)/bw*float64(time.Second))
}
