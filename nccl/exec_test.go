package nccl

import (
	"slices"
	"testing"

	"github.com/goroce/goroce/nccl/sched"
	"github.com/goroce/goroce/nccl/transport"
)

// streamedSteps runs the executor's plan on every phase of p over the
// given buffers and returns, per phase, which RecvReduce steps it streams.
func streamedSteps(t *testing.T, p *sched.Plan, in, out []byte, esz int) [][]bool {
	t.Helper()
	bufs := [][]byte{in, out, make([]byte, p.ScratchLen*esz)}
	bytesOf := func(r sched.Region) ([]byte, error) { return bufs[r.Buf][r.Off*esz : r.End()*esz], nil }
	var e executor
	var got [][]bool
	for _, ph := range p.Phases {
		if _, err := e.regions(ph, bytesOf); err != nil {
			t.Fatal(err)
		}
		e.plan(ph, true)
		var row []bool
		for i, s := range ph {
			if s.Kind == sched.RecvReduce {
				row = append(row, e.streamed[i])
			}
		}
		got = append(got, row)
	}
	return got
}

// bufferCase is one way of passing buffers to a collective.
type bufferCase struct {
	name    string
	in, out []byte
}

// bufferCases are the out-of-place and in-place calls over in and out.
func bufferCases(in, out []byte) []bufferCase {
	return []bufferCase{{"out of place", in, out}, {"in place", in, in}}
}

// The ring's reductions combine data as it lands, out of place and in
// place; recursive doubling's cannot, since each phase sends the very
// buffer it reduces into, and keeps the staged order.
func TestExecutorStreamsRecvReduce(t *testing.T) {
	const n, count, esz = 4, 1024, 4
	in, out := make([]byte, count*esz), make([]byte, count*esz)
	for _, c := range bufferCases(in, out) {
		p, err := sched.RingAllReduce(1, n, count)
		if err != nil {
			t.Fatal(err)
		}
		reductions := 0
		for k, row := range streamedSteps(t, p, c.in, c.out, esz) {
			for _, s := range row {
				reductions++
				if !s {
					t.Errorf("ring, %s: phase %d's RecvReduce is staged, want streamed", c.name, k)
				}
			}
		}
		if reductions != n-1 {
			t.Errorf("ring, %s: %d reductions, want %d", c.name, reductions, n-1)
		}
	}
	p, err := sched.DoublingAllReduce(1, n, count)
	if err != nil {
		t.Fatal(err)
	}
	for k, row := range streamedSteps(t, p, in, out, esz) {
		for _, s := range row {
			if s {
				t.Errorf("recursive doubling: phase %d's RecvReduce is streamed while the phase sends its bytes", k)
			}
		}
	}
}

// forwardedSends runs the executor's forwarding decision on every pair of
// consecutive phases of p and returns, per phase after the first, which
// of its sends would be posted early, forwarding the phase before.
func forwardedSends(t *testing.T, p *sched.Plan, in, out []byte, esz int) [][]bool {
	t.Helper()
	return postedEarly(t, p, in, out, esz, sched.Send)
}

// prepostedRecvs runs the executor's early-receive decision on every pair
// of consecutive phases of p and returns, per phase after the first, which
// of its receives would be posted during the phase before.
func prepostedRecvs(t *testing.T, p *sched.Plan, in, out []byte, esz int) [][]bool {
	t.Helper()
	return postedEarly(t, p, in, out, esz, sched.Recv)
}

// postedEarly runs the executor's decisions for the steps of kind (Send:
// forward, Recv: prepost) on every pair of consecutive phases of p.
func postedEarly(t *testing.T, p *sched.Plan, in, out []byte, esz int, kind sched.Kind) [][]bool {
	t.Helper()
	bufs := [][]byte{in, out, make([]byte, p.ScratchLen*esz)}
	bytesOf := func(r sched.Region) ([]byte, error) { return bufs[r.Buf][r.Off*esz : r.End()*esz], nil }
	e := executor{t: recordingReceiver{}}
	var got [][]bool
	for k, ph := range p.Phases[:len(p.Phases)-1] {
		if _, err := e.regions(ph, bytesOf); err != nil {
			t.Fatal(err)
		}
		e.plan(ph, true)
		e.stepReqs = e.stepReqs[:0]
		for i := range ph {
			e.stepReqs = append(e.stepReqs, stepRequest{phase: k, step: i})
		}
		e.early = append(e.early[:0], make([]transport.Request, len(p.Phases[k+1]))...)
		if kind == sched.Send {
			e.forward(recordingForwarder{}, ph, p.Phases[k+1], bytesOf)
		} else if _, err := e.prepost(ph, p.Phases[k+1], bytesOf); err != nil {
			t.Fatal(err)
		}
		var row []bool
		for j, s := range p.Phases[k+1] {
			if s.Kind == kind {
				row = append(row, e.early[j] != nil)
			}
		}
		got = append(got, row)
	}
	return got
}

