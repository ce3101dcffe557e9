package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/goroce/goroce/cmd/goroce/internal/ui"
	"github.com/goroce/goroce/rnic"
)

// A running device's counters and resources, over HTTP (--metrics-addr):
//
//	/metrics  Prometheus text: goroce_<counter>_total for every counter, and
//	          per QP goroce_qp_rate_bits_per_second, goroce_qp_send_wrs,
//	          goroce_qp_recv_wrs
//	/stat       the counters and the QPs as `rdma statistic show` and `rdma
//	            res show qp` print rxe's (WriteStatText)
//	/stat.json  the same as JSON (DeviceStat)
//
// `goroce stat ADDR` reads /stat.json of another process's device.

// StartMetrics serves dev on addr and returns the function that stops the
// server. It says where it listens on stderr.
func StartMetrics(addr string, dev *rnic.Device, stderr io.Writer) (func() error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(deviceCollector{dev})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/stat", func(w http.ResponseWriter, _ *http.Request) {
		s := StatOf(dev)
		WriteStatText(w, &s)
	})
	mux.HandleFunc("/stat.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(StatOf(dev))
	})
	srv := ui.NewHTTPServer(mux)
	go srv.Serve(ln)
	fmt.Fprintf(stderr, "goroce: metrics on http://%s (/metrics, /stat, /stat.json)\n", ln.Addr())
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return srv.Shutdown(ctx)
	}, nil
}

// LinkName is how the device appears in the rdma-tool-style views.
func LinkName(dev *rnic.Device) string { return "goroce_" + dev.Addr().Addr().String() + "/1" }

// deviceCollector turns a device's counters and QPs into Prometheus
// metrics at each scrape.
type deviceCollector struct{ dev *rnic.Device }

var (
	qpRateDesc = prometheus.NewDesc("goroce_qp_rate_bits_per_second", "The QP's DCQCN send rate.", []string{"device", "qpn", "type"}, nil)
	qpSendDesc = prometheus.NewDesc("goroce_qp_send_wrs", "Send WRs posted and not yet completed.", []string{"device", "qpn", "type"}, nil)
	qpRecvDesc = prometheus.NewDesc("goroce_qp_recv_wrs", "Receive WRs posted.", []string{"device", "qpn", "type"}, nil)
)

func (c deviceCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c deviceCollector) Collect(ch chan<- prometheus.Metric) {
	dev := c.dev.Addr().String()
	for _, k := range c.dev.Counters() {
		d := prometheus.NewDesc("goroce_"+k.Name+"_total", "goroce device counter "+k.Name+" (rxe's name where it has one).", []string{"device"}, nil)
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(k.Value), dev)
	}
	for _, r := range c.dev.Resources() {
		qpn, typ := fmt.Sprintf("%#x", r.QPN), r.Type.String()
		ch <- prometheus.MustNewConstMetric(qpRateDesc, prometheus.GaugeValue, float64(r.Rate), dev, qpn, typ)
		ch <- prometheus.MustNewConstMetric(qpSendDesc, prometheus.GaugeValue, float64(r.SendWRs), dev, qpn, typ)
		ch <- prometheus.MustNewConstMetric(qpRecvDesc, prometheus.GaugeValue, float64(r.RecvWRs), dev, qpn, typ)
	}
}
