package topo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/mr/gpu"
)

const topoAbout = `Prints the simulated PCIe topology that goroce nccl-perf --device and goroce
demo give each rank (package mr/gpu), the way nvidia-smi topo -m prints a
real one: a matrix of how far apart every two devices are, in NCCL's path
names, then the legend, then every PCIe link of the tree with its
generation, width, bandwidth (each direction) and latency.

--preset places the GPUs and the NIC:
  pix  GPUs and NIC0 under one PCIe switch (SW0) of socket CPU0
  pxb  GPUs under switch SW1, NIC0 under SW2, both below switch SW0
  phb  GPUs and NIC0 on root ports of CPU0: the path crosses the host bridge
  sys  GPUs on socket CPU0, NIC0 on socket CPU1: the path crosses UPI
With one GPU each preset is mr/gpu's Preset. NCCL uses GPUDirect RDMA when
the GPU–NIC path is no farther than NCCL_NET_GDR_LEVEL (default PXB).`

// Run is `goroce topo`.
func Run(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("goroce topo [--preset pix|pxb|phb|sys] [--gpus N]", topoAbout)
	preset := fs.String("preset", "pix", "GPU–NIC placement: pix, pxb, phb or sys")
	ngpus := fs.Int("gpus", 1, "number of simulated GPUs")
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	p, err := ParsePreset(*preset)
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	case *ngpus < 1 || *ngpus > 64:
		err = fmt.Errorf("--gpus %d: want 1 to 64", *ngpus)
	}
	if err != nil {
		fmt.Fprintf(stderr, "goroce topo: %v\n", err)
		return cli.ExitUsage
	}
	topo, err := Build(p, *ngpus, 1<<30, gpu.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "goroce topo: %v\n", err)
		return cli.ExitFail
	}
	if err := topo.print(stdout); err != nil {
		fmt.Fprintf(stderr, "goroce topo: %v\n", err)
		return cli.ExitFail
	}
	return cli.ExitOK
}

// ParsePreset reads a --preset value: pix, pxb, phb or sys, in any case.
func ParsePreset(s string) (gpu.PathType, error) {
	p, err := gpu.ParsePathType(s)
	if err != nil || p == gpu.PathLOC || !strings.EqualFold(s, p.String()) {
		return 0, fmt.Errorf("--preset %q: want pix, pxb, phb or sys", s)
	}
	return p, nil
}

// Topology is one host's simulated topology as goroce's commands build it:
// the system, its GPUs (device ordinals in order), its one NIC, and the
// tree's links in the order they were added (the System does not list
// parents, so the builder remembers them for printing).
type Topology struct {
	preset gpu.PathType
	Sys    *gpu.System   // the simulated host
	GPUs   []*gpu.Device // by device ordinal
	NIC    gpu.NodeID    // NIC0
	cpus   []gpu.NodeID  // NUMA node i is cpus[i]
	links  []topoLink
}

// topoLink is the link above node, joining it to parent.
type topoLink struct {
	node, parent string
	kind         gpu.NodeKind
	link         gpu.Link
}

// Build builds ngpus GPUs of memBytes each and one NIC (NIC0) placed as
// preset says (see topoAbout). With one GPU it is the layout of gpu.Preset,
// node names included.
func Build(preset gpu.PathType, ngpus int, memBytes int64, opts gpu.Options) (*Topology, error) {
	t := &Topology{preset: preset, Sys: gpu.NewSystem(opts)}
	cpu := func(name string) (gpu.NodeID, error) {
		id, err := t.Sys.AddCPU(name, gpu.UPI)
		t.record(name, "SYS", gpu.KindCPU, gpu.UPI)
		t.cpus = append(t.cpus, id)
		return id, err
	}
	sw := func(name string, parent gpu.NodeID) gpu.NodeID {
		id, _ := t.Sys.AddSwitch(name, parent, gpu.Gen4x16) // valid by construction
		t.record(name, t.name(parent), gpu.KindSwitch, gpu.Gen4x16)
		return id
	}
	cpu0, err := cpu("CPU0")
	if err != nil {
		return nil, err
	}
	gpuParent, nicParent := cpu0, cpu0
	switch preset {
	case gpu.PathPIX:
		s := sw("SW0", cpu0)
		gpuParent, nicParent = s, s
	case gpu.PathPXB:
		top := sw("SW0", cpu0)
		gpuParent = sw("SW1", top)
		nicParent = sw("SW2", top)
	case gpu.PathPHB:
	case gpu.PathSYS:
		if nicParent, err = cpu("CPU1"); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("no topology preset for path %v (want PIX, PXB, PHB or SYS)", preset)
	}
	for i := range ngpus {
		name := fmt.Sprintf("GPU%d", i)
		d, err := t.Sys.AddGPU(name, gpuParent, gpu.Gen4x16, memBytes)
		if err != nil {
			return nil, err
		}
		t.record(name, t.name(gpuParent), gpu.KindGPU, gpu.Gen4x16)
		t.GPUs = append(t.GPUs, d)
	}
	if t.NIC, err = t.Sys.AddNIC("NIC0", nicParent, gpu.Gen4x16); err != nil {
		return nil, err
	}
	t.record("NIC0", t.name(nicParent), gpu.KindNIC, gpu.Gen4x16)
	return t, nil
}

