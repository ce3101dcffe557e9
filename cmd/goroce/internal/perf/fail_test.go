package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/qp"
)

// run is the goroce command line with this package's command alone.
var run = clitest.Command("perf", Run)

// TestPerfServerSaysWhyItsQPFailed runs a write_bw server's and client's
// devices and QPs, connected as perf connects them, and has the client
// WRITE with an R_Key the server never handed out: the server's QP goes to
// ERR with IBV_EVENT_QP_ACCESS_ERR and the client's WR fails with
// REM_ACCESS_ERR (IBTA 9.7.5.2.4). The client would then exit without its
// done line; the server's error for that must name its QP, the state and
// the event, not only the side channel's EOF.
func TestPerfServerSaysWhyItsQPFailed(t *testing.T) {
	srvAddr, cliAddr := clitest.LoopbackPair()
	srv := openPerf(t, perfStall, "write_bw", "--addr", srvAddr)
	cli := openPerf(t, perfStall, "write_bw", srvAddr, "--addr", cliAddr)
	connectPerf(t, srv, cli, func(d *perfDest) {
		d.rkey += 0x100 // the next region index: the server has none
	})
	s, c := srv.qps[0], cli.qps[0]
	cli.prepare(c, 64)
	c.send.Flags = qp.SendSignaled
	if err := c.qp.PostSend(&c.send); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := cli.cq.Wait(ctx); err != nil {
		t.Fatalf("no completion on the client: %v", err)
	}
	var wc [1]qp.WC
	if cli.cq.Poll(wc[:]) != 1 || wc[0].Status != qp.WCRemAccessErr {
		t.Fatalf("client completion %+v, want status %v", wc[0], qp.WCRemAccessErr)
	}

	eof := fmt.Errorf("couldn't read the client's done: %w", io.ErrUnexpectedEOF)
	err := srv.peerFailed(peerDone{err: eof}).err
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %q lost the side channel's error", err)
	}
	want := fmt.Sprintf("QP %#x went to %v on %v", s.qp.QPN(), qp.StateErr, qp.EventQPAccessErr)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("server's error\n\t%v\ndoes not say\n\t%s", err, want)
	}
	t.Logf("server: %v", err)
	if d := srv.peerFailed(peerDone{counts: []int{1}}); d.err != nil {
		t.Errorf("a done line read without error became %v", d.err)
	}
}
