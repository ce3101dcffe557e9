package nccl

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/goroce/goroce/nccl/reduce"
)

// matrixCase is one collective of the matrix: it issues the operation on
// every rank with fresh data and checks the outputs against a reference.
type matrixCase struct {
	name    string
	reduces bool // takes an op
	run     func(t testing.TB, comms []*Comm, rng *rand.Rand, dt DataType, op Op, count int, inPlace bool)
}

var matrix = []matrixCase{
	{"AllReduce", true, testAllReduce},
	{"Reduce", true, testReduce},
	{"ReduceScatter", true, testReduceScatter},
	{"Broadcast", false, testBroadcast},
	{"AllGather", false, testAllGather},
	{"AlltoAll", false, testAlltoAll},
	{"Gather", false, testGather},
	{"Scatter", false, testScatter},
}

// TestCollectivesMem runs every collective × every data type × every op ×
// 1 to 8 ranks × counts 0, 1, uneven and larger, in place and out of
// place, over the in-memory transport, with both AllReduce algorithms.
func TestCollectivesMem(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, algo := range []Algo{AlgoRing, AlgoRecursiveDoubling} {
		for n := 1; n <= 8; n++ {
			comms := memComms(t, n, Options{Algo: algo, SliceBytes: 24})
			for _, mc := range matrix {
				if algo == AlgoRecursiveDoubling && mc.name != "AllReduce" {
					continue
				}
				ops := []Op{Sum}
				if mc.reduces {
					ops = reduce.Ops
				}
				for _, dt := range reduce.DataTypes {
					for _, op := range ops {
						for _, count := range []int{0, 1, n + 3, 100 + rng.IntN(200)} {
							for _, inPlace := range []bool{false, true} {
								name := fmt.Sprintf("%v/%s/n=%d/%v/%v/count=%d/inPlace=%v", algo, mc.name, n, dt, op, count, inPlace)
								t.Run(name, func(t *testing.T) { mc.run(t, comms, rng, dt, op, count, inPlace) })
								if t.Failed() {
									return
								}
							}
						}
					}
				}
			}
		}
	}
}

func inputs(rng *rand.Rand, n int, dt DataType, op Op, count int) [][]byte {
	ins := make([][]byte, n)
	for r := range ins {
		ins[r] = exactValues(rng, dt, op, count)
	}
	return ins
}

func testAllReduce(t testing.TB, comms []*Comm, rng *rand.Rand, dt DataType, op Op, count int, inPlace bool) {
	n := len(comms)
	ins := inputs(rng, n, dt, op, count)
	want := expected(t, ins, dt, op)
	outs := make([][]byte, n)
	mustAll(t, "AllReduce", onAll(t, comms, func(r int, c *Comm) *Request {
		send := bytes.Clone(ins[r])
		outs[r] = make([]byte, len(send))
		if inPlace {
			outs[r] = send
		}
		return c.AllReduce(send, outs[r], count, dt, op)
	}))
	for r := range n {
		if !bytes.Equal(outs[r], want) {
			t.Fatalf("rank %d: got % x\nwant % x", r, outs[r], want)
		}
	}
}

func testReduce(t testing.TB, comms []*Comm, rng *rand.Rand, dt DataType, op Op, count int, inPlace bool) {
	n := len(comms)
	ins := inputs(rng, n, dt, op, count)
	want := expected(t, ins, dt, op)
	root := rng.IntN(n)
	var out []byte
	mustAll(t, "Reduce", onAll(t, comms, func(r int, c *Comm) *Request {
		send := bytes.Clone(ins[r])
		var recv []byte
		if r == root {
			recv = make([]byte, len(send))
			if inPlace {
				recv = send
			}
			out = recv
		}
		return c.Reduce(send, recv, count, dt, op, root)
	}))
	if !bytes.Equal(out, want) {
		t.Fatalf("root %d: got % x\nwant % x", root, out, want)
	}
}

func testReduceScatter(t testing.TB, comms []*Comm, rng *rand.Rand, dt DataType, op Op, count int, inPlace bool) {
	n, esz := len(comms), dt.Size()
	ins := inputs(rng, n, dt, op, n*count)
	want := expected(t, ins, dt, op)
	outs := make([][]byte, n)
	mustAll(t, "ReduceScatter", onAll(t, comms, func(r int, c *Comm) *Request {
		send := bytes.Clone(ins[r])
		outs[r] = make([]byte, count*esz)
		if inPlace {
			outs[r] = send[r*count*esz : (r+1)*count*esz]
		}
		return c.ReduceScatter(send, outs[r], count, dt, op)
	}))
	for r := range n {
		if w := want[r*count*esz : (r+1)*count*esz]; !bytes.Equal(outs[r], w) {
			t.Fatalf("rank %d: got % x\nwant % x", r, outs[r], w)
		}
	}
}

