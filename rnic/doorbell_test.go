package rnic

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/clock"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/simlink"
)

// sendCostClock is a device's clock in the doorbell tests: the time
// package's (virtual in a bubble), moved on by the link each time it
// sends, as the real clock moves on while a poster is in its send system
// call. Virtual time stands still while a goroutine runs, so without it
// every send would take no time at all.
type sendCostClock struct {
	clock.Clock
	off atomic.Int64 // nanoseconds the link's sends took so far
}

func (c *sendCostClock) Now() time.Time { return c.Clock.Now().Add(time.Duration(c.off.Load())) }

// countLink records the datagrams of each WriteBatch call, moves its
// device's clock on by cost per call, and, when gate is set, holds the
// next call (it says so on entered) until gate is closed.
type countLink struct {
	link.Link
	clk  *sendCostClock
	cost time.Duration

	mu      sync.Mutex
	batches []int // datagrams per WriteBatch call, in order
	gate    chan struct{}
	entered chan struct{}
}

func (l *countLink) WriteBatch(pkts []link.Packet) (int, error) {
	l.mu.Lock()
	l.batches = append(l.batches, len(pkts))
	gate, entered := l.gate, l.entered
	l.gate = nil
	l.mu.Unlock()
	if gate != nil {
		close(entered)
		<-gate
	}
	l.clk.off.Add(int64(l.cost))
	return l.Link.WriteBatch(pkts)
}

// hold makes the link hold its next WriteBatch call until release is
// called (by the test's end at the latest). It returns that call's number
// (calls()[n] is its batch) and a function that waits, a minute at most,
// for the call to begin, failing the test with what it waited for.
func (l *countLink) hold(t *testing.T) (n int, begun func(what string), release func()) {
	gate, entered := make(chan struct{}), make(chan struct{})
	l.mu.Lock()
	l.gate, l.entered = gate, entered
	n = len(l.batches)
	l.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	begun = func(what string) {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(time.Minute):
			t.Fatalf("%s never reached the link", what)
		}
	}
	return n, begun, release
}

// calls returns the datagrams of each WriteBatch call so far.
func (l *countLink) calls() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.batches)
}

// doorbellPair opens x (with cfg, on a countLink whose sends take cost)
// and y on a simulated network and connects an RC QP on each to the
// other. Each port's uplink takes wireLatency, so that no answer from y
// reaches x before 2×wireLatency has passed: what x sent before then, x's
// posts sent, not its receive path.
func doorbellPair(t *testing.T, cfg Config, cost time.Duration) (x, y *end, l *countLink) {
	t.Helper()
	network := simlink.NewNetwork(simlink.Config{})
	t.Cleanup(func() { network.Close() })
	pc := pairConfig{typ: qp.RC, mtu: 1024, bufSize: 1 << 16, timeout: 14, retry: 7, rnrRetry: 7, access: allAccess}
	var ends [2]*end
	for i, a := range []netip.AddrPort{addrA, addrB} {
		port, err := network.Attach(a, simlink.PortConfig{Uplink: simlink.Wire{Latency: wireLatency}})
		if err != nil {
			t.Fatal(err)
		}
		c := Config{Addr: a, Link: port, MTU: pc.mtu, StrictICRC: true}
		if i == 0 {
			clk := &sendCostClock{Clock: clock.Real}
			l = &countLink{Link: port, clk: clk, cost: cost}
			c = cfg
			c.Addr, c.Link, c.MTU, c.StrictICRC, c.Clock = a, l, pc.mtu, true, clk
		}
		dev, err := Open(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		ends[i] = newEnd(t, dev, pc)
	}
	connect(t, ends[0], ends[1], pc)
	connect(t, ends[1], ends[0], pc)
	return ends[0], ends[1], l
}

// writeWR is the RDMA WRITE of 64 bytes at offset 64*i of x's buffer to
// the same offset of y's, signalled if last.
func writeWR(x, y *end, i int, last bool) qp.SendWR {
	wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{x.sge(64*i, 64)},
		RemoteAddr: y.mr.Addr() + uint64(64*i), RKey: y.mr.RKey()}
	if last {
		wr.Flags = qp.SendSignaled
	}
	return wr
}

