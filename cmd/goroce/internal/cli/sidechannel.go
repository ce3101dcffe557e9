package cli

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/goroce/goroce/wire"
)

// This file holds what the two-process tools (pingpong, perf) share to set
// up their TCP side channel, the out-of-band connection over which two
// RDMA programs trade QPNs, PSNs and GIDs before their queue pairs can
// talk: the server accepts one client, the client dials with retries.

// DialRetry connects to hostPort, retrying for up to patience while the
// connection is refused (the server may not be listening yet).
func DialRetry(ctx context.Context, hostPort string, patience time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	var d net.Dialer
	retry := time.NewTicker(50 * time.Millisecond)
	defer retry.Stop()
	var last error // the last refusal, more telling than the final timeout
	for {
		conn, err := d.DialContext(ctx, "tcp", hostPort)
		if err == nil {
			return conn, nil
		}
		if ne, ok := errors.AsType[net.Error](err); last == nil || !ok || !ne.Timeout() {
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, last
		case <-retry.C:
		}
	}
}

// AcceptPeer listens on TCP port of addr, the device's address or
// --sc-addr (0: a
// free port, reported on stderr as "<who>: listening on port N"), and
// waits, until ctx is done, for one client. It listens on the device's
// address alone, not on every interface, so that two servers on one host
// with devices at two addresses do not collide. The listener is closed
// before it returns.
func AcceptPeer(ctx context.Context, addr netip.Addr, port int, who string, stderr io.Writer) (net.Conn, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			err = fmt.Errorf("%w: another server has TCP port %d on %v: pick another port with -p (-p 0: a free one), or another address with --addr (GOROCE_ADDR)", err, port, addr)
		}
		return nil, fmt.Errorf("couldn't listen to port %d: %w", port, err)
	}
	defer ln.Close()
	if port == 0 {
		fmt.Fprintf(stderr, "%s: listening on port %d\n", who, ln.Addr().(*net.TCPAddr).Port)
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	conn, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("accept() failed: %w", CtxErr(ctx, err))
	}
	return conn, nil
}

// SideChannelAddrFlag defines --sc-addr, the address a server's TCP side
// channel listens on; "" (the default) is the device's own (--addr). A
// peer that reaches the side channel over another address family than
// RoCE (perftest's and the verbs examples' side channel is IPv4 only)
// needs it.
func SideChannelAddrFlag(fs *flag.FlagSet) *string {
	return fs.String("sc-addr", "", "server: listen for the TCP side channel on this `address` (default: the device's, --addr)")
}

// ParseSideChannelAddr reads --sc-addr: s, or the device's address dev
// if s is "".
func ParseSideChannelAddr(s string, dev netip.Addr) (netip.Addr, error) {
	if s == "" {
		return dev, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("--sc-addr %q is not an IP address", s)
	}
	return a.Unmap(), nil
}

// CtxErr prefers the context's error (an interrupt) to the I/O error it
// caused by closing the socket.
func CtxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// RandomPSN draws a 24-bit initial PSN, as ibv_rc_pingpong does with
// lrand48() & 0xffffff (here from crypto/rand: predictable PSNs make
// packet injection easy).
func RandomPSN() wire.PSN {
	var b [4]byte
	rand.Read(b[:])
	return wire.PSN(binary.BigEndian.Uint32(b[:]) & 0xFFFFFF)
}

// ErrStalled reports a peer that stopped answering.
var ErrStalled = errors.New("no completion (the peer stopped answering?)")
