package rping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/cm"
	"github.com/goroce/goroce/wire"
)

// runClient is rping_run_client: resolve the server's address and route,
// set up the QP and buffers, connect, ping -C times, disconnect. A REJ
// saying nobody listens on the port, or an UNREACHABLE saying no device
// answers at the address (a server not started yet, either), is tried
// again, for up to connectFor, as goroce pingpong retries a refused
// connect; rping gives up at once.
func (s *session) runClient(ctx context.Context, id *cm.ID) error {
	deadline := time.Now().Add(connectFor)
	for {
		c, err := s.connect(ctx, id)
		if err == nil {
			defer c.close()
			if err := c.testClient(); err != nil {
				if errors.Is(err, errDisconnected) {
					return fmt.Errorf("rping client failed: the server disconnected")
				}
				return errors.Join(fmt.Errorf("rping client failed: %w", err), c.disconnect())
			}
			return c.disconnect()
		}
		c.close()
		var noDevice *cm.UnreachableError
		if !errors.Is(err, errNoListener) && !errors.As(err, &noDevice) || time.Now().After(deadline) {
			return err
		}
		// A new ID for the next REQ, as the rejected one is done.
		id.Destroy()
		t := time.NewTimer(connectRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		if id, err = s.ch.CreateID(s, wire.PortSpaceTCP); err != nil {
			return fmt.Errorf("rdma_create_id: %w", err)
		}
		s.debugf("created cm_id %p\n", id)
		defer id.Destroy()
	}
}

// How long and how often the client tries again while nobody listens.
const (
	connectFor   = 3 * time.Second
	connectRetry = 100 * time.Millisecond
)

// errNoListener is a REJ with reason 8, invalid service ID: no listener on
// the port (cm.c cm_req_handler when it finds none).
var errNoListener = errors.New("nobody listens on the port (REJ reason 8, invalid service ID)")

// connect is rping_bind_client, rping_setup_qp, rping_setup_buffers and
// rping_connect_client on id; the connection is ESTABLISHED when it
// returns no error. Close the connection either way.
func (s *session) connect(ctx context.Context, id *cm.ID) (*conn, error) {
	c := s.newConn(ctx, id, true)
	if err := id.ResolveAddr(netip.AddrPortFrom(s.cfg.source, 0), netip.AddrPortFrom(s.cfg.addr, s.cfg.port), resolveTimeout); err != nil {
		return c, fmt.Errorf("rdma_resolve_addr: %w", err)
	}
	if _, err := c.expect(ctx, cm.EventAddrResolved); err != nil {
		return c, fmt.Errorf("waiting for addr/route resolution: %w", err)
	}
	if err := id.ResolveRoute(resolveTimeout); err != nil {
		return c, fmt.Errorf("rdma_resolve_route: %w", err)
	}
	if _, err := c.expect(ctx, cm.EventRouteResolved); err != nil {
		return c, fmt.Errorf("waiting for addr/route resolution: %w", err)
	}
	s.debugf("rdma_resolve_addr - rdma_resolve_route successful\n")
	if err := c.setup(); err != nil {
		return c, fmt.Errorf("setup_qp failed: %w", err)
	}
	// rping_init_conn_param.
	if err := id.Connect(&cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		return c, fmt.Errorf("rdma_connect: %w", err)
	}
	ev, err := c.event(ctx)
	switch {
	case err != nil:
		return c, fmt.Errorf("connect error: %w", err)
	case ev.Type == cm.EventRejected && ev.Status == int(wire.CMRejInvalidServiceID):
		return c, fmt.Errorf("connect error: %w", errNoListener)
	case ev.Type == cm.EventUnreachable && ev.Err != nil:
		return c, fmt.Errorf("connect error: %w", ev.Err)
	case ev.Type != cm.EventEstablished:
		return c, fmt.Errorf("connect error: got %v (status %d), want %v", ev.Type, ev.Status, cm.EventEstablished)
	}
	s.debugf("ESTABLISHED\n")
	s.debugf("rdma_connect successful\n")
	return c, nil
}

// testClient is rping_test_client: -C pings (0: forever), each checked
// with -V and printed with -v.
func (c *conn) testClient() error {
	s := c.s
	start, sink := c.start.Bytes(), c.rdma.Bytes()
	for ping := 0; s.cfg.count == 0 || ping < s.cfg.count; ping++ {
		fillPing(start, ping)
		if err := c.advertise(c.start.Addr(), c.start.RKey()); err != nil {
			return err
		}
		// Wait for the server to say it has read the start buffer.
		if _, err := c.await(qp.WCRecv); err != nil {
			return fmt.Errorf("wait for RDMA_WRITE_ADV: %w", err)
		}
		if err := c.advertise(c.rdma.Addr(), c.rdma.RKey()); err != nil {
			return err
		}
		// Wait for the server to say the RDMA WRITE is complete.
		if _, err := c.await(qp.WCRecv); err != nil {
			return fmt.Errorf("wait for RDMA_WRITE_COMPLETE: %w", err)
		}
		if s.cfg.validate && !bytes.Equal(start, sink) {
			s.errOut.printf("data mismatch!\n")
			i := mismatch(sink, start)
			return fmt.Errorf("ping %d: byte %d of the sink is %#02x, the start buffer's %#02x", ping, i, sink[i], start[i])
		}
		if s.cfg.verbose {
			s.out.printf("ping data: %s\n", cString(sink))
		}
	}
	return nil
}

// advertise SENDs a buffer's advertisement (rping_format_send).
func (c *conn) advertise(addr uint64, rkey uint32) error {
	a := adv{addr: addr, rkey: rkey, size: uint32(c.s.cfg.size)}
	a.encode(c.send.Bytes())
	c.s.debugf("RDMA addr %x rkey %x len %d\n", a.addr, a.rkey, a.size)
	if err := c.postSend(); err != nil {
		return fmt.Errorf("post send error: %w", err)
	}
	return nil
}
