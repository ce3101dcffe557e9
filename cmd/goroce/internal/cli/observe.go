package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire/pcap"
)

// ObserveFlags are --trace and --pcap, on every command that opens a
// device, and --metrics-addr and --ui-addr where the command's own process
// holds the device. The defaults of --trace and --pcap come from
// GOROCE_TRACE and GOROCE_PCAP, so the ranks that `goroce run`, `goroce
// demo` and `goroce nccl-perf -np` start inherit them; demo and nccl-perf
// pass all four to their ranks, and rank r serves on the given port + r.
type ObserveFlags struct {
	trace       bool
	pcap        string
	metricsAddr string
	uiAddr      string
	traceTag    string // starts each trace line (rnic.Config.TraceTag)
}

// TraceAs tags each --trace line with who this process is: role (server,
// client) and the device's address, as "[server 127.0.0.1]", so that the
// traces of two processes sharing a terminal, each on its own clock, can
// be told apart (goroce run's ranks get "[rank]" from the launcher).
func (o *ObserveFlags) TraceAs(role string, addr netip.Addr) {
	o.traceTag = fmt.Sprintf("[%s %v]", role, addr)
}

func (o *ObserveFlags) Register(fs *flag.FlagSet) {
	o.RegisterTrace(fs)
	ListenAddrFlag(fs, &o.metricsAddr, "metrics-addr", "",
		"serve the device's counters and QPs on this `address` (/metrics for Prometheus, /stat and /stat.json for goroce stat); "+
			"with several ranks, rank r serves on the port + r")
	ListenAddrFlag(fs, &o.uiAddr, "ui-addr", "", UIFlagHelp)
}

// registerTrace registers --trace and --pcap alone, for commands whose
// devices live in one process without a metrics or UI server of their own.
func (o *ObserveFlags) RegisterTrace(fs *flag.FlagSet) {
	fs.BoolVar(&o.trace, "trace", os.Getenv("GOROCE_TRACE") != "",
		"print one line per packet sent and received and per QP event (state changes, retransmissions, CNPs, DCQCN rate changes, completions) to stderr")
	fs.StringVar(&o.pcap, "pcap", os.Getenv("GOROCE_PCAP"),
		"write every packet the device sends or receives to this pcap `file` (Wireshark decodes it as RoCE); "+
			"with several ranks, each writes FILE.rankN.pcap")
}

// env returns the environment that passes the flags on to child ranks.
func (o *ObserveFlags) Env() []string {
	var env []string
	if o.trace {
		env = append(env, "GOROCE_TRACE=1")
	}
	if o.pcap != "" {
		env = append(env, "GOROCE_PCAP="+o.pcap)
	}
	return env
}

// openDevice opens a device with the flags applied: trace, capture and
// metrics. closeObs flushes the capture and stops the metrics and UI
// servers; call it after the device is closed.
func (o *ObserveFlags) OpenDevice(dc rnic.Config, stderr io.Writer) (dev *rnic.Device, closeObs func() error, err error) {
	closeCapture, err := o.Apply(&dc, stderr)
	if err != nil {
		return nil, nil, err
	}
	if dev, err = rnic.Open(dc); err != nil {
		closeCapture()
		return nil, nil, fmt.Errorf("couldn't open the device on %v: %w", dc.Addr.Addr(), explainBindError(err, dc.Addr.Addr()))
	}
	stopAttached, err := o.Attach(dev, stderr)
	if err != nil {
		dev.Close()
		closeCapture()
		return nil, nil, err
	}
	return dev, func() error { stopAttached(); return closeCapture() }, nil
}

// explainBindError says, for a device that could not bind its UDP port
// at addr, which flag picks another address: the port is RoCEv2's, fixed.
func explainBindError(err error, addr netip.Addr) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%w: another device (a goroce process, or the kernel's RoCE) has UDP port 4791 on %v: "+
			"give this one another address with --addr (or GOROCE_ADDR), e.g. another of 127.0.0.0/8", err, addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("%w: %v is not an address of this host: --addr (or GOROCE_ADDR) must be one of its interfaces' addresses", err, addr)
	}
	return err
}

