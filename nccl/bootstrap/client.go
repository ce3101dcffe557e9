package bootstrap

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Client is one rank's connection to the root. Not safe for concurrent use.
type Client struct {
	conn    net.Conn
	rank, n int
	timeout time.Duration
	w       *watcher // set by Watch
}

// Connect dials the root at addr (retrying while it is not up yet), says
// hello as rank of nranks of job (answering the root's challenge with a
// MAC made with job.Secret), and waits until every rank has arrived. It
// fails after timeout (or when ctx ends) with ErrRoot if the root never
// answered, or with the root's report naming the missing ranks.
func Connect(ctx context.Context, addr string, rank, nranks int, job Job, timeout time.Duration) (*Client, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var conn net.Conn
	var d net.Dialer
	for {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			conn = c
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: rank %d could not reach the root (rank 0) at %s within %v: %v", ErrRoot, rank, addr, timeout, err)
		}
		select { // the root may not be listening yet
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	conn.SetDeadline(deadline.Add(time.Second)) // the root answers by its own timeout
	c := &Client{conn: conn, rank: rank, n: nranks, timeout: timeout}
	challenge, err := readFrame(conn, challengeLen)
	if err == nil && len(challenge) != challengeLen {
		err = fmt.Errorf("%w: a challenge of %d bytes", ErrProtocol, len(challenge))
	}
	if err == nil {
		err = writeFrame(conn, job.hello(challenge, rank, nranks))
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: rank %d: hello to %s: %v", ErrRoot, rank, addr, err)
	}
	b, err := readFrame(conn, maxFrame)
	if err == nil {
		_, err = parseAnswer(b, 0)
	} else {
		err = fmt.Errorf("%w: rank %d: no answer from the root at %s within %v: %v", ErrRoot, rank, addr, timeout, err)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// AllGather sends blob and returns every rank's blob, in rank order. It
// fails if a rank does not contribute within the timeout, naming it.
func (c *Client) AllGather(ctx context.Context, blob []byte) ([][]byte, error) {
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	defer stop()
	c.conn.SetDeadline(time.Now().Add(c.timeout + time.Second))
	if err := writeFrame(c.conn, blob); err != nil {
		return nil, fmt.Errorf("%w: rank %d: %v", ErrRoot, c.rank, err)
	}
	b, err := readFrame(c.conn, maxFrame)
	if err != nil {
		return nil, fmt.Errorf("%w: rank %d: no answer to a round: %v", ErrRoot, c.rank, err)
	}
	return parseAnswer(b, c.n)
}

// Barrier returns when every rank has reached it.
func (c *Client) Barrier(ctx context.Context) error {
	_, err := c.AllGather(ctx, nil)
	return err
}

// Close hangs up; after Watch it first says goodbye, so the root does not
// take the hang-up for a death, and waits for the listening goroutine.
func (c *Client) Close() error {
	if c.w != nil {
		return c.watchClose()
	}
	return c.conn.Close()
}
