package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

// deviceWithQP opens a device on a loopback address and creates one RC QP
// on it (in RESET), for the tests of the servers that watch a device.
func deviceWithQP(t *testing.T) (*rnic.Device, *rnic.QP) {
	t.Helper()
	srvAddr, _ := loopbackPair()
	dev, err := rnic.Open(rnic.Config{Addr: netip.AddrPortFrom(netip.MustParseAddr(srvAddr), 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(8)
	q, err := dev.CreateQP(pd, &qp.InitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq, Cap: qp.Cap{MaxSendWR: 4, MaxRecvWR: 4}})
	if err != nil {
		t.Fatal(err)
	}
	return dev, q
}

// TestMetricsAndStat serves a device with a QP on an ephemeral port, scrapes
// /metrics as Prometheus would, and reads /stat and /res with goroce stat.
func TestMetricsAndStat(t *testing.T) {
	dev, q := deviceWithQP(t)
	addr := serveMetrics(t, dev)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"goroce_sent_pkts_total", "goroce_retry_exceeded_err_total", "goroce_qp_send_wrs{"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"stat", addr}, &out, &errOut); code != cli.ExitOK {
		t.Fatalf("goroce stat exit %d: %s", code, errOut.String())
	}
	s := out.String()
	if !strings.Contains(s, "link goroce_"+dev.Addr().Addr().String()+"/1 sent_pkts 0") || !strings.Contains(s, "type RC state RESET") ||
		!strings.Contains(s, "lqpn "+strconv.FormatUint(uint64(q.QPN()), 10)) {
		t.Errorf("goroce stat printed:\n%s", s)
	}
}
