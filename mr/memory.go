package mr

// Memory is storage that PD.RegMemory can register as a memory region. It is
// the hook for memory that is not an ordinary Go slice the application
// touches directly, above all the simulated GPU ("device") memory of the
// collective library: that package allocates a backing []byte, meters every
// host<->device copy as PCIe traffic, and registers the buffer here when
// GPUDirect RDMA ("peer memory", Limits.PeerMemory) is enabled, so the NIC
// reads and writes device memory without a bounce buffer.
//
// The table keeps the Memory for the lifetime of the MR and uses only what
// Bytes returns at registration time.
type Memory interface {
	// Bytes returns the storage the NIC reads and writes. It must not be
	// resized or replaced while registered. The region's virtual address is
	// the address of its first byte (unless AccessZeroBased).
	Bytes() []byte
	// DeviceMemory reports whether the storage is device memory, which host
	// code may reach only through explicit copies. Registering device memory
	// needs Limits.PeerMemory.
	DeviceMemory() bool
}

// HostMemory is ordinary host memory: a Go slice the application reads and
// writes directly. PD.RegMR(buf, access) is PD.RegMemory(HostMemory(buf),
// access).
type HostMemory []byte

// Bytes returns the slice itself.
func (h HostMemory) Bytes() []byte { return h }

// DeviceMemory returns false: host memory is not device memory.
func (h HostMemory) DeviceMemory() bool { return false }