// recordingForwarder accepts every IsendAfter.
type recordingForwarder struct{}

func (recordingForwarder) IsendAfter(peer int, data []byte, after transport.Request) (transport.Request, error) {
	return after, nil
}

// stepRequest stands for the request of one step, for forwardedSends.
type stepRequest struct{ phase, step int }

func (stepRequest) Test() (bool, error) { return false, nil }
func (stepRequest) Peer() int           { return 0 }

// The ring passes every block on as it lands: each send after the first
// forwards the reduction (or receive) of the phase before, as NCCL's
// recvReduceSend and recvCopySend do. Recursive doubling sends whole
// buffers that the phase before reduced after landing (staged), and
// forwards nothing.
func TestExecutorForwardsRing(t *testing.T) {
	const n, count, esz = 4, 1024, 4
	in, out := make([]byte, count*esz), make([]byte, count*esz)
	for _, c := range bufferCases(in, out) {
		p, err := sched.RingAllReduce(2, n, count)
		if err != nil {
			t.Fatal(err)
		}
		rows := forwardedSends(t, p, c.in, c.out, esz)
		if len(rows) != 2*(n-1)-1 {
			t.Fatalf("ring, %s: %d phases after the first, want %d", c.name, len(rows), 2*(n-1)-1)
		}
		for k, row := range rows {
			if len(row) != 1 || !row[0] {
				t.Errorf("ring, %s: phase %d's send %v, want forwarded", c.name, k+1, row)
			}
		}
	}
	p, err := sched.DoublingAllReduce(2, n, count)
	if err != nil {
		t.Fatal(err)
	}
	for k, row := range forwardedSends(t, p, in, out, esz) {
		for _, f := range row {
			if f {
				t.Errorf("recursive doubling: phase %d forwards a staged reduction", k+1)
			}
		}
	}
}

// A send is not forwarded when the next phase also writes its bytes, nor
// when another send to the same peer comes before it in that phase.
func TestExecutorForwardKeepsOrder(t *testing.T) {
	const esz = 1
	in, out := make([]byte, 64), make([]byte, 64)
	a, b := sched.Region{Buf: sched.Output, Off: 0, Len: 32}, sched.Region{Buf: sched.Output, Off: 32, Len: 32}
	recvA := sched.Phase{{Kind: sched.Recv, Peer: 1, Dst: a}, {Kind: sched.Recv, Peer: 2, Dst: b}}
	for _, c := range []struct {
		name string
		next sched.Phase
		want []bool
	}{
		{"alone", sched.Phase{{Kind: sched.Send, Peer: 2, Src: a}}, []bool{true}},
		{"its bytes rewritten", sched.Phase{{Kind: sched.Send, Peer: 2, Src: a}, {Kind: sched.Recv, Peer: 1, Dst: a}}, []bool{false}},
		{"behind another send", sched.Phase{{Kind: sched.Send, Peer: 2, Src: b}, {Kind: sched.Send, Peer: 2, Src: a}}, []bool{true, false}},
		{"part of a receive", sched.Phase{{Kind: sched.Send, Peer: 2, Src: sched.Region{Buf: sched.Output, Off: 0, Len: 16}}}, []bool{false}},
	} {
		p := &sched.Plan{Rank: 0, Size: 3, InputLen: 64, OutputLen: 64, Phases: []sched.Phase{recvA, c.next}}
		if got := forwardedSends(t, p, in, out, esz)[0]; !slices.Equal(got, c.want) {
			t.Errorf("%s: forwarded %v, want %v", c.name, got, c.want)
		}
	}
}

// recordingReceiver accepts every Irecv; nothing else of it is used.
type recordingReceiver struct{ transport.Transport }

