package nccl

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/goroce/goroce/nccl/reduce"
	"github.com/goroce/goroce/nccl/reduce/reference"
	"github.com/goroce/goroce/nccl/transport"
)

// memComms returns n communicators over an in-memory fabric, destroyed at
// the end of the test.
func memComms(t testing.TB, n int, opts Options) []*Comm {
	t.Helper()
	f := transport.NewMemFabric(n)
	comms := make([]*Comm, n)
	for r := range n {
		c, err := NewComm(f.Rank(r), opts)
		if err != nil {
			t.Fatal(err)
		}
		comms[r] = c
		t.Cleanup(func() { c.Abort() })
	}
	return comms
}

// onAll issues one operation on every rank (enqueueing never blocks) and
// waits for all of them.
func onAll(t testing.TB, comms []*Comm, f func(r int, c *Comm) *Request) []error {
	t.Helper()
	reqs := make([]*Request, len(comms))
	for r, c := range comms {
		reqs[r] = f(r, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, len(comms))
	for r, q := range reqs {
		errs[r] = q.Wait(ctx)
	}
	return errs
}

func mustAll(t testing.TB, what string, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s: rank %d: %v", what, r, err)
		}
	}
}

// exactValues fills count elements of dt with small integers (in floats
// too), so that sums and products over up to 8 ranks are exact in every
// type and the order of reduction cannot change the bits.
func exactValues(rng *rand.Rand, dt reduce.DataType, op reduce.Op, count int) []byte {
	b := make([]byte, count*dt.Size())
	for i := range count {
		v := int64(rng.IntN(17) - 8)
		if op == reduce.Prod {
			v = []int64{-2, -1, 1, 2}[rng.IntN(4)]
		}
		if !dt.IsFloat() && op != reduce.Prod && op != reduce.Avg {
			v = int64(rng.Uint64()) // integers wrap exactly whatever the size
		}
		reduce.PutInt(b[i*dt.Size():], dt, v)
	}
	return b
}

// expected is the result a reduction of ins must have, from the plain
// reference (not the kernels of nccl/reduce that the library runs).
func expected(t testing.TB, ins [][]byte, dt reduce.DataType, op reduce.Op) []byte {
	t.Helper()
	out, err := reference.Reduce(ins, dt, op)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func putFloat(b []byte, dt reduce.DataType, f float64) {
	le := binary.LittleEndian
	switch dt {
	case reduce.Float16:
		le.PutUint16(b, reduce.Float64ToFloat16(f))
	case reduce.BFloat16:
		le.PutUint16(b, reduce.Float64ToBFloat16(f))
	case reduce.Float32:
		le.PutUint32(b, math.Float32bits(float32(f)))
	case reduce.Float64:
		le.PutUint64(b, math.Float64bits(f))
	}
}

// NewMemFabricForTest returns rank 0 of an in-memory fabric of n ranks.
func NewMemFabricForTest(n int) transport.Transport { return transport.NewMemFabric(n).Rank(0) }

func itoa(i int) string { return strconv.Itoa(i) }
