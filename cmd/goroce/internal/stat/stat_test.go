package stat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/cmd/goroce/internal/pingpong"
)

// run is the goroce command line with this package's command alone.
var run = clitest.Command("stat", Run)

// TestMetricsAndStat serves a device with a QP on an ephemeral port, scrapes
// /metrics as Prometheus would, and reads it with goroce stat.
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
		!strings.Contains(s, fmt.Sprintf("lqpn %#x", q.QPN())) {
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

// both is the goroce command line with pingpong and stat.
var both = clitest.Commands(map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{
	"pingpong": pingpong.Run, "stat": Run})

// TestStatOfPingpongServer reads a waiting pingpong server's device, after
// sending its RoCEv2 port three datagrams too short for a BTH: goroce stat
// -j parses back to the counters /metrics (Prometheus's own encoder) says,
// with the three counted as malformed; the text has one wrapped line per
// link and per QP with hex QPNs; -w prints the increase of two more.
func TestStatOfPingpongServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srvAddr, _ := clitest.LoopbackPair()
	srvCtx, stopSrv := context.WithCancel(ctx)
	_, srvCode, srvErr := clitest.StartServer(t, srvCtx, both,
		[]string{"pingpong", "--addr", srvAddr, "-p", "0", "--metrics-addr", "127.0.0.1:0"}, io.Discard)
	defer func() { stopSrv(); <-srvCode }()
	m := regexp.MustCompile(`metrics on http://(\S+) `).FindStringSubmatch(srvErr.String())
	if m == nil {
		t.Fatalf("no metrics address in the server's stderr: %s", srvErr)
	}
	addr := m[1]
	udp, err := net.Dial("udp", net.JoinHostPort(srvAddr, "4791"))
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	junk := func(n int) {
		for range n {
			if _, err := udp.Write([]byte("not a BTH")); err != nil {
				t.Fatal(err)
			}
		}
	}
	junk(3)

	var s cli.DeviceStat
	for tries := 0; ; tries++ { // the device counts them as they arrive
		code, out, errOut := clitest.Goroce(t, both, "stat", "-j", addr)
		if code != cli.ExitOK {
			t.Fatalf("goroce stat -j exit %d: %s", code, errOut)
		}
		s = cli.DeviceStat{}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("goroce stat -j printed %q: %v", out, err)
		}
		if v, _ := s.Counters.Get("malformed"); v == 3 || tries == 500 {
			break
		}
	}
	if v, ok := s.Counters.Get("malformed"); v != 3 {
		t.Fatalf("malformed %d (%v), want the 3 datagrams sent: %+v", v, ok, s)
	}
	if want := "goroce_" + srvAddr + "/1"; s.Link != want {
		t.Errorf("link %q, want %q", s.Link, want)
	}
	metrics := prometheusCounters(t, addr)
	if len(s.Counters) != len(metrics) || len(s.Counters) < 30 {
		t.Errorf("%d counters in JSON, %d in /metrics", len(s.Counters), len(metrics))
	}
	for _, c := range s.Counters {
		if v, ok := metrics[c.Name]; !ok || v != c.Value {
			t.Errorf("JSON %s %d, /metrics %d (%v)", c.Name, c.Value, v, ok)
		}
	}
	if len(s.QPs) == 0 {
		t.Fatal("no QP in the JSON: the pingpong server has one")
	}

	code, text, errOut := clitest.Goroce(t, both, "stat", addr)
	if code != cli.ExitOK {
		t.Fatalf("goroce stat exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	heads := 0
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("line of %d columns: %q", len(l), l)
		}
		if strings.HasPrefix(l, "link ") {
			heads++
		} else if !strings.HasPrefix(l, "    ") {
			t.Errorf("a line neither a link's nor a QP's nor indented: %q", l)
		}
	}
	if heads != 1+len(s.QPs) || len(lines) <= heads {
		t.Errorf("%d head lines of %d, want 1 + %d QPs, wrapped:\n%s", heads, len(lines), len(s.QPs), text)
	}
	q := s.QPs[0]
	if want := fmt.Sprintf("link %s lqpn %#x rqpn %#x type %s state %s", s.Link, q.LQPN, q.RQPN, q.Type, q.State); !strings.Contains(text, want) {
		t.Errorf("no %q in:\n%s", want, text)
	}
	if !strings.Contains(text, " malformed 3") {
		t.Errorf("no malformed 3 in:\n%s", text)
	}

	// Watch: a first print, then increases only.
	pr, pw := io.Pipe()
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan int, 1)
	go func() {
		code := both(watchCtx, []string{"stat", "-w", "20ms", "-c", "250", addr}, pw, io.Discard)
		pw.Close()
		watched <- code
	}()
	sc := bufio.NewScanner(pr)
	sent, increases, sum := false, false, 0
	var got []string
	malformed := regexp.MustCompile(` malformed (\d+)`)
	for sum < 2 && sc.Scan() {
		l := sc.Text()
		got = append(got, l)
		switch {
		case !sent && strings.HasPrefix(l, "link "):
			junk(2) // after the first print's counters
			sent = true
		case strings.Contains(l, "increases since the last print"):
			increases = true
		case increases:
			if m := malformed.FindStringSubmatch(l); m != nil {
				n, _ := strconv.Atoi(m[1])
				sum += n
			}
		}
	}
	stopWatch()
	go io.Copy(io.Discard, pr)
	if code := <-watched; code != cli.ExitOK {
		t.Errorf("goroce stat -w exit %d", code)
	}
	if sum != 2 {
		t.Errorf("goroce stat -w printed malformed increases summing to %d, want the 2 sent:\n%s", sum, strings.Join(got, "\n"))
	}
}

// prometheusCounters scrapes /metrics and returns every goroce_NAME_total.
func prometheusCounters(t *testing.T, addr string) map[string]uint64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]uint64{}
	re := regexp.MustCompile(`^goroce_(\w+)_total\{[^}]*\} (\S+)$`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			out[m[1]] = uint64(v)
		}
	}
	return out
}
