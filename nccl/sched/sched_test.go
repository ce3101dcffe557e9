package sched

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/goroce/goroce/nccl/reduce"
)

// counts returns the element counts to try with n ranks: 0, 1, small,
// not divisible by n, and random.
func counts(r *rand.Rand, n int) []int {
	return []int{0, 1, 2, n - 1, n + 1, 2*n + 1, 13, 1 + r.IntN(200)}
}

// fill returns count random int64 values (small, so sums never overflow).
func fill(r *rand.Rand, count int) []byte {
	b := make([]byte, 8*count)
	for i := 0; i < count; i++ {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(r.Int64N(1000)-500))
	}
	return b
}

func sumOf(ins [][]byte, lo, hi int) []byte {
	out := make([]byte, 8*(hi-lo))
	for _, in := range ins {
		for i := lo; i < hi; i++ {
			v := binary.LittleEndian.Uint64(out[8*(i-lo):]) + binary.LittleEndian.Uint64(in[8*i:])
			binary.LittleEndian.PutUint64(out[8*(i-lo):], v)
		}
	}
	return out
}

type builderFunc func(rank, n, root, count int) (*Plan, error)

// collective describes one collective for the table test: how to build a
// rank's plan, the per-rank input length, and the expected outputs.
type collective struct {
	name   string
	build  builderFunc
	inLen  func(n, count int) int
	expect func(ins [][]byte, n, root, count int) [][]byte // nil entry: output unused
	// inPlace says where rank r's Input sits inside its Output (element
	// offset), or -1 if the collective has no in-place form for rank r.
	inPlace func(rank, n, root, count int) int
}

// allReduce describes an AllReduce algorithm for the table test: every
// rank ends with the sum of all inputs, in place or not.
func allReduce(name string, build builderFunc) collective {
	return collective{
		name:  name,
		build: build,
		inLen: func(_, c int) int { return c },
		expect: func(ins [][]byte, n, _, c int) [][]byte {
			out := make([][]byte, n)
			for i := range out {
				out[i] = sumOf(ins, 0, c)
			}
			return out
		},
		inPlace: func(int, int, int, int) int { return 0 },
	}
}

var collectives = []collective{
	allReduce("RingAllReduce", func(r, n, _, c int) (*Plan, error) { return RingAllReduce(r, n, c) }),
	allReduce("RingAllReduceChunked", func(r, n, _, c int) (*Plan, error) { return RingAllReduceChunked(r, n, c, 2) }),
	allReduce("DoublingAllReduce", func(r, n, _, c int) (*Plan, error) { return DoublingAllReduce(r, n, c) }),
	{
		name:  "RingReduceScatter",
		build: func(r, n, _, c int) (*Plan, error) { return RingReduceScatter(r, n, c) },
		inLen: func(n, c int) int { return n * c },
		expect: func(ins [][]byte, n, _, c int) [][]byte {
			out := make([][]byte, n)
			for i := range out {
				out[i] = sumOf(ins, i*c, (i+1)*c)
			}
			return out
		},
		inPlace: func(int, int, int, int) int { return -1 }, // Output inside Input: see test
	},
	{
		name:  "RingAllGather",
		build: func(r, n, _, c int) (*Plan, error) { return RingAllGather(r, n, c) },
		inLen: func(_, c int) int { return c },
		expect: func(ins [][]byte, n, _, c int) [][]byte {
			all := bytes.Join(ins, nil)
			out := make([][]byte, n)
			for i := range out {
				out[i] = all
			}
			return out
		},
		inPlace: func(r, _, _, c int) int { return r * c },
	},
	{
		name:  "ChainBroadcast",
		build: func(r, n, root, c int) (*Plan, error) { return ChainBroadcast(r, n, root, c, 3) },
		inLen: func(_, c int) int { return c },
		expect: func(ins [][]byte, n, root, _ int) [][]byte {
			out := make([][]byte, n)
			for i := range out {
				out[i] = ins[root]
			}
			return out
		},
		inPlace: func(int, int, int, int) int { return 0 },
	},
	{
		name:  "ChainReduce",
		build: func(r, n, root, c int) (*Plan, error) { return ChainReduce(r, n, root, c, 3) },
		inLen: func(_, c int) int { return c },
		expect: func(ins [][]byte, n, root, c int) [][]byte {
			out := make([][]byte, n)
			out[root] = sumOf(ins, 0, c)
			return out
		},
		inPlace: func(r, _, root, _ int) int {
			if r == root {
				return 0
			}
			return -1
		},
	},
	{
		name:  "PairwiseAlltoAll",
		build: func(r, n, _, c int) (*Plan, error) { return PairwiseAlltoAll(r, n, c) },
		inLen: func(n, c int) int { return n * c },
		expect: func(ins [][]byte, n, _, c int) [][]byte {
			out := make([][]byte, n)
			for j := range out {
				for i := range n {
					out[j] = append(out[j], ins[i][8*j*c:8*(j+1)*c]...)
				}
			}
			return out
		},
		inPlace: func(int, int, int, int) int { return -1 },
	},
	{
		name:  "Gather",
		build: func(r, n, root, c int) (*Plan, error) { return Gather(r, n, root, c) },
		inLen: func(_, c int) int { return c },
		expect: func(ins [][]byte, n, root, _ int) [][]byte {
			out := make([][]byte, n)
			out[root] = bytes.Join(ins, nil)
			return out
		},
		inPlace: func(r, _, root, c int) int {
			if r == root {
				return root * c
			}
			return -1
		},
	},
	{
		name:  "Scatter",
		build: func(r, n, root, c int) (*Plan, error) { return Scatter(r, n, root, c) },
		inLen: func(n, c int) int { return n * c },
		expect: func(ins [][]byte, n, root, c int) [][]byte {
			out := make([][]byte, n)
			for i := range out {
				out[i] = ins[root][8*i*c : 8*(i+1)*c]
			}
			return out
		},
		inPlace: func(int, int, int, int) int { return -1 },
	},
}

