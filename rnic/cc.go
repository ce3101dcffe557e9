package rnic

import (
	"sync"
	"time"

	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// DCQCNConfig configures congestion control (DCQCN, Zhu et al., SIGCOMM
// 2015) on a device. Each RC and UC QP gets a reaction point that sets its
// send rate and a pacer that enforces it, and a notification point that
// answers ECN CE marks on the packets it receives with CNPs.
type DCQCNConfig struct {
	// Disable turns DCQCN off: no pacing, CE marks counted but not
	// answered, CNPs counted and ignored.
	Disable bool
	// Params are the algorithm's parameters; zero means dcqcn.PresetMLX5().
	Params dcqcn.Params
	// LineRate is the rate a QP starts at and returns to (default 100 Gb/s).
	LineRate dcqcn.Rate
}

// congestion is one QP's DCQCN state: the reaction point and pacer of its
// sends, the notification point of its receives.
type congestion struct {
	mtu int // fixed

	// mu guards the three DCQCN parts, which senders, the receive path and
	// the worker all drive (see the package doc). Never held with the
	// QP's token.
	mu     sync.Mutex
	rp     *dcqcn.ReactionPoint
	pacer  *dcqcn.Pacer
	np     *dcqcn.NotificationPoint
	paceAt time.Time // when the pacer lets the next packet go, while it holds one back
}

func newCongestion(d *Device, now time.Time) (*congestion, error) {
	cfg := d.cfg.DCQCN
	rp, err := dcqcn.NewReactionPoint(cfg.Params, cfg.LineRate, now)
	if err != nil {
		return nil, err
	}
	// The pacer holds every QP to its rate, line rate included: without
	// it a QP at line rate hands its whole backlog to the link at once and
	// a CNP only slows what queues behind it. The burst is about 20 µs of
	// line time (at least 4 packets): smooth at 10 Gb/s (25 KB), no
	// throttle where the link is far slower than the line rate.
	burst := max(4*(d.cfg.MTU+64), int(float64(cfg.LineRate)*20e-6/8))
	pacer, err := dcqcn.NewPacer(cfg.LineRate, burst, now)
	if err != nil {
		return nil, err
	}
	// A new QP's bucket holds two packets, not the whole burst. A full
	// bucket at line rate would put the burst into the link's transmit
	// queue at once, and since the pacer then earns credit exactly as fast
	// as the wire drains, those bytes would stay queued ahead of the wire
	// for as long as the QP sends at line rate. A real NIC's rate limiter
	// sits at the wire, with only the packet on the wire and the next one
	// past it: when the first CNP lowers the rate, nothing else has
	// escaped the limiter. (With senders starting together, full buckets
	// would put another burst each into the switch queue after the CNPs
	// had already cut every rate.)
	pacer.Consume(burst-min(burst, 2*(d.cfg.MTU+64)), now)
	c := &congestion{rp: rp, pacer: pacer, np: dcqcn.NewNotificationPoint(cfg.Params.MinTimeBetweenCNPs), mtu: d.cfg.MTU}
	return c, nil
}

// budget returns how many request packets the QP may send now, at most
// room.
func (c *congestion) budget(now time.Time, room int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.pacer.Budget(now)
	if b <= 0 {
		c.paceAt = now.Add(c.pacer.TimeUntil(c.mtu, now))
		return 0
	}
	c.paceAt = time.Time{}
	return min(room, (b+c.mtu-1)/c.mtu)
}

// sent accounts the request packets a QP just added to the outbox.
func (c *congestion) sent(now time.Time, pkts []qp.OutPacket) {
	n := 0
	for i := range pkts {
		if pkts[i].Opcode().Info().Request {
			n += len(pkts[i].Head()) + len(pkts[i].Payload) + wire.ICRCLen
		}
	}
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.rp.OnSent(n, now)
	c.pacer.Consume(n, now)
	c.sync(now)
	// If these packets spent the budget, the QP must wake when the pacer
	// has earned the next packet: its worker asks budget again only when
	// something rings it, and a QP in the middle of a message may have
	// nothing else coming (no ACK is due before the message's last
	// packet). A wake with nothing left to send finds nothing and re-arms
	// nothing.
	if c.pacer.Budget(now) < c.mtu {
		c.paceAt = now.Add(c.pacer.TimeUntil(c.mtu, now))
	}
	c.mu.Unlock()
}

// onCNP feeds a CNP to the reaction point. It reports whether the rate was
// cut.
func (c *congestion) onCNP(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cuts := c.rp.Stats().RateCuts
	c.rp.OnCNP(now)
	c.sync(now)
	return c.rp.Stats().RateCuts > cuts
}

// onCE tells the notification point a CE-marked packet arrived; it reports
// whether to send a CNP.
func (c *congestion) onCE(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.np.OnCE(now)
}

// advance runs the reaction point's timers.
func (c *congestion) advance(now time.Time) {
	c.mu.Lock()
	c.rp.Advance(now)
	c.sync(now)
	if !c.paceAt.IsZero() && !now.Before(c.paceAt) {
		c.paceAt = time.Time{}
	}
	c.mu.Unlock()
}

// sync gives the pacer the reaction point's rate. Called with mu held.
func (c *congestion) sync(now time.Time) {
	if c.pacer.Rate() != c.rp.Rate() {
		c.pacer.SetRate(c.rp.Rate(), now)
	}
}

// deadline is the earliest of the reaction point's timer and the pacer's
// next release.
func (c *congestion) deadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	dl := c.rp.Deadline()
	if !c.paceAt.IsZero() && (dl.IsZero() || c.paceAt.Before(dl)) {
		dl = c.paceAt
	}
	return dl
}

// Rate returns the QP's current send rate set by DCQCN (the line rate when
// DCQCN is off or the QP is not congested).
func (q *QP) Rate() dcqcn.Rate {
	if q.cc == nil {
		return q.d.cfg.DCQCN.LineRate
	}
	q.cc.mu.Lock()
	defer q.cc.mu.Unlock()
	return q.cc.rp.Rate()
}
