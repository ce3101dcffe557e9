package reduce

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The typed in-place loops give the same bits as the element-by-element
// path, for every type and op they take, and step aside for misaligned
// buffers.
func TestApplyNativeMatchesBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range []DataType{Float32, Float64, Int32, Uint32, Int64, Uint64} {
		for _, op := range []Op{Sum, Prod} {
			for _, n := range []int{1, 7, 1000} {
				size := n * typ.Size()
				raw := make([]byte, 2*size+16)
				for i := range raw {
					raw[i] = byte(rng.Uint32())
				}
				dst, src := raw[:size], raw[size+8:2*size+8]
				want := bytes.Clone(dst)
				applyBytes(want, src, typ, op)
				if !applyNative(dst, src, typ, op) {
					t.Fatalf("%v %v: aligned buffers not taken", typ, op)
				}
				if !bytes.Equal(dst, want) {
					t.Fatalf("%v %v, %d elements: the native loop and the byte path differ", typ, op, n)
				}
			}
			if applyNative(make([]byte, 17)[1:], make([]byte, 16), typ, op) {
				t.Errorf("%v %v: a misaligned buffer was taken", typ, op)
			}
		}
	}
}