// How long a send takes on the doorbell tests' links, and a packet
// between a host and the switch.
const (
	sendCost    = 5 * time.Microsecond
	wireLatency = 10 * time.Microsecond
)

// TestDoorbellBatchesStreamingPosts: in PostBatched mode, WRITEs posted
// one at a time in a row leave as a posted list does. The first post
// finds the device idle and leaves inline, inside PostSend (its
// WriteBatch call has been made when PostSend returns); the 19 that
// follow it sooner than half a send's time join a batch that leaves in
// one WriteBatch call, with no further post and with no time passing, so
// before any answer from y can have come back; after a pause longer than
// a send, a lone post leaves inline again. Each post's 64 bytes land in
// the peer's memory, and a stream posted the other way, from y, lands in
// x's.
//
// GOMAXPROCS 1 keeps the worker from running until the test goroutine
// waits (synctest.Wait): the posts come, in virtual time, in no time at
// all, and then the device has the CPU.
func TestDoorbellBatchesStreamingPosts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	synctest.Test(t, func(t *testing.T) {
		x, y, l := doorbellPair(t, Config{PostMode: PostBatched}, sendCost)
		const k = 20
		for i := range 64 * (k + 1) {
			x.buf[i] = byte(i*7 + 3)
			y.buf[32768+i] = byte(i*5 + 1)
		}
		synctest.Wait()
		before := len(l.calls())
		start := time.Now()
		for i := range k {
			x.postSend(t, writeWR(x, y, i, i == k-1))
			if i == 0 && len(l.calls()) != before+1 {
				t.Fatalf("the first post, on an idle device, did not leave inside PostSend (link calls %v)", l.calls()[before:])
			}
		}
		synctest.Wait()
		if got, want := l.calls()[before:], []int{1, k - 1}; !slices.Equal(got, want) {
			t.Fatalf("%d WRITEs posted one at a time left in WriteBatch calls of %v datagrams, want %v", k, got, want)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the batch left %v after the posts, want at once", d)
		}
		x.expect(t, k-1, qp.WCSuccess)
		if !bytes.Equal(y.buf[:64*k], x.buf[:64*k]) {
			t.Fatal("y's memory does not hold the 20 WRITEs")
		}

		// A lone post, after a pause longer than a send.
		time.Sleep(10 * sendCost)
		before = len(l.calls())
		x.postSend(t, writeWR(x, y, k, true))
		if got := l.calls()[before:]; !slices.Equal(got, []int{1}) {
			t.Fatalf("a lone post after a pause: link calls %v during PostSend, want [1] (inline)", got)
		}
		x.expect(t, k, qp.WCSuccess)
		if !bytes.Equal(y.buf[64*k:64*(k+1)], x.buf[64*k:64*(k+1)]) {
			t.Fatal("y's memory does not hold the lone WRITE")
		}

		// The other way: y streams WRITEs into x.
		for i := range k {
			wr := writeWR(y, x, i, i == k-1)
			wr.SGL[0].Addr += 32768
			wr.RemoteAddr += 32768
			y.postSend(t, wr)
		}
		y.expect(t, k-1, qp.WCSuccess)
		if !bytes.Equal(x.buf[32768:32768+64*k], y.buf[32768:32768+64*k]) {
			t.Fatal("x's memory does not hold y's 20 WRITEs")
		}
	})
}

// TestDoorbellDefault: a device that polls batches its posts by default;
// one that does not leaves them to its workers.
func TestDoorbellDefault(t *testing.T) {
	for _, c := range []struct {
		busy time.Duration
		want PostMode
	}{{0, PostToWorker}, {50 * time.Microsecond, PostBatched}} {
		d, err := Open(Config{Addr: netip.MustParseAddrPort("127.140.7.1:0"), BusyPoll: c.busy})
		if err != nil {
			t.Fatal(err)
		}
		got := d.cfg.PostMode
		d.Close()
		if got != c.want {
			t.Errorf("BusyPoll %v: PostMode %v, want %v", c.busy, got, c.want)
		}
	}
}

