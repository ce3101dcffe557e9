package udpceiling

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxGSOSegments is the most segments one GSO send may carry
// (UDP_MAX_SEGMENTS: 64 before Linux 6.9, 128 since).
const maxGSOSegments = 64

// GSO measures UDP generic segmentation offload on send and generic receive
// offload on receive. Each send is a super-datagram of as many cfg.Size
// segments as fit in one UDP datagram (15 of 4096 bytes) with a UDP_SEGMENT
// control message; the kernel cuts it into datagrams of cfg.Size bytes. The
// receiver sets UDP_GRO and gets runs of them back as one buffer, with the
// segment size in a UDP_GRO control message. Sent, Received and Mpps count
// the datagrams on the wire, not the system calls.
//
// It returns an error wrapping errors.ErrUnsupported when the kernel
// refuses UDP_SEGMENT or UDP_GRO.
func GSO(cfg Config) (Throughput, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Throughput{}, err
	}
	segs := min(maxDatagram4/cfg.Size, maxGSOSegments)
	if segs < 2 {
		return Throughput{}, fmt.Errorf("%w: Size %d leaves no room for two GSO segments", ErrBadConfig, cfg.Size)
	}
	tx, rx, err := pair(cfg)
	if err != nil {
		return Throughput{}, err
	}
	if err := probeGSO(tx, rx); err != nil {
		tx.Close()
		rx.Close()
		return Throughput{}, err
	}

	out, in := newBatchConn(tx), newBatchConn(rx)
	outMsgs := messages(max(1, cfg.Batch/segs), segs*cfg.Size, 0, net.UDPAddrFromAddrPort(addrOf(rx)))
	segment := segmentCmsg(cfg.Size)
	for i := range outMsgs {
		outMsgs[i].OOB = segment
	}
	inMsgs := messages(max(1, cfg.Batch/segs), 1<<16, unix.CmsgSpace(4), nil)

	send := func(until time.Time) (uint64, error) {
		var sent uint64
		for !stop(cfg, sent, until) {
			n, err := out.WriteBatch(outMsgs, 0)
			if err != nil && sent == 0 && errors.Is(err, unix.EIO) {
				// The device cannot checksum the segments.
				return 0, fmt.Errorf("%w: UDP GSO send: %v", errors.ErrUnsupported, err)
			}
			if err != nil { // sendmmsg sent nothing (and x/net says n = -1)
				return sent, err
			}
			sent += uint64(n * segs)
		}
		return sent, nil
	}
	receive := func() (int, int, error) {
		n, err := in.ReadBatch(inMsgs, 0)
		if err != nil { // recvmmsg got nothing (and x/net says n = -1)
			return 0, 0, err
		}
		pkts, bytes := 0, 0
		for _, m := range inMsgs[:n] {
			bytes += m.N
			if size := groSize(m.OOB[:m.NN]); size > 0 {
				pkts += (m.N + size - 1) / size
			} else {
				pkts++
			}
		}
		return pkts, bytes, err
	}
	return run(cfg, fmt.Sprintf("GSO %dx%d B / GRO", segs, cfg.Size), tx, rx, send, receive)
}

// probeGSO checks that the sender's socket knows UDP_SEGMENT and turns on
// UDP_GRO on the receiver's.
func probeGSO(tx, rx *net.UDPConn) error {
	sockopt := func(c *net.UDPConn, f func(fd int) error) error {
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var ferr error
		if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
			return err
		}
		return ferr
	}
	if err := sockopt(tx, func(fd int) error {
		_, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
		return err
	}); err != nil {
		return fmt.Errorf("%w: UDP_SEGMENT (GSO, Linux 4.18+): %v", errors.ErrUnsupported, err)
	}
	if err := sockopt(rx, func(fd int) error {
		return unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1)
	}); err != nil {
		return fmt.Errorf("%w: UDP_GRO (Linux 5.0+): %v", errors.ErrUnsupported, err)
	}
	return nil
}

// segmentCmsg is a UDP_SEGMENT control message: cut this send into
// datagrams of size bytes (a uint16).
func segmentCmsg(size int) []byte {
	b := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], uint16(size))
	return b
}

// groSize returns the segment size in a UDP_GRO control message (an int),
// or 0 when there is none (the buffer holds one datagram).
func groSize(oob []byte) int {
	for len(oob) >= unix.CmsgLen(0) {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		n := int(h.Len)
		if n < unix.CmsgLen(0) || n > len(oob) {
			return 0
		}
		if h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && n >= unix.CmsgLen(4) {
			return int(binary.NativeEndian.Uint32(oob[unix.CmsgLen(0):]))
		}
		next := unix.CmsgSpace(n - unix.CmsgLen(0))
		if next >= len(oob) {
			break
		}
		oob = oob[next:]
	}
	return 0
}
