package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// TestMetricsAndStat serves a device with a QP on an ephemeral port, scrapes
// /metrics as Prometheus would, and reads /stat and /res with goroce stat.
func TestMetricsAndStat(t *testing.T) {
	dev, q := clitest.DeviceWithQP(t)
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
