// Package qemurouter boots a Linux router as a QEMU/TCG guest, for tests
// and experiments that need a qdisc this host's kernel lacks (sch_red,
// sch_netem): the guest runs Debian's kernel from the rxe lab's image
// (rxe-lab setup: vmlinuz, an initramfs with busybox and iproute2, and
// the kernel's packages unpacked beside them).
//
// The guest boots the lab's vmlinuz and initramfs, untouched, with an
// archive appended that holds init.sh as /init, iproute2's tc, and the
// kernel modules the caller names (Config.Modules) with virtio_console.
// Each of its NICs is a virtio NIC on a tap the package creates in a
// network namespace of the caller's; the guest names the NIC, addresses
// it, and forwards IPv4 between its NICs (no ICMP redirects, no
// reverse-path filter, no IPv6). The host runs commands in the guest
// (Router.Run) and samples qdiscs (Router.Qdiscs) over virtio serial
// ports. The guest runs on an emulated CPU: it forwards tens of Mb/s,
// in bunches when the host is busy.
//
// Where it sits: below bench/cmd/dcqcn-netns (the guest as the incast's
// bottleneck, with RED) and package nccl's multi-host test (the guest as
// the link between two hosts, with netem); it knows neither.
package qemurouter
