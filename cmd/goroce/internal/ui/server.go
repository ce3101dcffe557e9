package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/goroce/goroce/rnic"
)

// ErrInvalid is wrapped by the errors of API misuse: a nil device, an
// empty or duplicate name. The message says which.
var ErrInvalid = errors.New("ui: invalid argument")

// Defaults of Options.
const (
	DefaultTitle   = "goroce"
	DefaultPoll    = 300 * time.Millisecond
	DefaultHistory = 4096
)

// Options tune a Server. The zero value takes the defaults.
type Options struct {
	// Title heads the page (DefaultTitle).
	Title string
	// Poll is how often the page asks for fresh data (DefaultPoll),
	// at least 50 ms.
	Poll time.Duration
	// History is how many of the newest DCQCN samples the server keeps
	// for a page that loads late (DefaultHistory); older ones are dropped.
	History int
}

// Server is the live view of some devices and, optionally, of a DCQCN
// experiment. Serve its Handler, or call Start. All its methods are safe
// for concurrent use.
type Server struct {
	opts    Options
	handler http.Handler
	chart   chart

	mu      sync.Mutex // guards devices
	devices []namedDevice
}

// namedDevice is a device and the name the page shows it under.
type namedDevice struct {
	name string
	dev  *rnic.Device
}

// New returns a Server with no devices and no DCQCN run.
func New(opts Options) *Server {
	if opts.Title == "" {
		opts.Title = DefaultTitle
	}
	if opts.Poll == 0 {
		opts.Poll = DefaultPoll
	}
	opts.Poll = max(opts.Poll, 50*time.Millisecond)
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	s := &Server{opts: opts, chart: chart{limit: opts.History}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", servePage)
	mux.Handle("GET /static/", http.FileServerFS(staticFiles))
	mux.HandleFunc("GET /api/devices", s.serveDevices)
	mux.HandleFunc("GET /api/dcqcn", s.serveDCQCN)
	s.handler = securityHeaders(mux)
	return s
}

// AddDevice shows dev on the page under name (the tools' convention is
// "goroce_<ip>/1"). Devices appear in the order they were added. Closing a
// device does not take it off the page, which goes on showing its last
// state; RemoveDevice does. It returns an error wrapping ErrInvalid for a
// nil device, an empty name or a name already in use.
func (s *Server) AddDevice(name string, dev *rnic.Device) error {
	if dev == nil {
		return fmt.Errorf("%w: AddDevice(%q): nil device", ErrInvalid, name)
	}
	if name == "" {
		return fmt.Errorf("%w: AddDevice: empty name", ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.devices, func(d namedDevice) bool { return d.name == name }) {
		return fmt.Errorf("%w: AddDevice: a device named %q is already shown", ErrInvalid, name)
	}
	s.devices = append(s.devices, namedDevice{name, dev})
	return nil
}

// RemoveDevice takes the device called name off the page. It reports
// whether there was one.
func (s *Server) RemoveDevice(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.devices)
	s.devices = slices.DeleteFunc(s.devices, func(d namedDevice) bool { return d.name == name })
	return len(s.devices) < n
}

// Handler returns the HTTP handler that serves the page and its data, for
// a caller that runs its own http.Server or mounts it under a prefix with
// http.StripPrefix.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves the
// page there in a goroutine. It returns the address it listens on and the
// function that stops the server, waiting at most a second for requests
// under way.
func (s *Server) Start(addr string) (net.Addr, func() error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	srv := NewHTTPServer(s.handler)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
	}()
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if err != nil {
			srv.Close()
		}
		<-done
		return err
	}
	return ln.Addr(), stop, nil
}

// Limits of the HTTP servers goroce runs: every endpoint is a small GET.
const (
	maxHeaderBytes    = 8 << 10 // net/http allows 4 KiB more
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	idleTimeout       = 60 * time.Second
)

// NewHTTPServer returns the http.Server that serves h (the page here, the
// metrics in cmd/goroce) with bounded requests: headers of at most 8 KiB
// (431 beyond), read within 5 s, a whole request within 10 s, no body
// (413: no endpoint takes one), an idle connection closed after 60 s.
func NewHTTPServer(h http.Handler) *http.Server {
	noBody := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			w.Header().Set("Connection", "close")
			http.Error(w, "no endpoint here takes a request body", http.StatusRequestEntityTooLarge)
			return
		}
		h.ServeHTTP(w, r)
	})
	return &http.Server{Handler: noBody, MaxHeaderBytes: maxHeaderBytes, ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout: readTimeout, IdleTimeout: idleTimeout}
}

// snapshot returns the devices as the page shows them, read now.
func (s *Server) snapshot() []deviceJSON {
	s.mu.Lock()
	devices := slices.Clone(s.devices)
	s.mu.Unlock()
	out := make([]deviceJSON, 0, len(devices))
	for _, d := range devices {
		out = append(out, viewDevice(d.name, d.dev))
	}
	return out
}

// serveDevices is GET /api/devices.
func (s *Server) serveDevices(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, devicesJSON{
		Title:   s.opts.Title,
		PollMS:  s.opts.Poll.Milliseconds(),
		Devices: s.snapshot(),
	})
}

// serveDCQCN is GET /api/dcqcn?after=SEQ.
func (s *Server) serveDCQCN(w http.ResponseWriter, r *http.Request) {
	var after uint64
	if v := r.URL.Query().Get("after"); v != "" {
		var err error
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			http.Error(w, fmt.Sprintf("after=%q: want a sample number (0 for all)", v), http.StatusBadRequest)
			return
		}
	}
	writeJSON(w, s.chart.since(after))
}

// writeJSON writes v as the response; the page must never see a cached
// answer.
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.Write(b)
}

// servePage serves the page for "/".
func servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	http.ServeFileFS(w, r, staticFiles, "static/index.html")
}

// securityHeaders lets the page run only its own script and style sheet
// and talk only to its own server.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}
