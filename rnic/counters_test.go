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
		// A source's counters (the CM adds its own so) are listed after
		// the device's, and Counter finds them, until it is removed.
		src := b.dev.AddCounterSource(func(cs []Counter) []Counter { return append(cs, Counter{"cm_rx_msgs_req", 5}) })
		if cs := b.dev.Counters(); cs[len(cs)-1] != (Counter{"cm_rx_msgs_req", 5}) {
			t.Errorf("Counters ends with %+v, want the source's cm_rx_msgs_req 5", cs[len(cs)-1])
		}
		for _, c := range b.dev.Counters() {
			if got := b.dev.Counter(c.Name); got != c.Value {
				t.Errorf("Counter(%q) = %d, Counters says %d", c.Name, got, c.Value)
			}
		}
		src.Remove()
		if got := b.dev.Counter("cm_rx_msgs_req"); got != 0 {
			t.Errorf("Counter(cm_rx_msgs_req) = %d after its source was removed, want 0", got)
		}
		if n := testing.AllocsPerRun(100, func() { b.dev.Counter("polled_pkts") }); n != 0 {
			t.Errorf("Counter allocates %v times a call, want 0", n)
		}
	})
}

// TestNumCounters: numCounters, which sizes Counter's buffer, is the number
// of counters the device lists of its own.
func TestNumCounters(t *testing.T) {
	if n := len(new(Device).appendCounters(nil)); n != numCounters {
		t.Fatalf("the device lists %d counters of its own; numCounters = %d", n, numCounters)
	}
}
