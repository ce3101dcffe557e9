package nccl_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/goroce/goroce/nccl"
	"github.com/goroce/goroce/nccl/transport"
)

// Four ranks in one process, over the in-memory transport, sum a float32
// vector. With goroce devices, CommInitRank replaces NewComm.
func Example() {
	const n, count = 4, 3
	fabric := transport.NewMemFabric(n)
	var reqs []*nccl.Request
	outs := make([][]byte, n)
	for r := range n {
		c, err := nccl.NewComm(fabric.Rank(r), nccl.Options{})
		if err != nil {
			panic(err)
		}
		defer c.Destroy()
		in := make([]byte, 4*count)
		for i := range count {
			binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(r*10+i)))
		}
		outs[r] = make([]byte, 4*count)
		reqs = append(reqs, c.AllReduce(in, outs[r], count, nccl.Float32, nccl.Sum))
	}
	for _, q := range reqs {
		if err := q.Wait(context.Background()); err != nil {
			panic(err)
		}
	}
	for i := range count {
		fmt.Print(math.Float32frombits(binary.LittleEndian.Uint32(outs[2][4*i:])), " ")
	}
	fmt.Println()
	// Output: 60 64 68
}
