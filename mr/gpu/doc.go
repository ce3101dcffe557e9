// Package gpu simulates GPUs for goroce: device memory that host code cannot
// touch, the PCIe topology that joins GPUs, NICs and CPU sockets, and a
// meter that counts every byte crossing each simulated PCIe link.
//
// # Where it sits
//
// gpu sits beside package mr, at the bottom of the stack, and imports
// nothing of goroce's but mr. The collective library (nccl) allocates its
// buffers here, copies through host bounce buffers when it must, and
// registers device memory with the RNIC (PD.RegMemory with Device.Memory)
// when GPUDirect RDMA ("peer memory", the nvidia_peermem stand-in
// rnic.Config.PeerMemory) is on.
//
//	CUDA / NCCL                       gpu
//	cudaMalloc / cudaFree             Device.Alloc / Device.Free
//	cudaMemGetInfo                    Device.MemInfo
//	cudaMemcpy(HtoD, DtoH, DtoD)      CopyHtoD, CopyDtoH, CopyDtoD
//	cudaMemcpyAsync, cudaStream_t     Stream.CopyHtoD ..., Stream.Synchronize
//	cudaMemset                        Device.Memset
//	reduction kernel of a collective  Device.Reduce (kernel passed in)
//	nvidia-smi topo -m, NCCL paths    System.PathType: LOC, PIX, PXB, PHB, SYS
//	ibv_reg_mr on device memory       PD.RegMemory(Device.Memory(p))
//
// # Device memory
//
// Alloc returns a Ptr, an opaque handle (device, allocation, offset,
// length), never a slice. Host code reaches the bytes only through the
// copies, and every misuse is an error, never corruption: out of memory
// (ErrOutOfMemory), freeing twice (ErrDoubleFree), using a freed allocation
// (ErrUseAfterFree), a range outside the allocation (ErrOutOfBounds), a
// pointer of another device or system (ErrInvalidPtr). Allocation IDs are
// never reused, so a stale Ptr is always recognised. Each allocation owns its
// own backing array: even memory still registered with the NIC after Free
// cannot overlap a later allocation.
//
// # Topology and metering
//
// A System is a tree: CPU sockets (each a PCIe root complex with its host
// memory) joined by the inter-socket link, PCIe switches below them, and
// GPUs and NICs as leaves. Each edge is a Link with a PCIe generation and
// width (hence bandwidth) and a latency. A transfer between two nodes
// crosses the links on the tree path between them; the Meter adds its bytes
// to each of those links (per direction) and to its Flow (GPU↔host copy,
// NIC↔host, NIC↔GPU peer-to-peer, GPU↔GPU), and accounts a modelled time:
//
//	time = Σ latency of the links crossed + bytes / slowest bandwidth on the path
//
// With Options.Emulate the copy also takes that long (time.Sleep, so
// virtual time under testing/synctest): emulated timing for experiments.
// Kernels (Memset, Reduce, a DtoD copy within one device) run in device
// memory and cross no PCIe link.
//
// The RNIC itself does not know about this package: it reads and writes a
// registered device allocation as ordinary memory. Whoever posts the work
// (nccl's transport) accounts those bytes with System.Transfer.
package gpu
