package udpceiling

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"time"
)

// PingMode is how PingPong waits for the next datagram.
type PingMode int

const (
	// Blocking reads park the goroutine in Go's netpoller until the socket
	// is readable (ReadFromUDPAddrPort).
	Blocking PingMode = iota
	// BusyPoll reads spin on a non-blocking read(2) inside
	// syscall.RawConn.Read, parking only after PingConfig.SpinBudget without
	// a datagram: the lowest latency Go can get from a socket, at the price
	// of a core per side.
	BusyPoll
)

func (m PingMode) String() string {
	switch m {
	case Blocking:
		return "blocking"
	case BusyPoll:
		return "busy-poll"
	}
	return fmt.Sprintf("PingMode(%d)", int(m))
}

// PingConfig describes one ping-pong run. Zero fields take the defaults.
type PingConfig struct {
	// Addr is the loopback address both sockets bind (default 127.0.0.1).
	Addr netip.Addr
	// Count is the number of round trips measured (default 10000), after
	// Warmup (default 100) unmeasured ones.
	Count, Warmup int
	// Size is the datagram payload (default 8 bytes).
	Size int
	// Mode is how both sides wait for a datagram.
	Mode PingMode
	// SpinBudget is how long a BusyPoll read spins before it parks
	// (default 50 µs, the kernel's recommended busy_read).
	SpinBudget time.Duration
	// Timeout bounds the whole run (default 30 s): a lost datagram ends it
	// with an error instead of a hang.
	Timeout time.Duration
}

// Latency is the outcome of a ping-pong run.
type Latency struct {
	Name    string // what was measured
	Size    int    // datagram payload bytes
	Samples int    // round trips measured
	// Round-trip times: the fastest, the median, the 99th percentile and
	// the slowest.
	Min, Median, P99, Max time.Duration
}

func (cfg PingConfig) withDefaults() (PingConfig, error) {
	if !cfg.Addr.IsValid() {
		cfg.Addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if cfg.Count == 0 {
		cfg.Count = 10000
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = 100
	}
	if cfg.Size == 0 {
		cfg.Size = 8
	}
	if cfg.SpinBudget == 0 {
		cfg.SpinBudget = 50 * time.Microsecond
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	switch {
	case !cfg.Addr.IsLoopback():
		return cfg, fmt.Errorf("%w: %v is not a loopback address", ErrBadConfig, cfg.Addr)
	case cfg.Count < 0 || cfg.Warmup < 0 || cfg.Timeout < 0 || cfg.SpinBudget < 0 || cfg.Size < 1 || cfg.Size > maxDatagram4:
		return cfg, fmt.Errorf("%w: %+v", ErrBadConfig, cfg)
	case cfg.Mode != Blocking && cfg.Mode != BusyPoll:
		return cfg, fmt.Errorf("%w: unknown PingMode %d", ErrBadConfig, cfg.Mode)
	case cfg.Mode == BusyPoll && runtime.GOMAXPROCS(0) < 2:
		return cfg, fmt.Errorf("%w: busy polling needs GOMAXPROCS >= 2 (two spinning goroutines)", errors.ErrUnsupported)
	}
	return cfg, nil
}

// PingPong bounces a datagram between two sockets in this process, Count
// times after Warmup, and reports the round-trip time as the sender sees it
// (send, then wait for the echo).
//
// Go schedules both sides in one process; when one side parks, the other's
// wakeup is often handled on the same thread without a cross-CPU wakeup.
// Run Echo in another process and Ping against it to include that cost.
func PingPong(cfg PingConfig) (Latency, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Latency{}, err
	}
	server, err := listen(cfg.Addr, 1<<20)
	if err != nil {
		return Latency{}, err
	}
	defer server.Close()
	server.SetDeadline(time.Now().Add(cfg.Timeout))
	echoed := make(chan error, 1)
	go func() { echoed <- echo(server, cfg) }()

	l, err := Ping(cfg, addrOf(server))
	if err != nil {
		server.Close() // the echo side returns at once
		<-echoed
		return Latency{}, err
	}
	return l, <-echoed
}

// Echo is the far side of a ping-pong, for running in another process: it
// binds a socket on cfg.Addr, passes its address to ready, and sends each
// of the Warmup+Count datagrams it receives back to the sender, waiting as
// cfg.Mode says. It returns when done or after cfg.Timeout.
func Echo(cfg PingConfig, ready func(netip.AddrPort)) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	server, err := listen(cfg.Addr, 1<<20)
	if err != nil {
		return err
	}
	defer server.Close()
	server.SetDeadline(time.Now().Add(cfg.Timeout))
	ready(addrOf(server))
	return echo(server, cfg)
}

