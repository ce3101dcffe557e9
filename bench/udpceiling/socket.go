package udpceiling

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"time"
)

// listen opens an unconnected UDP socket on addr, with an ephemeral port
// and socket buffers of size bytes (see setBuffers).
func listen(addr netip.Addr, size int) (*net.UDPConn, error) {
	network := "udp4"
	if addr.Is6() {
		network = "udp6"
	}
	lc := net.ListenConfig{Control: bufferControl(size)}
	pc, err := lc.ListenPacket(context.Background(), network, netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// pair opens the two sockets of a run: the sender's and the receiver's.
func pair(cfg Config) (tx, rx *net.UDPConn, err error) {
	if tx, err = listen(cfg.Addr, cfg.Buffer); err != nil {
		return nil, nil, err
	}
	if rx, err = listen(cfg.Addr, cfg.Buffer); err != nil {
		tx.Close()
		return nil, nil, err
	}
	return tx, rx, nil
}

func addrOf(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

// drainIdle is how long the receiver keeps reading, once the sender is
// done, after the last datagram it got: long enough that nothing still in
// the socket buffer is missed, short enough not to matter.
const drainIdle = 50 * time.Millisecond

// run is the skeleton of every throughput measurement. send runs in its own
// goroutine, sending until its deadline or count and returning the
// datagrams sent; receive is called in a loop and returns the datagrams and
// bytes of one read. When send is done, the receiver reads on until
// drainIdle passes without a datagram.
func run(cfg Config, name string, tx, rx *net.UDPConn,
	send func(until time.Time) (uint64, error),
	receive func() (pkts, bytes int, err error)) (Throughput, error) {
	defer tx.Close()
	defer rx.Close()

	start := time.Now()
	var sent uint64
	var sendErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sent, sendErr = send(start.Add(cfg.Duration))
		rx.SetReadDeadline(time.Now().Add(drainIdle)) // from now on a quiet receiver stops
	}()

	var received, bytes uint64
	last := start
	for {
		pkts, n, err := receive()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if time.Since(last) < drainIdle {
				rx.SetReadDeadline(time.Now().Add(drainIdle)) // still flowing
				continue
			}
			break
		}
		if err != nil {
			tx.Close() // stops the sender
			<-done
			return Throughput{}, err
		}
		received += uint64(pkts)
		bytes += uint64(n)
		last = time.Now()
	}
	<-done
	if sendErr != nil {
		return Throughput{}, sendErr
	}
	return newThroughput(name, cfg.Size, sent, received, bytes, last.Sub(start).Seconds()), nil
}

// stop reports whether a sender that has sent sent datagrams should stop.
// Senders ask once per batch, so the clock is read rarely.
func stop(cfg Config, sent uint64, until time.Time) bool {
	if cfg.Count > 0 && sent >= uint64(cfg.Count) {
		return true
	}
	return time.Now().After(until)
}
