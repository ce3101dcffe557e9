package bootstrap

import (
	"context"
	"sync"
	"testing"
	"time"
)

// watchAll connects n clients to a root on loopback and puts them in watch
// mode; notices[r] receives what client r hears.
func watchAll(t *testing.T, n int) (*Root, []*Client, []chan Notice) {
	t.Helper()
	ln := listen(t)
	root := StartRoot(ln, n, Job{Magic: 11}, RootOptions{Timeout: 5 * time.Second})
	t.Cleanup(root.Close)
	clients := make([]*Client, n)
	notices := make([]chan Notice, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		notices[r] = make(chan Notice, 16)
		wg.Go(func() {
			c, err := Connect(t.Context(), ln.Addr().String(), r, n, Job{Magic: 11}, 5*time.Second)
			if err != nil {
				errs[r] = err
				return
			}
			clients[r] = c
			errs[r] = c.Watch(t.Context(), func(nt Notice) { notices[r] <- nt })
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return root, clients, notices
}

func expect(t *testing.T, ch chan Notice, want Notice) {
	t.Helper()
	select {
	case got := <-ch:
		if got.Rank != want.Rank || got.SeenBy != want.SeenBy || got.Stalled != want.Stalled ||
			(want.Cause != "" && got.Cause != want.Cause) {
			t.Errorf("notice %+v, want %+v", got, want)
		}
	case <-time.After(5 * time.Second): // a real-socket test: bounded wait
		t.Errorf("no notice, want %+v", want)
	}
}

// In watch mode a rank's report reaches every other rank; a rank that
// hangs up without a goodbye is reported dead by the root; clean
// goodbyes end the root without a notice.
func TestWatchNotices(t *testing.T) {
	root, clients, notices := watchAll(t, 4)
	sent := Notice{Rank: 3, SeenBy: 1, Stalled: true, Cause: "nothing for 1s"}
	if err := clients[1].Report(sent); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{0, 2, 3} {
		expect(t, notices[r], sent)
	}
	clients[3].w.closing.Store(true) // rank 3 dies: no goodbye (and no
	clients[3].conn.Close()          // notice of its own end)
	for _, r := range []int{0, 1, 2} {
		expect(t, notices[r], Notice{Rank: 3, SeenBy: SeenByRoot})
	}
	for _, r := range []int{0, 1, 2} {
		if err := clients[r].Close(); err != nil {
			t.Errorf("rank %d close: %v", r, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := root.Wait(ctx); err != nil {
		t.Fatalf("root: %v", err)
	}
	for r, ch := range notices {
		select {
		case n := <-ch:
			t.Errorf("rank %d heard %+v after the goodbyes", r, n)
		default:
		}
	}
}

// A client that loses the root (it runs in rank 0's process) hears that
// rank 0 is dead.
func TestWatchRootLost(t *testing.T) {
	root, clients, notices := watchAll(t, 2)
	root.Close() // rank 0's process dies
	expect(t, notices[1], Notice{Rank: 0, SeenBy: 1})
	for _, c := range clients {
		c.Close()
	}
}
