package ncclperf

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/goroce/goroce/cmd/goroce/internal/topo"
	"github.com/goroce/goroce/mr/gpu"
	"github.com/goroce/goroce/nccl"
	"github.com/goroce/goroce/nccl/transport/ib"
)

// This file holds nccl-perf --device: the collectives on buffers of a
// simulated GPU (package mr/gpu), as nccl-tests runs them on cudaMalloc'd
// memory, with the PCIe traffic each call causes read from the GPU
// system's meter.

const ncclPerfDeviceAbout = `
--device runs the *Device collectives on buffers of a simulated GPU: each
rank builds the topology of goroce topo --preset (one GPU, GPU0, and its
NIC, NIC0), allocates its buffers there, copies the input host to device
before a checked call and the result back after it. --gdr on gives the NIC
peer memory (nvidia_peermem): the library then uses GPUDirect RDMA if the
GPU–NIC path is within NCCL_NET_GDR_LEVEL (default PXB), else it stages
through host memory, as with --gdr off. Three columns are added: the bytes
one call moves over PCIe per rank, by path (GPU<->host copies, the NIC
reading or writing host memory, the NIC reading or writing the GPU), from
the meter, averaged over the timed calls of both halves of the row.
--emulate-pcie makes every metered transfer also take its modelled time.`

// deviceFlags are nccl-perf's flags for device buffers.
type deviceFlags struct {
	device, emulate bool
	gdr, preset     string
}

func (f *deviceFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.device, "device", false, "run on buffers of a simulated GPU (see below)")
	fs.StringVar(&f.gdr, "gdr", "on", "with --device: `on` gives the NIC peer memory (GPUDirect RDMA), off does not")
	fs.StringVar(&f.preset, "preset", "pix", "with --device: GPU–NIC `placement`, pix, pxb, phb or sys (goroce topo)")
	fs.BoolVar(&f.emulate, "emulate-pcie", false, "with --device: transfers take their modelled PCIe time")
}

// config checks the flags and returns the device part of the
// configuration; nil without --device.
func (f *deviceFlags) config(fs *flag.FlagSet, coll *perfColl) (*deviceConfig, error) {
	if !f.device {
		var set []string
		fs.Visit(func(fl *flag.Flag) {
			switch fl.Name {
			case "gdr", "preset", "emulate-pcie":
				set = append(set, "--"+fl.Name)
			}
		})
		if len(set) > 0 {
			return nil, fmt.Errorf("%s need --device", strings.Join(set, ", "))
		}
		return nil, nil
	}
	if coll.callDevice == nil {
		return nil, fmt.Errorf("--device: %s has no device-buffer call", coll.name)
	}
	d := &deviceConfig{emulate: f.emulate}
	switch strings.ToLower(f.gdr) {
	case "on":
		d.peerMemory = true
	case "off":
	default:
		return nil, fmt.Errorf("--gdr %q: want on or off", f.gdr)
	}
	var err error
	if d.preset, err = topo.ParsePreset(f.preset); err != nil {
		return nil, err
	}
	return d, nil
}

// deviceConfig is what --device asks for, and, once the rank has set it
// up, its GPU.
type deviceConfig struct {
	preset     gpu.PathType
	peerMemory bool
	emulate    bool

	topo *topo.Topology // this rank's system, built by setup
}

// setup builds this rank's simulated system, with memory for the largest
// size's buffers and the connections' FIFOs, and returns its GPU for the
// communicator.
func (d *deviceConfig) setup(maxBytes int) (*nccl.GPU, error) {
	topo, err := topo.Build(d.preset, 1, 2*int64(maxBytes)+fifoBytes, gpu.Options{Emulate: d.emulate})
	if err != nil {
		return nil, err
	}
	d.topo = topo
	return &nccl.GPU{Device: topo.GPUs[0], NIC: topo.NIC, PeerMemory: d.peerMemory}, nil
}

// fifoBytes is room in GPU memory for the connections' FIFOs that a
// communicator with GPUDirect RDMA allocates there: ib's default slots, a
// receive and a send FIFO for each of up to 16 peers.
const fifoBytes = 16 * 2 * ib.DefaultSlots * ib.DefaultSlotSize

// describe is the header line about the device buffers: where the GPU is
// and which path the library chose, and why.
func (d *deviceConfig) describe(c *nccl.Comm) string {
	gdr := "off"
	if d.peerMemory {
		gdr = "on"
	}
	s := fmt.Sprintf("# Device buffers on simulated GPU0, preset %v (goroce topo --preset %s), peer memory %s", d.preset, strings.ToLower(d.preset.String()), gdr)
	if c.Size() < 2 {
		return s
	}
	path, why, err := c.GPUPath((c.Rank() + 1) % c.Size())
	if err != nil {
		return s + ": " + err.Error()
	}
	return fmt.Sprintf("%s: path %v (%s)", s, path, why)
}

// pcieFlows are the meter's flows nccl-perf reports, in column order.
var pcieFlows = [...]gpu.Flow{gpu.FlowGPUHost, gpu.FlowNICHost, gpu.FlowNICGPU}

// flowBytes reads the bytes of pcieFlows from the rank's meter.
func (d *deviceConfig) flowBytes() [len(pcieFlows)]float64 { return pcieBytes(d.topo.Sys) }