func (recordingReceiver) Irecv(peer int, buf []byte) (transport.Request, error) {
	return stepRequest{}, nil
}

// The ring's all-gather receives are posted a phase early, where no step
// of that phase touches their bytes: with 4 ranks in place and out of
// place; with 2 ranks out of place only, since in place the reduce-scatter
// sends the very bytes the all-gather receives. Recursive doubling's
// phases reduce into the buffer they send, and nothing is posted early.
func TestExecutorPrepostsRing(t *testing.T) {
	const count, esz = 1024, 4
	in, out := make([]byte, count*esz), make([]byte, count*esz)
	for _, n := range []int{2, 4} {
		for _, c := range bufferCases(in, out) {
			p, err := sched.RingAllReduce(1, n, count)
			if err != nil {
				t.Fatal(err)
			}
			want := n > 2 || c.name == "out of place"
			for k, row := range prepostedRecvs(t, p, c.in, c.out, esz) {
				gather := k+1 >= n-1 // phases 0 … n-2 reduce-scatter, then the all-gather
				if gather != (len(row) == 1) {
					t.Fatalf("ring %d ranks, %s: phase %d has receives %v", n, c.name, k+1, row)
				}
				if gather && row[0] != want {
					t.Errorf("ring %d ranks, %s: phase %d's receive posted early: %v, want %v", n, c.name, k+1, row[0], want)
				}
			}
		}
	}
	p, err := sched.DoublingAllReduce(0, 3, count)
	if err != nil {
		t.Fatal(err)
	}
	for k, row := range prepostedRecvs(t, p, in, out, esz) {
		if slices.Contains(row, true) {
			t.Errorf("recursive doubling: phase %d's receive posted early", k+1)
		}
	}
}

// A receive is not posted early when a step of the phase before or of
// its own phase touches its bytes, nor behind another receive from the
// same peer.
func TestExecutorPrepostKeepsOrder(t *testing.T) {
	const esz = 1
	in, out := make([]byte, 64), make([]byte, 64)
	a, b := sched.Region{Buf: sched.Output, Off: 0, Len: 32}, sched.Region{Buf: sched.Output, Off: 32, Len: 32}
	for _, c := range []struct {
		name      string
		now, next sched.Phase
		want      []bool
	}{
		{"alone", sched.Phase{{Kind: sched.Send, Peer: 1, Src: b}},
			sched.Phase{{Kind: sched.Recv, Peer: 1, Dst: a}}, []bool{true}},
		{"sent now", sched.Phase{{Kind: sched.Send, Peer: 2, Src: a}},
			sched.Phase{{Kind: sched.Recv, Peer: 1, Dst: a}}, []bool{false}},
		{"received now", sched.Phase{{Kind: sched.Recv, Peer: 2, Dst: sched.Region{Buf: sched.Output, Off: 16, Len: 32}}},
			sched.Phase{{Kind: sched.Recv, Peer: 1, Dst: a}}, []bool{false}},
		{"copied from next", sched.Phase{{Kind: sched.Send, Peer: 1, Src: b}},
			sched.Phase{{Kind: sched.Copy, Src: a, Dst: b}, {Kind: sched.Recv, Peer: 1, Dst: a}}, []bool{false}},
		{"reduced from next", sched.Phase{{Kind: sched.Send, Peer: 1, Src: b}},
			sched.Phase{{Kind: sched.Recv, Peer: 1, Dst: a}, {Kind: sched.RecvReduce, Peer: 2, Src: a, Dst: b}}, []bool{false}},
		{"behind another receive", sched.Phase{{Kind: sched.Send, Peer: 2, Src: sched.Region{Buf: sched.Input, Len: 8}}},
			sched.Phase{{Kind: sched.Recv, Peer: 1, Dst: b}, {Kind: sched.Recv, Peer: 1, Dst: a}}, []bool{true, false}},
	} {
		p := &sched.Plan{Rank: 0, Size: 3, InputLen: 64, OutputLen: 64, Phases: []sched.Phase{c.now, c.next}}
		if got := prepostedRecvs(t, p, in, out, esz)[0]; !slices.Equal(got, c.want) {
			t.Errorf("%s: posted early %v, want %v", c.name, got, c.want)
		}
	}
}
