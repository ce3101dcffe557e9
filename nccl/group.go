package nccl

import (
	"fmt"

	"github.com/goroce/goroce/nccl/sched"
	"github.com/goroce/goroce/nccl/transport"
)

// Send sends count elements of buf to peer (ncclSend). Outside a group it
// is an operation of its own; inside GroupStart/GroupEnd it is fused with
// the group's other sends and receives into one step that posts them all
// at once, so a ring of exchanges cannot deadlock.
func (c *Comm) Send(buf []byte, count int, dt DataType, peer int) *Request {
	return c.p2p("Send", sched.Send, buf, count, dt, peer)
}

// Recv receives count elements from peer into buf (ncclRecv). The peer's
// matching Send must have the same size. See Send for groups. A rank
// cannot send to itself.
func (c *Comm) Recv(buf []byte, count int, dt DataType, peer int) *Request {
	return c.p2p("Recv", sched.Recv, buf, count, dt, peer)
}

func (c *Comm) p2p(name string, kind sched.Kind, buf []byte, count int, dt DataType, peer int) *Request {
	if err := c.args(name, buf, buf, count, 0, dt, Sum, 0); err != nil {
		return c.failed(name, err)
	}
	if err := transport.CheckPeer(c.rank, c.size, peer); err != nil {
		return c.failed(name, fmt.Errorf("%w: %v", ErrInvalidArgument, err))
	}
	b := buf[:count*dt.Size()]
	if c.group > 0 {
		// Fuse into the group's point-to-point task.
		t := c.groupP2P()
		s := &t.steps[0]
		idx := sched.Buf(len(s.bufs))
		s.bufs = append(s.bufs, b)
		r := sched.Region{Buf: idx, Len: len(b)} // the fused step counts bytes
		if len(b) == 0 {
			return t.req
		}
		if s.plan.Phases == nil {
			s.plan.Phases = []sched.Phase{nil}
		}
		st := sched.Step{Kind: kind, Peer: peer}
		if kind == sched.Send {
			st.Src = r
		} else {
			st.Dst = r
		}
		s.plan.Phases[0] = append(s.plan.Phases[0], st)
		return t.req
	}
	t := &task{req: c.newRequest(name)}
	plan := &sched.Plan{Rank: c.rank, Size: c.size}
	st := sched.Step{Kind: kind, Peer: peer}
	if kind == sched.Send {
		st.Src = sched.Region{Buf: 3, Len: count}
	} else {
		st.Dst = sched.Region{Buf: 3, Len: count}
	}
	if count > 0 {
		plan.Phases = []sched.Phase{{st}}
	}
	t.steps = []step{{plan: plan, dt: dt, op: Sum, bufs: [][]byte{nil, nil, nil, b}}}
	return c.submit(t)
}

// groupP2P returns the group's fused point-to-point task, creating it. Its
// regions count bytes (a Uint8 view), so sends and receives of any types
// mix.
func (c *Comm) groupP2P() *task {
	for _, t := range c.held {
		if t.req.op == "GroupP2P" {
			return t
		}
	}
	t := &task{req: c.newRequest("GroupP2P"), steps: []step{{
		plan: &sched.Plan{Rank: c.rank, Size: c.size}, dt: Uint8, op: Sum, bufs: [][]byte{nil, nil, nil}}}}
	c.held = append(c.held, t)
	return t
}

// GroupStart begins a group (ncclGroupStart): operations issued until the
// matching GroupEnd are held back; sends and receives are fused into one
// step.
func (c *Comm) GroupStart() { c.group++ }

// GroupEnd ends a group (ncclGroupEnd); at the outermost one the group's
// operations go to the stream: collectives in the order issued, then the
// fused sends and receives.
func (c *Comm) GroupEnd() error {
	if c.group == 0 {
		return ErrGroup
	}
	c.group--
	if c.group > 0 {
		return nil
	}
	tasks := c.held
	c.held = nil
	var p2p *task
	for _, t := range tasks {
		if t.req.op == "GroupP2P" {
			p2p = t
			continue
		}
		c.number(t.req)
		c.enqueue(t)
	}
	if p2p != nil {
		c.number(p2p.req)
		c.enqueue(p2p)
	}
	return nil
}
