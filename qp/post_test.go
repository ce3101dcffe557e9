package qp_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// TestPostInWrongStates checks where PostSend and PostRecv are allowed, as
// in verbs: receives from INIT on, sends from RTS on (in ERR they are
// accepted and flushed).
func TestPostInWrongStates(t *testing.T) {
	for _, c := range []struct {
		state          qp.State
		sendOK, recvOK bool
	}{
		{qp.StateReset, false, false},
		{qp.StateInit, false, true},
		{qp.StateRTR, false, true},
		{qp.StateRTS, true, true},
		{qp.StateSQD, true, true},
		{qp.StateErr, true, true},
	} {
		t.Run(c.state.String(), func(t *testing.T) {
			f := newFixture(t, qp.RC, 4, 4)
			bring(t, f.qp, c.state)
			err := f.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, SGL: []qp.SGE{f.sge(0, 16)}})
			switch {
			case c.sendOK && err != nil:
				t.Errorf("PostSend in %v: %v", c.state, err)
			case !c.sendOK && (!errors.Is(err, qp.ErrInvalidState) || !strings.Contains(err.Error(), c.state.String())):
				t.Errorf("PostSend in %v: err = %v, want ErrInvalidState naming the state", c.state, err)
			}
			err = f.qp.PostRecv(&qp.RecvWR{WRID: 2, SGL: []qp.SGE{f.sge(0, 16)}})
			switch {
			case c.recvOK && err != nil:
				t.Errorf("PostRecv in %v: %v", c.state, err)
			case !c.recvOK && (!errors.Is(err, qp.ErrInvalidState) || !strings.Contains(err.Error(), c.state.String())):
				t.Errorf("PostRecv in %v: err = %v, want ErrInvalidState naming the state", c.state, err)
			}
		})
	}
}

// TestPostQueueFull fills both work queues: the WR after the last one that
// fits fails with ErrQueueFull and a message naming the limit.
func TestPostQueueFull(t *testing.T) {
	f := newFixture(t, qp.RC, 4, 3)
	bring(t, f.qp, qp.StateRTS)
	// Nothing runs the engines here, so posted WRs stay outstanding.
	for i := range 4 {
		if err := f.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, SGL: []qp.SGE{f.sge(0, 8)}}); err != nil {
			t.Fatalf("send WR %d: %v", i, err)
		}
	}
	err := f.qp.PostSend(&qp.SendWR{WRID: 4, Opcode: qp.WRSend, SGL: []qp.SGE{f.sge(0, 8)}})
	if !errors.Is(err, qp.ErrQueueFull) || !strings.Contains(err.Error(), "max_send_wr is 4") {
		t.Fatalf("fifth send WR: err = %v, want ErrQueueFull naming max_send_wr", err)
	}
	for i := range 3 {
		if err := f.qp.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{f.sge(0, 8)}}); err != nil {
			t.Fatalf("receive WR %d: %v", i, err)
		}
	}
	err = f.qp.PostRecv(&qp.RecvWR{WRID: 3, SGL: []qp.SGE{f.sge(0, 8)}})
	if !errors.Is(err, qp.ErrQueueFull) || !strings.Contains(err.Error(), "max_recv_wr is 3") {
		t.Fatalf("fourth receive WR: err = %v, want ErrQueueFull naming max_recv_wr", err)
	}
}