// TestSchedules runs every collective's plans in memory for 1 to 8 ranks,
// every root, and counts including 0, 1 and counts not divisible by n,
// out of place and (where the collective has one) in place, and compares
// with a direct computation.
func TestSchedules(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range collectives {
		t.Run(c.name, func(t *testing.T) {
			for n := 1; n <= 8; n++ {
				for _, count := range counts(rng, n) {
					for root := range n {
						for _, inPlace := range []bool{false, true} {
							name := fmt.Sprintf("n=%d count=%d root=%d inPlace=%v", n, count, root, inPlace)
							if err := runCollective(c, rng, n, root, count, inPlace); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
						}
					}
				}
			}
		})
	}
}

func runCollective(c collective, rng *rand.Rand, n, root, count int, inPlace bool) error {
	ins := make([][]byte, n)
	ranks := make([]simRank, n)
	for r := range n {
		ins[r] = fill(rng, c.inLen(n, count))
		p, err := c.build(r, n, root, count)
		if err != nil {
			return err
		}
		if p.InputLen > len(ins[r])/8 {
			return fmt.Errorf("rank %d plan wants %d input elements, has %d", r, p.InputLen, len(ins[r])/8)
		}
		ranks[r].plan = p
		in := bytes.Clone(ins[r])
		out := make([]byte, 8*p.OutputLen)
		if inPlace {
			switch off := c.inPlace(r, n, root, count); {
			case off >= 0 && p.OutputLen > 0:
				copy(out[8*off:], in[:8*p.InputLen])
				in = out[8*off : 8*(off+p.InputLen)]
			case c.name == "RingReduceScatter":
				out = in[8*r*count : 8*(r+1)*count]
			case c.name == "Scatter" && r == root:
				out = in[8*root*count : 8*(root+1)*count]
			}
		}
		ranks[r].bufs[Input], ranks[r].bufs[Output] = in, out
	}
	if err := simulate(ranks, reduce.Int64, reduce.Sum); err != nil {
		return err
	}
	want := c.expect(ins, n, root, count)
	for r := range n {
		if want[r] == nil {
			continue
		}
		if got := ranks[r].bufs[Output]; !bytes.Equal(got, want[r]) {
			return fmt.Errorf("rank %d output\n got %v\nwant %v", r, ints(got), ints(want[r]))
		}
	}
	return nil
}

