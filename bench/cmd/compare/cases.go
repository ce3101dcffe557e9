package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/bench/udpceiling"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// shmArgs put goroce perf on the shared-memory wire.
var shmArgs = []string{"--link", "shm"}

// The names of the ceilings' cases.
const (
	batched    = "udp batched 4 KiB"
	gso        = "udp GSO/GRO"
	rate64     = "udp batched 64 B"
	pingBusy   = "udp ping-pong busy RTT"
	pingBusy99 = "udp ping-pong busy RTT p99"
	pingBlk    = "udp ping-pong blocking RTT"
	iperf      = "iperf3 TCP 1 stream"
)

// A target is one of the speed targets: a goroce case's median over a
// ceiling's, at least factor (bandwidth, rate) or, with atMost, at most
// factor (latency).
type target struct {
	name, ceiling string
	atMost        bool
	factor        float64
}

// targets are the speed targets for one device pair, over UDP and over
// shared memory.
var targets = []target{
	{"goroce write_bw 64 B msg rate", rate64, false, 1.5},
	// One WR per post (perftest's default, and what most programs do)
	// moves about as many messages as lists of 32: the device batches
	// posts that stream, as an RNIC batches doorbells.
	{onePerPost, listRate, false, 0.8},
	{onePerPost, rate64, false, 1.5},
	{"goroce write_bw 4 KiB", gso, false, 0.5},
	{"goroce write_bw 64 KiB", gso, false, 0.85},
	{"goroce send_lat 8 B RTT", pingBusy, true, 1.3},
	{"goroce shm write_bw 64 KiB", gso, false, 1.5},
	{"goroce shm send_lat 8 B RTT", pingBusy, true, 0.5},
	// A thousand QPs share the link about as well as one uses it: their
	// ACK timers wait for a responder that is behind instead of resending
	// into its queue (qp.Path).
	{manyQPsBW, oneQPBW, false, 0.8},
}

// The message rate of 64-byte WRITEs posted in lists of postList WRs and
// one WR per post.
const (
	listRate   = "goroce write_bw 64 B msg rate"
	onePerPost = "goroce write_bw 64 B msg rate 1 WR/post"
)

// The bandwidth of 64 KiB WRITEs on one QP and spread over a thousand.
const (
	oneQPBW   = "goroce write_bw 64 KiB"
	manyQPsBW = "goroce write_bw 64 KiB 1000 QPs"
	manyQPs   = 1000
)

