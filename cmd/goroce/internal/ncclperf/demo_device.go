package ncclperf

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/topo"
	"github.com/goroce/goroce/mr/gpu"
	"github.com/goroce/goroce/nccl"
)

// The demo's second part: AllReduce on buffers of a simulated GPU, once
// with GPUDirect RDMA (the NIC reads and writes GPU memory) and once
// staged through host memory, side by side, with the PCIe bytes the
// simulated meter counted on each path.

// demoDeviceRow is one way of moving device buffers: one line of the
// second table.
type demoDeviceRow struct {
	pc         *perfCase
	peerMemory bool
	path       nccl.NetPath
	sec        float64 // one call, averaged over the ranks
	wrong      int64   // wrong elements summed over the ranks
	pcie       [len(pcieFlows)]float64
}

// demoDevice runs AllReduce of size bytes on device buffers with peer
// memory on, then off; each on a communicator split from c with the GPU
// attached, over the ranks' RNICs.
func demoDevice(ctx context.Context, c *nccl.Comm, size, iters int) ([]demoDeviceRow, error) {
	var rows []demoDeviceRow
	for _, peer := range []bool{true, false} {
		row, err := demoDeviceMode(ctx, c, size, iters, peer)
		if err != nil {
			return nil, fmt.Errorf("AllReduce on device buffers, peer memory %v: %w", onOff(peer), err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// demoDeviceMode is one row: a new communicator whose GPU sits with the
// NIC under one PCIe switch (preset PIX), with its FIFOs in GPU memory
// when peer memory is on, one checked call, then iters timed calls
// metered.
func demoDeviceMode(ctx context.Context, c *nccl.Comm, size, iters int, peer bool) (demoDeviceRow, error) {
	rank, n := c.Rank(), c.Size()
	topo, err := topo.Build(gpu.PathPIX, 1, 2*int64(size)+fifoBytes, gpu.Options{})
	if err != nil {
		return demoDeviceRow{}, err
	}
	sub, err := c.CommSplit(ctx, 0, rank, nccl.Options{GPU: &nccl.GPU{Device: topo.GPUs[0], NIC: topo.NIC, PeerMemory: peer}})
	if err != nil {
		return demoDeviceRow{}, err
	}
	ok := false
	defer func() {
		if !ok {
			sub.Abort()
		}
	}()
	path, _, err := sub.GPUPath((rank + 1) % n)
	if err != nil {
		return demoDeviceRow{}, err
	}
	coll, _ := findPerfColl("all_reduce")
	pc := newPerfCase(coll, rank, n, size, nccl.Float32, nccl.Sum, 0)
	dc, free, err := newDevCase(pc, topo.GPUs[0])
	if err != nil {
		return demoDeviceRow{}, err
	}
	defer free()
	wrong, err := dc.checked(ctx, sub, false)
	if err != nil {
		return demoDeviceRow{}, err
	}
	if err := barrier(ctx, sub); err != nil {
		return demoDeviceRow{}, err
	}
	topo.Sys.Meter().Reset()
	sec, err := timeCalls(ctx, sub, &ncclPerfConfig{iters: iters, aggIters: 1}, func() *nccl.Request { return dc.call(sub, false) })
	if err != nil {
		return demoDeviceRow{}, err
	}
	pcie := pcieBytes(topo.Sys)
	sums, err := allReduceFloat64s(ctx, sub, append([]float64{sec, float64(wrong)}, pcie[:]...)...)
	if err != nil {
		return demoDeviceRow{}, err
	}
	row := demoDeviceRow{pc: pc, peerMemory: peer, path: path, sec: sums[0] / float64(n), wrong: int64(sums[1])}
	for i := range row.pcie {
		row.pcie[i] = sums[2+i] / float64(n) / float64(iters)
	}
	ok = true
	return row, sub.Destroy()
}

// printDemoDevice prints the second table; it returns the rows with
// wrong results.
func printDemoDevice(out io.Writer, rows []demoDeviceRow, size, iters int) (bad int) {
	fmt.Fprintln(out, "AllReduce on device buffers: each rank has one simulated GPU, GPU0 under one PCIe switch")
	fmt.Fprintf(out, "with its NIC (PIX, see goroce topo); %d bytes of float32 per rank, copied host to device,\n", size)
	fmt.Fprintf(out, "checked after a copy back, then %d timed calls. With peer memory the NIC reads and writes\n", iters)
	fmt.Fprintln(out, "GPU memory (GPUDirect RDMA); without, every byte is staged through host memory. PCIe bytes")
	fmt.Fprintln(out, "are per rank per call, as the simulated meter counted them.")
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%-11s %-7s %10s %12s %12s %12s %12s %12s  %s\n", "peer memory", "path", "time/call",
		"algbw GB/s", "busbw GB/s", "GPU<->host", "NIC<->host", "NIC<->GPU", "result")
	for _, r := range rows {
		alg, bus := r.pc.bandwidth(r.sec)
		result := "OK"
		if r.wrong != 0 {
			result = fmt.Sprintf("WRONG (%d elements)", r.wrong)
			bad++
		}
		fmt.Fprintf(out, "%-11s %-7v %10s %12.3f %12.3f %12.0f %12.0f %12.0f  %s\n", onOff(r.peerMemory), r.path,
			time.Duration(r.sec*1e9).Round(time.Microsecond), alg, bus, r.pcie[0], r.pcie[1], r.pcie[2], result)
	}
	fmt.Fprintln(out)
	return bad
}
