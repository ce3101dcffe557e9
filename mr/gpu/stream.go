package gpu

import "sync"

// Stream is an in-order queue of device work (cudaStream_t). The enqueue
// methods check their pointers and sizes at once, as cudaMemcpyAsync checks
// its arguments, and return; the work runs in order no later than
// Synchronize, which returns the first error. Like a CUDA stream error, that
// error is sticky: the work queued after it is dropped, and every later
// Synchronize returns it. Host buffers handed to the stream must not be
// touched until Synchronize returns. Safe for concurrent use.
type Stream struct {
	dev *Device

	mu  sync.Mutex
	ops []func() error
	err error
}

// NewStream returns an empty stream of the device.
func (d *Device) NewStream() *Stream { return &Stream{dev: d} }

func (s *Stream) enqueue(check error, op func() error) error {
	if check != nil {
		return check
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.ops = append(s.ops, op)
	return nil
}

// CopyHtoD queues CopyHtoD(dst, src) (cudaMemcpyAsync HostToDevice).
func (s *Stream) CopyHtoD(dst Ptr, src []byte) error {
	_, err := dst.bytes(int64(len(src)), "Stream.CopyHtoD")
	return s.enqueue(err, func() error { return CopyHtoD(dst, src) })
}

// CopyDtoH queues CopyDtoH(dst, src) (cudaMemcpyAsync DeviceToHost).
func (s *Stream) CopyDtoH(dst []byte, src Ptr) error {
	_, err := src.bytes(int64(len(dst)), "Stream.CopyDtoH")
	return s.enqueue(err, func() error { return CopyDtoH(dst, src) })
}

// CopyDtoD queues CopyDtoD(dst, src).
func (s *Stream) CopyDtoD(dst, src Ptr) error {
	_, err := src.bytes(src.n, "Stream.CopyDtoD source")
	if err == nil {
		_, err = dst.bytes(src.n, "Stream.CopyDtoD destination")
	}
	return s.enqueue(err, func() error { return CopyDtoD(dst, src) })
}

// Memset queues Memset(dst, v) (cudaMemsetAsync).
func (s *Stream) Memset(dst Ptr, v byte) error {
	_, err := dst.bytes(dst.n, "Stream.Memset")
	return s.enqueue(err, func() error { return Memset(dst, v) })
}

// Reduce queues Reduce(dst, src, kernel).
func (s *Stream) Reduce(dst, src Ptr, kernel Kernel) error {
	var err error
	if kernel == nil {
		err = errorf(ErrInvalidArgument, "Stream.Reduce: nil kernel")
	}
	return s.enqueue(err, func() error { return Reduce(dst, src, kernel) })
}

// Pending is the number of queued operations not yet run.
func (s *Stream) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ops)
}

// Synchronize runs the queued work in order and waits for it
// (cudaStreamSynchronize). It returns the stream's first error, for
// example ErrUseAfterFree if an allocation was freed before the copy that
// used it ran.
func (s *Stream) Synchronize() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.ops) > 0 && s.err == nil {
		op := s.ops[0]
		s.ops = s.ops[1:]
		if err := op(); err != nil {
			s.err = err
			s.ops = nil
			break
		}
	}
	return s.err
}