func testBroadcast(t testing.TB, comms []*Comm, rng *rand.Rand, dt DataType, _ Op, count int, inPlace bool) {
	n := len(comms)
	ins := inputs(rng, n, dt, Sum, count)
	root := rng.IntN(n)
	outs := make([][]byte, n)
	mustAll(t, "Broadcast", onAll(t, comms, func(r int, c *Comm) *Request {
		send := bytes.Clone(ins[r])
		outs[r] = make([]byte, len(send))
		if inPlace {
			outs[r] = send
		}
		return c.Broadcast(send, outs[r], count, dt, root)
	}))
	for r := range n {
		if !bytes.Equal(outs[r], ins[root]) {
			t.Fatalf("rank %d: got % x\nwant % x", r, outs[r], ins[root])
		}
	}
}

func testAllGather(t testing.TB, comms []*Comm, rng *rand.Rand, dt DataType, _ Op, count int, inPlace bool) {
	n, esz := len(comms), dt.Size()
	ins := inputs(rng, n, dt, Sum, count)
	want := bytes.Join(ins, nil)
	outs := make([][]byte, n)
	mustAll(t, "AllGather", onAll(t, comms, func(r int, c *Comm) *Request {
		outs[r] = make([]byte, n*count*esz)
		send := bytes.Clone(ins[r])
		if inPlace {
			send = outs[r][r*count*esz : (r+1)*count*esz]
			copy(send, ins[r])
		}
		return c.AllGather(send, outs[r], count, dt)
	}))
	for r := range n {
		if !bytes.Equal(outs[r], want) {
			t.Fatalf("rank %d: got % x\nwant % x", r, outs[r], want)
		}
	}
}

func testAlltoAll(t testing.TB, comms []*Comm, rng *rand.Rand, dt DataType, _ Op, count int, inPlace bool) {
	n, bs := len(comms), count*dt.Size()
	ins := inputs(rng, n, dt, Sum, n*count)
	outs := make([][]byte, n)
	mustAll(t, "AlltoAll", onAll(t, comms, func(r int, c *Comm) *Request {
		send := bytes.Clone(ins[r])
		outs[r] = make([]byte, len(send))
		if inPlace {
			outs[r] = send
		}
		return c.AlltoAll(send, outs[r], count, dt)
	}))
	for j := range n {
		for i := range n {
			if got, want := outs[j][i*bs:(i+1)*bs], ins[i][j*bs:(j+1)*bs]; !bytes.Equal(got, want) {
				t.Fatalf("rank %d block %d: got % x\nwant % x", j, i, got, want)
			}
		}
	}
}

func testGather(t testing.TB, comms []*Comm, rng *rand.Rand, dt DataType, _ Op, count int, inPlace bool) {
	n, bs := len(comms), count*dt.Size()
	ins := inputs(rng, n, dt, Sum, count)
	root := rng.IntN(n)
	var out []byte
	mustAll(t, "Gather", onAll(t, comms, func(r int, c *Comm) *Request {
		send := bytes.Clone(ins[r])
		if r != root {
			return c.Gather(send, nil, count, dt, root)
		}
		out = make([]byte, n*bs)
		if inPlace {
			send = out[r*bs : (r+1)*bs]
			copy(send, ins[r])
		}
		return c.Gather(send, out, count, dt, root)
	}))
	if want := bytes.Join(ins, nil); !bytes.Equal(out, want) {
		t.Fatalf("root %d: got % x\nwant % x", root, out, want)
	}
}

func testScatter(t testing.TB, comms []*Comm, rng *rand.Rand, dt DataType, _ Op, count int, inPlace bool) {
	n, bs := len(comms), count*dt.Size()
	root := rng.IntN(n)
	in := exactValues(rng, dt, Sum, n*count)
	outs := make([][]byte, n)
	mustAll(t, "Scatter", onAll(t, comms, func(r int, c *Comm) *Request {
		var send []byte
		outs[r] = make([]byte, bs)
		if r == root {
			send = bytes.Clone(in)
			if inPlace {
				outs[r] = send[r*bs : (r+1)*bs]
			}
		}
		return c.Scatter(send, outs[r], count, dt, root)
	}))
	for r := range n {
		if want := in[r*bs : (r+1)*bs]; !bytes.Equal(outs[r], want) {
			t.Fatalf("rank %d: got % x\nwant % x", r, outs[r], want)
		}
	}
}

