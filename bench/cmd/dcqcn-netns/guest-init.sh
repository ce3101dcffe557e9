#!/bin/sh
# /init of dcqcn-netns's router guest (Debian's kernel and busybox from the
# rxe-lab image, with sch_htb, sch_red, virtio_console and iproute2's tc
# appended). Kernel command line:
#   gr.tx=MAC,ADDR/PREFIX  the NIC towards the senders: renamed "tx"
#   gr.rx=MAC,ADDR/PREFIX  the NIC towards the receiver: renamed "rx"
#   gr.mtu=N               both NICs' MTU
# It forwards IPv4 between them (no ICMP redirects, no reverse-path
# filter), then serves the host on two virtio ports. goroce.ctl: each
# line read is a shell command; its standard output follows, then a line
# "@@rc=N"; the port's first line is "@@ready" (or "@@failed: why").
# goroce.tc: one `tc -s -j -batch -` for the whole run, which answers each
# tc command line with one line of JSON, without a process per sample.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
exec </dev/console >/dev/console 2>&1
for kv in $(cat /proc/cmdline); do
  case "$kv" in
    gr.tx=*) TX=${kv#gr.tx=};; gr.rx=*) RX=${kv#gr.rx=};; gr.mtu=*) MTU=${kv#gr.mtu=};;
  esac
done
for m in virtio/virtio_ring virtio/virtio virtio/virtio_pci_modern_dev virtio/virtio_pci_legacy_dev \
    virtio/virtio_pci char/virtio_console; do
  insmod /lib/modules/kernel/drivers/$m.ko || echo "GROUTER: insmod $m failed"
done
insmod /lib/modules/kernel/net/core/failover.ko
insmod /lib/modules/kernel/drivers/net/net_failover.ko
insmod /lib/modules/kernel/drivers/net/virtio_net.ko
insmod /lib/modules/kernel/net/sched/sch_htb.ko
insmod /lib/modules/kernel/net/sched/sch_red.ko
# the ports by name (no udev here to make /dev/virtio-ports/NAME)
port() {
  i=0
  while [ $i -lt 100 ]; do
    for p in /sys/class/virtio-ports/*; do
      [ "$(cat "$p/name" 2>/dev/null)" = "$1" ] && echo "/dev/${p##*/}" && return
    done
    sleep 0.1; i=$((i+1))
  done
}
PORT=$(port goroce.ctl)
TCPORT=$(port goroce.tc)
fail() { echo "GROUTER: $*"; echo "@@failed: $*" > "$PORT"; sync; poweroff -f; }
# nic NAME MAC,ADDR/PREFIX: rename the interface with MAC to NAME, address it
nic() {
  mac=${2%%,*}; addr=${2#*,}
  i=0
  while [ $i -lt 100 ]; do
    for d in /sys/class/net/*; do
      [ "$(cat "$d/address")" = "$mac" ] || continue
      ip link set "${d##*/}" name "$1" || return 1
      ip link set "$1" mtu "$MTU" || return 1
      ip addr add "$addr" dev "$1" || return 1
      ip link set "$1" up
      return
    done
    sleep 0.1; i=$((i+1))
  done
  return 1
}
ip link set lo up
# IPv4 only: IPv6's own packets (router solicitations, MLD reports) would
# cross the bottleneck without ECT, and RED with ecn drops those early
echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
nic tx "$TX" || fail "no NIC $TX"
nic rx "$RX" || fail "no NIC $RX"
for f in /proc/sys/net/ipv4/conf/*/send_redirects /proc/sys/net/ipv4/conf/*/accept_redirects \
    /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > "$f"; done
echo 1 > /proc/sys/net/ipv4/ip_forward
echo "GROUTER: ready on $PORT, kernel $(uname -r)"
# a port opens once at a time: one read-write descriptor for all three
/sbin/tc -s -j -force -batch - <>"$TCPORT" >&0 2>&0 &
exec 3<>"$PORT"
echo "@@ready" >&3
while read -r line <&3; do
  eval "$line" >&3 2>/tmp/err; rc=$?
  echo >&3
  [ $rc = 0 ] || cat /tmp/err >&3
  echo "@@rc=$rc" >&3
done
poweroff -f
