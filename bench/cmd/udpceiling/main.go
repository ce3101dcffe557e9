// Command udpceiling prints what plain Go UDP does on this machine's
// loopback: throughput one datagram per system call, batched with
// sendmmsg/recvmmsg, and with UDP GSO/GRO; and ping-pong round-trip time
// with blocking and busy-polling reads. These are the ceilings goroce's
// software RNIC is compared against.
//
//	udpceiling [-d 1s] [-n 10000] [-addr 127.0.0.1] [-procs]
//
// With -procs, the echo side of each ping-pong runs in a second process (a
// copy of this command started with -echo), so the round trip includes the
// cross-process wakeups that two goroce processes would pay.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/goroce/goroce/bench/udpceiling"
)

func main() {
	duration := flag.Duration("d", udpceiling.DefaultDuration, "how long each throughput test sends")
	count := flag.Int("n", 10000, "round trips per ping-pong test")
	addr := flag.String("addr", "127.0.0.1", "loopback address to bind")
	procs := flag.Bool("procs", false, "run the echo side of ping-pong in a second process")
	echoMode := flag.Int("echo", -1, "internal: be the echo side of a ping-pong in this `mode` and exit")
	flag.Parse()
	ip, err := netip.ParseAddr(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "udpceiling:", err)
		os.Exit(2)
	}
	if *echoMode >= 0 {
		// The echo side: tell the parent the address, then echo.
		err := udpceiling.Echo(udpceiling.PingConfig{Addr: ip, Count: *count, Mode: udpceiling.PingMode(*echoMode)},
			func(a netip.AddrPort) { fmt.Println(a) })
		if err != nil {
			fmt.Fprintln(os.Stderr, "udpceiling -echo:", err)
			os.Exit(1)
		}
		return
	}

	fmt.Printf("plain Go UDP on loopback %v: %s, GOMAXPROCS %d, %d CPUs\n\n", ip, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU())
	failed := false

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "throughput\tsize\tsent\treceived\tloss\tseconds\tGB/s\tMpps\t")
	for _, t := range []struct {
		run func(udpceiling.Config) (udpceiling.Throughput, error)
		cfg udpceiling.Config
	}{
		{udpceiling.PerSyscall, udpceiling.Config{Size: 4096}},
		{udpceiling.Batched, udpceiling.Config{Size: 4096}},
		{udpceiling.Batched, udpceiling.Config{Size: 64}},
		{udpceiling.GSO, udpceiling.Config{Size: 4096}},
	} {
		t.cfg.Addr, t.cfg.Duration = ip, *duration
		r, err := t.run(t.cfg)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			fmt.Fprintf(w, "%s\t%d\tunsupported: %v\t\t\t\t\t\t\n", r.Name, t.cfg.Size, err)
		case err != nil:
			fmt.Fprintf(w, "%s\t%d\terror: %v\t\t\t\t\t\t\n", r.Name, t.cfg.Size, err)
			failed = true
		default:
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%.2f%%\t%.3f\t%.2f\t%.3f\t\n",
				r.Name, r.Size, r.Sent, r.Received, 100*r.Loss, r.Seconds, r.GBps, r.Mpps)
		}
	}
	w.Flush()
	fmt.Println()

	where := "one process"
	if *procs {
		where = "two processes"
	}
	fmt.Fprintf(w, "round trip (%s)\tsize\tsamples\tmin\tmedian\tp99\tmax\t\n", where)
	for _, mode := range []udpceiling.PingMode{udpceiling.Blocking, udpceiling.BusyPoll} {
		cfg := udpceiling.PingConfig{Addr: ip, Count: *count, Mode: mode}
		var r udpceiling.Latency
		if *procs {
			r, err = pingOtherProcess(cfg)
		} else {
			r, err = udpceiling.PingPong(cfg)
		}
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			fmt.Fprintf(w, "ping-pong %v\t\tunsupported: %v\t\t\t\t\t\n", mode, err)
		case err != nil:
			fmt.Fprintf(w, "ping-pong %v\t\terror: %v\t\t\t\t\t\n", mode, err)
			failed = true
		default:
			fmt.Fprintf(w, "%s\t%d\t%d\t%v\t%v\t%v\t%v\t\n", r.Name, r.Size, r.Samples,
				us(r.Min), us(r.Median), us(r.P99), us(r.Max))
		}
	}
	w.Flush()
	if failed {
		os.Exit(1)
	}
}

// pingOtherProcess starts this command again as the echo side and pings it.
func pingOtherProcess(cfg udpceiling.PingConfig) (udpceiling.Latency, error) {
	self, err := os.Executable()
	if err != nil {
		return udpceiling.Latency{}, err
	}
	cmd := exec.Command(self, "-echo", strconv.Itoa(int(cfg.Mode)), "-addr", cfg.Addr.String(), "-n", strconv.Itoa(cfg.Count))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return udpceiling.Latency{}, err
	}
	if err := cmd.Start(); err != nil {
		return udpceiling.Latency{}, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	server, perr := netip.ParseAddrPort(strings.TrimSpace(line))
	if err != nil || perr != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return udpceiling.Latency{}, fmt.Errorf("echo process gave no address (%q): %v %v", line, err, perr)
	}
	l, err := udpceiling.Ping(cfg, server)
	if err != nil {
		cmd.Process.Kill()
	}
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("echo process: %w", werr)
	}
	return l, err
}

// us rounds a duration to 0.1 µs for the table.
func us(d time.Duration) time.Duration { return d.Round(100 * time.Nanosecond) }
