package udpceiling

import (
	"fmt"
	"net"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// PerSyscall measures one datagram per system call: the sender calls
// WriteToUDPAddrPort, the receiver ReadFromUDPAddrPort (neither allocates).
func PerSyscall(cfg Config) (Throughput, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Throughput{}, err
	}
	tx, rx, err := pair(cfg)
	if err != nil {
		return Throughput{}, err
	}
	dst := addrOf(rx)
	out, in := make([]byte, cfg.Size), make([]byte, cfg.Size)
	send := func(until time.Time) (uint64, error) {
		var sent uint64
		for !stop(cfg, sent, until) {
			for range 64 {
				if _, err := tx.WriteToUDPAddrPort(out, dst); err != nil {
					return sent, err
				}
				sent++
			}
		}
		return sent, nil
	}
	receive := func() (int, int, error) {
		n, _, err := rx.ReadFromUDPAddrPort(in)
		return 1, n, err
	}
	return run(cfg, "per-syscall WriteTo/ReadFrom", tx, rx, send, receive)
}

// batchConn is what ipv4.PacketConn and ipv6.PacketConn share.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func newBatchConn(c *net.UDPConn) batchConn {
	if addrOf(c).Addr().Is6() {
		return ipv6.NewPacketConn(c)
	}
	return ipv4.NewPacketConn(c)
}

// messages returns n messages with one buffer of size bytes each, and oob
// bytes of control-message room, addressed to dst if not nil.
func messages(n, size, oob int, dst net.Addr) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	for i := range ms {
		ms[i] = ipv4.Message{Buffers: [][]byte{make([]byte, size)}, OOB: make([]byte, oob), Addr: dst}
	}
	return ms
}

// Batched measures sendmmsg/recvmmsg through x/net's WriteBatch and
// ReadBatch, cfg.Batch datagrams per call. (x/net's ReadBatch allocates a
// source address per datagram; that is part of what plain Go pays.)
func Batched(cfg Config) (Throughput, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Throughput{}, err
	}
	tx, rx, err := pair(cfg)
	if err != nil {
		return Throughput{}, err
	}
	out, in := newBatchConn(tx), newBatchConn(rx)
	outMsgs := messages(cfg.Batch, cfg.Size, 0, net.UDPAddrFromAddrPort(addrOf(rx)))
	inMsgs := messages(cfg.Batch, cfg.Size, 0, nil)
	send := func(until time.Time) (uint64, error) {
		var sent uint64
		for !stop(cfg, sent, until) {
			n, err := out.WriteBatch(outMsgs, 0)
			if err != nil { // sendmmsg sent nothing (and x/net says n = -1)
				return sent, err
			}
			sent += uint64(n)
		}
		return sent, nil
	}
	receive := func() (int, int, error) {
		n, err := in.ReadBatch(inMsgs, 0)
		if err != nil { // recvmmsg got nothing (and x/net says n = -1)
			return 0, 0, err
		}
		bytes := 0
		for _, m := range inMsgs[:n] {
			bytes += m.N
		}
		return n, bytes, err
	}
	return run(cfg, fmt.Sprintf("batched x/net, %d per call", cfg.Batch), tx, rx, send, receive)
}
