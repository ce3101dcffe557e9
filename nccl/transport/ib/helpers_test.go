package ib

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/nccl/transport"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/simlink"
)

// fabric opens n goroce devices on a simulated network (10.0.0.1…) and
// connects an ib transport on each to all others. Everything closes at the
// end of the test.
func fabric(t testing.TB, n int, cfg Config) ([]*Transport, []*rnic.Device) {
	t.Helper()
	return fabricOn(t, simlink.Config{}, n, cfg)
}

// fabricOn is fabric on a simulated network configured as net.
func fabricOn(t testing.TB, net simlink.Config, n int, cfg Config) ([]*Transport, []*rnic.Device) {
	t.Helper()
	network := simlink.NewNetwork(net)
	t.Cleanup(func() { network.Close() })
	ts := make([]*Transport, n)
	devs := make([]*rnic.Device, n)
	for r := range n {
		addr := netip.MustParseAddrPort(fmt.Sprintf("10.0.0.%d:4791", r+1))
		port, err := network.Attach(addr, simlink.PortConfig{})
		if err != nil {
			t.Fatal(err)
		}
		dev, err := rnic.Open(rnic.Config{Addr: addr, Link: port, MTU: 1024, StrictICRC: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		c := cfg
		c.Device, c.Rank, c.Size, c.MTU = dev, r, n, 1024
		tr, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		ts[r], devs[r] = tr, dev
	}
	infos := make([][]byte, n)
	for r, tr := range ts {
		infos[r] = tr.LocalInfo()
	}
	for _, tr := range ts {
		if err := tr.Connect(infos); err != nil {
			t.Fatal(err)
		}
	}
	return ts, devs
}

// adder is an IrecvReduce combine that adds bytes and counts its calls.
type adder struct{ calls int }

func (a *adder) combine(dst, in, src []byte) error {
	a.calls++
	for i := range dst {
		dst[i] = in[i] + src[i]
	}
	return nil
}

// checkAdded fails t unless every out[i] is x[i]+y[i].
func checkAdded(t testing.TB, what string, out, x, y []byte) {
	t.Helper()
	for i := range out {
		if out[i] != x[i]+y[i] {
			t.Fatalf("%s, byte %d: %d, want %d+%d", what, i, out[i], x[i], y[i])
		}
	}
}

// waitAll drives each request's transport until all complete or the
// (virtual) minute runs out.
func waitAll(t testing.TB, reqs map[transport.Request]*Transport) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(reqs) > 0 {
		for r, tr := range reqs {
			if err := tr.Progress(); err != nil {
				return err
			}
			done, err := r.Test()
			if err != nil {
				return err
			}
			if done {
				delete(reqs, r)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Give the devices' goroutines a turn; in a synctest bubble this
		// advances virtual time only when everything is idle.
		wctx, c := context.WithTimeout(ctx, time.Millisecond)
		for _, tr := range reqs {
			tr.Wait(wctx)
			break
		}
		c()
	}
	return nil
}
