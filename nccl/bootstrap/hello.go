package bootstrap

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// The hello. On every connection the root speaks first: a challenge of
// challengeLen random bytes. The client answers with its hello: magic (8),
// rank (4), nranks (4) and a MAC (32), HMAC-SHA256 under the job's secret
// of a label, the challenge and the first 16 bytes of the hello. Without
// the secret nobody can make a hello the root accepts, and a hello seen on
// the wire cannot be replayed on another connection (its challenge
// differs). The root does not prove itself to the clients: a process that
// holds the root's address before rank 0 can still make the ranks fail,
// but cannot learn the secret or join.
const (
	challengeLen = 16
	helloLen     = 8 + 4 + 4 + sha256.Size
	helloLabel   = "goroce bootstrap hello v1\x00"
)

// DefaultHelloTimeout bounds how long the root waits for one connection's
// hello when RootOptions does not say: a rank sends it as soon as it has
// the challenge, so only a stranger (or a stopped process) takes longer.
const DefaultHelloTimeout = 5 * time.Second

// Job names one rendezvous and what its ranks share.
type Job struct {
	// Magic tells this rendezvous's hellos from another's. It is not
	// secret: a rank of another job that dials the wrong root is told so.
	Magic uint64
	// Secret proves that a hello comes from a rank of the job: only
	// hellos whose MAC was made with it are accepted. Every rank must
	// have the same; empty is allowed, and then any process that knows
	// Magic can join (see nccl.CommInitFromEnv for where it comes from).
	Secret []byte
}

// newChallenge draws the root's challenge for one connection.
func newChallenge() []byte {
	b := make([]byte, challengeLen)
	rand.Read(b)
	return b
}

// hello is rank's hello of nranks to the root that sent challenge.
func (j Job) hello(challenge []byte, rank, nranks int) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, helloLen), j.Magic)
	b = binary.BigEndian.AppendUint32(b, uint32(rank))
	b = binary.BigEndian.AppendUint32(b, uint32(nranks))
	return append(b, j.mac(challenge, b)...)
}

// mac is the MAC of a hello's first 16 bytes under challenge.
func (j Job) mac(challenge, head []byte) []byte {
	m := hmac.New(sha256.New, j.Secret)
	io.WriteString(m, helloLabel)
	m.Write(challenge)
	m.Write(head)
	return m.Sum(nil)
}

// errHello is why the root refused a connection's hello; answer, if not
// empty, is what the root tells the client.
type errHello struct{ why, answer string }

func (e *errHello) Error() string { return e.why }

// checkHello parses a hello made for challenge and returns its rank.
func (j Job) checkHello(b, challenge []byte, nranks int) (int, error) {
	if len(b) != helloLen {
		return 0, &errHello{why: fmt.Sprintf("a hello of %d bytes, want %d", len(b), helloLen)}
	}
	magic := binary.BigEndian.Uint64(b)
	rank, n := int(int32(binary.BigEndian.Uint32(b[8:]))), int(int32(binary.BigEndian.Uint32(b[12:])))
	if magic != j.Magic || n != nranks || rank < 0 || rank >= n {
		msg := fmt.Sprintf("hello from rank %d of %d does not match this rendezvous of %d ranks", rank, n, nranks)
		return 0, &errHello{why: msg, answer: msg}
	}
	if !hmac.Equal(b[16:], j.mac(challenge, b[:16])) {
		msg := fmt.Sprintf("hello from rank %d of %d failed authentication: not made with this job's secret (do all ranks have the same GOROCE_JOB_SECRET, or belong to the same launcher job?)", rank, n)
		return 0, &errHello{why: msg, answer: msg}
	}
	return rank, nil
}
