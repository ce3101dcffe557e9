// Command rxe-interop runs goroce's verbs ping-pong examples and its
// perftest against the Linux Soft-RoCE driver (rxe), on the wire, and says
// case by case whether the two interoperate.
//
// The rxe side is the real kernel driver with rdma-core's ibv_rc_pingpong,
// ibv_uc_pingpong and ibv_ud_pingpong and perftest's ib_write_bw,
// ib_read_bw, ib_send_bw, ib_atomic_bw (FETCH_ADD), ib_send_lat,
// ib_write_lat and ib_read_lat, booted by the rxe lab (/work/shared/rxe-lab)
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
// runs in one guest boot: the guest runs rxe's side of each case in turn,
// each on its own TCP port so that a case that goes wrong cannot spill into
// the next, and raises eth0's MTU between the 1024 and the 4096 cases (rxe
// follows the netdev MTU). A case passes when both programs exit 0 and a
// capture of the bridge holds RoCEv2 packets in both directions, every one
// with an ICRC that verifies against the captured IP and UDP headers
// (checked with `goroce pcap`, which sees the IPv4 Identification field
// that a UDP socket hides). When goroce is a ping-pong client it also
// checks the payload (-c): rxe's examples send back the buffer they
// received into.
//
// Output, one line per case and a summary:
//
//	interop: rc_pingpong rxe-server ipv4 mtu=1024 PASS (5 x 1024 B, payload checked, 20 packets, ICRC ok)
//	interop: ib_write_bw rxe-client ipv4 mtu=1024 PASS (20 x 4096 B, 86 packets, ICRC ok)
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
//	    [-roles server,client] [-families ipv4,ipv6] [-mtus 1024,4096]
//	    [-iters 5] [-perf-iters 20]
//
// Exit status: 0 when every case passed, 1 when one failed, 2 on bad flags,
// 77 when the lab cannot run on this machine (not root, no /dev/net/tun,
// network namespaces refused): then every case is reported as skipped.
//
// Where it sits: outside the stack, next to cmd/goroce, whose binary it
// builds (or takes with -goroce) and drives as a black box.
package main