// echo answers Warmup+Count pings on server. The first one, read blocking,
// tells it where the pings come from.
//
// When busy polling, each side runs on its own OS thread pinned to its own
// CPU where there are two: two spinning threads that the kernel puts on one
// CPU take turns at time-slice (or spin-budget) granularity, not
// microseconds. The pinned thread belongs to a goroutine that exits locked
// to it, so Go discards the thread afterwards.
func echo(server *net.UDPConn, cfg PingConfig) error {
	done := make(chan error, 1)
	go func() {
		if cfg.Mode == BusyPoll {
			pinThread(1)
		}
		done <- func() error {
			read, err := reader(server, cfg)
			if err != nil {
				return err
			}
			buf := make([]byte, cfg.Size)
			n, client, err := server.ReadFromUDPAddrPort(buf)
			for i := 0; err == nil; i++ {
				if _, err = server.WriteToUDPAddrPort(buf[:n], client); err != nil || i+1 == cfg.Warmup+cfg.Count {
					break
				}
				n, err = read(buf)
			}
			if err != nil {
				return fmt.Errorf("echo: %w", err)
			}
			return nil
		}()
	}()
	return <-done
}

// Ping measures Count round trips, after Warmup, to the echo side at server
// (see Echo), waiting as cfg.Mode says.
func Ping(cfg PingConfig, server netip.AddrPort) (Latency, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Latency{}, err
	}
	client, err := listen(cfg.Addr, 1<<20)
	if err != nil {
		return Latency{}, err
	}
	defer client.Close()
	client.SetDeadline(time.Now().Add(cfg.Timeout))
	read, err := reader(client, cfg)
	if err != nil {
		return Latency{}, err
	}

	rtts := make([]time.Duration, 0, cfg.Count)
	done := make(chan error, 1)
	go func() { // on its own (pinned) thread: see echo
		if cfg.Mode == BusyPoll {
			pinThread(0)
		}
		ping, pong := make([]byte, cfg.Size), make([]byte, cfg.Size)
		for i := range cfg.Warmup + cfg.Count {
			start := time.Now()
			if _, err := client.WriteToUDPAddrPort(ping, server); err != nil {
				done <- err
				return
			}
			if _, err := read(pong); err != nil {
				done <- fmt.Errorf("round trip %d: %w", i, err)
				return
			}
			if i >= cfg.Warmup {
				rtts = append(rtts, time.Since(start))
			}
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		return Latency{}, err
	}

	l := Latency{Name: "ping-pong " + cfg.Mode.String(), Size: cfg.Size, Samples: len(rtts)}
	if len(rtts) > 0 {
		slices.Sort(rtts)
		l.Min, l.Max = rtts[0], rtts[len(rtts)-1]
		l.Median = rtts[len(rtts)/2]
		l.P99 = rtts[(len(rtts)*99+99)/100-1] // the smallest that 99% do not exceed
	}
	return l, nil
}

// reader returns the read function of a ping-pong side.
func reader(c *net.UDPConn, cfg PingConfig) (func([]byte) (int, error), error) {
	switch cfg.Mode {
	case Blocking:
		return func(b []byte) (int, error) {
			n, _, err := c.ReadFromUDPAddrPort(b)
			return n, err
		}, nil
	case BusyPoll:
		return spinReader(c, cfg.SpinBudget)
	}
	return nil, fmt.Errorf("%w: unknown PingMode %d", ErrBadConfig, cfg.Mode)
}
