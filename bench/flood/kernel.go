package flood

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// KernelCounts are what Linux counts of the datagrams it could not hand to
// the victim. Known says whether /proc had them (Linux only).
type KernelCounts struct {
	Known bool
	// SocketDrops: datagrams the victim's socket dropped because its
	// receive buffer was full (the drops column of /proc/net/udp).
	SocketDrops uint64
	// BacklogDrops: packets dropped system-wide because a CPU's input
	// backlog (net.core.netdev_max_backlog) was full: on loopback every
	// datagram passes through it (column 2 of /proc/net/softnet_stat).
	BacklogDrops uint64
	// RcvbufErrors: datagrams dropped system-wide for a full socket
	// buffer (Udp RcvbufErrors in /proc/net/snmp), other processes'
	// included.
	RcvbufErrors uint64
	// RxQueue is the bytes waiting in the victim's socket.
	RxQueue uint64
}

// sub returns the drops counted since before; RxQueue is k's.
func (k KernelCounts) sub(before KernelCounts) KernelCounts {
	return KernelCounts{Known: k.Known && before.Known, SocketDrops: k.SocketDrops - before.SocketDrops,
		BacklogDrops: k.BacklogDrops - before.BacklogDrops, RcvbufErrors: k.RcvbufErrors - before.RcvbufErrors, RxQueue: k.RxQueue}
}

// readKernel reads the counts for the IPv4 UDP socket bound to addr.
func readKernel(addr netip.AddrPort) KernelCounts {
	var k KernelCounts
	var err error
	k.RxQueue, k.SocketDrops, err = udpSocket(addr)
	if err != nil {
		return KernelCounts{}
	}
	if k.BacklogDrops, err = backlogDrops(); err != nil {
		return KernelCounts{}
	}
	if k.RcvbufErrors, err = snmpUDP("RcvbufErrors"); err != nil {
		return KernelCounts{}
	}
	k.Known = true
	return k
}

// udpSocket finds the socket bound to addr in /proc/net/udp and returns its
// receive queue in bytes and its drop count. A line reads:
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ref pointer drops
//	 7: 010A4D7F:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 12345 2 000000000a33155e 0
//
// where the address is the 32-bit word as the kernel holds it (network
// byte order) printed as a native-endian number.
func udpSocket(addr netip.AddrPort) (rxQueue, drops uint64, err error) {
	ip := addr.Addr().Unmap().As4()
	local := fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(ip[:]), addr.Port())
	f, err := os.Open("/proc/net/udp")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 13 || fs[1] != local {
			continue
		}
		_, rx, ok := strings.Cut(fs[4], ":")
		if !ok {
			break
		}
		if rxQueue, err = strconv.ParseUint(rx, 16, 64); err != nil {
			return 0, 0, err
		}
		drops, err = strconv.ParseUint(fs[12], 10, 64)
		return rxQueue, drops, err
	}
	return 0, 0, fmt.Errorf("no socket bound to %v in /proc/net/udp", addr)
}

// backlogDrops sums the per-CPU "dropped" column of /proc/net/softnet_stat
// (hexadecimal, the second on each line).
func backlogDrops() (uint64, error) {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0, err
	}
	var sum uint64
	for line := range bytes.Lines(b) {
		fs := bytes.Fields(line)
		if len(fs) < 2 {
			continue
		}
		n, err := strconv.ParseUint(string(fs[1]), 16, 64)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// snmpUDP returns the named field of the Udp lines of /proc/net/snmp: a
// line of names followed by a line of values.
func snmpUDP(name string) (uint64, error) {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0, err
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		fs := strings.Fields(line)
		if len(fs) == 0 || fs[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = fs
			continue
		}
		for i, n := range names {
			if n == name && i < len(fs) {
				return strconv.ParseUint(fs[i], 10, 64)
			}
		}
		break
	}
	return 0, fmt.Errorf("no Udp %s in /proc/net/snmp", name)
}
