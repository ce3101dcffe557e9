package perf

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/qp"
)

// openPerf opens the device and QPs perf opens for args, with stall as
// its stall timeout, and closes them when the test ends.
func openPerf(t *testing.T, stall time.Duration, args ...string) *perfContext {
	t.Helper()
	cfg, code, ok := parsePerf(args, io.Discard, io.Discard)
	if !ok {
		t.Fatalf("perf %v: exit %d", args, code)
	}
	cfg.stall = stall
	pc, err := newPerfContext(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pc.dev.Close()
		pc.closeObs()
	})
	return pc
}

// connectPerf connects the first QPs of srv and cli as perf's exchange
// connects them; edit, if not nil, changes what the client learns of the
// server's side first.
func connectPerf(t *testing.T, srv, cli *perfContext, edit func(*perfDest)) {
	t.Helper()
	s, c := srv.qps[0], cli.qps[0]
	s.remote, c.remote = c.local, s.local
	if edit != nil {
		edit(&c.remote)
	}
	for _, p := range []struct {
		pc *perfContext
		q  *perfQP
	}{{srv, s}, {cli, c}} {
		if err := p.pc.connect(p.q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAwaitClientNoticesADeadClient runs a passive write_bw server's wait
// (awaitClient), polling and with -e, while a client WRITEs to it for a
// while and then stops without its done line, its side channel open (a
// client that hangs). The server must keep waiting while packets come,
// and give up with ErrStalled within a few seconds of its stall timeout
// after the last one: polling reads the clock only once every pollChecks
// polls, and that must not lose the bound. The bounds come from the
// client's clock: the server cannot stall before the last WRITE was
// posted plus the stall timeout.
func TestAwaitClientNoticesADeadClient(t *testing.T) {
	const stall = time.Second
	const sending = 1500 * time.Millisecond
	for _, mode := range []struct {
		name  string
		extra []string
	}{{"polling", nil}, {"events", []string{"-e"}}} {
		t.Run(mode.name, func(t *testing.T) {
			srvAddr, cliAddr := clitest.LoopbackPair()
			srv := openPerf(t, stall, append([]string{"write_bw", "--addr", srvAddr}, mode.extra...)...)
			cl := openPerf(t, stall, "write_bw", srvAddr, "--addr", cliAddr)
			connectPerf(t, srv, cl, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			type result struct {
				err error
				at  time.Time
			}
			res := make(chan result, 1)
			start := time.Now()
			go func() {
				_, err := srv.awaitClient(ctx, make(chan peerDone)) // no done line ever
				res <- result{err, time.Now()}
			}()

			c := cl.qps[0]
			cl.prepare(c, 64)
			c.send.Flags = qp.SendSignaled
			var wc [1]qp.WC
			var lastPost, lastDone time.Time
			writes := 0
			for time.Since(start) < sending {
				lastPost = time.Now()
				if err := c.qp.PostSend(&c.send); err != nil {
					t.Fatal(err)
				}
				if err := cl.cq.Wait(ctx); err != nil {
					t.Fatalf("WRITE %d: no completion: %v", writes, err)
				}
				if cl.cq.Poll(wc[:]) != 1 || wc[0].Status != qp.WCSuccess {
					t.Fatalf("WRITE %d: completion %+v", writes, wc[0])
				}
				lastDone = time.Now()
				writes++
				select {
				case r := <-res:
					t.Fatalf("the server gave up after %v while the client was writing (WRITE %d): %v",
						r.at.Sub(start), writes, r.err)
				default:
				}
			}
			r := <-res
			if !errors.Is(r.err, cli.ErrStalled) {
				t.Fatalf("the server's wait ended with %v, want %v", r.err, cli.ErrStalled)
			}
			if early := lastPost.Add(stall); r.at.Before(early) {
				t.Errorf("the server gave up %v after the last WRITE was posted, before its stall timeout %v",
					r.at.Sub(lastPost), stall)
			}
			if late := lastDone.Add(stall + 5*time.Second); r.at.After(late) {
				t.Errorf("the server gave up %v after the last WRITE completed, want within 5 s of its stall timeout %v",
					r.at.Sub(lastDone), stall)
			}
			t.Logf("%d WRITEs for %v; the server gave up %v after the last: %v",
				writes, lastDone.Sub(start), r.at.Sub(lastDone), r.err)
		})
	}
}

// TestAwaitClientTakesTheDoneLine: the client's done line, and the end of
// the context, end a polling server's wait at once, with their values.
func TestAwaitClientTakesTheDoneLine(t *testing.T) {
	srvAddr, _ := clitest.LoopbackPair()
	srv := openPerf(t, time.Hour, "write_bw", "--addr", srvAddr)
	done := make(chan peerDone, 1)
	done <- peerDone{counts: []int{7}}
	bound, cancelBound := context.WithTimeout(t.Context(), 30*time.Second) // a lost line fails, not hangs
	defer cancelBound()
	d, err := srv.awaitClient(bound, done)
	if err != nil || len(d.counts) != 1 || d.counts[0] != 7 {
		t.Errorf("awaitClient with a done line waiting = %+v, %v; want counts [7]", d, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := srv.awaitClient(ctx, make(chan peerDone)); !errors.Is(err, context.Canceled) {
		t.Errorf("awaitClient with its context done = %v, want %v", err, context.Canceled)
	}
}