func ints(b []byte) []int64 {
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

// Both AllReduce algorithms leave every rank with the same bits for
// floating-point data, where the order of reduction matters.
func TestAllReduceBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	chunked := func(r, n, c int) (*Plan, error) { return RingAllReduceChunked(r, n, c, 3) }
	for _, build := range []func(int, int, int) (*Plan, error){RingAllReduce, chunked, DoublingAllReduce} {
		for _, dt := range []reduce.DataType{reduce.Float32, reduce.Float16, reduce.BFloat16, reduce.Float64} {
			for n := 2; n <= 8; n++ {
				count := 1 + rng.IntN(50)
				ranks := make([]simRank, n)
				for r := range n {
					p, err := build(r, n, count)
					if err != nil {
						t.Fatal(err)
					}
					in := make([]byte, count*dt.Size())
					for i := range in {
						in[i] = byte(rng.Uint32())
					}
					if dt == reduce.Float32 { // no NaNs: their payloads may differ
						for i := 3; i < len(in); i += 4 {
							in[i] &= 0x3F
						}
					} else if dt == reduce.Float64 {
						for i := 7; i < len(in); i += 8 {
							in[i] &= 0x3F
						}
					} else {
						for i := 1; i < len(in); i += 2 {
							in[i] &= 0x3F
						}
					}
					ranks[r] = simRank{plan: p, bufs: [3][]byte{in, make([]byte, len(in))}}
				}
				if err := simulate(ranks, dt, reduce.Sum); err != nil {
					t.Fatal(err)
				}
				for r := 1; r < n; r++ {
					if !bytes.Equal(ranks[r].bufs[Output], ranks[0].bufs[Output]) {
						t.Fatalf("%v n=%d: rank %d differs from rank 0", dt, n, r)
					}
				}
			}
		}
	}
}

func TestBuilderMisuse(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func() (*Plan, error)
	}{
		{"no ranks", func() (*Plan, error) { return RingAllReduce(0, 0, 1) }},
		{"rank too big", func() (*Plan, error) { return RingAllGather(4, 4, 1) }},
		{"negative count", func() (*Plan, error) { return DoublingAllReduce(0, 2, -1) }},
		{"bad root", func() (*Plan, error) { return ChainBroadcast(0, 2, 2, 1, 0) }},
	} {
		if _, err := c.f(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	bad := &Plan{Rank: 0, Size: 2, InputLen: 4, OutputLen: 4, Phases: []Phase{{
		{Kind: Send, Peer: 1, Src: Region{Output, 0, 4}},
		{Kind: Recv, Peer: 1, Dst: Region{Output, 2, 2}},
	}}}
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("recv over a send source: %v", err)
	}
	bad.Phases = []Phase{{{Kind: Send, Peer: 0, Src: Region{Input, 0, 4}}}}
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("send to self: %v", err)
	}
	bad.Phases = []Phase{{{Kind: Send, Peer: 1, Src: Region{Input, 2, 4}}}}
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("source past the end: %v", err)
	}
}

// The phase counts are those of the algorithms: 2(n-1) for the ring
// AllReduce, log2 n for recursive doubling.
func TestPhaseCounts(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func() (*Plan, error)
		want int
	}{
		{"ring allreduce n=8", func() (*Plan, error) { return RingAllReduce(3, 8, 800) }, 14},
		{"doubling n=8", func() (*Plan, error) { return DoublingAllReduce(3, 8, 800) }, 3},
		{"doubling n=6 rank 1", func() (*Plan, error) { return DoublingAllReduce(1, 6, 800) }, 4},
		{"doubling n=6 rank 5", func() (*Plan, error) { return DoublingAllReduce(5, 6, 800) }, 2},
		{"alltoall n=5", func() (*Plan, error) { return PairwiseAlltoAll(0, 5, 10) }, 4},
		{"broadcast n=4 middle, 10 slices", func() (*Plan, error) { return ChainBroadcast(1, 4, 0, 100, 10) }, 11},
	} {
		p, err := c.f()
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Phases) != c.want {
			t.Errorf("%s: %d phases, want %d", c.name, len(p.Phases), c.want)
		}
	}
}

// The chunked ring runs one ring per slice of n×chunk elements, in order;
// a chunk that covers the buffer gives RingAllReduce's plan.
func TestRingAllReduceChunkedSlices(t *testing.T) {
	const n, count = 4, 100
	whole, err := RingAllReduce(1, n, count)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ chunk, slices int }{{0, 1}, {25, 1}, {1000, 1}, {10, 3}, {5, 5}, {1, 25}} {
		p, err := RingAllReduceChunked(1, n, count, c.chunk)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("chunk %d: %v", c.chunk, err)
		}
		if got, want := len(p.Phases), c.slices*2*(n-1); got != want {
			t.Errorf("chunk %d: %d phases, want %d (%d slices)", c.chunk, got, want, c.slices)
		}
		if c.slices == 1 && !reflect.DeepEqual(p, whole) {
			t.Errorf("chunk %d: one slice differs from RingAllReduce", c.chunk)
		}
	}
}
