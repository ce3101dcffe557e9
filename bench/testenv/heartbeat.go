package testenv

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// HeartbeatEvery is how often Heartbeat says that a package's tests still
// run.
const HeartbeatEvery = 30 * time.Second

// Heartbeat is for the TestMain of a package whose tests take minutes:
//
//	func TestMain(m *testing.M) { stop := testenv.Heartbeat(); code := m.Run(); stop(); os.Exit(code) }
//
// go test ./... prints a package's result only when it and every package
// before it are done, so a long package keeps the whole run silent.
// Heartbeat writes "go test: PACKAGE: still running (1m30s)" every
// HeartbeatEvery on the terminal that started the run (/dev/tty), which go
// test does not hold back; without a terminal (CI, a pipe), or with
// GOROCE_PROGRESS=0, it writes nothing. The returned function stops it.
func Heartbeat() (stop func()) {
	if os.Getenv("GOROCE_PROGRESS") == "0" {
		return func() {}
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return func() {}
	}
	return heartbeat(tty, packageName(), HeartbeatEvery)
}

// heartbeat writes Heartbeat's line for pkg on w every interval until the
// returned function is called, and closes w if it is a Closer.
func heartbeat(w io.Writer, pkg string, every time.Duration) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				fmt.Fprintf(w, "go test: %s: still running (%v)\n", pkg, now.Sub(start).Round(time.Second))
			}
		}
	}()
	return func() {
		close(done)
		<-exited
		if c, ok := w.(io.Closer); ok {
			c.Close()
		}
	}
}

// packageName is the test's package directory relative to the module root
// (go test runs a test binary in its package's directory).
func packageName() string {
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Base(os.Args[0])
	}
	for d := dir; filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if rel, err := filepath.Rel(d, dir); err == nil {
				return rel
			}
		}
	}
	return dir
}
