// Command goroce-verbs is the Go core of a preloadable libibverbs: with it,
// unmodified verbs programs (rdma-core's ibv_*_pingpong, ibv_devinfo,
// perftest's ib_write_bw, ...) run on a goroce device inside their own
// process, with no kernel module and no root:
//
//	go build -buildmode=c-shared -o DIR/libgoroce-verbs-core.so ./cmd/goroce-verbs
//	gcc -O2 -shared -fPIC -o DIR/libgoroce-verbs.so cmd/goroce-verbs/shim/verbs.c cmd/goroce-verbs/shim/rdmacm.c \
//	    cmd/goroce-verbs/shim/sysfs.c -ldl -lpthread
//	LD_PRELOAD=DIR/libgoroce-verbs.so GOROCE_ADDR=127.0.0.2 ibv_rc_pingpong -g 0
//
// The same preload stands in for librdmacm.so.1 too, so programs that
// connect with rdma_cm (rping, ucmatose, udaddy, rdma_server/rdma_client,
// perftest's -R) run unmodified: shim/rdmacm.c defines every rdma_*
// function librdmacm exports, with the layouts of Debian's librdmacm-dev
// <rdma/rdma_cma.h>, and rdmacm.go connects them to package rnic/cm, the
// connection manager, on goroce0 (its CM MADs travel on QP1 as with
// rxe). One library rather than a second one, because the CM drives the
// QPs the verbs half created (rdma_create_qp is ibv_create_qp, then the
// CM moves the QP to INIT, and to RTR and RTS as the connection forms),
// and a program linked with both libraries needs both stood in for;
// goroce exec then preloads one file as before. What it does not support
// (multicast, rdma_init_qp_attr, rdma_establish, rdma_notify, rdma_cm
// SRQs, rdma_create_qp_ex, ECE, options but REUSEADDR and AFONLY) fails
// with ENOSYS, and with GOROCE_DEBUG says so once. The rsocket functions
// are not stood in for.
//
// Two libraries, because a program that never calls a verb must not pay
// for a Go runtime:
//
//   - shim/verbs.c, the preloaded object, is C compiled against the
//     system's <infiniband/verbs.h> (Debian's libibverbs-dev). It defines
//     the exported ibv_* functions and fills the context ops table
//     (post_send, post_recv, post_srq_recv, poll_cq, req_notify_cq) that
//     verbs.h's inline functions call, so every structure a program reads
//     (ibv_context inside a verbs_context, ibv_qp, ibv_cq, ibv_wc, ...) has
//     exactly the layout its headers expect. On the first call that needs
//     the device it dlopen()s the core (RTLD_NOW|RTLD_LOCAL, once,
//     pthread_once) from its own directory, or from $GOROCE_VERBS_CORE.
//     The real libibverbs.so.1 stays loaded: the preload's definitions win
//     symbol lookup, and its pure helpers (ibv_wc_status_str,
//     ibv_port_state_str, ibv_node_type_str, ...) serve as they are.
//   - This package, built with -buildmode=c-shared, is the device: one
//     rnic.Device per process named goroce0, opened by the first
//     ibv_open_device, with objects named by the 32-bit handles the shim
//     keeps in ibv_pd.handle, ibv_qp.handle, and so on. It sees only the
//     plain C structures of core.h, never a libibverbs structure, so it
//     builds without libibverbs-dev; its .go files need cgo, and main.go
//     alone keeps the package building with CGO_ENABLED=0.
//
// Memory regions are the program's own memory: the core registers a slice
// over the C buffer (unsafe.Slice), and the device reads and writes it in
// place. No Go pointer is ever handed to C.
//
// The data path calls into Go as little as it can. An ibv_post_send or
// ibv_post_recv list crosses once per 16 WRs (GOROCE_POST_BATCH), and a
// send list is posted as one (rnic.QP.PostSendList: the device is told
// once). Each CQ has a completion ring in the shim's memory (core.h,
// struct goroce_cq_ring): ibv_poll_cq takes completions from it without a
// crossing, and calls into the core only when it is empty, at most once
// per call, to move what the device's CQ holds into it (and, on an empty
// CQ, run the receive path). The ring's unread completions count toward
// the CQ's depth (qp.CQ.SetHeld), so it overruns as a CQ of that depth
// does. A program that polls no CQ while packets arrive, the passive side
// of RDMA WRITEs and READs (ib_write_bw's and ib_read_lat's servers wait on
// their TCP socket), has a goroutine of the device run the receive path in
// a loop until the polling budget passes without a packet (spin.go), as
// goroce perf's passive server does, instead of waking the receive
// goroutine for each burst: ib_read_lat 8 B went from 66-73 to 20 µs.
//
// Receive completions carry what rdma-core's rxe provider reports
// (testdata/rxe-recv-wc.txt, captured on rxe): IBV_WC_GRH on every
// successful receive, RC and UC included; src_qp only for UD (0 on RC and
// UC); sl, slid, dlid_path_bits and pkey_index 0. A UD receive buffer
// starts with the 40-byte GRH area as rxe fills it: for an IPv4 packet 20
// zero bytes, then the IPv4 header; for IPv6 the IPv6 header. Its TOS (or
// traffic class), IPv4 Identification and TTL (or hop limit) are 0, 0 and
// 64 whatever the packet carried: goroce does not read them off its socket.
//
// Completion channels and the async fd are eventfds in semaphore mode, so
// poll and epoll work on them; the core adds one per event and the shim's
// ibv_get_cq_event and ibv_get_async_event read one, then take the event.
// ibv_destroy_cq waits until every event it handed out is acknowledged
// (ibv_ack_cq_events), and ibv_destroy_qp, ibv_destroy_srq and
// ibv_destroy_cq until every async event of the object the program took is
// (ibv_ack_async_event), as rdma-core's do; an object's events nobody took
// go with it.
//
// Fork: the Go runtime does not survive fork, so in the child of a process
// that has loaded the core every verb fails with ENODEV; a child that
// execs, or never calls a verb, is unaffected. Signals: the core is loaded
// with all signals blocked, so the Go runtime's threads inherit that mask
// and the program's asynchronous signals (perftest's SIGALRM for -D) go to
// the program's own threads and handlers. Those handlers get SA_ONSTACK
// added (the shim interposes sigaction, signal, bsd_signal and
// sysv_signal), as the Go runtime requires of C code in its process: a
// signal that lands while a thread is inside a verb then runs its handler
// on the runtime's signal stack, not on the small goroutine stack the
// verb's Go code runs on.
//
// # goroce0 in /dev and sysfs
//
// Programs that look for a device themselves, not through the verbs, find
// goroce0 where they find rxe0: ibstat and ibstatus read sysfs, UCX lists
// a device only if /dev/infiniband/uverbsN is a character device it may
// read and write and reads its GID attributes from sysfs. shim/sysfs.c
// shows them, inside the preloaded process only, with no file on the host:
//
//	/dev/infiniband/uverbs0                  character device 231:192, mode 0666
//	/sys/class/infiniband_verbs/abi_version  6
//	/sys/class/infiniband_verbs/uverbs0      -> ../../devices/virtual/infiniband_verbs/uverbs0:
//	                                         abi_version, dev, ibdev, uevent, subsystem
//	/sys/class/infiniband/goroce0            -> ../../devices/virtual/infiniband/goroce0:
//	                                         fw_ver, node_desc, node_guid, node_type, parent, sys_image_guid,
//	                                         uevent, subsystem, ports/1/{cap_mask, lid, lid_mask_count,
//	                                         link_layer, phys_state, rate, sm_lid, sm_sl, state, gids/N,
//	                                         gid_attrs/types/N, gid_attrs/ndevs/N, pkeys/N}
//
// with the layout, modes and formats Linux gives rxe0 (testdata/rxe0-sysfs.txt,
// captured in the rxe lab), without power/ (runtime power management of a
// device that has none), the CM's counters and hw_counters/ (goroce stat
// shows a device's counters). The values are the core's: the attributes
// ibv_query_device and ibv_query_port report (present.go: the port fields
// rnic does not model, with rxe's values), the GID table ibv_query_gid
// gives, as long as ibv_query_port's gid_tbl_len, its empty entries read as
// rxe's (the zero GID; their attributes fail with EINVAL), and the netdev
// the address lives on (lo for 127.x.y.z). The core answers these queries before the device is opened
// too (rnic.Describe, from GOROCE_ADDR and GOROCE_MTU), so a program that
// only reads sysfs binds no socket; the shim takes the values once and
// keeps them.
//
// The shim interposes the calls programs make on paths: open, openat,
// creat and _FORTIFY_SOURCE's __open_2 variants, fopen, the stat family
// (stat, lstat, fstatat, fstat, statx, and glibc's older __xstat names),
// access, faccessat, euidaccess, opendir, fdopendir, readdir, readdir_r,
// scandir, scandirat, dirfd, rewinddir, telldir, seekdir, closedir,
// readlink, readlinkat, realpath, canonicalize_file_name, chdir, fchdir,
// getcwd, getxattr, listxattr and close. A path that names a node of the
// tree (in any spelling: .., //, a trailing slash, relative after a chdir
// into the tree or to a directory descriptor of it, through its symbolic
// links) is answered from it, one table and one lookup; any other goes to
// libc untouched, and costs a search for "infiniband" in it. A host
// directory that holds one of the tree's lists both: ls /sys/class shows
// infiniband, and a host with rxe0 shows it beside goroce0.
//
// A file opens as a read-only descriptor holding its content (a sealed
// memfd); opening it for writing fails with EACCES, as sysfs refuses it,
// and so does creating a file in the tree. /dev/infiniband/uverbs0 opens
// as a descriptor only the library would use: read, write and ioctl on it
// fail, close works. A directory opens as a descriptor that fstat, fchdir,
// fdopendir and the *at calls take. Where it differs from the kernel's:
// reading a directory's descriptor fails with EINVAL, not EISDIR; the tree
// takes no write (rxe's node_desc does, from root); a program started from
// a shell whose current directory is in the tree starts in the one before
// (the kernel's never changed: use absolute paths); a descriptor copied
// with dup is not known as the tree's; a forked child whose parent used the
// verbs but never read the tree cannot read its values (the Go runtime
// does not survive fork); and the uverbs device is uverbs0 even on a host
// with its own, which the process then does not see.
//
// # UCX
//
// UCX 1.13 (Debian's libucx0, ucx_perftest, Open MPI's pml ucx and osc
// ucx) opens goroce0 as it opens rxe0 and uses the two transports it finds
// on rxe: rc_verbs and ud_verbs (rc_mlx5, dc_mlx5 and ud_mlx5 need mlx5's
// provider, on rxe too). Between two processes of one host UCX prefers
// shared memory; UCX_TLS=rc_verbs,ud_verbs,self (RC, with UD for its
// wire-up) or ud_verbs,self keeps every byte on goroce0, and so does the
// default selection between processes UCX takes for two hosts. Over an
// IPv4 GID, UCX 1.13's UD transport drops every datagram while its RoCE
// destination-GID filter is on, because it reads the IP version from
// wc.sl as mlx5 encodes it, and rxe and goroce report sl 0: goroce exec sets
// UCX_UD_VERBS_ETH_DGID_CHECK=n unless the environment sets it (UCX 1.19
// reads the version from the GRH area). Over IPv6 GIDs the filter passes.
// Open MPI 4.1 runs over it with --mca pml ucx --mca osc ucx, each rank
// under goroce exec on a goroce0 of its own (mpirun ... goroce exec --
// PROGRAM); with UCX_TLS=rc_verbs,ud_verbs,self every byte between the
// ranks crosses goroce0, as each rank's counters show.
// librdmacm's stand-in keeps a context of goroce0 for the CM, as librdmacm
// keeps its devices, and closes it as the process ends (librdmacm's
// destructor does too), so goroce0 closes, and GOROCE_DEBUG prints its
// counters, when a program such as UCX has loaded the CM.
//
// Environment:
//
//	GOROCE_ADDR        the device's IP address, or address:port (default 127.0.0.1, port 4791)
//	GOROCE_MTU         the port's active MTU in bytes (default 4096)
//	GOROCE_BUSY_POLL   how long a CQ wait spins driving the receive path (default 200us; 0: off);
//	                   while on, ibv_poll_cq on an empty CQ reads the socket itself, in the caller's thread,
//	                   and while packets arrive and nothing polls a CQ (the passive side of RDMA WRITEs)
//	                   a goroutine of the device does, until this long passes without a packet
//	GOROCE_TRACE=1     print the packet trace on stderr, as goroce --trace does
//	GOROCE_PCAP=FILE   write every packet to a pcap file, as goroce --pcap does
//	GOROCE_DEBUG=1     say on stderr why a verb failed, once per verb what is unsupported, and as
//	                   goroce0 closes its address and its counters that are not 0 (as goroce stat shows
//	                   a native device's): "goroce0 on 127.0.0.1:4791 closes: sent_pkts 12 ..."
//	GOROCE_VERBS_CORE  the core library's path, if not beside the shim
//	GOROCE_CPUPROFILE  write a CPU profile (runtime/pprof) of the Go side to this file, from the
//	                   first ibv_open_device to the last ibv_close_device
//
// goroce0 has port 1, ACTIVE, link layer Ethernet, and one GID, index 0:
// the address, IPv4-mapped for IPv4, of type RoCE v2. What it does not
// support fails as rdma-core fails for a device without it: NULL with
// errno EOPNOTSUPP, or the error EOPNOTSUPP (libibverbs' dummy_ops.c
// values), and with GOROCE_DEBUG set says so once per verb: QP types other
// than RC, UC and UD (XRC, raw packet, driver types such as DC), XRC
// domains, SRQs and ibv_open_qp, ibv_create_qp_ex with anything beyond a
// PD and the ibv_wr_* API (ibv_qp_to_qp_ex gives NULL), extended CQs
// (ibv_create_cq_ex, ibv_modify_cq), resize_cq, modify_srq/query_srq,
// get_srq_num, post_srq_ops, rereg_mr, on-demand paging (reg_mr with
// IBV_ACCESS_ON_DEMAND, advise_mr), dmabuf MRs, null MRs, device memory,
// flow steering and flow actions, counters, thread and parent domains,
// WQs and RWQ indirection tables, rate limits, query_rt_values, and
// multicast. Memory windows
// of both types work as rxe's do: ibv_alloc_mw, ibv_bind_mw (a BIND_MW
// work request, completed on the send CQ), IBV_WR_BIND_MW, IBV_WR_LOCAL_INV
// and IBV_WR_SEND_WITH_INV.
package main
