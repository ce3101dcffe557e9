#!/bin/sh
# /init of package qemurouter's router guest (Debian's kernel and busybox
# from the rxe-lab image, with virtio_console, the modules asked for and
# iproute2's tc appended). Kernel command line:
#   gr.nic=NAME,MAC,ADDR/PREFIX  a NIC: the one with MAC is renamed NAME
#                                and addressed (one gr.nic per NIC)
#   gr.mtu=N                     every NIC's MTU
#   gr.mods=PATH,...             modules to load, by path under kernel/
#                                without .ko (net/sched/sch_netem)
# It forwards IPv4 between the NICs (no ICMP redirects, no reverse-path
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
    gr.nic=*) NICS="$NICS ${kv#gr.nic=}";; gr.mtu=*) MTU=${kv#gr.mtu=};; gr.mods=*) MODS=${kv#gr.mods=};;
  esac
done
for m in virtio/virtio_ring virtio/virtio virtio/virtio_pci_modern_dev virtio/virtio_pci_legacy_dev \
    virtio/virtio_pci char/virtio_console; do
  insmod /lib/modules/kernel/drivers/$m.ko || echo "GROUTER: insmod $m failed"
done
insmod /lib/modules/kernel/net/core/failover.ko
insmod /lib/modules/kernel/drivers/net/net_failover.ko
insmod /lib/modules/kernel/drivers/net/virtio_net.ko
for m in $(echo "$MODS" | tr , ' '); do
  insmod "/lib/modules/kernel/$m.ko" || echo "GROUTER: insmod $m failed"
done
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
# nic NAME,MAC,ADDR/PREFIX: rename the interface with MAC to NAME, address it
nic() {
  name=${1%%,*}; rest=${1#*,}; mac=${rest%%,*}; addr=${rest#*,}
  i=0
  while [ $i -lt 100 ]; do
    for d in /sys/class/net/*; do
      [ "$(cat "$d/address")" = "$mac" ] || continue
      ip link set "${d##*/}" name "$name" || return 1
      ip link set "$name" mtu "$MTU" || return 1
      ip addr add "$addr" dev "$name" || return 1
      ip link set "$name" up
      return
    done
    sleep 0.1; i=$((i+1))
  done
  return 1
}
ip link set lo up
# IPv4 only: IPv6's own packets (router solicitations, MLD reports) would
# cross a bottleneck without ECT, and RED with ecn drops those early
echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
for n in $NICS; do
  nic "$n" || fail "no NIC $n"
done
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