// TestPostSendRejects checks the work requests PostSend refuses outright,
// and that a refused WR takes no slot of the send queue.
func TestPostSendRejects(t *testing.T) {
	fixtures := map[qp.Type]*fixture{}
	for _, typ := range []qp.Type{qp.RC, qp.UC, qp.UD} {
		fixtures[typ] = newFixture(t, typ, 2, 2)
		bring(t, fixtures[typ].qp, qp.StateRTS)
	}
	f := fixtures[qp.RC]
	ah := &qp.AH{GID: peerGID}
	for _, c := range []struct {
		name string
		typ  qp.Type
		wr   qp.SendWR
		want error
	}{
		{"three SGEs, max_send_sge 2", qp.RC, qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{f.sge(0, 1), f.sge(1, 1), f.sge(2, 1)}}, qp.ErrTooManySGE},
		{"message over max_msg_sz", qp.RC, qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{f.sge(0, 1<<20), f.sge(0, 1)}}, qp.ErrInvalidWR},
		{"inline over max_inline_data", qp.RC, qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendInline, SGL: []qp.SGE{f.sge(0, 33)}}, qp.ErrInvalidWR},
		{"atomic of 4 bytes", qp.RC, qp.SendWR{Opcode: qp.WRAtomicFetchAndAdd, SGL: []qp.SGE{f.sge(0, 4)}, RemoteAddr: 64}, qp.ErrInvalidWR},
		{"atomic at an unaligned address", qp.RC, qp.SendWR{Opcode: qp.WRAtomicCmpAndSwp, SGL: []qp.SGE{f.sge(0, 8)}, RemoteAddr: 65}, qp.ErrInvalidWR},
		{"BIND_MW without a window", qp.RC, qp.SendWR{Opcode: qp.WRBindMW}, qp.ErrInvalidWR},
		{"unknown opcode", qp.RC, qp.SendWR{Opcode: 42}, qp.ErrInvalidWR},
		{"READ on UC", qp.UC, qp.SendWR{Opcode: qp.WRRDMARead, SGL: []qp.SGE{f.sge(0, 8)}}, qp.ErrInvalidWR},
		{"atomic on UC", qp.UC, qp.SendWR{Opcode: qp.WRAtomicFetchAndAdd, SGL: []qp.SGE{f.sge(0, 8)}}, qp.ErrInvalidWR},
		{"WRITE on UD", qp.UD, qp.SendWR{Opcode: qp.WRRDMAWrite, AH: ah, SGL: []qp.SGE{f.sge(0, 8)}}, qp.ErrInvalidWR},
		{"UD without an address handle", qp.UD, qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{f.sge(0, 8)}}, qp.ErrInvalidWR},
		{"UD over the MTU", qp.UD, qp.SendWR{Opcode: qp.WRSend, AH: ah, SGL: []qp.SGE{f.sge(0, 1025)}}, qp.ErrInvalidWR},
	} {
		if err := fixtures[c.typ].qp.PostSend(&c.wr); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	for typ, f := range fixtures {
		for i := range 2 {
			wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, SGL: []qp.SGE{f.sge(0, 8)}}
			if typ == qp.UD {
				wr.AH = ah
			}
			if err := f.qp.PostSend(&wr); err != nil {
				t.Errorf("%v: a refused WR took a send-queue slot: %v", typ, err)
			}
		}
	}
	// A UD message of exactly the MTU is fine.
	u := newFixture(t, qp.UD, 1, 1)
	bring(t, u.qp, qp.StateRTS)
	if err := u.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, AH: ah, SGL: []qp.SGE{u.sge(0, 1024)}}); err != nil {
		t.Errorf("UD message of 1024 bytes at MTU 1024: %v", err)
	}
}

