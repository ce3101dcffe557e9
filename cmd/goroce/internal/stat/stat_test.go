package stat

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// run is the goroce command line with this package's command alone.
var run = clitest.Command("stat", Run)

// TestMetricsAndStat serves a device with a QP on an ephemeral port, scrapes
// /metrics as Prometheus would, and reads /stat and /res with goroce stat.
func TestMetricsAndStat(t *testing.T) {
	dev, q := clitest.DeviceWithQP(t)
	addr := clitest.ServeMetrics(t, dev)
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

// TestMetricsRequestLimits: the metrics server refuses 64 KiB of request
// headers (431) and a request body (413) over a real connection.
func TestMetricsRequestLimits(t *testing.T) {
	addr := clitest.ServeMetrics(t, nil)
	get := "GET /stat HTTP/1.1\r\nHost: x\r\n"
	for _, c := range []struct {
		req  string
		want int
	}{
		{get + "\r\n", http.StatusOK},
		{get + "X-Filler: " + strings.Repeat("a", 64<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{get + "Content-Length: 5\r\n\r\nhello", http.StatusRequestEntityTooLarge},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(15 * time.Second))
		io.WriteString(conn, c.req)
		status := 0
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil {
			status = resp.StatusCode
		}
		conn.Close()
		if status != c.want {
			t.Errorf("%.40q…: status %d (%v), want %d", c.req, status, err, c.want)
		}
	}
}
