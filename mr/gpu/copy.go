package gpu

// CopyHtoD copies src from host memory to the first len(src) bytes of dst
// (cudaMemcpy HostToDevice), counting the bytes over the links from the
// device's CPU socket (NUMA-local pinned memory) down to the GPU.
func CopyHtoD(dst Ptr, src []byte) error {
	b, err := dst.bytes(int64(len(src)), "CopyHtoD")
	if err != nil {
		return err
	}
	copy(b, src)
	return dst.dev.hostTransfer(int64(len(src)), false)
}

// CopyDtoH copies the first len(dst) bytes of src to host memory
// (cudaMemcpy DeviceToHost), counting them from the GPU up to its socket.
func CopyDtoH(dst []byte, src Ptr) error {
	b, err := src.bytes(int64(len(dst)), "CopyDtoH")
	if err != nil {
		return err
	}
	copy(dst, b)
	return src.dev.hostTransfer(int64(len(dst)), true)
}

// CopyDtoD copies all of src to the start of dst (cudaMemcpy
// DeviceToDevice); the ranges may overlap. On one device it is a kernel
// that crosses no link; between two GPUs of a system it is a peer-to-peer
// copy metered along the path between them.
func CopyDtoD(dst, src Ptr) error {
	s, err := src.bytes(src.n, "CopyDtoD source")
	if err != nil {
		return err
	}
	d, err := dst.bytes(src.n, "CopyDtoD destination")
	if err != nil {
		return err
	}
	if dst.dev.sys != src.dev.sys {
		return errorf(ErrInvalidPtr, "CopyDtoD from %v to %v: devices of different systems", src, dst)
	}
	copy(d, s)
	if dst.dev == src.dev {
		return nil
	}
	_, err = src.dev.sys.Transfer(src.dev.node, dst.dev.node, src.n)
	return err
}

// Memset sets every byte of dst to v (cudaMemset), a kernel on the device.
func Memset(dst Ptr, v byte) error {
	b, err := dst.bytes(dst.n, "Memset")
	if err != nil {
		return err
	}
	for i := range b {
		b[i] = v
	}
	return nil
}

// Kernel is an element-wise device kernel: dst = dst ⊕ src over equal-length
// byte ranges, such as nccl/reduce.Apply with its type and op bound.
type Kernel func(dst, src []byte) error

// Reduce runs kernel over dst and src, two ranges of the same length on the
// same device (the reduction kernel of a collective). It crosses no link.
func Reduce(dst, src Ptr, kernel Kernel) error {
	if kernel == nil {
		return errorf(ErrInvalidArgument, "Reduce: nil kernel")
	}
	if dst.n != src.n {
		return errorf(ErrOutOfBounds, "Reduce: %v and %v differ in length", dst, src)
	}
	if dst.dev != src.dev {
		return errorf(ErrInvalidPtr, "Reduce: %v and %v are on different devices", dst, src)
	}
	s, err := src.bytes(src.n, "Reduce source")
	if err != nil {
		return err
	}
	d, err := dst.bytes(dst.n, "Reduce destination")
	if err != nil {
		return err
	}
	return kernel(d, s)
}

// hostTransfer meters n bytes between the device and its socket's memory.
func (d *Device) hostTransfer(n int64, toHost bool) error {
	host, err := d.sys.Host(d.node)
	if err != nil {
		return err
	}
	if toHost {
		_, err = d.sys.Transfer(d.node, host, n)
	} else {
		_, err = d.sys.Transfer(host, d.node, n)
	}
	return err
}