// TestPostRecvOnSRQQP checks that a QP taking its receives from an SRQ
// refuses its own.
func TestPostRecvOnSRQQP(t *testing.T) {
	f := newFixture(t, qp.RC, 1, 1)
	srq, err := qp.NewSRQ(qp.SRQAttr{MaxWR: 4, MaxSGE: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := qp.NewEngine(0x77, f.pd, &qp.InitAttr{Type: qp.RC, SendCQ: f.cq, RecvCQ: f.cq, SRQ: srq,
		Cap: qp.Cap{MaxSendWR: 1}}, &qp.Env{Mem: f.mem, Counters: new(qp.Counters), Limits: testLimits})
	if err != nil {
		t.Fatal(err)
	}
	q := e.QP()
	bring(t, q, qp.StateInit)
	if err := q.PostRecv(&qp.RecvWR{SGL: []qp.SGE{f.sge(0, 8)}}); !errors.Is(err, qp.ErrInvalidWR) {
		t.Fatalf("PostRecv on a QP with an SRQ: err = %v, want ErrInvalidWR", err)
	}
	if err := srq.PostRecv(&qp.RecvWR{SGL: []qp.SGE{f.sge(0, 8)}}); err != nil || srq.Len() != 1 {
		t.Fatalf("SRQ PostRecv: %v, %d posted", err, srq.Len())
	}
}

// TestPostSendDoesNotAllocate posts SENDs, UD SENDs with an address handle
// and BIND_MWs: PostSend copies what it needs and allocates nothing.
func TestPostSendDoesNotAllocate(t *testing.T) {
	const runs = 20
	rc := newFixture(t, qp.RC, 2*(runs+1), 1)
	bring(t, rc.qp, qp.StateRTS)
	ud := newFixture(t, qp.UD, runs+1, 1)
	bring(t, ud.qp, qp.StateRTS)
	w, err := rc.pd.AllocMW(mr.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	sgl := []qp.SGE{rc.sge(0, 64)}
	send := &qp.SendWR{Opcode: qp.WRSend, SGL: sgl}
	bind := &qp.SendWR{Opcode: qp.WRBindMW, Bind: &qp.MWBind{MW: w, RKey: mr.IncKey(w.RKey()), MR: rc.mr,
		Addr: rc.mr.Addr(), Length: 64, Access: mr.AccessRemoteWrite}}
	udSend := &qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{ud.sge(0, 64)}, AH: &qp.AH{GID: peerGID}, RemoteQPN: 9}
	allocs := testing.AllocsPerRun(runs, func() {
		if rc.qp.PostSend(send) != nil || rc.qp.PostSend(bind) != nil || ud.qp.PostSend(udSend) != nil {
			t.Fatal("PostSend failed")
		}
	})
	if allocs != 0 {
		t.Fatalf("PostSend allocates %.1f times per SEND + BIND_MW + UD SEND, want 0", allocs)
	}
}

// TestPostSendList posts a list of WRs: the device hears of them once,
// after the last; a list with a bad WR posts those before it, returns
// their count and the bad one's error, and the WRs after it are not
// posted (as ibv_post_send's bad_wr).
func TestPostSendList(t *testing.T) {
	posts := 0
	f := newFixtureWithPost(t, qp.RC, 8, 1, func(*qp.QP) { posts++ })
	q := f.qp
	bring(t, q, qp.StateRTS)
	sge := []qp.SGE{f.sge(0, 16)}
	wrs := make([]qp.SendWR, 4)
	for i := range wrs {
		wrs[i] = qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, SGL: sge}
	}
	if n, err := q.PostSendList(wrs); n != 4 || err != nil || posts != 1 {
		t.Fatalf("PostSendList of 4: posted %d, %v, the device told %d times; want 4, nil, once", n, err, posts)
	}
	wrs[2].SGL = []qp.SGE{sge[0], sge[0], sge[0]} // more SGEs than max_send_sge
	if n, err := q.PostSendList(wrs); n != 2 || !errors.Is(err, qp.ErrTooManySGE) || posts != 2 {
		t.Fatalf("PostSendList with a bad 3rd WR: posted %d, %v, the device told %d times; want 2, ErrTooManySGE, twice", n, err, posts)
	}
	// 6 posted of 8: a list of 4 fits 2, then the queue is full.
	wrs[2].SGL = sge
	if n, err := q.PostSendList(wrs); n != 2 || !errors.Is(err, qp.ErrQueueFull) {
		t.Fatalf("PostSendList into a queue with room for 2: posted %d, %v; want 2, ErrQueueFull", n, err)
	}
	if n, err := q.PostSendList(wrs); n != 0 || !errors.Is(err, qp.ErrQueueFull) || posts != 3 {
		t.Fatalf("PostSendList into a full queue: posted %d, %v, the device told %d times; want 0, ErrQueueFull, still 3", n, err, posts)
	}
}

// TestQueueSendList queues lists without telling the device, which Post
// does once for all of them; a bad WR stops a list as PostSendList's.
func TestQueueSendList(t *testing.T) {
	posts := 0
	f := newFixtureWithPost(t, qp.RC, 8, 1, func(*qp.QP) { posts++ })
	q := f.qp
	bring(t, q, qp.StateRTS)
	sge := []qp.SGE{f.sge(0, 16)}
	wrs := make([]qp.SendWR, 3)
	for i := range wrs {
		wrs[i] = qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, SGL: sge}
	}
	for range 2 {
		if n, err := q.QueueSendList(wrs); n != 3 || err != nil || posts != 0 {
			t.Fatalf("QueueSendList of 3: queued %d, %v, the device told %d times; want 3, nil, never", n, err, posts)
		}
	}
	wrs[1].SGL = []qp.SGE{sge[0], sge[0], sge[0]} // more SGEs than max_send_sge
	if n, err := q.QueueSendList(wrs); n != 1 || !errors.Is(err, qp.ErrTooManySGE) || posts != 0 {
		t.Fatalf("QueueSendList with a bad 2nd WR: queued %d, %v, told %d times; want 1, ErrTooManySGE, never", n, err, posts)
	}
	q.Post()
	if posts != 1 {
		t.Fatalf("Post told the device %d times, want once", posts)
	}
	// 7 queued of 8.
	wrs[1].SGL = sge
	if n, err := q.QueueSendList(wrs[:2]); n != 1 || !errors.Is(err, qp.ErrQueueFull) {
		t.Fatalf("QueueSendList into a queue with room for 1: queued %d, %v; want 1, ErrQueueFull", n, err)
	}
}
