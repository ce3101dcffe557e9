package udplink

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/rnic/link"
)

// TestReadOutlastsErrorCondition makes the kernel report EPOLLERR alone on
// a link's socket, which Go's poller turns into a "not pollable" error
// for every read until the socket's next event: link a, in a network
// namespace of its own, sends to a port where nothing is bound, in
// another namespace, through a veth whose qdisc (tbf, 400 kbit/s) holds
// the datagrams back, so that a's small send buffer stays full while the
// ICMP errors come back. a's blocked ReadBatch must live through it
// (settle), report the errors, and take the datagram b then sends.
func TestReadOutlastsErrorCondition(t *testing.T) {
	needRoot(t)
	for _, polled := range []bool{false, true} {
		t.Run(map[bool]string{false: "ReadBatch", true: "Poller"}[polled], func(t *testing.T) { readOutlastsErrorCondition(t, polled) })
	}
}

func readOutlastsErrorCondition(t *testing.T, polled bool) {
	ip, tc := testenv.LookPath(t, "ip", "iproute2"), testenv.LookPath(t, "tc", "iproute2")
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
	}
	id := rand.Uint32()
	nsA, nsB := fmt.Sprintf("goroce-errq-a-%d", id), fmt.Sprintf("goroce-errq-b-%d", id)
	for _, ns := range []string{nsA, nsB} {
		run(ip, "netns", "add", ns)
		t.Cleanup(func() { exec.Command(ip, "netns", "del", ns).Run() })
	}
	run(ip, "link", "add", "va", "netns", nsA, "type", "veth", "peer", "name", "vb", "netns", nsB)
	run(ip, "-n", nsA, "addr", "add", "10.138.0.1/24", "dev", "va")
	run(ip, "-n", nsB, "addr", "add", "10.138.0.2/24", "dev", "vb")
	run(ip, "-n", nsA, "link", "set", "va", "up")
	run(ip, "-n", nsB, "link", "set", "vb", "up")
	run(tc, "-n", nsA, "qdisc", "add", "dev", "va", "root", "tbf", "rate", "400kbit", "burst", "1600", "limit", "1000000")
	// An ICMP error for every datagram, not one a second (loopback's are
	// not limited; a veth's are).
	run(ip, "netns", "exec", nsB, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0")

	var a *Link
	var b *net.UDPConn
	inNetns(t, nsA, func() (err error) {
		a, err = Open(Config{Local: netip.MustParseAddrPort("10.138.0.1:4791"), WriteBuffer: 8192})
		return err
	})
	t.Cleanup(func() { a.Close() })
	stop := time.AfterFunc(watchdog, func() { a.Close() })
	t.Cleanup(func() { stop.Stop() })
	inNetns(t, nsB, func() (err error) {
		b, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 138, 0, 2), Port: 4791})
		return err
	})
	t.Cleanup(func() { b.Close() })
	reports := make(chan link.Unreachable, 64)
	a.NotifyUnreachable(func(u link.Unreachable) {
		select {
		case reports <- u:
		default:
		}
	})

	got := make(chan error, 1)
	start := time.Now()
	go func() { got <- readOne(a, polled, []byte("hello")) }()
	nobody := netip.MustParseAddrPort("10.138.0.2:9")
	burst := make([]link.Packet, 40)
	for i := range burst {
		burst[i] = link.Packet{Buf: make([]byte, 1000), Addr: nobody}
	}
	sent := make(chan error, 1)
	go func() {
		_, err := a.WriteBatch(burst) // waits while the qdisc drains
		sent <- err
	}()
	for range len(burst) / 2 {
		waitReport(t, reports, got, nobody)
	}
	if _, err := b.WriteToUDP([]byte("hello"), &net.UDPAddr{IP: net.IPv4(10, 138, 0, 1), Port: 4791}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("a's read: %v", err)
	}
	took := time.Since(start)
	if err := <-sent; err != nil {
		t.Fatalf("a's burst: %v", err)
	}
	// Each wait sleeps settleWait at least, however loaded the machine.
	switch n := a.errs.settled.Load(); {
	case n == 0:
		t.Errorf("no read met the error condition: the kernel never reported EPOLLERR alone, so the test tried nothing")
	case n > uint64(took/settleWait)+1:
		t.Errorf("the read waited out the error condition %d times in %v: it spun", n, took)
	}
}

// inNetns runs f in the network namespace ns, on a thread of its own: the
// sockets f opens live there.
func inNetns(t *testing.T, ns string, f func() error) {
	t.Helper()
	target, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(target)
	errc := make(chan error, 1)
	go func() {
		// The thread ends with the goroutine, still in ns: it is never
		// given back to the runtime.
		runtime.LockOSThread()
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in %s: %v", ns, err)
	}
}

// TestNoRouteReported sends, in a network namespace with only lo up, to
// an address no route reaches (10.9.9.9) and to one a route declares
// unreachable (10.8.1.1): the kernel refuses both sends, ENETUNREACH and
// EHOSTUNREACH, as before, and the link now reports each destination with
// that errno, as it would the ICMP error of a router.
func TestNoRouteReported(t *testing.T) {
	needRoot(t)
	ip := testenv.LookPath(t, "ip", "iproute2")
	ns := fmt.Sprintf("goroce-noroute-%d", rand.Uint32())
	for _, args := range [][]string{{"netns", "add", ns}, {"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "route", "add", "unreachable", "10.8.0.0/16"}} {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %q: %v\n%s", args, err, out)
		}
		if args[0] == "netns" {
			t.Cleanup(func() { exec.Command(ip, "netns", "del", ns).Run() })
		}
	}
	var a *Link
	inNetns(t, ns, func() (err error) {
		a, err = Open(Config{Local: netip.MustParseAddrPort("127.138.70.1:4791")})
		return err
	})
	t.Cleanup(func() { a.Close() })
	var got []link.Unreachable
	a.NotifyUnreachable(func(u link.Unreachable) { got = append(got, u) })
	want := []link.Unreachable{
		{Addr: netip.MustParseAddrPort("10.9.9.9:4791"), Errno: syscall.ENETUNREACH},
		{Addr: netip.MustParseAddrPort("10.8.1.1:4791"), Errno: syscall.EHOSTUNREACH},
	}
	for _, w := range want {
		if n, err := a.WriteBatch([]link.Packet{{Buf: []byte("REQ"), Addr: w.Addr}}); n != 0 || !errors.Is(err, w.Errno) {
			t.Errorf("WriteBatch to %v = %d, %v; want 0, %v", w.Addr, n, err, w.Errno)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("reports %+v, want %+v", got, want)
	}
}
