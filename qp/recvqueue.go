package qp

import (
	"errors"
	"fmt"
	"sync"
)

// Errors of posting work requests.
var (
	ErrQueueFull    = errors.New("qp: work queue full")
	ErrTooManySGE   = errors.New("qp: more scatter/gather elements than the queue allows")
	ErrInvalidWR    = errors.New("qp: invalid work request")
	ErrInvalidState = errors.New("qp: operation not allowed in the QP's state")
)

// recvWQE is a posted receive: where an incoming SEND's payload goes.
type recvWQE struct {
	wrID uint64
	sgl  []SGE // capacity fixed at creation: posting does not allocate
}

// length returns the total length of the buffers.
func (w *recvWQE) length() uint64 {
	var n uint64
	for _, s := range w.sgl {
		n += uint64(s.Length)
	}
	return n
}

// recvQueue is a receive queue: a QP's own, or shared by several QPs as an
// SRQ. It is safe for concurrent use: the application posts while the
// responder takes.
type recvQueue struct {
	// Fixed at creation.
	maxSGE  int
	onLimit func() // called without mu held

	// mu guards the ring and the limit. A leaf: the responder takes with
	// its QP's token held.
	mu      sync.Mutex
	ring    []recvWQE
	head, n int
	// SRQ limit (srq_limit): when the number of posted WQEs falls below
	// limit, onLimit is called once and the limit disarms.
	limit int
}

func newRecvQueue(depth, maxSGE int) *recvQueue {
	q := &recvQueue{ring: make([]recvWQE, depth), maxSGE: maxSGE}
	for i := range q.ring {
		q.ring[i].sgl = make([]SGE, 0, maxSGE)
	}
	return q
}

func (q *recvQueue) post(wr *RecvWR) error {
	if len(wr.SGL) > q.maxSGE {
		return fmt.Errorf("%w: %d SGEs, max_recv_sge is %d", ErrTooManySGE, len(wr.SGL), q.maxSGE)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == len(q.ring) {
		return fmt.Errorf("%w: %d receive WRs posted, max_recv_wr is %d", ErrQueueFull, q.n, len(q.ring))
	}
	i := (q.head + q.n) % len(q.ring)
	q.ring[i].wrID = wr.WRID
	q.ring[i].sgl = append(q.ring[i].sgl[:0], wr.SGL...)
	q.n++
	return nil
}

// take removes the oldest posted receive into w. It reports false if none
// is posted.
func (q *recvQueue) take(w *recvWQE) bool {
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return false
	}
	slot := &q.ring[q.head]
	w.wrID = slot.wrID
	w.sgl = append(w.sgl[:0], slot.sgl...)
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	var fire func()
	if q.limit > 0 && q.n < q.limit {
		q.limit, fire = 0, q.onLimit
	}
	q.mu.Unlock()
	if fire != nil {
		fire()
	}
	return true
}

// drain removes every posted receive, calling f for each (to flush them).
func (q *recvQueue) drain(f func(wrID uint64)) {
	q.mu.Lock()
	ids := make([]uint64, 0, q.n)
	for ; q.n > 0; q.n-- {
		ids = append(ids, q.ring[q.head].wrID)
		q.head = (q.head + 1) % len(q.ring)
	}
	q.mu.Unlock()
	for _, id := range ids {
		f(id)
	}
}

func (q *recvQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// SRQ is a shared receive queue (struct ibv_srq): receive WQEs that any
// QP created with it consumes, in posting order. It is safe for concurrent
// use.
type SRQ struct {
	q *recvQueue
}

// SRQAttr holds an SRQ's attributes (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR    uint32
	MaxSGE   uint32
	SRQLimit uint32 // arm the limit event when fewer than this many WQEs remain
}

// NewSRQ returns an SRQ holding up to attr.MaxWR receives of attr.MaxSGE
// elements. onLimit (may be nil) is called, from a device goroutine, when the
// armed limit is crossed (IBV_EVENT_SRQ_LIMIT_REACHED).
func NewSRQ(attr SRQAttr, onLimit func()) (*SRQ, error) {
	if attr.MaxWR == 0 || attr.MaxWR > 1<<16 || attr.MaxSGE == 0 || attr.MaxSGE > 32 {
		return nil, fmt.Errorf("%w: SRQ max_wr %d, max_sge %d", ErrInvalidWR, attr.MaxWR, attr.MaxSGE)
	}
	q := newRecvQueue(int(attr.MaxWR), int(attr.MaxSGE))
	q.limit, q.onLimit = int(attr.SRQLimit), onLimit
	return &SRQ{q: q}, nil
}

// PostRecv posts a receive to the SRQ (ibv_post_srq_recv).
func (s *SRQ) PostRecv(wr *RecvWR) error {
	if wr == nil {
		return fmt.Errorf("%w: nil RecvWR", ErrInvalidWR)
	}
	return s.q.post(wr)
}

// Modify arms the limit event with a new srq_limit (ibv_modify_srq with
// IBV_SRQ_LIMIT). A limit of 0 disarms it.
func (s *SRQ) Modify(limit uint32) error {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	if int(limit) > len(s.q.ring) {
		return fmt.Errorf("%w: srq_limit %d above max_wr %d", ErrInvalidWR, limit, len(s.q.ring))
	}
	s.q.limit = int(limit)
	return nil
}

// Len returns how many receives are posted.
func (s *SRQ) Len() int { return s.q.len() }
