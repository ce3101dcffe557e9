package soak

import (
	"fmt"
	"sync"

	"github.com/goroce/goroce/qp"
)

// OpCounts counts the send work requests of one opcode on one lane.
type OpCounts struct {
	Posted    uint64
	Completed uint64 // completions with the expected (success) status
	Failed    uint64 // completions with any other status
}

// LaneCounts is what one lane (one QP pair on one link) has done so far.
type LaneCounts struct {
	Lane      string  // e.g. "simlink RC"
	Transport qp.Type // RC, UC or UD
	Rounds    uint64  // workload rounds finished
	// Sends counts send WRs by opcode (qp.WROpcode indexes it).
	Sends [qp.WRSendWithInv + 1]OpCounts
	// Receive WRs on the responder's QP: posted, completed with a message,
	// and flushed (WRFlushErr) when the QP moved to ERR at the end.
	RecvPosted, RecvCompleted, RecvFlushed uint64
	// Verified counts payloads (received messages, RDMA READ results,
	// atomic results, RDMA WRITE targets) whose bytes matched.
	Verified uint64
	// Mismatches counts payloads whose bytes, length, immediate data or
	// sequence number were not what was sent.
	Mismatches uint64
	// Errors counts everything else that went wrong (a refused post, a
	// completion that never came, a duplicate completion); FirstErrors
	// holds the first few messages.
	Errors      uint64
	FirstErrors []string
}

// SendsPosted is the number of send WRs posted, over all opcodes.
func (c *LaneCounts) SendsPosted() (n uint64) {
	for _, o := range c.Sends {
		n += o.Posted
	}
	return n
}

// SendsCompleted is the number of send WRs completed with success.
func (c *LaneCounts) SendsCompleted() (n uint64) {
	for _, o := range c.Sends {
		n += o.Completed
	}
	return n
}

// SendsFailed is the number of send WRs completed with an error status.
func (c *LaneCounts) SendsFailed() (n uint64) {
	for _, o := range c.Sends {
		n += o.Failed
	}
	return n
}

// Consuming is the number of posted send WRs that consume a receive at the
// peer: SEND, SEND_WITH_IMM and RDMA_WRITE_WITH_IMM.
func (c *LaneCounts) Consuming() uint64 {
	return c.Sends[qp.WRSend].Posted + c.Sends[qp.WRSendWithImm].Posted + c.Sends[qp.WRRDMAWriteWithImm].Posted
}

// maxFirstErrors bounds LaneCounts.FirstErrors.
const maxFirstErrors = 8

// tally is a lane's counts under a lock: the lane updates them, the
// sampler copies them.
type tally struct {
	mu sync.Mutex
	c  LaneCounts
}

func (t *tally) update(f func(c *LaneCounts)) {
	t.mu.Lock()
	f(&t.c)
	t.mu.Unlock()
}

func (t *tally) snapshot() LaneCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.c
	c.FirstErrors = append([]string(nil), t.c.FirstErrors...)
	return c
}

// errorf counts an error and keeps its message if it is among the first.
func (t *tally) errorf(format string, args ...any) {
	msg := fmt.Sprintf(t.c.Lane+": "+format, args...)
	t.update(func(c *LaneCounts) {
		c.Errors++
		if len(c.FirstErrors) < maxFirstErrors {
			c.FirstErrors = append(c.FirstErrors, msg)
		}
	})
}

// mismatchf counts a payload that was not what was sent.
func (t *tally) mismatchf(format string, args ...any) {
	msg := fmt.Sprintf(t.c.Lane+": "+format, args...)
	t.update(func(c *LaneCounts) {
		c.Mismatches++
		if len(c.FirstErrors) < maxFirstErrors {
			c.FirstErrors = append(c.FirstErrors, msg)
		}
	})
}

func (t *tally) verified() { t.update(func(c *LaneCounts) { c.Verified++ }) }
