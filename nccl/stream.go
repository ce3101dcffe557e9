package nccl

import (
	"context"
	"time"
)

// The stream. A communicator runs its operations one at a time, in the
// order they were issued, as a CUDA stream runs kernels. Whoever holds
// runMu runs them, taking each from the head of the queue:
//
//   - the stream goroutine, which a kick wakes when a task is queued, runs
//     every task queued;
//   - a goroutine that waits for a small operation with a context that is
//     never done (Request.Wait), finding no one running, runs the small
//     tasks at the head of the queue itself, up to its own, and returns
//     without a hand-off to the stream goroutine and back.
//
// A task a waiter may run is queued without a kick, so that the stream
// goroutine is not woken for a call its caller runs itself: the kick
// comes from a timer inlineGrace later, in case nobody waits for it, or
// at once when someone waits in a way that does not run it. A runner
// that lets go of runMu with tasks still queued kicks the stream
// goroutine, so a task never waits for a runner that has left: the stream
// goroutine, kicked while another runner held runMu, may have found it
// taken and gone back to sleep.

// inlineBytes is the most bytes an operation's buffers hold for a waiter
// to run it itself: a small operation takes a few round trips, so the
// waiter is not kept from its context's end for long, and a large one
// gains nothing from skipping a hand-off.
const inlineBytes = 4 << 10

// inlineGrace is how long a task a waiter may run stays queued before the
// stream goroutine is kicked to run it: the most a small operation that
// nobody waits for starts late.
const inlineGrace = 50 * time.Microsecond

// enqueue queues t for the stream, or fails it at once if the stream has
// stopped.
func (c *Comm) enqueue(t *task) {
	t.inline = t.small()
	c.qmu.Lock()
	if c.stopped {
		c.qmu.Unlock()
		c.failTask(t)
		return
	}
	c.queued.push(t)
	c.qmu.Unlock()
	if !t.inline {
		c.wake()
		return
	}
	t.req.inline.Store(true)
	if c.lateKick == nil {
		c.lateKick = time.AfterFunc(inlineGrace, c.wake)
	} else {
		c.lateKick.Reset(inlineGrace)
	}
}

// wake kicks the stream goroutine; a kick already pending is enough.
func (c *Comm) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// failTask completes t with the context's cause.
func (c *Comm) failTask(t *task) {
	t.req.err = &OpError{Op: t.req.op, Seq: t.req.seq, Rank: c.rank, Peer: -1, Err: context.Cause(c.ctx)}
	close(t.req.done)
}

// stream is the stream goroutine: it runs what is queued whenever kicked,
// until the communicator stops, then fails whatever is left.
func (c *Comm) stream() {
	defer close(c.done)
	defer c.exec.watch.stop()
	for {
		select {
		case <-c.kick:
			c.run(nil)
		case <-c.ctx.Done():
			c.qmu.Lock()
			c.stopped = true
			left := c.queued.drain()
			c.qmu.Unlock()
			for _, t := range left {
				c.failTask(t)
			}
			return
		}
	}
}

// run runs queued tasks if no one else is: for the stream goroutine (until
// nil) all of them, for a waiter the small ones at the head of the queue
// until its request until is done.
func (c *Comm) run(until *Request) {
	if !c.runMu.TryLock() {
		return // the runner kicks the stream goroutine when it leaves
	}
	for until == nil || !until.isDone() {
		t := c.next(until != nil)
		if t == nil {
			break
		}
		if until != nil {
			c.inlined.Add(1)
		}
		c.execute(t)
	}
	c.runMu.Unlock()
	c.qmu.Lock()
	left := c.queued.len() > 0
	c.qmu.Unlock()
	if left {
		c.wake()
	}
}

// next takes the task at the head of the queue, if there is one, and, for
// smallOnly, if it is small.
func (c *Comm) next(smallOnly bool) *task {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.queued.len() == 0 || (smallOnly && !c.queued.peek().inline) {
		return nil
	}
	return c.queued.pop()
}

// taskQueue is the stream's queue of tasks, oldest first. Taking the
// oldest costs the same however many are queued (a caller may issue
// thousands of calls before it waits for one): the taken ones leave a
// gap at the front, which is closed only when it is at least half of the
// slice, so each task is moved at most a few times in all.
type taskQueue struct {
	tasks []*task // tasks[head:] are queued
	head  int
}

// compactAt is the smallest gap at the front that is closed.
const compactAt = 64

func (q *taskQueue) len() int { return len(q.tasks) - q.head }

func (q *taskQueue) push(t *task) { q.tasks = append(q.tasks, t) }

// peek returns the oldest task; the queue must not be empty.
func (q *taskQueue) peek() *task { return q.tasks[q.head] }

// pop takes the oldest task; the queue must not be empty.
func (q *taskQueue) pop() *task {
	t := q.tasks[q.head]
	q.tasks[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.tasks):
		q.tasks, q.head = q.tasks[:0], 0
	case q.head >= compactAt && 2*q.head >= len(q.tasks):
		n := copy(q.tasks, q.tasks[q.head:])
		clear(q.tasks[n:])
		q.tasks, q.head = q.tasks[:n], 0
	}
	return t
}

// drain takes every task queued, oldest first, and leaves the queue
// empty.
func (q *taskQueue) drain() []*task {
	left := q.tasks[q.head:]
	q.tasks, q.head = nil, 0
	return left
}
