package qp_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// testLimits are the device capabilities the QPs of these tests are checked
// against: a port whose active MTU is 1024.
var testLimits = qp.Limits{MaxMTU: qp.MTU1024, MaxRdAtomic: 16, MaxSendWR: 64, MaxSGE: 4,
	MaxInline: 64, MaxMsgSize: 1 << 20, IPv4: true}

// peerGID is the address vector's GID in these tests: an IPv4-mapped
// address, as a RoCEv2 GID table holds it.
var peerGID = netip.MustParseAddr("::ffff:10.0.0.2")

// fixture is a QP with no device around it: nothing transmits, nothing
// completes, so what the tests see is the verbs API alone.
type fixture struct {
	mem *mr.Table
	pd  *mr.PD
	cq  *qp.CQ
	qp  *qp.QP
	mr  *mr.MR
}

// newFixture creates a QP of type typ in RESET with room for sendWR send
// and recvWR receive WRs.
func newFixture(t *testing.T, typ qp.Type, sendWR, recvWR uint32) *fixture {
	t.Helper()
	return newFixtureWithPost(t, typ, sendWR, recvWR, nil)
}

// newFixtureWithPost is newFixture with post as the QP's Env.Post, what
// the device hears when work is posted.
func newFixtureWithPost(t *testing.T, typ qp.Type, sendWR, recvWR uint32, post func(*qp.QP)) *fixture {
	t.Helper()
	mem, err := mr.NewTable(mr.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := mem.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := qp.NewCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	env := &qp.Env{Mem: mem, Counters: new(qp.Counters), Limits: testLimits, Post: post}
	e, err := qp.NewEngine(0x123, pd, &qp.InitAttr{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: qp.Cap{MaxSendWR: sendWR, MaxRecvWR: recvWR, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 32}}, env)
	if err != nil {
		t.Fatal(err)
	}
	m, err := pd.RegMR(make([]byte, 8192), mr.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{mem: mem, pd: pd, cq: cq, qp: e.QP(), mr: m}
}

// sge returns an SGE for n bytes at offset off of the fixture's region.
func (f *fixture) sge(off, n int) qp.SGE {
	return qp.SGE{Addr: f.mr.Addr() + uint64(off), Length: uint32(n), LKey: f.mr.LKey()}
}

// goodAttr returns attributes with every field valid for testLimits, and
// State set to s.
func goodAttr(s qp.State) qp.Attr {
	return qp.Attr{
		State:           s,
		PathMTU:         qp.MTU1024,
		QKey:            0x11111111,
		RQPSN:           0x000100,
		SQPSN:           0x000200,
		DestQPN:         0x456,
		AccessFlags:     mr.AccessRemoteWrite | mr.AccessRemoteRead,
		AH:              qp.AH{GID: peerGID},
		PortNum:         1,
		MaxRdAtomic:     4,
		MaxDestRdAtomic: 4,
		MinRNRTimer:     12,
		Timeout:         14,
		RetryCnt:        7,
		RNRRetry:        7,
	}
}

// path is the way up from RESET to RTS: each step with the attributes the
// kernel's table requires for the QP type.
var path = []qp.State{qp.StateInit, qp.StateRTR, qp.StateRTS}

// bring moves a fresh (RESET) QP to state s: up the path with the required
// attributes, then to SQD or ERR with a plain state change.
func bring(t *testing.T, q *qp.QP, s qp.State) {
	t.Helper()
	cur := qp.StateReset
	up := s
	if s == qp.StateSQD || s == qp.StateErr {
		up = qp.StateRTS
	}
	for _, next := range path {
		if cur == up {
			break
		}
		a := goodAttr(next)
		if err := q.Modify(&a, qp.AttrState|kernelTable[edge{cur, next}][q.Type()].req, time.Time{}); err != nil {
			t.Fatalf("bringing a %v QP to %v: %v → %v: %v", q.Type(), s, cur, next, err)
		}
		cur = next
	}
	if s != up {
		a := goodAttr(s)
		if err := q.Modify(&a, qp.AttrState, time.Time{}); err != nil {
			t.Fatalf("bringing a %v QP to %v: %v", q.Type(), s, err)
		}
	}
	if got := q.State(); got != s {
		t.Fatalf("QP is in %v, want %v", got, s)
	}
}
