// Command goroce is the one command-line tool of goroce, a software RDMA NIC
// that speaks RoCEv2. Each task is a subcommand:
//
//	goroce pcap [-json] FILE...   decode the RoCEv2 packets of pcap/pcapng captures
//	                              and verify their ICRC
//	goroce pingpong [flags] [HOST]
//	                              ibv_rc_pingpong (-t uc, ud, srq: ibv_uc_, ibv_ud_,
//	                              ibv_srq_pingpong) over a goroce device: server
//	                              without HOST, client with it; same flags and side
//	                              channel
//	goroce perf TEST [flags] [HOST]
//	                              perftest's send_bw, write_bw, read_bw, atomic_bw,
//	                              send_lat, write_lat and read_lat; same flags and
//	                              report columns, goroce's own side channel
//	goroce run -n N [--] CMD ARGS...
//	                              start N ranks on loopback (torchrun-style
//	                              environment, one RNIC address each), prefix
//	                              their output, stop all on the first failure
//	goroce nccl-perf COLL [flags] nccl-tests (all_reduce_perf, ...) over goroce;
//	                              -np N launches the ranks itself
//	goroce demo                   4 ranks run every collective on checked data
//	goroce help [COMMAND]         list the commands, or show one command's flags
//
// main.go holds only the table of commands and the dispatch. Each command
// is its own package under internal/, named after it (internal/pcap,
// internal/perf, internal/pingpong, internal/run, ...; nccl-perf and demo
// share internal/ncclperf), with one entry point,
// Run(ctx, args, stdout, stderr) int, that the table names. What several
// commands share is in internal/cli (exit statuses, flag helpers, the TCP
// side channel, --trace/--pcap/--metrics-addr/--ui-addr and their servers);
// what their tests share is in internal/clitest. Every subcommand parses
// its own flags with package flag (-name and --name both work) and exits 0
// on success, 1 when it ran and found a problem, and 2 on a usage error or
// an input it could not read.
//
// Where it sits: at the top of the stack; it uses the public packages
// (wire, wire/pcap, rnic, qp, mr, nccl, bench/experiment, bench/soak) and
// nothing else of goroce's internals.
package main
