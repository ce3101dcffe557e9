// Command rxe-interop runs goroce's verbs ping-pong examples and its
// perftest against the Linux Soft-RoCE driver (rxe), on the wire, and says
// case by case whether the two interoperate.
//
// The rxe side is the real kernel driver with rdma-core's ibv_rc_pingpong,
// ibv_uc_pingpong and ibv_ud_pingpong and perftest's ib_write_bw,
// ib_read_bw, ib_send_bw, ib_atomic_bw (FETCH_ADD), ib_send_lat,
// ib_write_lat and ib_read_lat, booted by the rxe lab (../shared/rxe-lab, beside the repository)
// in one small QEMU guest inside a private network namespace. The goroce
// side is `goroce pingpong` or `goroce perf` on the namespace's bridge
// address (10.99.0.254, fd00:99::254); as perftest's client, goroce perf
// speaks perftest's side channel (--exchange perftest), and as its server
// it recognises it. Each ping-pong case swaps one RC, UC or UD ping-pong
// of -iters messages; each perftest case runs -perf-iters operations
// (4096-byte messages, 8192 at MTU 4096; 64 bytes for latency; 8 for
// atomics). Every combination of
//
//	program    rc, uc, ud ping-pong (-transports); the perftest programs
//	           (-perftests)
//	rxe role   server (goroce connects to the guest) or client (the guest
//	           connects to goroce)
//	family     ipv4 (GID ::ffff:10.99.0.x) or ipv6 (GID fd00:99::x); the TCP
//	           side channel stays on IPv4, as the examples only listen there
//	MTU        1024 (guest eth0 MTU 1500) or 4096 (eth0 MTU 9000)
//
// runs in one guest boot, and so does each preloaded case (-preload): the
// same, but goroce's side is the unmodified Debian program rxe runs
// (ibv_rc/uc/ud_pingpong, ibv_srq_pingpong with 4 QPs, and the seven
// perftest programs), started by `goroce exec` with goroce's libibverbs
// preloaded, on goroce0 (GID index 0); and ibv_rc_pingpong, ib_send_bw
// and ib_send_lat once more in event mode (-e on both sides: each program
// sleeps on its completion channel instead of spinning on its CQ):
//
//	interop: rc_pingpong preloaded rxe-server ipv4 mtu=1024 PASS (...)
//	interop: rc_pingpong -e preloaded rxe-server ipv4 mtu=1024 PASS (...)
//
// and so does each rdma_cm case (-rdmacm): librdmacm's rping on rxe
// against `goroce rping`, which connect with CM MADs on QP1 instead of a
// side channel (rping.go says what such a case checks):
//
//	interop: rping rxe-client ipv6 mtu=1024 PASS (...)
//
// and so does each preloaded rdma_cm case (-rdmacm rping-preload,
// ucmatose, udaddy, rdma_server, fi_pingpong): Debian's rping -V,
// ucmatose, udaddy (UD, resolved with SIDR REQ/REP), rdma_server/
// rdma_client and libfabric's fi_pingpong (its verbs provider's MSG
// endpoints, IPv4 only) on both sides, goroce's under `goroce exec` with
// its librdmacm preloaded too, at MTU 1024 only (their messages, 16 to
// 4096 bytes, fit one to four packets, so 4096 would add nothing).
// Preloaded rping is checked as rping is; ucmatose and udaddy pass when
// both sides print "test complete" and "return status 0", rdma_server and
// rdma_client when they print "rdma_server: end 0" and "rdma_client: end
// 0", fi_pingpong when both sides checked every message (-c) and printed
// its row with every message sent and acknowledged (rdmacm.go):
//
//	interop: ucmatose preloaded rxe-server ipv6 mtu=1024 PASS (...)
//
// and so does each case of goroce's own C programs (-own, own.go): ext_qp
// (cmd/goroce-verbs/testdata/ext_qp.c), built on the host and run under
// `goroce exec` on goroce and, copied into the guest (the lab's
// RXE_LAB_ADD), on rxe: the extended verbs (ibv_wr_* on RC, UC and UD,
// the ibv_cq_ex poll API), READ, atomics and memory windows bound,
// invalidated and rebound, each side the sender in turn and checking
// what it received; both sides must pass every check, print the same
// "api:" lines (the extended verbs' errno values), and send what their
// "wire:" lines say, at MTU 1024:
//
//	interop: ext_qp preloaded rxe-client ipv6 mtu=1024 PASS (...)
//
// and so does each UCX case (-ucx, ucx.go): Debian's ucx_perftest (UCX
// 1.13) at UCT level over rc_verbs on both sides, goroce's under `goroce
// exec`, each side running the test from a batch file that names its own
// device (goroce0:1, rxe0:1, with UCX_IB_GID_INDEX choosing rxe's GID of
// the family): am_lat_rc, an 8-byte active-message ping-pong, whose last
// -n SENDs each way must carry the iteration's sequence number in order,
// and put_bw_rc, RDMA WRITEs of 64 KiB from the client, at MTU 1024:
//
//	interop: ucx_am_lat_rc preloaded rxe-server ipv4 mtu=1024 PASS (...)
//
// perftest's -R (connect with rdma_cm) is not a case: ib_write_bw -R does
// not complete even rxe to rxe in the lab.
//
// All cases the guest runs rxe's side of each case in turn,
// each on its own TCP port so that a case that goes wrong cannot spill into
// the next, and raises eth0's MTU between the 1024 and the 4096 cases (rxe
// follows the netdev MTU). A case passes when both programs exit 0 and a
// capture of the bridge holds RoCEv2 packets in both directions, every one
// with an ICRC that verifies against the captured IP and UDP headers
// (checked with `goroce pcap`, which sees the IPv4 Identification field
// that a UDP socket hides), and when the data and the packets are what
// they should be:
//
//   - ping-pong: both sides run with -c. rxe's server checks what goroce's
//     client sent (rdma-core's -c: a zero at each page start; it prints
//     "invalid data in page N", which fails the case); goroce checks every
//     message it receives in both roles, in a receive area poisoned before
//     each receive, and must report all -iters of them checked.
//   - perftest: perftest sends rand() bytes, so the capture is the oracle:
//     every payload goroce sent is its pattern, the atomic original values
//     it returned are what its memory held, and its buffers hold the last
//     READ response, atomic value, SEND or WRITE rxe sent (goroce perf
//     --data-report prints their CRC).
//   - preloaded: neither program says what it received, so the capture
//     is the oracle where the programs' buffers are known: every message
//     of the ping-pongs (rdma-core's -c fill: 0x7b with a zero at each
//     page start; srq: zeros) and of ib_write_lat (zeros ending in the
//     message count), both ways; ib_atomic_bw runs two rounds of its 64
//     targets, so each second-round original value must be the first
//     plus its add; ib_read_bw and ib_read_lat return, and ib_write_bw
//     and ib_send_bw send, the same (rand()) bytes every time. Only
//     ib_send_lat's data is not checked (it receives into what it sends).
//     rdma-core's examples fix their QP timeout at 67 ms, which a TCG
//     guest can outlast: goroce's retransmissions after that timeout,
//     with no NAK, each ACKed again by rxe, are allowed there (see
//     timedOutRetransmits).
//   - the wire: exactly the request, READ response and atomic ACK packets
//     the case calls for from each side, ACKs within bounds, and no NAK,
//     no retransmission and no duplicate from goroce (see wantWire and
//     maxRxeDuplicates). perftest runs with a 1 s QP timeout (-u 18): a
//     TCG guest can take longer than the default 67 ms to ACK.
//
// Output, one line per case and a summary:
//
//	interop: rc_pingpong rxe-server ipv4 mtu=1024 PASS (5 x 1024 B, data checked by goroce (5 messages,
//	    goroce's -c pattern) and rxe (-c); wire: goroce 10 pkts 5120 B, 5 acks 0 naks 0 retx;
//	    rxe 10 pkts 5120 B, 5 acks 0 naks 0 retx; ICRC ok on 20)
//	interop: ib_write_bw rxe-client ipv4 mtu=1024 PASS (20 x 4096 B, data checked: the last 4096 B
//	    goroce received (crc32 0x53422de9); wire: goroce 6 pkts 0 B, 6 acks 0 naks 0 retx;
//	    rxe 80 pkts 81920 B, 0 acks 0 naks 0 retx; ICRC ok on 86)
//	summary: interop passed=N failed=N skipped=N
//
// A failed case is followed by indented lines: goroce's last words, the
// last lines rxe printed, and the first decoded packets of its capture.
// Everything (serial log, goroce's output, one pcap per case) stays in the
// -out directory.
//
// Usage, as root, from the module root:
//
//	go run ./cmd/rxe-interop [-goroce BIN] [-lab PATH] [-out DIR] [-v]
//	    [-transports rc,uc,ud|none] [-perftests write_bw,...|none]
//	    [-preload rc,uc,ud,srq,write_bw,...,rc-e,send_bw-e,send_lat-e|none]
//	    [-rdmacm rping,rping-preload,ucmatose,udaddy,rdma_server,fi_pingpong|none] [-own ext_qp|none]
//	    [-ucx am_lat_rc,put_bw_rc|none]
//	    [-roles server,client] [-families ipv4,ipv6] [-mtus 1024,4096]
//	    [-iters 5] [-perf-iters 20]
//
// Exit status: 0 when every case passed, 1 when one failed, 2 on bad flags,
// 77 when the lab cannot run on this machine (not root, no /dev/net/tun,
// network namespaces refused): then every case is reported as skipped,
// which .ci/interop turns into a failure under GOROCE_CI_STRICT=1.
//
// Where it sits: outside the stack, next to cmd/goroce, whose binary it
// builds (or takes with -goroce) and drives as a black box; for the
// preloaded cases its `goroce exec` builds the libraries (go, gcc and
// libibverbs-dev) before the guest boots, and the namespace side needs
// Debian's ibverbs-utils, perftest, rdmacm-utils and ucx-utils.
package main