// allCases lists the measurements in the order they run and print.
func allCases(bin string, quick bool) []measurement {
	bwCeil := []string{batched, gso, iperf}
	cs := []measurement{
		{name: batched, unit: "GB/s", run: func() (float64, error) { return udpGBps(udpceiling.Batched, 4096) }},
		{name: gso, unit: "GB/s", run: func() (float64, error) { return udpGBps(udpceiling.GSO, 4096) }},
	}
	cs = append(cs, measurement{name: rate64, unit: "Mpps", run: func() (float64, error) { return udpMpps(64) }})
	if !quick {
		cs = append(cs, measurement{name: iperf, unit: "GB/s", run: iperf3})
	}
	cs = append(cs,
		measurement{name: pingBusy, unit: "us", run: func() (float64, error) { return udpPing(udpceiling.BusyPoll, false) }},
		measurement{name: pingBlk, unit: "us", run: func() (float64, error) { return udpPing(udpceiling.Blocking, false) }},
	)
	if !quick {
		cs = append(cs, measurement{name: pingBusy99, unit: "us", run: func() (float64, error) { return udpPing(udpceiling.BusyPoll, true) }})
	}
	bw := func(test string, size int) measurement {
		return measurement{name: fmt.Sprintf("goroce %s %s", test, sizeName(size)), unit: "GB/s", ceiling: bwCeil,
			run: func() (float64, error) { return perfBW(bin, test, size) }}
	}
	shmBW := func(size int) measurement {
		return measurement{name: fmt.Sprintf("goroce shm write_bw %s", sizeName(size)), unit: "GB/s", ceiling: bwCeil,
			run: func() (float64, error) { return perfBW(bin, "write_bw", size, shmArgs...) }}
	}
	cs = append(cs, bw("write_bw", 65536),
		measurement{name: manyQPsBW, unit: "GB/s", ceiling: []string{oneQPBW},
			run: func() (float64, error) { return perfBWQPs(bin, 65536, manyQPs) }},
		shmBW(65536))
	if !quick {
		for _, test := range []string{"write_bw", "read_bw", "send_bw"} {
			for _, size := range []int{4096, 65536, 1 << 20} {
				if test == "write_bw" && size == 65536 {
					continue
				}
				cs = append(cs, bw(test, size))
			}
		}
		cs = append(cs, shmBW(4096),
			measurement{name: "goroce shm write_bw 64 B msg rate", unit: "Mpps", ceiling: []string{rate64},
				run: func() (float64, error) { return perfRate(bin, 64, postList, shmArgs...) }})
	}
	cs = append(cs, measurement{name: listRate, unit: "Mpps", ceiling: []string{rate64},
		run: func() (float64, error) { return perfRate(bin, 64, postList) }},
		measurement{name: onePerPost, unit: "Mpps", ceiling: []string{listRate, rate64},
			run: func() (float64, error) { return perfRate(bin, 64, "1") }})
	lat := func(test string) measurement {
		return measurement{name: "goroce " + test + " 8 B RTT", unit: "us", ceiling: []string{pingBusy, pingBlk},
			run: func() (float64, error) { return perfRTT(bin, test, false) }}
	}
	lat99 := func(test string) measurement {
		return measurement{name: "goroce " + test + " 8 B RTT p99", unit: "us", ceiling: []string{pingBusy99},
			run: func() (float64, error) { return perfRTT(bin, test, true) }}
	}
	cs = append(cs, lat("send_lat"),
		measurement{name: "goroce shm send_lat 8 B RTT", unit: "us", ceiling: []string{pingBusy, pingBlk},
			run: func() (float64, error) { return perfRTT(bin, "send_lat", false, shmArgs...) }})
	if !quick {
		cs = append(cs, lat99("send_lat"), lat("write_lat"), lat99("write_lat"))
	}
	return cs
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func udpGBps(f func(udpceiling.Config) (udpceiling.Throughput, error), size int) (float64, error) {
	t, err := f(udpceiling.Config{Addr: loopback, Duration: time.Second, Size: size})
	return t.GBps, err
}

func udpMpps(size int) (float64, error) {
	t, err := udpceiling.Batched(udpceiling.Config{Addr: loopback, Duration: time.Second, Size: size})
	return t.Mpps, err
}

// udpPing measures the median round trip (with p99, its 99th percentile)
// of an 8-byte UDP ping-pong whose echo side runs in a second process
// (this command, re-executed).
func udpPing(mode udpceiling.PingMode, p99 bool) (float64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, "-udp-echo", strconv.Itoa(int(mode)))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var line string
	if _, err := fmt.Fscanln(out, &line); err != nil {
		return 0, fmt.Errorf("echo process gave no address: %v", err)
	}
	server, err := netip.ParseAddrPort(line)
	if err != nil {
		return 0, err
	}
	l, err := udpceiling.Ping(udpceiling.PingConfig{Addr: loopback, Size: 8, Mode: mode, Count: pingCount}, server)
	if p99 {
		return float64(l.P99.Nanoseconds()) / 1e3, err
	}
	return float64(l.Median.Nanoseconds()) / 1e3, err
}

const pingCount = 5000

// runEcho is the echo side of udpPing: print the address, then echo.
func runEcho(mode int) int {
	err := udpceiling.Echo(udpceiling.PingConfig{Addr: loopback, Size: 8, Mode: udpceiling.PingMode(mode), Count: pingCount},
		func(a netip.AddrPort) { fmt.Println(a) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare -udp-echo:", err)
		return 1
	}
	return 0
}

// iperf3 runs a 2-second single-stream TCP test on loopback, if iperf3 is
// installed.
func iperf3() (float64, error) {
	path, err := exec.LookPath("iperf3")
	if err != nil {
		return 0, fmt.Errorf("iperf3 not installed (skipped)")
	}
	srv := exec.Command(path, "-s", "-1", "-B", "127.0.0.1", "-p", "15201")
	if err := srv.Start(); err != nil {
		return 0, err
	}
	defer srv.Wait()
	defer srv.Process.Kill()
	var out []byte
	for try := 0; try < 50; try++ { // bounded: the server needs a moment to listen
		out, err = exec.Command(path, "-c", "127.0.0.1", "-p", "15201", "-t", "2", "-f", "m").CombinedOutput()
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return 0, fmt.Errorf("iperf3: %v: %s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "receiver") {
			f := strings.Fields(l)
			for i, w := range f {
				if w == "Mbits/sec" && i > 0 {
					v, err := strconv.ParseFloat(f[i-1], 64)
					return v / 8 / 1000, err
				}
			}
		}
	}
	return 0, fmt.Errorf("no receiver line in iperf3's output")
}
