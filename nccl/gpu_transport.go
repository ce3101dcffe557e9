package nccl

import (
	"github.com/goroce/goroce/nccl/transport"
)

// gpuTransport is the network seen from device memory. It wraps the
// rank's transport for operations on device buffers and meters, on the
// GPU's system, the PCIe traffic each message causes on this rank:
//
//	PathGDR, send n bytes:    NIC reads n from the GPU     (NIC<->GPU)
//	PathGDR, receive n:       NIC writes n to the GPU      (NIC<->GPU)
//	PathStaged, send n:       DtoH n into a bounce buffer  (GPU<->host),
//	                          then NIC reads n from host   (NIC<->host)
//	PathStaged, receive n:    NIC writes n to a bounce     (NIC<->host),
//	                          then HtoD n                  (GPU<->host)
//
// Every buffer the executor hands it (user buffers, scratch, reduce
// staging) is device memory: in NCCL they all live on the GPU and the
// kernels work there. The RNIC's own FIFO copies inside the transport are
// below this model (NCCL's FIFO sits in GPU memory with GDR, in host
// memory without). Driven by the stream goroutine only.
type gpuTransport struct {
	transport.Transport
	r *gpuRank
}

// Isend meters and posts a send of device data.
func (g *gpuTransport) Isend(peer int, data []byte) (transport.Request, error) {
	if err := transport.CheckPeer(g.Rank(), g.Size(), peer); err != nil {
		return nil, err
	}
	r, n := g.r, int64(len(data))
	if r.paths[peer] == PathGDR {
		if _, err := r.sys.Transfer(r.dev.Node(), r.nic, n); err != nil {
			return nil, err
		}
		return g.Transport.Isend(peer, data)
	}
	bounce := append([]byte(nil), data...) // the DtoH copy into pinned host memory
	if _, err := r.sys.Transfer(r.dev.Node(), r.host, n); err != nil {
		return nil, err
	}
	if _, err := r.sys.Transfer(r.host, r.nic, n); err != nil {
		return nil, err
	}
	return g.Transport.Isend(peer, bounce)
}

// Irecv posts a receive into device memory; the bytes are metered, and on
// the staged path copied to the device, when it completes.
func (g *gpuTransport) Irecv(peer int, buf []byte) (transport.Request, error) {
	if err := transport.CheckPeer(g.Rank(), g.Size(), peer); err != nil {
		return nil, err
	}
	q := &gpuRecv{r: g.r, buf: buf, path: g.r.paths[peer]}
	into := buf
	if q.path == PathStaged {
		q.bounce = make([]byte, len(buf))
		into = q.bounce
	}
	inner, err := g.Transport.Irecv(peer, into)
	if err != nil {
		return nil, err
	}
	q.Request = inner
	return q, nil
}

// gpuRecv finishes a device receive once the network's part is done.
type gpuRecv struct {
	transport.Request
	r      *gpuRank
	buf    []byte
	bounce []byte // PathStaged: the pinned host buffer the NIC writes
	path   NetPath
	done   bool
	err    error
}

// Test reports completion; the first time the network receive is done it
// meters the NIC's write and, when staged, performs the HtoD copy.
func (q *gpuRecv) Test() (bool, error) {
	if q.done || q.err != nil {
		return q.done, q.err
	}
	ok, err := q.Request.Test()
	if err != nil || !ok {
		q.err = err
		return ok, err
	}
	r, n := q.r, int64(len(q.buf))
	if q.path == PathGDR {
		_, q.err = r.sys.Transfer(r.nic, r.dev.Node(), n)
	} else {
		if _, q.err = r.sys.Transfer(r.nic, r.host, n); q.err == nil {
			copy(q.buf, q.bounce)
			_, q.err = r.sys.Transfer(r.host, r.dev.Node(), n)
		}
	}
	q.done = q.err == nil
	return q.done, q.err
}