func (t *Topology) record(node, parent string, kind gpu.NodeKind, l gpu.Link) {
	t.links = append(t.links, topoLink{node: node, parent: parent, kind: kind, link: l})
}

func (t *Topology) name(id gpu.NodeID) string {
	n, _, _ := t.Sys.Node(id)
	return n
}

// numa returns the NUMA node (socket index) above a device.
func (t *Topology) numa(id gpu.NodeID) (int, error) {
	host, err := t.Sys.Host(id)
	if err != nil {
		return 0, err
	}
	for i, c := range t.cpus {
		if c == host {
			return i, nil
		}
	}
	return 0, fmt.Errorf("node %d: socket %d not in the topology", id, host)
}

// matrix returns the rows of nvidia-smi topo -m's matrix, GPUs then the
// NIC, as names and cells: "X" on the diagonal, else the NCCL path type.
func (t *Topology) matrix() (names []string, cells [][]string, err error) {
	var ids []gpu.NodeID
	for _, d := range t.GPUs {
		ids = append(ids, d.Node())
	}
	ids = append(ids, t.NIC)
	for _, a := range ids {
		names = append(names, t.name(a))
		var row []string
		for _, b := range ids {
			p, err := t.Sys.PathType(a, b)
			if err != nil {
				return nil, nil, err
			}
			cell := p.String()
			if p == gpu.PathLOC {
				cell = "X"
			}
			row = append(row, cell)
		}
		cells = append(cells, row)
	}
	return names, cells, nil
}

// topoLegend is nvidia-smi topo -m's legend, word for word. The simulated
// topologies have one host bridge per socket and no NVLink, so NODE and
// NV# never appear in their matrices.
const topoLegend = `Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`

// print writes the matrix, the legends and the links.
func (t *Topology) print(w io.Writer) error {
	names, cells, err := t.matrix()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "\t%s\tNUMA Affinity\n", strings.Join(names, "\t"))
	ids := make([]gpu.NodeID, 0, len(names))
	for _, d := range t.GPUs {
		ids = append(ids, d.Node())
	}
	ids = append(ids, t.NIC)
	for i, row := range cells {
		numa, err := t.numa(ids[i])
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\n", names[i], strings.Join(row, "\t"), numa)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\nNIC Legend:\n\n  NIC0: goroce0 (software RNIC, RoCEv2 over UDP)\n\n", topoLegend)

	fmt.Fprintf(w, "PCIe links (simulated, preset %v; bandwidth is each direction):\n\n", t.preset)
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  node\tkind\tup to\tlink\tbandwidth\tlatency")
	for _, l := range t.links {
		link := l.link.String()
		if l.link.Bandwidth > 0 {
			link = "SMP (UPI)"
		}
		lat := l.link.Latency
		if lat == 0 {
			lat = gpu.DefaultLatency
		}
		fmt.Fprintf(tw, "  %s\t%v\t%s\t%s\t%.1f GB/s\t%v\n", l.node, l.kind, l.parent, link, l.link.BytesPerSecond()/1e9, lat)
	}
	return tw.Flush()
}
