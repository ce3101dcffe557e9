// Package nccl is goroce's collective communication library, shaped like
// NVIDIA's NCCL: a communicator (Comm) of n ranks, created from a unique ID
// (GetUniqueID, CommInitRank) or from the launcher's variables
// (OptionsFromEnv, CommInitFromEnv) or split from another (CommSplit),
// runs AllReduce, Broadcast, Reduce, AllGather,
// ReduceScatter, AlltoAll, Gather, Scatter and grouped Send/Recv over
// goroce RDMA devices.
//
// Where it sits: the top of the stack, below only the command line. The
// layers inside it, bottom up:
//
//	nccl/reduce     element types, ops and the reduce kernels
//	nccl/sched      schedules as data: per rank, phases of send/recv/reduce steps
//	nccl/transport  the transport interface (isend/irecv/test) and an in-memory fabric
//	nccl/transport/ib  RC QPs, RDMA WRITE WITH IMM into registered slots or straight into
//	                the receive's buffer (CTS), credits in the immediates
//	nccl/bootstrap  the TCP rendezvous that exchanges connection details
//	nccl            Comm: argument checks, algorithm choice, the stream that runs
//	                schedules over the transport, timeouts, errors, logging
//
// Streams. Each Comm runs its operations one after the other on its own
// goroutine, as a CUDA stream runs NCCL kernels: every call returns a
// *Request at once; Wait on it (or on a later one) to know the result.
// Every rank must issue the same collectives in the same order. A small
// operation (a few KiB) waited for with a context that is never done, as
// the C API waits for each call, runs in the waiting goroutine instead,
// when the stream is idle: no hand-off to the stream's goroutine and back
// (stream.go).
//
// Failures. An operation fails, never hangs: if a peer's connection
// breaks, or no transfer of the operation completes for Options.Timeout,
// the Request ends with an *OpError naming the operation, its sequence
// number (#N, see OpError) and the peer to blame. When a rank dies, every
// surviving rank names it, even one that was only waiting on a live rank
// stuck behind the dead one: the ranks tell each other about dead and
// stalled ranks over the bootstrap connections, which stay open as an
// out-of-band failure channel (notice.go, bootstrap.Client.Watch), and the
// error then says who reported it (*RankError). A timeout with no dead
// rank reported says the peer "stalled", not that it died, after waiting
// up to one more Timeout for a notice. After a failure the communicator is
// broken: later operations fail at once with ErrBroken. Abort fails
// everything pending.
//
// Device buffers. With a simulated GPU (package mr/gpu) given to
// CommInitRank (Options.GPU) or attached later (UseGPU), the *Device
// collectives (AllReduceDevice, ...) take device pointers. Each peer
// connection moves them by GPUDirect RDMA when the NIC has peer memory and
// the GPU–NIC distance is within NCCL_NET_GDR_LEVEL (default PXB),
// otherwise through pinned host bounce buffers; the GPU's meter counts the
// PCIe bytes of either path (gpu_transport.go). With Options.GPU and
// GPUDirect RDMA, the connections' FIFOs are allocated in GPU memory and
// registered through peer memory, so the RNIC writes there directly, as
// NCCL's do.
//
// Settings. The library reads nothing from the environment: a program
// passes Options. OptionsFromEnv, the one place the environment is read,
// builds them from the variables NCCL users set, and each bad value is an
// error naming the variable. Call it when the communicator is made: the C
// library does, in every ncclCommInitRank. What it reads, and where each
// goes:
//
//	NCCL_ALGO            Algo: Ring or Tree, force the AllReduce algorithm
//	NCCL_COMM_ID         CommID: host:port of the bootstrap root (GetUniqueID listens there)
//	NCCL_DEBUG           Debug: VERSION, WARN, INFO or TRACE (zap underneath)
//	NCCL_DEBUG_FILE      DebugFile: where the log goes (%h host, %p pid)
//	NCCL_IB_TIMEOUT      IBTimeout: the QPs' local ACK timeout code, 1 to 31 (default 14, 67 ms)
//	NCCL_IB_RETRY_CNT    IBRetryCnt: the QPs' retry count, 1 to 7 (default 7)
//	NCCL_NET_GDR_LEVEL   GDRLevel: LOC, PIX, PXB, PHB or SYS, how far GPUDirect RDMA reaches
//	GOROCE_ADDR          Addr: this rank's RNIC address (default: 127.0.0.(10+rank):4791 when the
//	                     bootstrap root is on loopback; else this host's address on the route
//	                     to the root, port 4791 + the local rank)
//	GOROCE_BUSY_POLL     BusyPoll: how long a rank spins on its RNIC before it sleeps (200us;
//	                     0: off; default on when this host's ranks fit its CPUs)
//	GOROCE_PCAP          Pcap: PATH, the RNIC captures to PATH.rankN.pcap
//	GOROCE_TRACE         RNIC.Trace: any value, the RNIC prints its packet trace to stderr
//	GOROCE_PEER_MEMORY   RNIC.PeerMemory: 1, the RNIC may register GPU memory (nvidia_peermem)
//	GOROCE_LINK          RNIC.Wire.Kind: the RNIC's wire, udp (default), RoCEv2 over UDP
//	                     sockets, or shm, the same frames through shared-memory rings (every
//	                     rank on one host)
//	GOROCE_SHM_DIR       RNIC.Wire.ShmDir: where shm's ring files live (default
//	                     /dev/shm/goroce-<uid>)
//	GOROCE_VERIFY_ICRC   RNIC.AlwaysVerifyICRC: 1, the RNIC verifies the ICRC of shm's frames
//	                     too, which by default it trusts as the kernel trusts loopback; UDP's
//	                     are always verified
//
// and the launcher's, into Launch (see Env), which CommInitFromEnv joins:
// torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
// and MASTER_PORT; Open MPI's OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_RANK and OMPI_COMM_WORLD_LOCAL_SIZE; Slurm's
// SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID; the job's secret,
// GOROCE_JOB_SECRET, and its names (SLURM_JOB_ID, SLURM_STEP_ID,
// OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE, TORCHELASTIC_RUN_ID; see
// JobSecret).
//
// Bit-identical results: each reduced element is computed by one rank in a
// fixed order (ring) or by partners with commutative kernels (recursive
// doubling), then copied, so every rank holds the same bits.
package nccl
