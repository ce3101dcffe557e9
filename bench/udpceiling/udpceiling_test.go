package udpceiling

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// Each test binds its own loopback address, so parallel package runs
// never meet. The runs are brief: these tests only keep the code honest;
// the numbers come from the command.

func checkThroughput(t *testing.T, r Throughput, err error) {
	t.Helper()
	if errors.Is(err, errors.ErrUnsupported) {
		testenv.SkipOrFailf(t, "not on this kernel: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d B × %d sent, %d received, %.3f s, %.2f GB/s, %.3f Mpps, loss %.1f%%",
		r.Name, r.Size, r.Sent, r.Received, r.Seconds, r.GBps, r.Mpps, 100*r.Loss)
	switch {
	case r.Sent == 0 || r.Received == 0 || r.Bytes == 0:
		t.Errorf("nothing moved: %+v", r)
	case r.Received > r.Sent:
		t.Errorf("received %d datagrams, more than the %d sent", r.Received, r.Sent)
	case r.Bytes != r.Received*uint64(r.Size):
		t.Errorf("%d bytes received in %d datagrams of %d bytes", r.Bytes, r.Received, r.Size)
	case r.Seconds <= 0 || r.GBps <= 0 || r.Mpps <= 0:
		t.Errorf("no rate: %+v", r)
	case r.Loss < 0 || r.Loss >= 1:
		t.Errorf("loss %v out of [0, 1)", r.Loss)
	}
}

func brief(addr string, size int) Config {
	return Config{Addr: netip.MustParseAddr(addr), Duration: 20 * time.Millisecond, Count: 2000, Size: size}
}

func TestPerSyscall(t *testing.T) {
	r, err := PerSyscall(brief("127.88.40.1", 4096))
	checkThroughput(t, r, err)
}

func TestBatched(t *testing.T) {
	for _, size := range []int{4096, 64} {
		r, err := Batched(brief("127.88.40.2", size))
		checkThroughput(t, r, err)
	}
}

func TestGSO(t *testing.T) {
	r, err := GSO(brief("127.88.40.3", 4096))
	checkThroughput(t, r, err)
}

func TestBatchedIPv6(t *testing.T) {
	r, err := Batched(brief("::1", 1400))
	checkThroughput(t, r, err)
}

func TestPingPong(t *testing.T) {
	for _, mode := range []PingMode{Blocking, BusyPoll} {
		t.Run(mode.String(), func(t *testing.T) {
			l, err := PingPong(PingConfig{Addr: netip.MustParseAddr("127.88.40.4"), Count: 300, Warmup: 20, Mode: mode, Timeout: 10 * time.Second})
			if errors.Is(err, errors.ErrUnsupported) {
				testenv.SkipOrFailf(t, "not here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: min %v, median %v, p99 %v, max %v", l.Name, l.Min, l.Median, l.P99, l.Max)
			if l.Samples != 300 || l.Size != 8 {
				t.Errorf("%d samples of %d bytes, want 300 of 8", l.Samples, l.Size)
			}
			if !(0 < l.Min && l.Min <= l.Median && l.Median <= l.P99 && l.P99 <= l.Max) {
				t.Errorf("times out of order: %+v", l)
			}
		})
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := Batched(Config{Addr: netip.MustParseAddr("192.0.2.1")}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("non-loopback address: %v, want ErrBadConfig", err)
	}
	if _, err := PerSyscall(Config{Addr: netip.MustParseAddr("127.88.40.5"), Size: 70000}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("Size 70000: %v, want ErrBadConfig", err)
	}
	if _, err := PingPong(PingConfig{Addr: netip.MustParseAddr("127.88.40.5"), Mode: PingMode(7)}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("unknown mode: %v, want ErrBadConfig", err)
	}
}

// TestEchoPing runs the two halves that the command puts in two processes.
func TestEchoPing(t *testing.T) {
	cfg := PingConfig{Addr: netip.MustParseAddr("127.88.40.6"), Count: 100, Warmup: 5, Timeout: 10 * time.Second}
	addr := make(chan netip.AddrPort, 1)
	echoed := make(chan error, 1)
	go func() { echoed <- Echo(cfg, func(a netip.AddrPort) { addr <- a }) }()
	l, err := Ping(cfg, <-addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-echoed; err != nil {
		t.Fatalf("Echo: %v", err)
	}
	if l.Samples != 100 || l.Median <= 0 {
		t.Errorf("Ping = %+v, want 100 samples", l)
	}
}
