package sched

import (
	"bytes"
	"fmt"

	"github.com/goroce/goroce/nccl/reduce"
)

// simRank is one rank's buffers in a simulation.
type simRank struct {
	plan *Plan
	bufs [3][]byte // Input, Output, Scratch
}

// simulate runs the ranks' plans in one goroutine with unbounded message
// queues, following the package's execution model, and reports a deadlock,
// a mismatched message or a leftover message as an error.
func simulate(ranks []simRank, dt reduce.DataType, op reduce.Op) error {
	esz := dt.Size()
	n := len(ranks)
	bytesOf := func(r *simRank, reg Region) []byte {
		return r.bufs[reg.Buf][reg.Off*esz : reg.End()*esz]
	}
	queue := make(map[[2]int][][]byte) // {from, to} → messages in order
	phase := make([]int, n)
	posted := make([]bool, n)
	for r := range ranks {
		if err := ranks[r].plan.Validate(); err != nil {
			return err
		}
		ranks[r].bufs[Scratch] = make([]byte, ranks[r].plan.ScratchLen*esz)
	}
	for {
		progress, done := false, 0
		for r := range ranks {
			rk := &ranks[r]
			if phase[r] == len(rk.plan.Phases) {
				done++
				continue
			}
			ph := rk.plan.Phases[phase[r]]
			if !posted[r] {
				for _, s := range ph {
					if s.Kind == Copy {
						copy(bytesOf(rk, s.Dst), bytesOf(rk, s.Src))
					}
				}
				for _, s := range ph {
					if s.Kind == Send {
						k := [2]int{r, s.Peer}
						queue[k] = append(queue[k], bytes.Clone(bytesOf(rk, s.Src)))
					}
				}
				posted[r], progress = true, true
			}
			need := map[int]int{}
			for _, s := range ph {
				if s.Kind == Recv || s.Kind == RecvReduce {
					need[s.Peer]++
				}
			}
			ready := true
			for p, c := range need {
				if len(queue[[2]int{p, r}]) < c {
					ready = false
				}
			}
			if !ready {
				continue
			}
			var reduces [][]byte
			for _, s := range ph {
				if s.Kind != Recv && s.Kind != RecvReduce {
					continue
				}
				k := [2]int{s.Peer, r}
				msg := queue[k][0]
				queue[k] = queue[k][1:]
				if len(msg) != s.Dst.Len*esz {
					return fmt.Errorf("rank %d phase %d: %v got %d bytes", r, phase[r], s, len(msg))
				}
				if s.Kind == Recv {
					copy(bytesOf(rk, s.Dst), msg)
				} else {
					reduces = append(reduces, msg)
				}
			}
			for _, s := range ph {
				if s.Kind == RecvReduce {
					acc := bytes.Clone(bytesOf(rk, s.Src))
					if err := reduce.Apply(acc, reduces[0], dt, op); err != nil {
						return err
					}
					reduces = reduces[1:]
					copy(bytesOf(rk, s.Dst), acc)
				}
			}
			phase[r]++
			posted[r], progress = false, true
		}
		if done == n {
			break
		}
		if !progress {
			return fmt.Errorf("deadlock: phases %v", phase)
		}
	}
	for k, q := range queue {
		if len(q) > 0 {
			return fmt.Errorf("%d messages from %d to %d never received", len(q), k[0], k[1])
		}
	}
	return nil
}
