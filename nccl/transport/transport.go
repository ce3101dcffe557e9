package transport

import (
	"context"
	"errors"
	"fmt"
	"unsafe"
)

// Transport moves messages between one rank and its peers. It is driven by
// one goroutine (the communicator's): its methods are not safe for
// concurrent use, except Close, which may be called from any goroutine to
// abort whatever is pending.
type Transport interface {
	// Rank is this end's rank, Size the number of ranks.
	Rank() int
	Size() int
	// Isend posts a send of data to peer. data must stay unchanged until
	// the request completes.
	Isend(peer int, data []byte) (Request, error)
	// Irecv posts a receive of exactly len(buf) bytes from peer into buf.
	// A message of another length fails the request with ErrLength.
	Irecv(peer int, buf []byte) (Request, error)
	// Progress moves posted requests forward without blocking.
	Progress() error
	// Wait blocks until Progress may have something to do, or ctx is done
	// (then it returns ctx.Err()). It may return early.
	Wait(ctx context.Context) error
	// Close releases the transport; pending requests fail with ErrClosed.
	Close() error
}

// Reducer is a Transport that can combine a message with local data as
// its fragments land, without keeping the message anywhere: NCCL's
// recvReduce, done by the receive path.
type Reducer interface {
	// IrecvReduce posts a receive of exactly len(dst) bytes from peer,
	// as Irecv does, but hands each fragment to combine as it arrives:
	// combine(dst[i:j], in, src[i:j]) with in the fragment's bytes i..j
	// of the message, in order. Every i is a multiple of align; a
	// transport that cannot cut fragments so returns an error wrapping
	// errors.ErrUnsupported, and the caller receives with Irecv instead.
	// dst and src (which may be the same slice) must stay untouched by
	// anyone else until the request completes. An error from combine
	// fails the connection.
	IrecvReduce(peer int, dst, src []byte, align int, combine func(dst, in, src []byte) error) (Request, error)
}

// Forwarder is a Transport that can pass bytes on while they arrive:
// NCCL's recvReduceSend and recvCopySend, where each fragment a rank
// receives (and reduces) leaves for the next rank at once, still in the
// cache, instead of after the whole message has landed.
type Forwarder interface {
	// IsendAfter posts a send of data to peer, as Isend does, whose
	// fragment i leaves only once fragment i of after has landed in data.
	// after must be a receive posted on this transport (Irecv, or an
	// IrecvReduce whose dst is data) into exactly data's bytes, so that
	// both are cut into the same fragments; any other returns an error
	// wrapping errors.ErrUnsupported, and the caller sends once after
	// completes. If after fails, so does the send.
	IsendAfter(peer int, data []byte, after Request) (Request, error)
}

// Registrar is a Transport that can send straight from the caller's
// memory once it is registered, as NCCL does with buffers registered by
// ncclCommRegister: no copy into a staging slot.
type Registrar interface {
	// Register registers buf, so that Isends of data inside it leave
	// from it directly and the peers may write receives into it
	// directly. It is cheap for a buffer already registered. The
	// transport keeps a few registrations and drops the oldest idle one
	// for a new one; a send from memory it does not hold registered is
	// copied to staging as before, a receive into it lands in the
	// transport's own buffers first. Register never fails a transfer: an
	// error only says that buf stays unregistered.
	Register(buf []byte) error
	// DeregisterAll drops every registration: from then on a peer's
	// write into one of those buffers fails instead of landing. The
	// owner calls it when an operation fails, so that a late peer cannot
	// write into buffers the caller has taken back.
	DeregisterAll() error
}

// Flusher is a Transport whose sends may complete before the peer has
// the data (once it sits in the transport's own buffers): Flush waits
// until everything sent has been delivered, or ctx is done. Before a
// transport closes, its owner flushes it, or the last sends may be lost.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Fragmenter is a Transport that carries a message as fragments of at
// most FragmentSize bytes (IrecvReduce's combine and IsendAfter work one
// fragment at a time). Collectives cut their pipelining units, the
// Broadcast/Reduce slice and the ring AllReduce's chunk, into whole
// fragments, so that no fragment is short.
type Fragmenter interface {
	FragmentSize() int
}

// Request is a posted send or receive.
type Request interface {
	// Test reports whether the request has completed, and its error.
	Test() (done bool, err error)
	// Peer is the rank on the other end.
	Peer() int
}

// Errors. Failures of a peer come wrapped in a *PeerError.
var (
	ErrClosed   = errors.New("transport: closed")
	ErrPeer     = errors.New("transport: no such peer")
	ErrLength   = errors.New("transport: message length differs from the posted receive")
	ErrPeerGone = errors.New("transport: peer went away")
)

// PeerError is a failure of the connection to one peer.
type PeerError struct {
	Peer int
	Err  error
}

// Error names the peer and the cause.
func (e *PeerError) Error() string { return fmt.Sprintf("peer %d: %v", e.Peer, e.Err) }

// Unwrap returns the underlying error.
func (e *PeerError) Unwrap() error { return e.Err }

// SameBytes reports whether a and b are the same bytes: the same memory,
// not merely equal contents.
func SameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b))
}

// CheckPeer returns an ErrPeer error unless peer is a rank of size other
// than rank.
func CheckPeer(rank, size, peer int) error {
	if peer < 0 || peer >= size || peer == rank {
		return fmt.Errorf("%w: %d (rank %d of %d)", ErrPeer, peer, rank, size)
	}
	return nil
}