// TestDoorbellBatchFillsOutbox: a batch of posts that would fill an
// outbox leaves with the post that fills it, inline, as a list of that
// size does; the posts after it start the next batch. 100 WRITEs posted
// in a row leave in calls of 1 (the first, inline), 64 (63 that joined
// and the 64th, which sends them) and 35 (the rest, from the worker).
func TestDoorbellBatchFillsOutbox(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	synctest.Test(t, func(t *testing.T) {
		x, y, l := doorbellPair(t, Config{PostMode: PostBatched}, sendCost)
		const k = 100
		for i := range 64 * k {
			x.buf[i] = byte(i*11 + 7)
		}
		synctest.Wait()
		before := len(l.calls())
		for i := range k {
			x.postSend(t, writeWR(x, y, i, i == k-1))
			if i == outboxSize && !slices.Equal(l.calls()[before:], []int{1, outboxSize}) {
				t.Fatalf("after the post that fills the batch, link calls %v, want [1 %d]", l.calls()[before:], outboxSize)
			}
		}
		synctest.Wait()
		if got, want := l.calls()[before:], []int{1, outboxSize, k - 1 - outboxSize}; !slices.Equal(got, want) {
			t.Fatalf("%d WRITEs posted one at a time left in WriteBatch calls of %v datagrams, want %v", k, got, want)
		}
		x.expect(t, k-1, qp.WCSuccess)
		if !bytes.Equal(y.buf[:64*k], x.buf[:64*k]) {
			t.Fatal("y's memory does not hold the 100 WRITEs")
		}
	})
}

