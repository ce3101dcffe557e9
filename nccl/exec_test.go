package nccl

import (
	"testing"

	"github.com/goroce/goroce/nccl/sched"
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

// The ring's reductions combine data as it lands, out of place and in
// place; recursive doubling's cannot, since each phase sends the very
// buffer it reduces into, and keeps the staged order.
func TestExecutorStreamsRecvReduce(t *testing.T) {
	const n, count, esz = 4, 1024, 4
	in, out := make([]byte, count*esz), make([]byte, count*esz)
	for _, c := range []struct {
		name    string
		in, out []byte
	}{{"out of place", in, out}, {"in place", in, in}} {
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
