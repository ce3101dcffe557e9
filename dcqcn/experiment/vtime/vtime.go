package vtime

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// ErrInTest is returned by Run inside a test binary whose tests are
// running: a test gets its bubble from synctest.Test directly.
var ErrInTest = errors.New("vtime: called from a running test; use synctest.Test")

// ErrFailed is wrapped by the error Run returns when the testing package
// reports a failure that did not panic (a data race the race detector
// found, say); the error carries its report.
var ErrFailed = errors.New("vtime: the virtual-time run failed")

// PollInterval is how often, in virtual time, the bubble looks whether the
// caller's context has ended.
const PollInterval = time.Millisecond

// testName names Run's one test; only it can match the -test.run default.
const testName = "VirtualTime"

var (
	mu     sync.Mutex // one testing.M at a time
	inited bool       // testing flags registered and parsed by Run
)

// Run calls f in a synctest bubble: every clock read inside it (time.Now,
// timers, tickers, sleeps) is virtual, starting at midnight UTC 2000-01-01,
// and time advances only when every goroutine of the bubble is blocked, so
// a simulation runs as fast as the CPU allows and gives the same timings
// however busy the machine is. Run returns once f and every goroutine it
// started have returned.
//
// f's context is created in the bubble (f may wait on it); it is cancelled
// within PollInterval of virtual time after ctx ends. Run returns ErrInTest
// when called from a running test, and an error wrapping ErrFailed if the
// testing package reported a failure. See the package doc for the rules f
// must keep.
func Run(ctx context.Context, f func(ctx context.Context)) error {
	mu.Lock()
	defer mu.Unlock()
	if !inited {
		if flag.Parsed() {
			return ErrInTest // flag.CommandLine holds a test binary's live flags (or someone else's)
		}
		testing.Init()
		if err := flag.CommandLine.Parse(nil); err != nil {
			return err
		}
		inited = true
	}

	var stop atomic.Bool // set from outside the bubble; read inside it
	watch := context.AfterFunc(ctx, func() { stop.Store(true) })
	defer watch()

	test := func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			inner, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { // the bubble cannot wait on ctx itself: it polls
				tick := time.NewTicker(PollInterval)
				defer tick.Stop()
				for !stop.Load() {
					select {
					case <-tick.C:
					case <-done:
						return
					}
				}
				cancel()
			}()
			defer close(done)
			f(inner)
		})
	}
	m := testing.MainStart(deps{}, []testing.InternalTest{{Name: testName, F: test}}, nil, nil, nil)

	report, code, err := withStdout(m.Run)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("%w (exit status %d):\n%s", ErrFailed, code, report)
	}
	return nil
}

// withStdout runs run with os.Stdout replaced by a pipe and returns what was
// written to it.
func withStdout(run func() int) (out []byte, code int, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, 0, err
	}
	var buf bytes.Buffer
	copied := make(chan struct{})
	go func() {
		io.Copy(&buf, r)
		r.Close()
		close(copied)
	}()
	saved := os.Stdout
	os.Stdout = w
	defer func() {
		os.Stdout = saved
		w.Close()
		<-copied
		out = buf.Bytes()
	}()
	return nil, run(), nil
}