// TestDoorbellJoinsSendInProgress: posts that come while another post is
// being sent do not wait for it: PostSend returns at once, and the posts
// leave together, in one WriteBatch call, once that send is done. The
// first post's send is held inside the link until the others have been
// posted; with a post path that waited for the send lock, they would
// still be waiting when the test gives up. Real time, bounded
// waits: a goroutine waiting for a mutex is not durably blocked, so a
// bubble could not tell that the posts wait.
func TestDoorbellJoinsSendInProgress(t *testing.T) {
	x, y, l := doorbellPair(t, Config{PostMode: PostBatched}, 0)
	const k = 16
	for i := range 64 * k {
		x.buf[i] = byte(i*3 + 9)
	}
	before, begun, release := l.hold(t)
	first := make(chan error, 1)
	go func() {
		wr := writeWR(x, y, 0, false)
		first <- x.qp.PostSend(&wr)
	}()
	begun("the first post's send")
	posted := make(chan error, 1)
	go func() {
		for i := 1; i < k; i++ {
			wr := writeWR(x, y, i, i == k-1)
			if err := x.qp.PostSend(&wr); err != nil {
				posted <- fmt.Errorf("PostSend wr_id %d: %w", i, err)
				return
			}
		}
		posted <- nil
	}()
	select {
	case err := <-posted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%d posts made while a send was in progress were still in PostSend after 10 s: they waited for it", k-1)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	x.expect(t, k-1, qp.WCSuccess)
	if got, want := l.calls()[before:], []int{1, k - 1}; !slices.Equal(got, want) {
		t.Fatalf("WriteBatch calls of %v datagrams, want %v: the first post's, then the %d posted during it in one", got, want, k-1)
	}
	if !bytes.Equal(y.buf[:64*k], x.buf[:64*k]) {
		t.Fatal("y's memory does not hold the WRITEs")
	}
}

// sentWhile is a Tap that notes, for the packets from src, whether a
// post call was still running (returned not yet closed) when each was
// sent: the device taps a packet as its sender sends it.
type sentWhile struct {
	src      netip.AddrPort
	returned chan struct{}
	mu       sync.Mutex
	running  []bool // per packet from src, in order
}

func (w *sentWhile) Tap(_ time.Time, src, _ netip.AddrPort, _ uint16, _ uint8, _ []byte) {
	if src != w.src {
		return
	}
	r := true
	select {
	case <-w.returned:
		r = false
	default:
	}
	w.mu.Lock()
	w.running = append(w.running, r)
	w.mu.Unlock()
}

// TestDoorbellLonePostWaitsForWorker: a lone post that finds the worker
// sending waits for that send and then leaves inline, inside its own
// PostSend, as PostInline's post does: only another post's send makes a
// post join the worker's batch. The worker's send is held inside the link
// while the lone post is made (its PostSend cannot return meanwhile: the
// test gives it a second, then lets the send go); the lone post's packet
// must leave before its PostSend returns. Had it been handed to the
// worker, PostSend would have returned at once and the packet left after.
func TestDoorbellLonePostWaitsForWorker(t *testing.T) {
	watch := &sentWhile{src: addrA, returned: make(chan struct{})}
	x, y, l := doorbellPair(t, Config{PostMode: PostBatched, Tap: watch}, 0)
	for i := range 128 {
		x.buf[i] = byte(i*13 + 2)
	}
	_, begun, release := l.hold(t)
	// The worker sends WR 0 (this goroutine is the device's only poster).
	x.dev.cfg.PostMode = PostToWorker
	x.postSend(t, writeWR(x, y, 0, false))
	x.dev.cfg.PostMode = PostBatched
	begun("the worker's send")
	posted := make(chan error, 1)
	go func() {
		wr := writeWR(x, y, 1, true)
		err := x.qp.PostSend(&wr)
		close(watch.returned)
		posted <- err
	}()
	select {
	case <-watch.returned:
	case <-time.After(time.Second):
	}
	release()
	if err := <-posted; err != nil {
		t.Fatal(err)
	}
	x.expect(t, 1, qp.WCSuccess)
	watch.mu.Lock()
	running := slices.Clone(watch.running)
	watch.mu.Unlock()
	if len(running) != 2 || !running[1] {
		t.Fatalf("x's packets, whether a PostSend ran as each left: %v; want [_ true]: the lone post leaves inline", running)
	}
	if !bytes.Equal(y.buf[:128], x.buf[:128]) {
		t.Fatal("y's memory does not hold the two WRITEs")
	}
}

// TestDoorbellDoesNotAllocate: posts that stream, batched, allocate
// nothing on their way, nor does their batch: a round of 20 WRITEs
// posted one at a time, sent in batches and completed, allocates nothing
// in steady state.
func TestDoorbellDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		testenv.SkipPartial(t, "race", "the race detector allocates; run without -race")
	}
	synctest.Test(t, func(t *testing.T) {
		x, y, l := doorbellPair(t, Config{PostMode: PostBatched}, sendCost)
		const k = 20
		wrs := make([]qp.SendWR, k)
		for i := range wrs {
			wrs[i] = writeWR(x, y, i, i == k-1)
		}
		round := func() {
			for i := range wrs {
				if err := x.qp.PostSend(&wrs[i]); err != nil {
					t.Fatal(err)
				}
			}
			// Waiting with e.expect would allocate its context: sleep
			// (virtual time) through the round trip instead.
			for x.cq.Poll(x.wcs[:1]) == 0 {
				time.Sleep(wireLatency)
			}
			if wc := x.wcs[0]; wc.WRID != k-1 || wc.Status != qp.WCSuccess {
				t.Fatalf("completion %+v, want wr_id %d, success", wc, k-1)
			}
		}
		for range 100 {
			round()
		}
		before := len(l.calls())
		if n := testing.AllocsPerRun(100, round); n != 0 {
			t.Errorf("%v allocations per round of %d streamed posts, want 0", n, k)
		}
		// AllocsPerRun runs a round once more than it says.
		if calls := len(l.calls()) - before; calls > 2*101 {
			t.Errorf("101 rounds of %d posts took %d WriteBatch calls, want at most 2 a round (batched)", k, calls)
		}
	})
}
