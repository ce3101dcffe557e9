package clock

import (
	"container/heap"
	"errors"
	"reflect"
	"sort"
	"sync"
	"time"
)

// Epoch is where a Virtual clock starts unless told otherwise: midnight UTC
// 2000-01-01, where a testing/synctest bubble's clock starts too.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrRunning is returned by Run while another Run of the same clock is
// under way.
var ErrRunning = errors.New("clock: the virtual clock is already running")

// Virtual is a clock whose time moves only when every goroutine of its
// simulation waits: it then jumps to the next timer. Its goroutines run
// one at a time (see the package doc), so a simulation gives the same
// result every time. Its methods are safe for concurrent use.
type Virtual struct {
	kick    chan struct{} // capacity 1: a goroutine parked, started or ended
	started chan struct{} // closed: what a new goroutine waits on to start

	// mu guards the time, the timers and the goroutines' accounting.
	mu      sync.Mutex
	now     time.Time
	timers  timerHeap
	seq     uint64 // orders timers due at the same instant
	live    int    // goroutines started by Go (or Run) that have not returned
	running int    // of those, how many are not parked in a Waiter
	parked  []*virtualWaiter
	ids     uint64 // waiters made
	driving bool   // Run is under way
}

// NewVirtual returns a virtual clock reading start (Epoch if start is
// zero), with no goroutines and no timers.
func NewVirtual(start time.Time) *Virtual {
	if start.IsZero() {
		start = Epoch
	}
	v := &Virtual{now: start, kick: make(chan struct{}, 1), started: make(chan struct{})}
	close(v.started)
	return v
}

// Now returns the virtual time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// AfterFunc calls f, in the goroutine that runs the clock (Run's caller),
// when the virtual time reaches d from now and every goroutine of the
// clock waits. f must not block or wait.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	t := &virtualTimer{v: v, f: f, index: -1}
	v.mu.Lock()
	v.scheduleLocked(t, d)
	v.mu.Unlock()
	return t
}

// Go runs f in a new goroutine of the clock. The goroutine first parks,
// ready: it starts when Run wakes it, in turn, not beside its starter.
func (v *Virtual) Go(f func()) {
	start := v.NewWaiter(v.started)
	v.mu.Lock()
	v.live++
	v.running++
	v.mu.Unlock()
	go func() {
		defer v.exit()
		start.Wait()
		f()
	}()
}

func (v *Virtual) exit() {
	v.mu.Lock()
	v.live--
	v.running--
	v.mu.Unlock()
	Signal(v.kick)
}

// NewWaiter returns a Waiter on chs. Only goroutines of the clock may wait
// on it.
func (v *Virtual) NewWaiter(chs ...<-chan struct{}) Waiter {
	v.mu.Lock()
	v.ids++
	w := &virtualWaiter{v: v, id: v.ids, n: len(chs), resume: make(chan int, 1)}
	v.mu.Unlock()
	setChannels(&w.chs, chs)
	return w
}

// Run runs f in a goroutine of the clock and drives the simulation from
// the calling goroutine until f and every goroutine started with Go have
// returned. Timers still pending then are dropped. Run returns ErrRunning
// if the clock is already running. When every goroutine waits and no timer
// is pending, Run waits for one of their channels to be made ready from
// outside the simulation (a context cancelled by a signal handler); if
// nothing outside can, the simulation hangs, as a program whose goroutines
// all wait for each other does.
func (v *Virtual) Run(f func()) error {
	v.mu.Lock()
	if v.driving {
		v.mu.Unlock()
		return ErrRunning
	}
	v.driving = true
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.driving = false
		for _, t := range v.timers {
			t.index = -1 // dropped: Stop and Reset find it not pending
		}
		v.timers = nil
		v.mu.Unlock()
	}()
	v.Go(f)
	for {
		v.mu.Lock()
		if v.live == 0 {
			v.mu.Unlock()
			return nil
		}
		if v.running > 0 {
			v.mu.Unlock()
			<-v.kick // until one of them parks or returns
			continue
		}
		parked := v.parked // every goroutine of the clock waits
		v.mu.Unlock()
		if w, i := ready(parked); w != nil {
			v.resume(w, i)
			continue
		}
		if !v.fireNext() {
			v.block(parked)
		}
	}
}

// ready finds the first waiter, in the order they were made, with a
// channel that can receive, and receives from it.
func ready(parked []*virtualWaiter) (*virtualWaiter, int) {
	for _, w := range parked {
		for i, ch := range w.chs[:w.n] {
			select {
			case <-ch:
				return w, i
			default:
			}
		}
	}
	return nil, 0
}

// resume wakes w, which received on its channel i. It counts as running
// from here on, before it is scheduled.
func (v *Virtual) resume(w *virtualWaiter, i int) {
	v.mu.Lock()
	k := sort.Search(len(v.parked), func(k int) bool { return v.parked[k].id >= w.id })
	v.parked = append(v.parked[:k], v.parked[k+1:]...) // ready and block are done with it
	v.running++
	v.mu.Unlock()
	w.resume <- i
}

// fireNext moves the time to the earliest timer and calls its function.
// It reports false if there is no timer.
func (v *Virtual) fireNext() bool {
	v.mu.Lock()
	if len(v.timers) == 0 {
		v.mu.Unlock()
		return false
	}
	t := heap.Pop(&v.timers).(*virtualTimer)
	if t.at.After(v.now) {
		v.now = t.at
	}
	v.mu.Unlock()
	t.f()
	return true
}

// block waits, with every goroutine parked and no timer, for a channel to
// become ready from outside the simulation (a context a signal handler
// cancels, say), and wakes its waiter.
func (v *Virtual) block(parked []*virtualWaiter) {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(v.kick)}}
	var owners []*virtualWaiter
	var index []int
	for _, w := range parked {
		for i, ch := range w.chs[:w.n] {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			owners, index = append(owners, w), append(index, i)
		}
	}
	chosen, _, _ := reflect.Select(cases)
	if chosen > 0 {
		v.resume(owners[chosen-1], index[chosen-1])
	}
}

// scheduleLocked sets t to fire d from now. Called with mu held.
func (v *Virtual) scheduleLocked(t *virtualTimer, d time.Duration) {
	t.at = v.now.Add(max(d, 0))
	v.seq++
	t.seq = v.seq
	heap.Push(&v.timers, t)
}

type virtualWaiter struct {
	v      *Virtual
	id     uint64 // the order of waking, among waiters ready at once
	n      int
	chs    [MaxWaitChannels]<-chan struct{}
	resume chan int // the index Run received on for the waiter
}

func (w *virtualWaiter) Wait() int {
	v := w.v
	v.mu.Lock()
	k := sort.Search(len(v.parked), func(k int) bool { return v.parked[k].id >= w.id })
	v.parked = append(v.parked, nil)
	copy(v.parked[k+1:], v.parked[k:])
	v.parked[k] = w
	v.running--
	v.mu.Unlock()
	Signal(v.kick)
	return <-w.resume
}

type virtualTimer struct {
	v     *Virtual
	f     func()
	at    time.Time
	seq   uint64
	index int // in v.timers; -1 when not pending
}

func (t *virtualTimer) Reset(d time.Duration) bool {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	pending := t.stopLocked()
	t.v.scheduleLocked(t, d)
	return pending
}

func (t *virtualTimer) Stop() bool {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	return t.stopLocked()
}

func (t *virtualTimer) stopLocked() bool {
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.v.timers, t.index)
	return true
}

// timerHeap orders pending timers by time, then by when they were set.
type timerHeap []*virtualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*virtualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
