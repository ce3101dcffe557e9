package reduce_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/goroce/goroce/nccl/reduce"
	"github.com/goroce/goroce/nccl/reduce/reference"
)

// Apply and Divide, folded over the ranks as a collective would, give the
// bits of the plain reference for every type and op, on random operands:
// every integer bit pattern, and every float pattern but NaN (subnormals,
// infinities, overflow and inexact sums included). Buffers start at odd
// and even offsets, so the aligned fast paths and the byte loop both run.
func TestApplyMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 5))
	for _, dt := range reduce.DataTypes {
		for _, op := range reduce.Ops {
			for _, n := range []int{2, 3, 5} {
				for _, off := range []int{0, 1} {
					const count = 257
					w := dt.Size()
					ins := make([][]byte, n)
					for r := range ins {
						ins[r] = make([]byte, count*w)
						for i := 0; i < count*w; i += w {
							randomElement(rng, ins[r][i:i+w], dt)
						}
					}
					want, err := reference.Reduce(ins, dt, op)
					if err != nil {
						t.Fatal(err)
					}
					acc := make([]byte, off+count*w)[off:]
					copy(acc, ins[0])
					for _, in := range ins[1:] {
						if err := reduce.Apply(acc, in, dt, op); err != nil {
							t.Fatal(err)
						}
					}
					if op == reduce.Avg {
						if err := reduce.Divide(acc, dt, n); err != nil {
							t.Fatal(err)
						}
					}
					if i := firstDifference(acc, want, dt); i >= 0 {
						var ops []string
						for _, in := range ins {
							ops = append(ops, fmt.Sprintf("% x", in[i*w:(i+1)*w]))
						}
						t.Fatalf("%v %v over %d ranks (offset %d), element %d of %v: got % x, the reference % x",
							dt, op, n, off, i, ops, acc[i*w:(i+1)*w], want[i*w:(i+1)*w])
					}
				}
			}
		}
	}
}

// randomElement writes random bits of one element of dt into b, never a
// NaN (whose payload the two may carry differently).
func randomElement(rng *rand.Rand, b []byte, dt reduce.DataType) {
	for {
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		if !isNaN(b, dt) {
			return
		}
	}
}

func isNaN(b []byte, dt reduce.DataType) bool {
	le := func() uint64 {
		var v uint64
		for k := len(b) - 1; k >= 0; k-- {
			v = v<<8 | uint64(b[k])
		}
		return v
	}
	switch dt {
	case reduce.Float16:
		return math.IsNaN(reference.Float16Value(uint16(le())))
	case reduce.BFloat16:
		return math.IsNaN(reference.BFloat16Value(uint16(le())))
	case reduce.Float32:
		return math.IsNaN(float64(math.Float32frombits(uint32(le()))))
	case reduce.Float64:
		return math.IsNaN(math.Float64frombits(le()))
	}
	return false
}

// firstDifference returns the first element whose bits differ, with two
// NaNs counted as equal, or -1.
func firstDifference(got, want []byte, dt reduce.DataType) int {
	w := dt.Size()
	for i := 0; i < len(want); i += w {
		g, x := got[i:i+w], want[i:i+w]
		if string(g) != string(x) && !(isNaN(g, dt) && isNaN(x, dt)) {
			return i / w
		}
	}
	return -1
}
