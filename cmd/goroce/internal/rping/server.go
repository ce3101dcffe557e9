package rping

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic/cm"
)

// runServer is rping_bind_server and rping_run_server (with -P,
// rping_run_persistent_server): it listens on -a and -p and serves one
// client, or with -P every client, each in its own goroutine, until
// interrupted.
func (s *session) runServer(ctx context.Context, lid *cm.ID) error {
	bind := netip.AddrPortFrom(s.cfg.addr, s.cfg.port)
	if !s.cfg.addr.IsValid() {
		bind = netip.AddrPortFrom(netip.IPv4Unspecified(), s.cfg.port)
		if s.cfg.devAddr.Is6() {
			bind = netip.AddrPortFrom(netip.IPv6Unspecified(), s.cfg.port)
		}
	}
	if err := lid.Bind(bind); err != nil {
		return fmt.Errorf("rdma_bind_addr: %w", err)
	}
	s.debugf("rdma_bind_addr successful\n")
	s.debugf("rdma_listen\n")
	if err := lid.Listen(backlog); err != nil {
		return fmt.Errorf("rdma_listen: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		var req *cm.Event
		select {
		case req = <-s.requests:
		case <-ctx.Done():
			if s.cfg.persistent {
				return nil // interrupted: a persistent server runs until then
			}
			return ctx.Err()
		}
		s.debugf("child cma %p\n", req.ID)
		if !s.cfg.persistent {
			return s.serve(ctx, req)
		}
		wg.Go(func() {
			if err := s.serve(ctx, req); err != nil {
				s.errOut.printf("goroce rping: %v\n", err)
			}
		})
	}
}

// serve is rping_run_server after the CONNECT_REQUEST (and
// rping_persistent_server_thread): it sets up the child's QP and buffers,
// accepts, runs the pings and disconnects.
func (s *session) serve(ctx context.Context, req *cm.Event) (err error) {
	c := s.newConn(ctx, req.ID, false)
	defer func() {
		req.ID.Destroy()
		c.close()
	}()
	if err := c.setup(); err != nil {
		req.ID.Reject(nil)
		return fmt.Errorf("setup_qp failed: %w", err)
	}
	// rdma_accept(id, NULL): librdmacm offers back what the REQ asked,
	// and RNR retry 7 (the golden rping capture's REP: resp_res=1,
	// init_depth=1, rnr_retry=7).
	s.debugf("accepting client connection request\n")
	if err := req.ID.Accept(&cm.ConnParam{ResponderResources: req.Param.ResponderResources,
		InitiatorDepth: req.Param.InitiatorDepth, RNRRetryCount: 7}); err != nil {
		return fmt.Errorf("rdma_accept: %w", err)
	}
	if _, err := c.expect(ctx, cm.EventEstablished); err != nil {
		return fmt.Errorf("connect error: %w", err)
	}
	s.debugf("ESTABLISHED\n")
	err = c.testServer()
	if errors.Is(err, errDisconnected) {
		err = nil // the client is done: rping's server returns 0
	} else if err != nil {
		err = fmt.Errorf("rping server failed: %w", err)
	}
	return errors.Join(err, c.disconnect())
}

// testServer is rping_test_server: for each ping, READ the client's start
// buffer, say go, WRITE it to the client's sink, say go. It returns
// errDisconnected when the client disconnects between pings.
func (c *conn) testServer() error {
	s := c.s
	for ping := 0; ; ping++ {
		// Wait for the client's start STAG/TO/Len.
		src, err := c.await(qp.WCRecv)
		if err != nil {
			return err
		}
		s.debugf("Received rkey %x addr %x len %d from peer\n", src.rkey, src.addr, src.size)
		if int(src.size) > c.rdma.Len() {
			return fmt.Errorf("the client's buffer of %d bytes does not fit the server's (-S %d)", src.size, c.rdma.Len())
		}
		s.debugf("server received sink adv\n")
		if err := c.postRDMA(qp.WRRDMARead, src, int(src.size)); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		s.debugf("server posted rdma read req \n")
		if _, err := c.await(qp.WCRDMARead); err != nil {
			return err
		}
		s.debugf("server received read complete\n")
		data := c.rdma.Bytes()[:src.size]
		if s.cfg.verbose {
			s.out.printf("server ping data: %s\n", cString(data))
		}
		if s.cfg.validate {
			if err := checkPing(data, ping); err != nil {
				s.errOut.printf("data mismatch!\n")
				return fmt.Errorf("the RDMA READ brought the wrong data: %w", err)
			}
		}
		// Tell the client to continue.
		if err := c.postSend(); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		s.debugf("server posted go ahead\n")

		// Wait for the client's RDMA STAG/TO/Len.
		sink, err := c.await(qp.WCRecv)
		if err != nil {
			return err
		}
		s.debugf("Received rkey %x addr %x len %d from peer\n", sink.rkey, sink.addr, sink.size)
		s.debugf("server received sink adv\n")
		// WRITE the echo: strlen(rdma_buf) + 1 bytes, as rping does.
		n := min(len(cString(data))+1, len(data))
		if n > int(sink.size) {
			return fmt.Errorf("the client's sink of %d bytes is smaller than the %d bytes to write", sink.size, n)
		}
		s.debugf("rdma write from lkey %x laddr %x len %d\n", c.rdma.LKey(), c.rdma.Addr(), n)
		if err := c.postRDMA(qp.WRRDMAWrite, sink, n); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		if _, err := c.await(qp.WCRDMAWrite); err != nil {
			return err
		}
		s.debugf("server rdma write complete \n")
		// Tell the client to begin again.
		if err := c.postSend(); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		s.debugf("server posted go ahead\n")
	}
}
