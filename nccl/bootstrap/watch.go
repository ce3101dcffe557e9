package bootstrap

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Watch mode: after the rendezvous the clients keep their connections to
// the root open as the communicator's out-of-band failure channel. Every
// frame is then a control frame (controlBit set in its length) whose first
// byte is its kind:
//
//	kindWatch   client → root, once, as the last round: enter watch mode
//	kindNotice  either way: stalled (1: 0 dead, 1 stalled), rank (4), seen by (4), cause (the rest)
//	kindBye     client → root: a clean hang-up, not a death
//
// The root relays each client's notice to every other client. A client
// whose connection closes without a goodbye has died (the kernel closes a
// killed process's sockets), so the root tells the others itself, with
// SeenBy = SeenByRoot. A client that loses the root has lost the rank-0
// process, where the root runs, and tells its caller so.
const (
	kindWatch  = 'W'
	kindNotice = 'N'
	kindBye    = 'B'
)

// SeenByRoot is Notice.SeenBy when the root saw the death itself: the
// rank's connection closed without a goodbye.
const SeenByRoot = -1

// Notice says that a rank is dead (or, if Stalled, stuck: alive as far
// as anyone knows, but not moving), which rank saw it (or SeenByRoot), and
// how.
type Notice struct {
	Rank, SeenBy int
	Stalled      bool
	Cause        string
}

func (n Notice) frame() []byte {
	b := []byte{kindNotice, 0}
	if n.Stalled {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint32(b, uint32(int32(n.Rank)))
	b = binary.BigEndian.AppendUint32(b, uint32(int32(n.SeenBy)))
	return append(b, n.Cause...)
}

func parseNotice(b []byte) (Notice, error) {
	if len(b) < 10 || b[0] != kindNotice || b[1] > 1 {
		return Notice{}, fmt.Errorf("%w: a %d-byte control frame that is no notice", ErrProtocol, len(b))
	}
	return Notice{Rank: int(int32(binary.BigEndian.Uint32(b[2:]))), SeenBy: int(int32(binary.BigEndian.Uint32(b[6:]))),
		Stalled: b[1] == 1, Cause: string(b[10:])}, nil
}

// watcher is the client's side of watch mode.
type watcher struct {
	mu      sync.Mutex // serializes writes: Report and Close
	closing atomic.Bool
	done    chan struct{} // closed when the listening goroutine ends
}

// Watch is the last round: every rank calls it, and from then on the
// connection carries failure notices. onNotice is called, on a goroutine
// of the client, with every notice another rank reports (see Report), with
// the root's notice when a rank dies without hanging up, and with a notice
// that rank 0 is dead if the root's connection breaks. After Watch,
// Report and Close are safe for concurrent use.
func (c *Client) Watch(ctx context.Context, onNotice func(Notice)) error {
	if c.w != nil {
		return fmt.Errorf("%w: Watch called twice", ErrProtocol)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	c.conn.SetDeadline(time.Now().Add(c.timeout + time.Second))
	err := writeFrameKind(c.conn, []byte{kindWatch}, true)
	var b []byte
	if err == nil {
		b, err = readFrame(c.conn, maxFrame)
	}
	stopped := stop()
	if err != nil || !stopped {
		return fmt.Errorf("%w: rank %d: no answer to the watch round: %v", ErrRoot, c.rank, err)
	}
	if _, err := parseAnswer(b, 0); err != nil {
		return err
	}
	c.conn.SetDeadline(time.Time{})
	c.w = &watcher{done: make(chan struct{})}
	go c.listen(onNotice)
	return nil
}

func (c *Client) listen(onNotice func(Notice)) {
	defer close(c.w.done)
	for {
		b, control, err := readFrameKind(c.conn, maxControl)
		if err == nil && !control {
			err = fmt.Errorf("%w: data frame in watch mode", ErrProtocol)
		}
		var n Notice
		if err == nil {
			n, err = parseNotice(b)
		}
		if err != nil {
			if !c.w.closing.Load() {
				onNotice(Notice{Rank: 0, SeenBy: c.rank,
					Cause: fmt.Sprintf("lost the bootstrap connection to the root in rank 0's process: %v", err)})
			}
			return
		}
		onNotice(n)
	}
}

// Report tells every other rank, through the root, that n.Rank is dead.
// Only after Watch.
func (c *Client) Report(n Notice) error {
	if c.w == nil {
		return fmt.Errorf("%w: Report before Watch", ErrProtocol)
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if c.w.closing.Load() {
		return nil
	}
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	return writeFrameKind(c.conn, n.frame(), true)
}

// watchClose says goodbye, hangs up and waits for the listener to end.
func (c *Client) watchClose() error {
	c.w.mu.Lock()
	if c.w.closing.Swap(true) {
		c.w.mu.Unlock()
		<-c.w.done
		return nil
	}
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	writeFrameKind(c.conn, []byte{kindBye}, true) // best effort: the root may be gone
	err := c.conn.Close()
	c.w.mu.Unlock()
	<-c.w.done
	return err
}

// watch serves watch mode until every client has said goodbye or gone.
func (r *Root) watch() {
	r.mu.Lock()
	conns := append([]net.Conn(nil), r.conns...)
	r.mu.Unlock()
	var wg sync.WaitGroup
	for rank, c := range conns {
		c.SetDeadline(time.Time{})
		wg.Go(func() { r.watchConn(rank, c) })
	}
	wg.Wait()
}

func (r *Root) watchConn(rank int, c net.Conn) {
	defer func() {
		r.mu.Lock()
		r.conns[rank] = nil
		r.mu.Unlock()
		c.Close()
	}()
	for {
		b, control, err := readFrameKind(c, maxControl)
		switch {
		case err == nil && control && len(b) == 1 && b[0] == kindBye:
			return
		case err == nil && control:
			if n, err := parseNotice(b); err == nil {
				r.relay(rank, n)
				continue
			}
		}
		if err == nil {
			err = fmt.Errorf("%w: unexpected frame in watch mode", ErrProtocol)
		}
		r.relay(rank, Notice{Rank: rank, SeenBy: SeenByRoot,
			Cause: fmt.Sprintf("its bootstrap connection closed without a goodbye: %v", err)})
		return
	}
}

// relay sends n to every client still connected but from.
func (r *Root) relay(from int, n Notice) {
	f := n.frame()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return
	}
	for rank, c := range r.conns {
		if c != nil && rank != from {
			c.SetWriteDeadline(time.Now().Add(r.timeout))
			writeFrameKind(c, f, true)
		}
	}
}
