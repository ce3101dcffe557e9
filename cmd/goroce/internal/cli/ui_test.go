package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/bench/experiment"
	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/cmd/goroce/internal/ui"
	"github.com/goroce/goroce/dcqcn"
)

// getUIJSON decodes the JSON at url into v.
func getUIJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestUIAddrFlag parses --ui-addr as the device commands do and attaches
// the live view to a device: the URL is on stderr and the page's data
// shows the device under its rdma-tool name, with its QP.
func TestUIAddrFlag(t *testing.T) {
	var obs cli.ObserveFlags
	fs := cli.NewFlagSet("test", "")
	obs.Register(fs)
	if err := fs.Parse([]string{"--ui-addr", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	dev, q := clitest.DeviceWithQP(t)
	var stderr bytes.Buffer
	stop, err := obs.Attach(dev, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	m := regexp.MustCompile(`^ui: serving (http://127\.0\.0\.1:\d+/)\n$`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("stderr %q, want the line ui: serving http://127.0.0.1:PORT/", stderr.String())
	}
	var got struct {
		Devices []struct {
			Name string
			QPs  []struct {
				QPN   uint32
				State string
			}
		}
	}
	getUIJSON(t, m[1]+"api/devices", &got)
	if len(got.Devices) != 1 || got.Devices[0].Name != "goroce_"+dev.Addr().Addr().String()+"/1" ||
		len(got.Devices[0].QPs) != 1 || got.Devices[0].QPs[0].QPN != q.QPN() || got.Devices[0].QPs[0].State != "RESET" {
		t.Errorf("devices %+v, want goroce_%s/1 with QP %d in RESET", got.Devices, dev.Addr().Addr(), q.QPN())
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if _, err := http.Get(m[1]); err == nil {
		t.Error("the live view still answers after stop")
	}
}

// TestWatchDCQCN runs a short incast (in virtual time) watched as
// `goroce dcqcn --ui-addr` watches it: the chart gets every sample the run
// recorded, with its rates and queue depth.
func TestWatchDCQCN(t *testing.T) {
	srv := ui.New(ui.Options{})
	sc := experiment.Scenario{Name: "incast", Flows: 2, LineRate: dcqcn.Gbps, Buffer: experiment.DefaultBuffer(dcqcn.Gbps),
		Duration: 10 * time.Millisecond, Interval: time.Millisecond}
	cli.WatchDCQCN(srv, &sc)
	var res *experiment.Result
	synctest.Test(t, func(t *testing.T) {
		var err error
		if res, err = experiment.Run(context.Background(), sc); err != nil {
			t.Fatal(err)
		}
	})
	if res == nil {
		t.FailNow()
	}
	addr, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var got struct {
		Run *struct {
			Name        string
			Flows       int
			LineRateBPS float64 `json:"line_rate_bps"`
			Kmin        int     `json:"kmin_bytes"`
			Kmax        int     `json:"kmax_bytes"`
		}
		Samples []struct {
			AtMS       float64   `json:"at_ms"`
			RateBPS    []float64 `json:"rate_bps"`
			QueueBytes int       `json:"queue_bytes"`
		}
	}
	getUIJSON(t, "http://"+addr.String()+"/api/dcqcn?after=0", &got)
	if got.Run == nil || got.Run.Name != "incast" || got.Run.Flows != 2 || got.Run.LineRateBPS != 1e9 {
		t.Fatalf("run %+v, want incast, 2 flows, 1 Gb/s", got.Run)
	}
	// The thresholds the run used: HPCC's RED scaled to 1 Gb/s (the
	// scenario's default), as the run itself reports them.
	if red := res.Scenario.RED; got.Run.Kmin != red.Kmin || got.Run.Kmax != red.Kmax || red.Kmax == 0 {
		t.Errorf("Kmin/Kmax charted %d/%d, the run used %d/%d", got.Run.Kmin, got.Run.Kmax, red.Kmin, red.Kmax)
	}
	if len(got.Samples) != len(res.Samples) || len(got.Samples) < 10 {
		t.Fatalf("%d samples charted, the run recorded %d (want at least 10)", len(got.Samples), len(res.Samples))
	}
	for i, s := range res.Samples {
		g := got.Samples[i]
		if g.AtMS != float64(s.At)/1e6 || len(g.RateBPS) != 2 || g.RateBPS[0] != float64(s.Rate[0]) ||
			g.RateBPS[1] != float64(s.Rate[1]) || g.QueueBytes != s.QueueBytes {
			t.Fatalf("sample %d charted as %+v, recorded as %+v", i, g, s)
		}
	}
}
