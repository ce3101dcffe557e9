package ui

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/rnic"
)

// get fetches url and returns the status, the Content-Type and the body.
func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// getJSON fetches url and decodes its JSON answer into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, h, body := get(t, url)
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET %s: %d %q %q: %s", url, code, h.Get("Content-Type"), h.Get("Cache-Control"), body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}

// counterValue returns the named counter of a device view.
func counterValue(t *testing.T, d deviceJSON, name string) uint64 {
	t.Helper()
	for _, c := range d.Counters {
		if c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("device %s has no counter %s", d.Name, name)
	return 0
}

// TestDevicesEndpoint connects an RC pair over real UDP, moves three
// SENDs, and reads /api/devices: each QP with its real QPN, state and
// PSNs, and the counters as the devices count them.
func TestDevicesEndpoint(t *testing.T) {
	const sends, extra = 3, 2
	a, b := connectedPair(t, sends, extra)
	srv := New(Options{Title: "test view", Poll: 400 * time.Millisecond})
	if err := errors.Join(srv.AddDevice("alpha", a.dev), srv.AddDevice("beta", b.dev)); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	before := [2]uint64{a.dev.Counter("sent_pkts"), b.dev.Counter("sent_pkts")}
	var got devicesJSON
	getJSON(t, ts.URL+"/api/devices", &got)
	after := [2]uint64{a.dev.Counter("sent_pkts"), b.dev.Counter("sent_pkts")}

	if got.Title != "test view" || got.PollMS != 400 || len(got.Devices) != 2 {
		t.Fatalf("got title %q, poll %d ms, %d devices; want \"test view\", 400, 2", got.Title, got.PollMS, len(got.Devices))
	}
	psn := uint32(startPSN) + sends
	for i, tc := range []struct {
		name              string
		n, peer           *node
		sqPSN, rqPSN      uint32
		sendWRs, recvWRs  int
		minSent, minRcvd  uint64
		sentLow, sentHigh uint64
	}{
		// a sent three SENDs and received their ACKs (one each at least,
		// coalesced perhaps); b the other way round.
		{"alpha", a, b, psn, uint32(startPSN), 0, 0, sends, 1, before[0], after[0]},
		{"beta", b, a, uint32(startPSN), psn, 0, extra, 1, sends, before[1], after[1]},
	} {
		d := got.Devices[i]
		if d.Name != tc.name || d.Addr != tc.n.dev.Addr().String() || d.GID != tc.n.dev.GID().String() {
			t.Errorf("device %d: %s %s %s, want %s %v %v", i, d.Name, d.Addr, d.GID, tc.name, tc.n.dev.Addr(), tc.n.dev.GID())
		}
		if len(d.QPs) != 1 {
			t.Fatalf("%s: %d QPs, want 1: %+v", tc.name, len(d.QPs), d.QPs)
		}
		want := qpJSON{QPN: tc.n.qp.QPN(), Type: "RC", State: "RTS", DestQPN: tc.peer.qp.QPN(),
			SendPSN: tc.sqPSN, AckedPSN: tc.sqPSN, RecvPSN: tc.rqPSN, SendWRs: tc.sendWRs, RecvWRs: tc.recvWRs,
			MTU: 1024, Rate: float64(tc.n.qp.Rate()), DCQCN: true}
		if d.QPs[0] != want {
			t.Errorf("%s: QP\n got %+v\nwant %+v", tc.name, d.QPs[0], want)
		}
		if sent := counterValue(t, d, "sent_pkts"); sent < tc.sentLow || sent > tc.sentHigh || sent < tc.minSent {
			t.Errorf("%s: sent_pkts %d, want %d ... %d and at least %d", tc.name, sent, tc.sentLow, tc.sentHigh, tc.minSent)
		}
		if rcvd := counterValue(t, d, "rcvd_pkts"); rcvd < tc.minRcvd {
			t.Errorf("%s: rcvd_pkts %d, want at least %d", tc.name, rcvd, tc.minRcvd)
		}
		// Every counter the device has, under its name, in its order.
		names := make([]string, 0, len(d.Counters))
		for _, c := range d.Counters {
			names = append(names, c.Name)
		}
		var wantNames []string
		for _, c := range tc.n.dev.Counters() {
			wantNames = append(wantNames, c.Name)
		}
		if strings.Join(names, " ") != strings.Join(wantNames, " ") {
			t.Errorf("%s: counters %v, want %v", tc.name, names, wantNames)
		}
	}

	// A removed device is gone.
	if !srv.RemoveDevice("alpha") || srv.RemoveDevice("alpha") {
		t.Error("RemoveDevice(alpha) twice: want true, then false")
	}
	getJSON(t, ts.URL+"/api/devices", &got)
	if len(got.Devices) != 1 || got.Devices[0].Name != "beta" {
		t.Errorf("after removing alpha: %+v, want beta alone", got.Devices)
	}
}

// TestDCQCNEndpoint pushes samples and reads them back in pieces, as the
// page does; the server keeps only the newest History samples.
func TestDCQCNEndpoint(t *testing.T) {
	srv := New(Options{History: 4})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	var got dcqcnJSON
	getJSON(t, ts.URL+"/api/dcqcn", &got)
	if got.RunID != 0 || got.Run != nil || got.Next != 0 || got.Samples == nil || len(got.Samples) != 0 {
		t.Fatalf("before any run: %+v, want run_id 0, run null, next 0, samples []", got)
	}

	srv.StartDCQCN(DCQCNRun{Name: "incast", Flows: 2, LineRate: dcqcn.Gbps, Duration: 2 * time.Second, Buffer: 64000, Preset: "paper"})
	rates := []dcqcn.Rate{dcqcn.Gbps, 500 * dcqcn.Mbps}
	for i := range 3 {
		srv.PushDCQCN(DCQCNSample{At: time.Duration(i+1) * time.Millisecond, Rate: rates,
			Throughput: []dcqcn.Rate{1, 2}, QueueBytes: 1000 * i, QueueMax: 1500 * i, Marked: uint64(i), CNPs: 2, TailDrops: 3, Retransmitted: 4})
	}
	rates[0] = 7 // PushDCQCN copied the slice: this must not show
	getJSON(t, ts.URL+"/api/dcqcn?after=0", &got)
	wantRun := runJSON{Name: "incast", Flows: 2, LineRate: 1e9, DurationMS: 2000, Buffer: 64000, Preset: "paper"}
	if got.RunID != 1 || got.Run == nil || *got.Run != wantRun || got.Next != 3 || len(got.Samples) != 3 {
		t.Fatalf("after 3 samples: %+v (run %+v), want run_id 1, run %+v, next 3, 3 samples", got, got.Run, wantRun)
	}
	s := got.Samples[2]
	if s.Seq != 3 || s.AtMS != 3 || s.Rate[0] != 1e9 || s.Rate[1] != 5e8 || s.Throughput[1] != 2 ||
		s.QueueBytes != 2000 || s.QueueMax != 3000 || s.Marked != 2 || s.CNPs != 2 || s.TailDrops != 3 || s.Retransmitted != 4 {
		t.Errorf("third sample %+v", s)
	}

	getJSON(t, ts.URL+"/api/dcqcn?after=2", &got)
	if len(got.Samples) != 1 || got.Samples[0].Seq != 3 {
		t.Errorf("after=2: %+v, want sample 3 alone", got.Samples)
	}
	getJSON(t, ts.URL+"/api/dcqcn?after=3", &got)
	if len(got.Samples) != 0 || got.Next != 3 {
		t.Errorf("after=3: %+v, want no samples, next 3", got)
	}

	// Ten samples more with History 4: only the newest four are served,
	// and a rate JSON cannot carry arrives as 0.
	for i := range 10 {
		srv.PushDCQCN(DCQCNSample{At: time.Duration(10+i) * time.Millisecond, Rate: []dcqcn.Rate{dcqcn.Rate(math.Inf(1)), dcqcn.Rate(i)}})
	}
	getJSON(t, ts.URL+"/api/dcqcn?after=0", &got)
	if got.Next != 13 || len(got.Samples) != 4 || got.Samples[0].Seq != 10 || got.Samples[3].Seq != 13 {
		t.Fatalf("after 13 samples, History 4: next %d, samples %+v; want 10 ... 13", got.Next, got.Samples)
	}
	if r := got.Samples[3].Rate; r[0] != 0 || r[1] != 9 {
		t.Errorf("rates %v, want [0 9]", r)
	}

	// A new run starts the chart over.
	srv.StartDCQCN(DCQCNRun{Name: "converge", Flows: 2})
	getJSON(t, ts.URL+"/api/dcqcn?after=0", &got)
	if got.RunID != 2 || got.Run.Name != "converge" || len(got.Samples) != 0 {
		t.Errorf("after a second StartDCQCN: %+v, want run_id 2, converge, no samples", got)
	}

	code, _, body := get(t, ts.URL+"/api/dcqcn?after=x")
	if code != http.StatusBadRequest || !strings.Contains(string(body), `after="x"`) {
		t.Errorf("after=x: %d %s, want 400 naming the bad value", code, body)
	}
}

// TestPageAndStatic checks the page, its files and the security headers.
func TestPageAndStatic(t *testing.T) {
	ts := httptest.NewServer(New(Options{}).Handler())
	defer ts.Close()
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html", `<script src="static/app.js"`},
		{"/static/app.js", "text/javascript", "function renderDevices"},
		{"/static/style.css", "text/css", ".counter"},
	} {
		code, h, body := get(t, ts.URL+tc.path)
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), tc.contentType) || !strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s: %d %q, want 200 %s containing %q", tc.path, code, h.Get("Content-Type"), tc.contentType, tc.contains)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
	}
	for _, path := range []string{"/index.html.bak", "/static/nope.js", "/api/nope"} {
		if code, _, _ := get(t, ts.URL+path); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
	resp, err := http.Post(ts.URL+"/api/devices", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/devices: %d, want 405", resp.StatusCode)
	}
}

// TestAddDeviceMisuse checks the errors of AddDevice.
func TestAddDeviceMisuse(t *testing.T) {
	n := openNode(t)
	srv := New(Options{})
	if err := srv.AddDevice("x", n.dev); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dev  *rnic.Device
		want string
	}{
		{"y", nil, "nil device"},
		{"", n.dev, "empty name"},
		{"x", n.dev, `"x" is already shown`},
	} {
		err := srv.AddDevice(tc.name, tc.dev)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddDevice(%q, %v): %v, want ErrInvalid saying %q", tc.name, tc.dev, err, tc.want)
		}
	}
}

// TestStart serves on an ephemeral loopback port and stops.
func TestStart(t *testing.T) {
	addr, stop, err := New(Options{}).Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, body := get(t, "http://"+addr.String()+"/"); code != http.StatusOK || !strings.Contains(string(body), "goroce live view") {
		t.Errorf("GET /: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if _, err := http.Get("http://" + addr.String() + "/"); err == nil {
		t.Error("the server still answers after stop")
	}
	if _, _, err := New(Options{}).Start("127.0.0.1:-1"); err == nil {
		t.Error("Start on port -1 succeeded")
	}
}