// AllReduce of random floats (reduction order matters) leaves the same
// bits on every rank, with either algorithm.
func TestAllReduceBitIdenticalMem(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, algo := range []Algo{AlgoRing, AlgoRecursiveDoubling} {
		for _, n := range []int{3, 5, 8} {
			comms := memComms(t, n, Options{Algo: algo})
			for _, dt := range []DataType{Float16, BFloat16, Float32, Float64} {
				for _, op := range []Op{Sum, Prod, Avg} {
					count := 1 + rng.IntN(300)
					outs := make([][]byte, n)
					mustAll(t, "AllReduce", onAll(t, comms, func(r int, c *Comm) *Request {
						in := make([]byte, count*dt.Size())
						for i := 0; i < count; i++ {
							reduce.PutInt(in[i*dt.Size():], dt, 0)
							f := rng.NormFloat64() * 100
							putFloat(in[i*dt.Size():], dt, f)
						}
						outs[r] = make([]byte, len(in))
						return c.AllReduce(in, outs[r], count, dt, op)
					}))
					for r := 1; r < n; r++ {
						if !bytes.Equal(outs[r], outs[0]) {
							t.Fatalf("%v n=%d %v %v: rank %d differs from rank 0", algo, n, dt, op, r)
						}
					}
				}
			}
		}
	}
}

func TestGroupSendRecvRing(t *testing.T) {
	const n = 5
	comms := memComms(t, n, Options{})
	outs := make([][]byte, n)
	mustAll(t, "group", onAll(t, comms, func(r int, c *Comm) *Request {
		c.GroupStart()
		// Every rank sends to the next and receives from the previous:
		// posted one by one this would deadlock on a rendezvous transport.
		outs[r] = make([]byte, 8)
		c.Recv(outs[r], 2, Int32, (r+n-1)%n)
		send := make([]byte, 8)
		reduce.PutInt(send, Int32, int64(r))
		reduce.PutInt(send[4:], Int32, int64(100+r))
		req := c.Send(send, 2, Int32, (r+1)%n)
		if err := c.GroupEnd(); err != nil {
			t.Fatal(err)
		}
		return req
	}))
	for r := range n {
		want := make([]byte, 8)
		p := (r + n - 1) % n
		reduce.PutInt(want, Int32, int64(p))
		reduce.PutInt(want[4:], Int32, int64(100+p))
		if !bytes.Equal(outs[r], want) {
			t.Fatalf("rank %d got % x want % x", r, outs[r], want)
		}
	}
	// Outside a group, a plain Send/Recv pair.
	buf := []byte{1, 2, 3}
	got := make([]byte, 3)
	errs := onAll(t, comms[:2], func(r int, c *Comm) *Request {
		if r == 0 {
			return c.Send(buf, 3, Uint8, 1)
		}
		return c.Recv(got, 3, Uint8, 0)
	})
	mustAll(t, "send/recv", errs)
	if !bytes.Equal(got, buf) {
		t.Fatalf("recv got %v", got)
	}
}

func TestArgumentErrors(t *testing.T) {
	c := memComms(t, 2, Options{})[0]
	for _, tc := range []struct {
		name string
		req  *Request
	}{
		{"short recv", c.AllReduce(make([]byte, 8), make([]byte, 4), 2, Int32, Sum)},
		{"bad type", c.AllReduce(nil, nil, 0, DataType(77), Sum)},
		{"bad op", c.AllReduce(nil, nil, 0, Int32, Op(77))},
		{"bad root", c.Broadcast(nil, nil, 0, Int32, 2)},
		{"negative count", c.AllGather(nil, nil, -1, Int32)},
		{"send to self", c.Send(make([]byte, 4), 1, Int32, 0)},
		{"peer out of range", c.Recv(make([]byte, 4), 1, Int32, 5)},
	} {
		err := tc.req.Wait(t.Context())
		var oe *OpError
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &oe) {
			t.Errorf("%s: %v, want an OpError with ErrInvalidArgument", tc.name, err)
		}
	}
	if err := c.GroupEnd(); !errors.Is(err, ErrGroup) {
		t.Errorf("GroupEnd alone: %v", err)
	}
}
