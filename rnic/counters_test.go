package rnic

import (
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
)

// Device.Counter reads one counter without allocating, so a program may
// read one in its polling loop (goroce perf reads rcvd_pkts in every
// wait), and agrees with Counters. One 3000-byte SEND at MTU 1024 is
// three packets one way and one ACK back.
func TestCounterAllocatesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{})
		b.postRecv(t, 1, 0, 4096)
		a.postSend(t, qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 3000)}})
		a.expect(t, 2, qp.WCSuccess)
		b.expect(t, 1, qp.WCSuccess)
		synctest.Wait()
		for _, c := range []struct {
			d    *Device
			name string
			want uint64
		}{{a.dev, "sent_pkts", 3}, {a.dev, "rcvd_pkts", 1}, {b.dev, "rcvd_pkts", 3}, {b.dev, "sent_pkts", 1},
			{b.dev, "no_such_counter", 0}} {
			if got := c.d.Counter(c.name); got != c.want {
				t.Errorf("Counter(%q) = %d, want %d", c.name, got, c.want)
			}
		}
		for _, c := range b.dev.Counters() {
			if got := b.dev.Counter(c.Name); got != c.Value {
				t.Errorf("Counter(%q) = %d, Counters says %d", c.Name, got, c.Value)
			}
		}
		if n := testing.AllocsPerRun(100, func() { b.dev.Counter("polled_pkts") }); n != 0 {
			t.Errorf("Counter allocates %v times a call, want 0", n)
		}
	})
}

// TestNumCounters: numCounters, which sizes Counter's buffer and says
// where the link's and the sources' counters begin in Counters, is the
// number of counters the device lists of its own.
func TestNumCounters(t *testing.T) {
	if n := len(new(Device).appendCounters(nil)); n != numCounters {
		t.Fatalf("the device lists %d counters of its own; numCounters = %d", n, numCounters)
	}
}
