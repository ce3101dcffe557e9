// Package cpucoll measures AllReduce in the CPU collective libraries
// people use when they have no RDMA NIC — Open MPI and Gloo — and in
// goroce, the same way and in the same run, so that goroce's figures can
// be read as ratios to theirs.
//
// Where it sits: bench/ (reproducible benchmarks), beside the goroce
// benchmarks. It imports nothing of goroce: goroce is measured through its
// command, `goroce nccl-perf all_reduce`, exactly as a user runs it. The
// command bench/cmd/collcompare drives it and prints the comparison.
//
// Every library runs AllReduce of float32 with sum on one host, over
// loopback or shared memory, with N ranks as N processes:
//
//   - goroce: `goroce nccl-perf all_reduce -np N`, RoCEv2 over UDP between
//     N software RNICs on 127.x addresses;
//   - openmpi-tcp and openmpi-shm: programs/mpi_allreduce.c (ours) under
//     mpirun with the ob1 messaging layer over `--mca btl self,tcp`
//     on lo, or over `--mca btl self,vader` (shared memory); Open MPI picks
//     its allreduce algorithm (coll/tuned) by size as it always does;
//   - gloo-ring, gloo-ring-chunked, gloo-halving-doubling:
//     programs/gloo_allreduce.cc (ours) running gloo::AllreduceRing,
//     AllreduceRingChunked or AllreduceHalvingDoubling over Gloo's TCP
//     transport on 127.0.0.1, N processes started here and meeting through
//     a gloo::rendezvous::FileStore.
//
// All of them print nccl-tests' columns (size, count, type, redop, root,
// then time, algbw, busbw and #wrong out of place and in place), time being
// one call's mean over the timed iterations averaged over the ranks, and
// busbw = algbw × 2(n−1)/n. Gloo's allreduce only works in place, so its
// out-of-place columns are N/A, and comparisons use the in-place columns
// for every library. Each program allocates and writes its buffers once
// before timing, runs warmup calls at every size, and checks one extra call
// per size and mode against the exact sum of rank-dependent inputs; a
// wrong element anywhere fails the run. Open MPI and Gloo run with
// MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ at 1 GiB, so that their
// internal temporary buffers stay in the heap instead of being mapped,
// faulted in and unmapped on every call.
//
// What to keep in mind when reading the numbers: goroce runs once per size
// (nccl-perf sweeps sizes geometrically and would miss some), the others
// once for all sizes, which changes nothing timed. Open MPI keeps its
// defaults besides the btl list: with 2 ranks it binds each to a core, and
// with more ranks than cores it binds none and yields the CPU while it
// polls. Gloo keeps its defaults too: its TCP pairs are
// asynchronous, served by an event-loop thread, which costs wakeups on
// small messages. All of them share the machine with whatever else runs.
//
// MeasureCPU adds what the times alone do not say: the CPU time of one
// call, all ranks together, in user space and in the kernel, from the
// usage wait4 reports for each process and the ranks it waited for. It
// runs a library twice at one size, with more calls the second time, and
// takes the difference, so that start-up and warmup cancel out. On a
// machine with fewer CPUs than ranks every library keeps the CPUs busy,
// and then this cost is what decides the time of a call.
//
// The C and C++ programs live in programs/ (a Go package directory may not
// hold C sources without cgo) and are embedded here; Build compiles them
// into a temporary directory (mpicc for Open MPI, g++ with -lgloo for Gloo);
// Debian's openmpi-bin, libopenmpi-dev and libgloo-dev provide them, and
// Install runs apt-get for whichever is missing.
package cpucoll