// ShareLoopbackCPUs halves GOMAXPROCS when the device's address is a
// loopback address, unless GOMAXPROCS is set in the environment: the peer
// of a pingpong or perf on loopback is the other process of a pair on this
// host, and two processes each free to run on every CPU wake idle threads
// that then fight for the same cores (as goroce run's ranks would; see
// RanksProcs, and docs/performance.md, "Processes and CPUs").
//
// It returns the function that puts GOMAXPROCS back, for when the command
// is done (commands also run inside the tests' process). perf and
// pingpong call it; the ranks of goroce run get theirs from the launcher.
func ShareLoopbackCPUs(addr netip.Addr) (restore func()) {
	if !addr.Unmap().IsLoopback() || os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(RanksProcs(2, runtime.NumCPU()))
	return func() { runtime.GOMAXPROCS(prev) }
}

// attach starts what needs the open device (--metrics-addr, --ui-addr)
// and returns the function that stops it.
func (o *ObserveFlags) Attach(dev *rnic.Device, stderr io.Writer) (func() error, error) {
	stopMetrics := func() error { return nil }
	if o.metricsAddr != "" {
		var err error
		if stopMetrics, err = StartMetrics(o.metricsAddr, dev, stderr); err != nil {
			return nil, err
		}
	}
	if o.uiAddr == "" {
		return stopMetrics, nil
	}
	stopUI, err := StartDeviceUI(o.uiAddr, dev, stderr)
	if err != nil {
		stopMetrics()
		return nil, err
	}
	return func() error { return errors.Join(stopUI(), stopMetrics()) }, nil
}

// attachRank is attach for rank r of a job: the servers listen on the
// given ports + r, so that every rank's device can be watched.
func (o *ObserveFlags) AttachRank(dev *rnic.Device, r int, stderr io.Writer) (func() error, error) {
	ranked := *o
	var err error
	if ranked.metricsAddr, err = portPlus(o.metricsAddr, r); err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	if ranked.uiAddr, err = portPlus(o.uiAddr, r); err != nil {
		return nil, fmt.Errorf("--ui-addr: %w", err)
	}
	return ranked.Attach(dev, stderr)
}

// portPlus adds r to the port of the host:port address hp; "" and port 0
// (any free port) stay as they are.
func portPlus(hp string, r int) (string, error) {
	if hp == "" || r == 0 {
		return hp, nil
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p+r > 65535 {
		return "", fmt.Errorf("port %q plus rank %d is not a port", port, r)
	}
	if p == 0 {
		return hp, nil
	}
	return net.JoinHostPort(host, strconv.Itoa(p+r)), nil
}

// ApplyRanks sets what the flags ask of the device of a job's rank, which
// package nccl opens: cfg's Trace (to stderr) and TraceTag, and pcap, the
// path the rank's capture is named after (PATH.rankN.pcap). The flags
// decide, their defaults being the environment's.
func (o *ObserveFlags) ApplyRanks(cfg *rnic.Config, pcap *string, stderr io.Writer) {
	cfg.Trace, cfg.TraceTag = nil, ""
	if o.trace {
		cfg.Trace, cfg.TraceTag = stderr, o.traceTag
	}
	*pcap = o.pcap
}

// apply sets cfg's Trace and Tap. The returned function flushes and closes
// the capture; call it after the device is closed.
func (o *ObserveFlags) Apply(cfg *rnic.Config, stderr io.Writer) (func() error, error) {
	if o.trace {
		cfg.Trace, cfg.TraceTag = stderr, o.traceTag
	}
	if o.pcap == "" {
		return func() error { return nil }, nil
	}
	w, closeFile, err := pcap.Create(o.pcap)
	if err != nil {
		return nil, fmt.Errorf("--pcap: %w", err)
	}
	cfg.Tap = w
	return closeFile, nil
}

// RanksProcs is the GOMAXPROCS each of n ranks on a host of cpus CPUs gets:
// its share of the CPUs, at least one, as mpirun binds each rank to its
// cores. With every rank free to run a goroutine on every CPU, the ranks'
// schedulers wake idle threads that then compete for the same cores
// (docs/performance.md, "Processes and CPUs").
func RanksProcs(n, cpus int) int { return max(1, cpus/max(1, n)) }
