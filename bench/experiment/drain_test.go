package experiment

import (
	"context"
	"testing"
	"time"

	"github.com/goroce/goroce/rnic/clock"
)

// TestDrain stops a 2-flow incast with WRITEs in flight and drains it: the
// WRITEs each flow's completions count must then be the ones whose bytes
// the receiver read from that flow, an oracle the flow does not keep (the
// receiver's link counts the bytes of the datagrams: per WRITE its
// payload, a BTH and an ICRC per packet and one RETH). Stopped without a
// drain, the two differ by what was still in flight, which dcqcn-netns's
// receiver missed when it closed with a marked packet on its way.
func TestDrain(t *testing.T) {
	sc := Incast(2)
	sc.Duration = 20 * time.Millisecond
	sc = sc.WithDefaults()
	params, err := sc.DCQCNParams()
	if err != nil {
		t.Fatal(err)
	}
	v := clock.NewVirtual(time.Time{})
	sc.Clock = v
	verr := v.Run(func() {
		e := &experiment{sc: sc, clock: v, t0: v.Now(), exited: make(chan struct{}, sc.Flows)}
		defer e.close()
		if err := e.build(params); err != nil {
			t.Error(err)
			return
		}
		ctx, stop := context.WithCancel(context.Background())
		for _, f := range e.flows {
			v.Go(func() {
				defer func() { e.exited <- struct{}{} }()
				if err := f.Run(ctx, e.t0); err != nil {
					t.Error(err)
				}
			})
		}
		sleep := newSleeper(v, context.Background())
		sleep.until(e.t0.Add(sc.Duration))
		sleep.stop()
		stop()
		exited := v.NewWaiter(e.exited)
		for range e.flows {
			exited.Wait()
		}
		msg := uint64(sc.MessageSize)
		perWrite := msg + (msg+uint64(sc.MTU)-1)/uint64(sc.MTU)*(12+4) + 16
		for i, f := range e.flows {
			if f.left == 0 {
				t.Errorf("flow %d stopped with no WRITE in flight: the test shows nothing", i)
			}
			if done, landed := f.Completed()/msg, f.delivered.Load(); done*perWrite >= landed {
				t.Errorf("flow %d before the drain: %d WRITEs completed (%d bytes of datagrams), %d bytes landed; want more landed",
					i, done, done*perWrite, landed)
			}
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for i, f := range e.flows {
			if err := f.Drain(dctx); err != nil {
				t.Errorf("flow %d: Drain: %v", i, err)
			}
			if done, landed := f.Completed(), f.delivered.Load(); done == 0 || landed != done/msg*perWrite {
				t.Errorf("flow %d after the drain: %d WRITEs completed (%d bytes of datagrams), %d bytes landed; want equal",
					i, done/msg, done/msg*perWrite, landed)
			}
		}
		for _, h := range e.senders {
			if n := h.dev.Counter("retransmitted_pkts"); n != 0 {
				t.Errorf("%d packets retransmitted: the receiver read some twice", n)
			}
		}
	})
	if verr != nil {
		t.Fatal(verr)
	}
}
