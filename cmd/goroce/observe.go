package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire/pcap"
)

// observeFlags are --trace and --pcap, on every command that opens a
// device. Their defaults come from GOROCE_TRACE and GOROCE_PCAP, so the
// ranks that `goroce run`, `goroce demo` and `goroce nccl-perf -np` start
// inherit them.
type observeFlags struct {
	trace       bool
	pcap        string
	metricsAddr string
	uiAddr      string
}

func (o *observeFlags) register(fs *flag.FlagSet) {
	o.registerTrace(fs)
	fs.StringVar(&o.metricsAddr, "metrics-addr", "",
		"serve the device's counters and QPs on this `address` (/metrics for Prometheus, /stat and /res for goroce stat)")
	fs.StringVar(&o.uiAddr, "ui-addr", "", uiFlagHelp)
}

// registerTrace registers --trace and --pcap alone, for commands whose
// devices live in one process without a metrics or UI server of their own.
func (o *observeFlags) registerTrace(fs *flag.FlagSet) {
	fs.BoolVar(&o.trace, "trace", os.Getenv("GOROCE_TRACE") != "",
		"print one line per packet sent and received and per QP event (state changes, retransmissions, CNPs, DCQCN rate changes, completions) to stderr")
	fs.StringVar(&o.pcap, "pcap", os.Getenv("GOROCE_PCAP"),
		"write every packet the device sends or receives to this pcap `file` (Wireshark decodes it as RoCE); "+
			"with several ranks, each writes FILE.rankN.pcap")
}

// env returns the environment that passes the flags on to child ranks.
func (o *observeFlags) env() []string {
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
func (o *observeFlags) openDevice(dc rnic.Config, stderr io.Writer) (dev *rnic.Device, closeObs func() error, err error) {
	closeCapture, err := o.apply(&dc, stderr)
	if err != nil {
		return nil, nil, err
	}
	if dev, err = rnic.Open(dc); err != nil {
		closeCapture()
		return nil, nil, fmt.Errorf("couldn't open the device on %v: %w", dc.Addr.Addr(), err)
	}
	stopAttached, err := o.attach(dev, stderr)
	if err != nil {
		dev.Close()
		closeCapture()
		return nil, nil, err
	}
	return dev, func() error { stopAttached(); return closeCapture() }, nil
}

// attach starts what needs the open device (--metrics-addr, --ui-addr)
// and returns the function that stops it.
func (o *observeFlags) attach(dev *rnic.Device, stderr io.Writer) (func() error, error) {
	stopMetrics := func() error { return nil }
	if o.metricsAddr != "" {
		var err error
		if stopMetrics, err = startMetrics(o.metricsAddr, dev, stderr); err != nil {
			return nil, err
		}
	}
	if o.uiAddr == "" {
		return stopMetrics, nil
	}
	stopUI, err := startDeviceUI(o.uiAddr, dev, stderr)
	if err != nil {
		stopMetrics()
		return nil, err
	}
	return func() error { return errors.Join(stopUI(), stopMetrics()) }, nil
}

// setenv passes the flags to package nccl, which opens the device of a
// rank and reads them from the environment (GOROCE_PCAP=PATH writes
// PATH.rankN.pcap).
func (o *observeFlags) setenv() {
	for _, kv := range o.env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
}

// apply sets cfg's Trace and Tap. The returned function flushes and closes
// the capture; call it after the device is closed.
func (o *observeFlags) apply(cfg *rnic.Config, stderr io.Writer) (func() error, error) {
	if o.trace {
		cfg.Trace = stderr
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
