// Command goroce-verbs is the Go core of a preloadable libibverbs: with it,
// unmodified verbs programs (rdma-core's ibv_*_pingpong, ibv_devinfo,
// perftest's ib_write_bw, ...) run on a goroce device inside their own
// process, with no kernel module and no root:
//
//	go build -buildmode=c-shared -o DIR/libgoroce-verbs-core.so ./cmd/goroce-verbs
//	gcc -O2 -shared -fPIC -o DIR/libgoroce-verbs.so cmd/goroce-verbs/shim/*.c -ldl -lpthread
//	LD_PRELOAD=DIR/libgoroce-verbs.so GOROCE_ADDR=127.0.0.2 ibv_rc_pingpong -g 0
//
// The same preload stands in for librdmacm.so.1 too, so programs that
// connect with rdma_cm (rping, ucmatose, udaddy, rdma_server/rdma_client,
// perftest's -R, libfabric's verbs provider) run unmodified:
// shim/rdmacm.c defines every rdma_* function librdmacm exports, with the
// layouts of Debian's librdmacm-dev <rdma/rdma_cma.h>, and rdmacm.go
// connects them to package rnic/cm, the connection manager, on goroce0
// (its CM MADs travel on QP1 as with rxe). One library rather than a
// second one, because the CM drives the QPs the verbs half created
// (rdma_create_qp is ibv_create_qp, then the CM moves the QP to INIT, and
// to RTR and RTS as the connection forms), and a program linked with both
// libraries needs both stood in for; goroce exec then preloads one file as
// before. As with the kernel's rdma_cm, an ID bound to the wildcard
// address or to a loopback one that is not goroce0's is bound to no
// device (id->verbs stays NULL) until it resolves a peer, and a listener
// on it takes requests to goroce0's address: libfabric binds "localhost"
// so, then each interface's address, to learn which addresses are a
// device's. What it does not support (multicast, rdma_init_qp_attr,
// rdma_establish, rdma_notify, rdma_cm SRQs, rdma_create_qp_ex, ECE,
// options but REUSEADDR and AFONLY) fails with ENOSYS, and with
// GOROCE_DEBUG says so once. The rsocket functions are not stood in for.
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
// ibv_post_recv list crosses once per 16 WRs (GOROCE_POST_BATCH), and the
// device is told once per crossing, after its last WR
// (rnic.QP.QueueSendList, then Post); ibv_wr_complete crosses once for
// every WR built since ibv_wr_start, so a batch of the ibv_wr_* API is one
// crossing and one doorbell however long. Each CQ has a completion ring in the shim's memory (core.h,
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
// goroutine for each burst, which would put a wake-up into every round
// trip.
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
//	GOROCE_MTU         the port's active MTU in bytes (default: rxe's on the netdev the address lives on, the
//	                   largest of 256 ... 4096 that fits in its MTU less 80 bytes: 4096 on lo, 1024 on 1500;
//	                   4096 on an address of no interface)
//	GOROCE_BUSY_POLL   how long a CQ wait spins driving the receive path (default 200us; 0: off);
//	                   while on, ibv_poll_cq on an empty CQ reads the socket itself, in the caller's thread,
//	                   and while packets arrive and nothing polls a CQ (the passive side of RDMA WRITEs)
//	                   a goroutine of the device does, until this long passes without a packet
//	GOROCE_TRACE=1     print the packet trace on stderr, as goroce --trace does
//	GOROCE_PCAP=FILE   write every packet to a pcap file, as goroce --pcap does
//	GOROCE_DEBUG=1     say on stderr why a verb failed, once per verb what is unsupported, and as
//	                   goroce0 closes its address and its counters that are not 0 (as goroce stat shows
//	                   a native device's): "goroce0 on 127.0.0.1:4791 closes: sent_pkts 12 ...", and
//	                   how often the threads polling its CQs offered their P to the runtime (cq.go)
//	GOROCE_VERBS_CORE  the core library's path, if not beside the shim
//	GOROCE_CPUPROFILE  write a CPU profile (runtime/pprof) of the Go side to this file, from the
//	                   first ibv_open_device to the last ibv_close_device
//
// goroce0 has port 1, ACTIVE, link layer Ethernet, and a GID table of
// 1024 entries as rxe's, of which index 0 holds one: the address,
// IPv4-mapped for IPv4, of type RoCE v2.
//
// # The extended verbs
//
// The extended verbs rxe's provider has are shim/verbs_ex.c's, with rxe's
// errno values (testdata/ext_qp.rxe-api.txt holds what rxe answered, in
// the lab, to the calls TestExtQP makes of goroce0):
// ibv_create_cq_ex with the ibv_cq_ex poll API, whose ibv_start_poll and
// ibv_next_poll read the completion ring ibv_poll_cq reads, crossing into
// the core only when it is empty, and whose ibv_wc_read_* accessors are
// those wc_flags asks for, as with rxe (the others stay NULL); and
// ibv_create_qp_ex with the ibv_wr_* API for RC, UC and UD, whose builders
// and setters write work requests into the QP's memory in the shim, and
// whose ibv_wr_complete hands all of them to the core in one call, which
// posts them GOROCE_POST_BATCH at a time as it does an ibv_post_send list.
// The two APIs mix freely on one QP and one CQ. Memory windows of both
// types work as rxe's do: ibv_alloc_mw, ibv_bind_mw (a BIND_MW work
// request, completed on the send CQ), IBV_WR_BIND_MW and ibv_wr_bind_mw,
// IBV_WR_LOCAL_INV and IBV_WR_SEND_WITH_INV, on an MR that has MW_BIND
// (and LOCAL_WRITE, for a window that grants remote writes or atomics).
//
// # No verb crashes
//
// The preload defines every function libibverbs.so.1 and librdmacm.so.1
// export but their pure helpers, so no call reaches the real libraries
// with an object of goroce0's (they would look for a provider's private
// structures in it, and crash). Each takes objects only from the table of
// live ones (shim/live.c): a NULL, destroyed or foreign object, or one of
// another kind, is EINVAL, what the kernel answers for a handle that
// names nothing. TestSymbolSweep reads the two libraries' dynamic symbol
// tables and runs testdata/sweep.c, which calls each function with valid
// and bad arguments; a function the libraries gain fails it until the
// sweep calls it, and TestVerbsTable holds the table below to the same
// symbol tables. A binary built against libibverbs 1.0 (before 2007,
// whose ABI the library keeps as IBVERBS_1.0 symbols) binds to the
// preload's unversioned functions and their 1.1 layouts: it is not
// supported.
//
// # Every verb
//
// What each exported function does on goroce0: "works", "EOPNOTSUPP as
// rdma-core" (its answer for a device without the function), or "works
// differently from rxe" and why. "libibverbs' own" functions are the real
// library's, which serve as they are.
//
// libibverbs.so.1:
//
//	__ioctl_final_num_attrs           works: libibverbs' own (pure)
//	__verbs_log                       works: a provider's log, on stderr under GOROCE_DEBUG
//	_ibv_query_gid_ex                 works (ibv_query_gid_ex): an index of the table with no GID is ENODATA
//	_ibv_query_gid_table              works (ibv_query_gid_table)
//	_verbs_init_and_alloc_context     EOPNOTSUPP as rdma-core: the provider interface; goroce0 is no provider's device
//	execute_ioctl                     EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_ack_async_event               works
//	ibv_ack_cq_events                 works
//	ibv_alloc_pd                      works
//	ibv_attach_mcast                  works differently from rxe: EOPNOTSUPP, goroce0 has no multicast
//	ibv_close_device                  works
//	ibv_cmd_advise_mr                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_alloc_dm                  EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_alloc_mw                  EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_alloc_pd                  EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_attach_mcast              EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_close_xrcd                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_ah                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_counters           EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_cq                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_cq_ex              EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_flow               EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_flow_action_esp    EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_qp                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_qp_ex              EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_qp_ex2             EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_rwq_ind_table      EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_srq                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_srq_ex             EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_create_wq                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_dealloc_mw                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_dealloc_pd                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_dereg_mr                  EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_destroy_ah                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_destroy_counters          EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_destroy_cq                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_destroy_flow              EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_destroy_flow_action       EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_destroy_qp                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_destroy_rwq_ind_table     EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_destroy_srq               EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_destroy_wq                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_detach_mcast              EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_free_dm                   EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_get_context               EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_modify_cq                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_modify_flow_action_esp    EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_modify_qp                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_modify_qp_ex              EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_modify_srq                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_modify_wq                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_open_qp                   EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_open_xrcd                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_poll_cq                   EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_post_recv                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_post_send                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_post_srq_recv             EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_query_context             EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_query_device_any          EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_query_mr                  EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_query_port                EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_query_qp                  EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_query_srq                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_read_counters             EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_reg_dm_mr                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_reg_dmabuf_mr             EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_reg_mr                    EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_req_notify_cq             EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_rereg_mr                  EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_cmd_resize_cq                 EOPNOTSUPP as rdma-core: the provider interface; goroce0 has no kernel command channel
//	ibv_copy_ah_attr_from_kern        works: libibverbs' own once its pointers are checked
//	ibv_copy_path_rec_from_kern       works: libibverbs' own once its pointers are checked
//	ibv_copy_path_rec_to_kern         works: libibverbs' own once its pointers are checked
//	ibv_copy_qp_attr_from_kern        works: libibverbs' own once its pointers are checked
//	ibv_create_ah                     works
//	ibv_create_ah_from_wc             works
//	ibv_create_comp_channel           works
//	ibv_create_cq                     works
//	ibv_create_qp                     works
//	ibv_create_srq                    works
//	ibv_dealloc_pd                    works
//	ibv_dereg_mr                      works
//	ibv_destroy_ah                    works
//	ibv_destroy_comp_channel          works
//	ibv_destroy_cq                    works
//	ibv_destroy_qp                    works
//	ibv_destroy_srq                   works
//	ibv_detach_mcast                  works differently from rxe: EOPNOTSUPP, goroce0 has no multicast
//	ibv_dofork_range                  works: 0, nothing to keep from a child (see Fork)
//	ibv_dontfork_range                works: 0, nothing to keep from a child (see Fork)
//	ibv_event_type_str                works: libibverbs' own (pure)
//	ibv_fork_init                     works: 0, fork needs no setup (see Fork)
//	ibv_free_device_list              works
//	ibv_get_async_event               works
//	ibv_get_cq_event                  works
//	ibv_get_device_guid               works
//	ibv_get_device_index              works: 0, the process's one device
//	ibv_get_device_list               works
//	ibv_get_device_name               works
//	ibv_get_pkey_index                works
//	ibv_get_sysfs_path                works: libibverbs' own (pure)
//	ibv_import_device                 EOPNOTSUPP as rdma-core (rxe's too): an object lives in one process's device
//	ibv_import_dm                     EOPNOTSUPP as rdma-core (rxe's too): an object lives in one process's device
//	ibv_import_mr                     EOPNOTSUPP as rdma-core (rxe's too): an object lives in one process's device
//	ibv_import_pd                     EOPNOTSUPP as rdma-core (rxe's too): an object lives in one process's device
//	ibv_init_ah_from_wc               works
//	ibv_is_fork_initialized           works: IBV_FORK_UNNEEDED (see Fork)
//	ibv_modify_qp                     works
//	ibv_modify_srq                    works differently from rxe: EOPNOTSUPP, an SRQ keeps its size and limit
//	ibv_node_type_str                 works: libibverbs' own (pure)
//	ibv_open_device                   works
//	ibv_port_state_str                works: libibverbs' own (pure)
//	ibv_qp_to_qp_ex                   works: the ibv_qp_ex of a QP of ibv_create_qp_ex
//	ibv_query_device                  works
//	ibv_query_ece                     EOPNOTSUPP as rdma-core (rxe's too)
//	ibv_query_gid                     works: an index with no GID gives a zero GID, as rdma-core
//	ibv_query_gid_type                works
//	ibv_query_pkey                    works
//	ibv_query_port                    works
//	ibv_query_qp                      works
//	ibv_query_qp_data_in_order        works: 0, as rxe (no in-order guarantee claimed)
//	ibv_query_srq                     works differently from rxe: EOPNOTSUPP
//	ibv_rate_to_mbps                  works: libibverbs' own (pure)
//	ibv_rate_to_mult                  works: libibverbs' own (pure)
//	ibv_read_ibdev_sysfs_file         EOPNOTSUPP as rdma-core: the provider interface; goroce0 is no provider's device
//	ibv_read_sysfs_file               works: libibverbs' own (pure)
//	ibv_reg_dmabuf_mr                 EOPNOTSUPP as rdma-core (rxe's too)
//	ibv_reg_mr                        works
//	ibv_reg_mr_iova                   works
//	ibv_reg_mr_iova2                  works
//	ibv_register_driver               works: does nothing, as rdma-core's since version 13
//	ibv_rereg_mr                      works differently from rxe: IBV_REREG_MR_ERR_INPUT with errno EOPNOTSUPP, an MR keeps its PD and access
//	ibv_resize_cq                     works differently from rxe: EOPNOTSUPP, a CQ keeps its size
//	ibv_resolve_eth_l2_from_gid       works differently from rxe: EOPNOTSUPP, goroce0 sends through UDP sockets and resolves no Ethernet address
//	ibv_set_ece                       EOPNOTSUPP as rdma-core (rxe's too)
//	ibv_unimport_dm                   works: does nothing, as nothing can be imported
//	ibv_unimport_mr                   works: does nothing, as nothing can be imported
//	ibv_unimport_pd                   works: does nothing, as nothing can be imported
//	ibv_wc_status_str                 works: libibverbs' own (pure)
//	mbps_to_ibv_rate                  works: libibverbs' own (pure)
//	mult_to_ibv_rate                  works: libibverbs' own (pure)
//	verbs_allow_disassociate_destroy  works: libibverbs' own (a flag of its commands, which goroce0 never runs)
//	verbs_init_cq                     works
//	verbs_open_device                 works: as ibv_open_device
//	verbs_register_driver_34          works: does nothing, goroce0's device list is goroce0
//	verbs_set_ops                     works: does nothing, a goroce0 context has no provider ops
//	verbs_uninit_context              works: does nothing, a goroce0 context has no provider part
//
// librdmacm.so.1:
//
//	raccept                           works differently from rxe: EBADF, no rsocket exists
//	rbind                             works differently from rxe: EBADF, no rsocket exists
//	rclose                            works differently from rxe: EBADF, no rsocket exists
//	rconnect                          works differently from rxe: EBADF, no rsocket exists
//	rdma_accept                       works
//	rdma_ack_cm_event                 works
//	rdma_bind_addr                    works
//	rdma_connect                      works
//	rdma_create_ep                    works
//	rdma_create_event_channel         works
//	rdma_create_id                    works
//	rdma_create_qp                    works
//	rdma_create_qp_ex                 works differently from rxe: ENOSYS, QPs through rdma_create_qp
//	rdma_create_srq                   works differently from rxe: ENOSYS, goroce's CM makes no SRQs
//	rdma_create_srq_ex                works differently from rxe: ENOSYS, goroce's CM makes no SRQs
//	rdma_destroy_ep                   works
//	rdma_destroy_event_channel        works
//	rdma_destroy_id                   works
//	rdma_destroy_qp                   works
//	rdma_destroy_srq                  works: does nothing, no SRQ can be made
//	rdma_disconnect                   works
//	rdma_establish                    works differently from rxe: ENOSYS, goroce's CM moves the QP itself
//	rdma_event_str                    works
//	rdma_free_devices                 works
//	rdma_freeaddrinfo                 works
//	rdma_get_cm_event                 works
//	rdma_get_devices                  works
//	rdma_get_dst_port                 works
//	rdma_get_remote_ece               works differently from rxe: ENOSYS, no ECE
//	rdma_get_request                  works
//	rdma_get_src_port                 works
//	rdma_getaddrinfo                  works
//	rdma_init_qp_attr                 works differently from rxe: ENOSYS, goroce's CM moves the QP itself
//	rdma_join_multicast               works differently from rxe: ENOSYS, no multicast
//	rdma_join_multicast_ex            works differently from rxe: ENOSYS, no multicast
//	rdma_leave_multicast              works differently from rxe: ENOSYS, no multicast
//	rdma_listen                       works
//	rdma_migrate_id                   works
//	rdma_notify                       works differently from rxe: ENOSYS, goroce's CM moves the QP itself
//	rdma_reject                       works
//	rdma_reject_ece                   works differently from rxe: ENOSYS, no ECE
//	rdma_resolve_addr                 works
//	rdma_resolve_route                works
//	rdma_set_local_ece                works differently from rxe: ENOSYS, no ECE
//	rdma_set_option                   works: REUSEADDR; AFONLY taken, it changes nothing on goroce0's one family; the other options ENOSYS
//	rfcntl                            works differently from rxe: EBADF, no rsocket exists
//	rgetpeername                      works differently from rxe: EBADF, no rsocket exists
//	rgetsockname                      works differently from rxe: EBADF, no rsocket exists
//	rgetsockopt                       works differently from rxe: EBADF, no rsocket exists
//	riomap                            works differently from rxe: EBADF, no rsocket exists
//	riounmap                          works differently from rxe: EBADF, no rsocket exists
//	riowrite                          works differently from rxe: EBADF, no rsocket exists
//	rlisten                           works differently from rxe: EBADF, no rsocket exists
//	rpoll                             works: poll and select, as no rsocket exists
//	rread                             works differently from rxe: EBADF, no rsocket exists
//	rreadv                            works differently from rxe: EBADF, no rsocket exists
//	rrecv                             works differently from rxe: EBADF, no rsocket exists
//	rrecvfrom                         works differently from rxe: EBADF, no rsocket exists
//	rrecvmsg                          works differently from rxe: EBADF, no rsocket exists
//	rselect                           works: poll and select, as no rsocket exists
//	rsend                             works differently from rxe: EBADF, no rsocket exists
//	rsendmsg                          works differently from rxe: EBADF, no rsocket exists
//	rsendto                           works differently from rxe: EBADF, no rsocket exists
//	rsetsockopt                       works differently from rxe: EBADF, no rsocket exists
//	rshutdown                         works differently from rxe: EBADF, no rsocket exists
//	rsocket                           works differently from rxe: ENOSYS, rsockets are not stood in for
//	rwrite                            works differently from rxe: EBADF, no rsocket exists
//	rwritev                           works differently from rxe: EBADF, no rsocket exists
//
// Not in the table, since they are inline functions of verbs.h that call
// the context's ops (ibv_post_send, ibv_poll_cq, ibv_req_notify_cq,
// ibv_alloc_mw, ibv_bind_mw, ...) or the extended ones above: they work;
// those of ops goroce0 lacks (ibv_open_xrcd, ibv_create_srq_ex,
// ibv_create_flow, ibv_alloc_dm, ibv_create_counters, ibv_alloc_td,
// ibv_alloc_parent_domain, ibv_create_wq, ibv_create_rwq_ind_table,
// ibv_advise_mr, ibv_modify_cq, ibv_modify_qp_rate_limit, ibv_get_srq_num,
// ibv_post_srq_ops, ibv_query_rt_values_ex, ibv_open_qp, ibv_alloc_null_mr)
// answer EOPNOTSUPP as rdma-core's dummy ops do, and with GOROCE_DEBUG
// say so once.
//
// Differences from the lab's rxe (Linux 6.1, rdma-core 44) that are not
// of a verb: a SEND_WITH_INV receive is marked IBV_WC_WITH_INV (rxe marks
// it with the kernel's bit for it, which user space reads as
// IBV_WC_IP_CSUM_OK); RC and UC receives do not say IBV_WC_GRH (rxe's
// always do); an error completion keeps its work request's opcode (rxe's
// is 0); ATOMIC WRITE is refused at ibv_create_qp_ex (rxe's provider
// takes IBV_QP_EX_WITH_ATOMIC_WRITE, the 6.1 kernel does not carry it
// out); an ibv_wr_* batch the device refuses part of (a QP not in RTS, an
// opcode of another QP type) stops there, the WRs before posted, as an
// ibv_post_send list does (rxe's wr_complete posts the whole batch and
// fails the WRs as they run).
package main
