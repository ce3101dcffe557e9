package nccl

import "github.com/goroce/goroce/nccl/sched"

// A communicator keeps the schedules it has built: a schedule depends
// only on the rank, the number of ranks and the builder's arguments, and
// the executor only reads it, so a call that repeats an earlier one's
// shape (the rule in training loops and benchmarks) reuses its plan
// instead of building the phases again.

// planBuilder names a schedule builder.
type planBuilder uint8

const (
	buildDoubling planBuilder = iota + 1
	buildRing
	buildBroadcast
	buildReduce
	buildAllGather
	buildReduceScatter
	buildAlltoAll
	buildGather
	buildScatter
)

// planKey names a schedule of this communicator: its builder and the
// arguments beyond rank and size (unit: the ring's chunk or the chain's
// slice, in elements).
type planKey struct {
	build             planBuilder
	count, unit, root int
}

// maxPlans bounds the schedules kept; when full, they are all dropped.
const maxPlans = 64

// schedule returns the plan named by k, building it with build the first
// time. A builder's error is returned, not kept. Called from the issuing
// goroutine only.
func (c *Comm) schedule(k planKey, build func() (*sched.Plan, error)) (*sched.Plan, error) {
	if p, ok := c.plans[k]; ok {
		return p, nil
	}
	p, err := build()
	if err != nil {
		return nil, err
	}
	if len(c.plans) >= maxPlans {
		clear(c.plans)
	}
	if c.plans == nil {
		c.plans = make(map[planKey]*sched.Plan)
	}
	c.plans[k] = p
	return p, nil
}
