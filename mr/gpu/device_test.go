package gpu

import (
	"bytes"
	"errors"
	"testing"
)

func newGPU(t *testing.T, mem int64) (*System, *Device, NodeID) {
	t.Helper()
	sys, dev, nic, err := Preset(PathPIX, mem, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sys, dev, nic
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: err = %v, want %v", what, err, want)
	}
}

func TestAllocFreeErrors(t *testing.T) {
	_, d, _ := newGPU(t, 1000)
	p, err := d.Alloc(600)
	if err != nil {
		t.Fatal(err)
	}
	if free, total := d.MemInfo(); free != 400 || total != 1000 {
		t.Errorf("MemInfo = %d, %d, want 400, 1000", free, total)
	}
	_, err = d.Alloc(401)
	wantErr(t, "Alloc beyond free memory", err, ErrOutOfMemory)
	_, err = d.Alloc(0)
	wantErr(t, "Alloc 0", err, ErrInvalidArgument)
	q, err := d.Alloc(400)
	wantErr(t, "Alloc of exactly the free memory", err, nil)
	if p.Addr() == q.Addr() || p.Addr() < deviceVABase {
		t.Errorf("addresses %#x, %#x", p.Addr(), q.Addr())
	}
	half, _ := p.Slice(0, 300)
	wantErr(t, "Free of a slice", d.Free(half), ErrInvalidPtr)
	wantErr(t, "Free", d.Free(p), nil)
	wantErr(t, "Free twice", d.Free(p), ErrDoubleFree)
	wantErr(t, "Free nil", d.Free(Ptr{}), ErrInvalidPtr)
	if free, _ := d.MemInfo(); free != 600 {
		t.Errorf("free after Free = %d, want 600", free)
	}

	// Use after free: every operation on p or its slices fails, and a
	// new allocation (same size, reusing the memory budget) is untouched.
	r, err := d.Alloc(600)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "CopyHtoD after free", CopyHtoD(p, []byte{1}), ErrUseAfterFree)
	wantErr(t, "CopyDtoH after free", CopyDtoH(make([]byte, 1), half), ErrUseAfterFree)
	wantErr(t, "Memset after free", Memset(p, 7), ErrUseAfterFree)
	_, err = d.Memory(p)
	wantErr(t, "Memory after free", err, ErrUseAfterFree)
	got := make([]byte, 600)
	if err := CopyDtoH(got, r); err != nil || !bytes.Equal(got, make([]byte, 600)) {
		t.Errorf("new allocation not zero after writes through a freed pointer: %v", err)
	}

	// Another device's pointer.
	_, d2, _ := newGPU(t, 100)
	o, _ := d2.Alloc(10)
	wantErr(t, "Free of another device's pointer", d.Free(o), ErrInvalidPtr)
	_, err = d.Memory(o)
	wantErr(t, "Memory of another device's pointer", err, ErrInvalidPtr)
	wantErr(t, "CopyDtoD across systems", CopyDtoD(r, o), ErrInvalidPtr)
}

func TestCopiesExactAndBounds(t *testing.T) {
	_, d, _ := newGPU(t, 1<<20)
	a, _ := d.Alloc(256)
	b, _ := d.Alloc(256)
	src := make([]byte, 256)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	if err := CopyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	if err := CopyDtoD(b, a); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 256)
	if err := CopyDtoH(got, b); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("HtoD, DtoD, DtoH round trip differs (%v)", err)
	}
	// A slice copies only its range; the rest stays.
	mid, _ := b.Slice(100, 50)
	if err := Memset(mid, 0xEE); err != nil {
		t.Fatal(err)
	}
	CopyDtoH(got, b)
	want := bytes.Clone(src)
	for i := 100; i < 150; i++ {
		want[i] = 0xEE
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Memset of a slice wrote outside it")
	}
	tail, _ := b.Slice(200, 56)
	wantErr(t, "CopyHtoD past the end", CopyHtoD(tail, make([]byte, 57)), ErrOutOfBounds)
	wantErr(t, "CopyDtoH past the end", CopyDtoH(make([]byte, 57), tail), ErrOutOfBounds)
	wantErr(t, "CopyDtoD into a shorter range", CopyDtoD(tail, a), ErrOutOfBounds)
	_, err := b.Slice(200, 57)
	wantErr(t, "Slice past the end", err, ErrOutOfBounds)
	_, err = b.Slice(-1, 1)
	wantErr(t, "Slice before the start", err, ErrOutOfBounds)
	CopyDtoH(got, b)
	if !bytes.Equal(got, want) {
		t.Errorf("failed copies changed device memory")
	}
}

func TestReduceKernel(t *testing.T) {
	_, d, _ := newGPU(t, 1<<20)
	a, _ := d.Alloc(4)
	b, _ := d.Alloc(4)
	CopyHtoD(a, []byte{1, 2, 3, 4})
	CopyHtoD(b, []byte{10, 20, 30, 40})
	add := func(dst, src []byte) error {
		for i := range dst {
			dst[i] += src[i]
		}
		return nil
	}
	if err := Reduce(a, b, add); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	CopyDtoH(got, a)
	if !bytes.Equal(got, []byte{11, 22, 33, 44}) {
		t.Errorf("Reduce = %v", got)
	}
	short, _ := b.Slice(0, 2)
	wantErr(t, "Reduce of unequal lengths", Reduce(a, short, add), ErrOutOfBounds)
	wantErr(t, "Reduce with nil kernel", Reduce(a, b, nil), ErrInvalidArgument)
	kerr := errors.New("bad type")
	if err := Reduce(a, b, func(dst, src []byte) error { return kerr }); !errors.Is(err, kerr) {
		t.Errorf("kernel error = %v", err)
	}
}

func TestStream(t *testing.T) {
	sys, d, _ := newGPU(t, 1<<20)
	s := d.NewStream()
	a, _ := d.Alloc(8)
	src := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	got := make([]byte, 8)
	if err := s.CopyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	s.Memset(mustSlice(t, a, 0, 2), 9)
	s.CopyDtoH(got, a)
	if s.Pending() != 3 {
		t.Errorf("Pending = %d, want 3", s.Pending())
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte{9, 9, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("stream result %v", got)
	}
	if f := sys.Meter().Flow(FlowGPUHost); f.Bytes != 16 || f.Transfers != 2 {
		t.Errorf("GPU<->host %+v, want 16 bytes in 2 transfers", f)
	}
	// Bad arguments fail at enqueue; a free before the queued copy runs
	// fails at Synchronize, stickily.
	wantErr(t, "enqueue out of bounds", s.CopyHtoD(a, make([]byte, 9)), ErrOutOfBounds)
	if err := s.CopyDtoH(got, a); err != nil {
		t.Fatal(err)
	}
	d.Free(a)
	wantErr(t, "Synchronize after free", s.Synchronize(), ErrUseAfterFree)
	wantErr(t, "sticky error", s.Synchronize(), ErrUseAfterFree)
	b, _ := d.Alloc(8)
	wantErr(t, "enqueue on a failed stream", s.Memset(b, 0), ErrUseAfterFree)
}

func mustSlice(t *testing.T, p Ptr, off, n int64) Ptr {
	t.Helper()
	q, err := p.Slice(off, n)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