// pcieBytes reads the bytes of pcieFlows from sys's meter.
func pcieBytes(sys *gpu.System) (b [len(pcieFlows)]float64) {
	m := sys.Meter()
	for i, f := range pcieFlows {
		b[i] = float64(m.Flow(f).Bytes)
	}
	return b
}

// perfRunner is one collective at one size on one rank, on host or
// device buffers.
type perfRunner interface {
	// call issues the collective once.
	call(c *nccl.Comm, inPlace bool) *nccl.Request
	// checked runs one call on fresh input and returns the wrong elements
	// of this rank's result (-1: not checked).
	checked(ctx context.Context, c *nccl.Comm, inPlace bool) (int64, error)
	// bandwidth returns algbw and busbw in GB/s of a call of sec seconds.
	bandwidth(sec float64) (alg, bus float64)
}

// checked is perfRunner's checked call on host buffers.
func (pc *perfCase) checked(ctx context.Context, c *nccl.Comm, inPlace bool) (int64, error) {
	pc.prepare(inPlace)
	if err := pc.call(c, inPlace).Wait(ctx); err != nil {
		return 0, err
	}
	return pc.wrong(inPlace), nil
}

// devCase is a perfCase on device buffers. Its host buffers mirror the
// device ones: the input is prepared there and copied host to device, the
// result copied back and checked there.
type devCase struct {
	*perfCase
	send, recv gpu.Ptr // sized as the host buffers
}

// newDevCase allocates pc's buffers on dev; free releases them.
func newDevCase(pc *perfCase, dev *gpu.Device) (dc *devCase, free func(), err error) {
	var allocs []gpu.Ptr
	free = func() {
		for _, p := range allocs {
			dev.Free(p)
		}
	}
	alloc := func(n int) (gpu.Ptr, error) {
		p, err := dev.Alloc(int64(max(n, 1))) // cudaMalloc(0) has no buffer to return
		if err != nil {
			return gpu.Ptr{}, err
		}
		allocs = append(allocs, p)
		return p.Slice(0, int64(n))
	}
	dc = &devCase{perfCase: pc}
	if dc.send, err = alloc(len(pc.send)); err == nil {
		dc.recv, err = alloc(len(pc.recv))
	}
	if err != nil {
		free()
		return nil, nil, err
	}
	return dc, free, nil
}

// buffers returns the device send and recv pointers of a call, where
// perfCase.buffers puts the host ones. The ranges are inside the
// allocations by construction.
func (dc *devCase) buffers(inPlace bool) (send, recv gpu.Ptr) {
	esz := int64(dc.dt.Size())
	sendLen, recvLen := int64(dc.sendN)*esz, int64(dc.recvN)*esz
	if !inPlace {
		send, _ = dc.send.Slice(0, sendLen)
		recv, _ = dc.recv.Slice(0, recvLen)
		return send, recv
	}
	so, ro := dc.inPlaceOffsets()
	send, _ = dc.recv.Slice(int64(so), sendLen)
	recv, _ = dc.recv.Slice(int64(ro), recvLen)
	return send, recv
}

// call issues the device collective once.
func (dc *devCase) call(c *nccl.Comm, inPlace bool) *nccl.Request {
	send, recv := dc.buffers(inPlace)
	return dc.coll.callDevice(c, send, recv, dc.count, dc.dt, dc.op, dc.root)
}

// checked prepares the input on the host, copies it to the device, runs
// the call, copies the result back and checks it.
func (dc *devCase) checked(ctx context.Context, c *nccl.Comm, inPlace bool) (int64, error) {
	dc.prepare(inPlace)
	if err := gpu.CopyHtoD(dc.send, dc.perfCase.send); err != nil {
		return 0, err
	}
	if err := gpu.CopyHtoD(dc.recv, dc.perfCase.recv); err != nil {
		return 0, err
	}
	if err := dc.call(c, inPlace).Wait(ctx); err != nil {
		return 0, err
	}
	clear(dc.perfCase.recv) // what is checked must come from the device
	if err := gpu.CopyDtoH(dc.perfCase.recv, dc.recv); err != nil {
		return 0, err
	}
	return dc.wrong(inPlace), nil
}

// runner returns what runs pc on this rank: pc itself, or with --device a
// devCase on the rank's GPU; free releases its buffers.
func (cfg *ncclPerfConfig) runner(pc *perfCase) (perfRunner, func(), error) {
	if cfg.device == nil {
		return pc, func() {}, nil
	}
	return newDevCase(pc, cfg.device.topo.GPUs[0])
}

// pcieTitles are the three header lines of the PCIe columns.
var pcieTitles = [3]string{
	"     PCIe bytes per rank per call",
	fmt.Sprintf("  %10s  %10s  %10s", "GPU<->host", "NIC<->host", "NIC<->GPU"),
	fmt.Sprintf("  %10s  %10s  %10s", "(B)", "(B)", "(B)"),
}

// printPCIe appends a row's PCIe columns: the mean of its two halves.
func printPCIe(w io.Writer, res [2]perfResult) {
	for i := range pcieFlows {
		fmt.Fprintf(w, "  %10.0f", (res[0].pcie[i]+res[1].pcie[i])/2)
	}
}
