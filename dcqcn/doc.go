// Package dcqcn implements DCQCN, the congestion control of RoCEv2 (Zhu et
// al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015),
// as NVIDIA's ConnectX (mlx5) firmware runs it, plus a token-bucket pacer
// that turns its rate into send budget.
//
// # Where it sits
//
// dcqcn is one of goroce's bottom layers, next to wire and mr: it imports
// nothing of goroce's. The device (rnic) owns one ReactionPoint, one
// NotificationPoint and one Pacer per RC or UC QP, under one lock of the
// QP's, and drives them from several goroutines: whichever goroutine sends
// the QP's packets asks the pacer and tells both of what it sent, the
// receive path feeds CNPs to the reaction point and CE marks to the
// notification point, and the QP's worker runs the timers, which the QP's
// timer on the device's clock (rnic.Config.Clock) wakes it for (rnic's
// package doc has the table). The simulated link (simlink) uses RED as its switch
// queue's marking rule. Everything here is pure: no goroutines, no clock
// reads (every method that needs the time takes now), no allocation on the
// per-packet path. None of the types is safe for concurrent use.
//
// # The three roles
//
// DCQCN splits the work between three places on a flow's path:
//
//	sender NIC                     switch                    receiver NIC
//	┌───────────────┐  data   ┌──────────────────┐  data,  ┌──────────────────┐
//	│ reaction point├────────►│ congestion point ├────────►│notification point│
//	│ (RP): rate    │         │ (CP): RED/ECN    │ some CE │ (NP): CE → CNP,  │
//	│ limiter, α    │◄────────┼──────────────────┼─────────┤ ≤ 1 per interval │
//	└───────────────┘   CNP   └──────────────────┘   CNP   └──────────────────┘
//
// In turn:
//
//   - The congestion point (RED) is a switch egress queue. It marks packets
//     ECN Congestion Experienced with a probability that grows from 0 at
//     Kmin bytes of queue to Pmax at Kmax, and is 1 above Kmax.
//   - The notification point (NotificationPoint) is the receiver. For a
//     CE-marked packet it sends a Congestion Notification Packet (CNP, the
//     RoCEv2 opcode 0x81) back to the sender, at most one per QP per
//     interval N.
//   - The reaction point (ReactionPoint) is the sender's rate limiter. A
//     CNP cuts the rate; a timer and a byte counter raise it again.
//
// # The reaction point's rate state machine
//
// The RP keeps a current rate RC, a target rate RT, the congestion estimate
// α (a moving average of "was there a CNP?"), and counts increase events
// since the last cut: T from the timer (every RPGTimeReset) and BC from the
// byte counter (every RPGByteReset bytes sent). F is RPGThreshold.
//
//	                     first CNP: α ← InitialAlpha, cut
//	┌──────────────┐ ──────────────────────────────────────┐
//	│   released   │                                       ▼
//	│ RC = RT =    │  RC reaches the     ┌─────────────────────────────┐
//	│ line rate,   │  line rate (from    │ fast recovery               │◄─┐ CNP:
//	│ no timers    │◄─any increase)──────┤ max(T,BC) ≤ F: RT unchanged │  │ cut
//	└──────────────┘                     └──────────────┬──────────────┘  │
//	                                       T > F or BC > F                │
//	                                     ┌──────────────▼──────────────┐  │
//	                                     │ additive increase           ├──┤
//	                                     │ RT += R_AI                  │  │
//	                                     └──────────────┬──────────────┘  │
//	                                       T > F and BC > F               │
//	                                     ┌──────────────▼──────────────┐  │
//	                                     │ hyper increase              ├──┘
//	                                     │ RT += i·R_HAI, i=min(T,BC)−F│
//	                                     └─────────────────────────────┘
//
//	cut (each CNP; at most one per RateReduceMonitorPeriod):
//	    RT ← RC (always with ClampTargetRate, else after an increase),
//	    RC ← RC·(1 − α/2),  α ← (1 − g)·α + g,  T = BC = 0, timers restart
//	    (a released flow's first CNP with RateToSetOnFirstCNP set instead
//	    sets RC = RT = that rate)
//	each increase event (timer or byte counter), in every stage, after RT moves:
//	    RC ← (RT + RC)/2
//
// So fast recovery closes half the gap to the rate the flow had before the cut;
// additive and hyper increase also move the target up, hyper increase
// faster the longer the flow has gone without a CNP. Without CNPs, α decays:
// α ← (1 − g)·α per α period (DCETCPRTT), so a flow that sees few CNPs cuts
// gently and one that sees many cuts by up to half. ReactionPoint documents
// the exact rules and where they differ from the paper's simulator and the
// firmware.
//
// # Parameters
//
// Params holds every knob, named after the firmware's (rpg_time_reset,
// dce_tcp_g, ...). Three presets come with their sources: PresetPaper (Zhu's
// ns-3 simulator), PresetMLX5 (the ConnectX firmware defaults) and
// PresetHPCC (the DCQCN setup of the HPCC paper's simulator, scaled to the
// link speed). PresetByName serves a command-line flag. A preset tuned for
// one link speed can be carried to another with Params.ScaleRateSteps, the
// way HPCC's simulator scales its own.
//
// # Using it from a device
//
// Per packet: if pacer.Budget(now) covers the packet, send it, then
// pacer.Consume(n, now) and rp.OnSent(n, now). On a CNP: rp.OnCNP(now). On a
// CE-marked packet received: if np.OnCE(now), send a CNP. After any of
// these, if rp.Rate() changed, pacer.SetRate(rp.Rate(), now). Arm one timer
// for the earlier of rp.Deadline() (when non-zero) and the pacer's next
// release (pacer.TimeUntil), and call rp.Advance(now) when it fires. Calls
// from several goroutines need one lock around the three (rnic's
// congestion.mu).
package dcqcn
