// Package simlink is the simulated network of the software RNIC: an
// in-memory switch whose ports implement [link.Link], so whole-stack tests
// run the real device code over it in virtual time (testing/synctest, or a
// virtual clock from package rnic/clock) and DCQCN experiments watch a
// congested queue build and drain.
//
// Where it sits: wire < link < udplink, simlink (this package) < rnic. It is
// the in-memory twin of udplink: same interface, no sockets.
//
// # What it models
//
// One output-queued, store-and-forward switch. Every port is a host's cable
// into it:
//
//	 host A                      switch                          host C
//	+------+  uplink A   +---------------------+  egress queue C  +------+
//	|Port A|------------>|                     |=[][][][]=------->|Port C|
//	+------+ rate,latency|  route by dst addr  | buffer, Marker   +------+
//	 host B              |  impairments        | rate, latency
//	+------+  uplink B   |                     |
//	|Port B|------------>|                     |=[]=------------> (to A, B ...)
//	+------+             +---------------------+
//
// A packet written to a port is serialized onto its uplink at
// PortConfig.Uplink.Rate (one packet after the other), crosses the cable in
// Uplink.Latency, and is routed by destination address. There the
// impairments pick it out (drop, duplicate, reorder, corrupt, mark CE), and
// it joins the egress queue towards the destination port. That queue drains
// at Downlink.Rate; it holds at most Buffer bytes (tail drop beyond), and
// its Marker, if any, is the ECN congestion point: it may set CE on an
// ECN-capable packet as the packet is enqueued, or, with MarkOnDequeue, as
// it leaves (see MarkPoint for why that matters). After Downlink.Latency the
// packet is in the destination port's receive queue, where ReadBatch finds
// it. A rate of 0 is infinite (no serialization delay).
//
// Because every sender towards one port shares that port's egress queue, N
// senders into one receiver (an incast) build a queue there exactly as on a
// real switch, which is what DCQCN reacts to.
//
// Ties: events at the same instant happen in a fixed order (departures
// before deliveries before arrivals, then in the order they were
// scheduled), so with the same Config.Seed and the same sends the outcome is
// the same.
//
// # Time
//
// The package reads the clock only through Config.Clock (package
// rnic/clock): Now, one AfterFunc timer per network, and the Waiter a
// port's ReadBatch blocks on. The default, clock.Real, is the time package:
// inside a synctest bubble everything runs in virtual time, outside one in
// real time. With a *clock.Virtual shared with the devices on the network,
// it runs in virtual time in any program. There is no goroutine per packet
// and no long-lived goroutine at all: the timer's callback moves packets
// along and returns, and WriteBatch moves along whatever is already due.
// Close leaves nothing running. Create and use a Network within one bubble
// (or outside all bubbles), on the clock its devices use.
//
// # Using it in a test
//
//	func TestLoss(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			net := simlink.NewNetwork(simlink.Config{Seed: 1})
//			defer net.Close()
//			cable := simlink.PortConfig{
//				Uplink:   simlink.Wire{Rate: 10 * simlink.Gbps, Latency: time.Microsecond},
//				Downlink: simlink.Wire{Rate: 10 * simlink.Gbps, Latency: time.Microsecond},
//			}
//			a, err := net.Attach(netip.MustParseAddrPort("10.0.0.1:4791"), cable)
//			...
//			lossy := cable
//			lossy.Receive = []simlink.Impairment{
//				{Action: simlink.Drop, Match: simlink.Nth(3, nil)}, // lose the 3rd packet towards b
//			}
//			b, err := net.Attach(netip.MustParseAddrPort("10.0.0.2:4791"), lossy)
//			...
//			// Build a device over a and one over b, run traffic, check
//			// the results and net.Stats(). The clock moves only when every
//			// goroutine in the bubble waits, so the times are exact.
//		})
//	}
//
// Closing every port (or the network) lets the bubble end with no goroutine
// left behind.
package simlink
