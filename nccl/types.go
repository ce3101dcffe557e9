package nccl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goroce/goroce/nccl/reduce"
)

// DataType is the element type of a collective's buffers (ncclDataType_t).
type DataType = reduce.DataType

// Element types, little-endian in the []byte buffers.
const (
	Int8     = reduce.Int8
	Uint8    = reduce.Uint8
	Int32    = reduce.Int32
	Uint32   = reduce.Uint32
	Int64    = reduce.Int64
	Uint64   = reduce.Uint64
	Float16  = reduce.Float16
	Float32  = reduce.Float32
	Float64  = reduce.Float64
	BFloat16 = reduce.BFloat16
)

// Op is a reduction operator (ncclRedOp_t).
type Op = reduce.Op

// Reduction operators. Avg is Sum followed by a division by the number of
// ranks, done once on the fully reduced data.
const (
	Sum  = reduce.Sum
	Prod = reduce.Prod
	Max  = reduce.Max
	Min  = reduce.Min
	Avg  = reduce.Avg
)

// Algo selects the AllReduce algorithm (NCCL_ALGO).
type Algo uint8

// Algorithms. AlgoAuto picks recursive doubling up to
// Options.DoublingThreshold bytes and the ring above.
//
// NCCL's own choices are Ring and Tree, a double binary tree that pipelines
// a reduce up one tree and a broadcast down the other. goroce has no such
// tree: its latency algorithm is recursive doubling (log2 n exchanges of
// the whole buffer, with a fold for rank counts that are not powers of
// two), which serves small messages as NCCL's tree does. So NCCL_ALGO=Tree
// selects AlgoRecursiveDoubling, and NCCL_ALGO=Ring the ring.
const (
	AlgoAuto Algo = iota
	AlgoRing
	AlgoRecursiveDoubling
)

// String returns the algorithm's name: Ring, RecursiveDoubling or Auto.
func (a Algo) String() string {
	switch a {
	case AlgoRing:
		return "Ring"
	case AlgoRecursiveDoubling:
		return "RecursiveDoubling"
	}
	return "Auto"
}

// ParseAlgo reads an NCCL_ALGO value, in any case: "Ring", "Tree" (NCCL's
// name for its latency algorithm, which selects AlgoRecursiveDoubling) or
// "RecursiveDoubling"; "" is AlgoAuto.
func ParseAlgo(s string) (Algo, error) {
	a, err := parseAlgo(s)
	if err != nil {
		return a, fmt.Errorf("%w: NCCL_ALGO=%q: %v", ErrInvalidArgument, s, err)
	}
	return a, nil
}

func parseAlgo(s string) (Algo, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return AlgoAuto, nil
	case "ring":
		return AlgoRing, nil
	case "tree", "recursivedoubling":
		return AlgoRecursiveDoubling, nil
	}
	return AlgoAuto, errors.New("want Ring, Tree or RecursiveDoubling")
}
