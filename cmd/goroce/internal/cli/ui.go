package cli

import (
	"fmt"
	"io"

	"github.com/goroce/goroce/bench/experiment"
	"github.com/goroce/goroce/cmd/goroce/internal/ui"
	"github.com/goroce/goroce/rnic"
)

// The live view (--ui-addr): a web page, served by package cmd/goroce/internal/ui, that
// shows the device's QPs and counters and, during `goroce dcqcn`, a chart
// of each flow's DCQCN rate and the switch queue.

// --ui-addr's usage lines: on the commands that open a device, and on
// goroce dcqcn.
const (
	UIFlagHelp = "serve a live web view of the device on this `address` (e.g. 127.0.0.1:8080): " +
		"its QPs with their states and PSNs, and its counters; with several ranks, rank r serves on the port + r"
	UIDCQCNFlagHelp = "serve a live chart of the flows' DCQCN rates and the switch queue on this `address` " +
		"(e.g. 127.0.0.1:8080); after the run the page keeps the whole chart until goroce is interrupted (Ctrl-C)"
)

// StartUI serves a live view on addr and says where on stderr. stop shuts
// the server down.
func StartUI(addr string, stderr io.Writer) (srv *ui.Server, stop func() error, err error) {
	srv = ui.New(ui.Options{})
	at, stop, err := srv.Start(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--ui-addr: %w", err)
	}
	fmt.Fprintf(stderr, "ui: serving http://%s/\n", at)
	return srv, stop, nil
}

// StartDeviceUI serves the live view of dev on addr.
func StartDeviceUI(addr string, dev *rnic.Device, stderr io.Writer) (stop func() error, err error) {
	srv, stop, err := StartUI(addr, stderr)
	if err != nil {
		return nil, err
	}
	if err := srv.AddDevice(LinkName(dev), dev); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// WatchDCQCN charts sc's run on srv: it describes the run (with the RED
// thresholds the run will use) and has the run push every sample it
// records. Call srv.EndDCQCN when the run is over.
func WatchDCQCN(srv *ui.Server, sc *experiment.Scenario) {
	preset := sc.Preset
	if sc.DisableDCQCN {
		preset = "off"
	}
	red := sc.WithDefaults().RED
	srv.StartDCQCN(ui.DCQCNRun{Name: sc.Name, Flows: sc.Flows, LineRate: sc.LineRate,
		Duration: sc.Duration, Buffer: sc.Buffer, Preset: preset, Kmin: red.Kmin, Kmax: red.Kmax})
	sc.OnSample = func(s experiment.Sample) {
		srv.PushDCQCN(ui.DCQCNSample{At: s.At, Rate: s.Rate, Throughput: s.Throughput,
			QueueBytes: s.QueueBytes, QueueMax: s.QueueMax,
			Marked: s.Marked, CNPs: s.CNPs, TailDrops: s.TailDrops, Retransmitted: s.Retransmitted})
	}
}
