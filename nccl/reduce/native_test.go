package reduce

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"
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
				applyBytes(want, want, src, typ, op)
				if !applyNative(dst, dst, src, typ, op) {
					t.Fatalf("%v %v: aligned buffers not taken", typ, op)
				}
				if !bytes.Equal(dst, want) {
					t.Fatalf("%v %v, %d elements: the native loop and the byte path differ", typ, op, n)
				}
			}
			if b := make([]byte, 16); applyNative(b, misaligned(16), b, typ, op) {
				t.Errorf("%v %v: a misaligned buffer was taken", typ, op)
			}
		}
	}
}

// misaligned returns n bytes at an address one past a multiple of 8.
func misaligned(n int) []byte {
	b := make([]byte, n+8)
	k := 0
	for uintptr(unsafe.Pointer(&b[k]))%8 != 1 {
		k++
	}
	return b[k : k+n]
}

// ApplyTo into a third buffer gives the bits Apply leaves in its first
// operand, for every type and op, aligned or not, and into either operand.
func TestApplyToMatchesApply(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for typ := DataType(0); typ.Valid(); typ++ {
		for op := Op(0); op.Valid(); op++ {
			for _, shift := range []int{0, 1} {
				size := 100 * typ.Size()
				raw := make([]byte, 3*size+3)
				for i := range raw {
					raw[i] = byte(rng.Uint32())
				}
				a, b := raw[shift:shift+size], raw[size+1:2*size+1]
				want := bytes.Clone(a)
				if err := Apply(want, b, typ, op); err != nil {
					t.Fatal(err)
				}
				dst := raw[2*size+2+shift : 3*size+2+shift]
				if err := ApplyTo(dst, a, b, typ, op); err != nil || !bytes.Equal(dst, want) {
					t.Fatalf("%v %v (shift %d): ApplyTo into a third buffer differs from Apply (err %v)", typ, op, shift, err)
				}
				if err := ApplyTo(b, a, b, typ, op); err != nil || !bytes.Equal(b, want) {
					t.Fatalf("%v %v (shift %d): ApplyTo into its second operand differs from Apply (err %v)", typ, op, shift, err)
				}
			}
		}
	}
	if err := ApplyTo(make([]byte, 8), make([]byte, 8), make([]byte, 4), Float32, Sum); err == nil {
		t.Error("ApplyTo with operands of different lengths: no error")
	}
}

// The AVX2 kernels, where the CPU has them, take the 128-byte rounds of
// long buffers at any 4- or 8-byte alignment and leave the tail to the
// loops: the bits match the byte path at every length around a round.
func TestApplySIMDRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []DataType{Float32, Float64, Int32, Uint64} {
		for _, op := range []Op{Sum, Prod} {
			for _, n := range []int{127, 128, 129, 255, 256, 4096 + 24} {
				n -= n % typ.Size()
				raw := make([]byte, 3*n+32)
				for i := range raw {
					raw[i] = byte(rng.Uint32())
				}
				off := typ.Size() // not 32-byte aligned
				a, b, dst := raw[off:off+n], raw[n+16:2*n+16], raw[2*n+24:3*n+24]
				want := bytes.Clone(a)
				applyBytes(want, a, b, typ, op)
				if !applyNative(dst, a, b, typ, op) || !bytes.Equal(dst, want) {
					t.Fatalf("%v %v, %d bytes: differs from the byte path", typ, op, n)
				}
			}
		}
	}
}
