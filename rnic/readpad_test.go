package rnic

import (
	"bytes"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/qp"
)

// TestReadOfOddLength RDMA READs lengths that are not a multiple of 4 (a
// response payload is padded to 4 bytes, and its BTH pad count says how
// many pad bytes follow), whole and split across MTU-sized responses,
// each way between two devices whose ICRCs are checked in full: the bytes
// read must be the peer's and nothing after them may change.
func TestReadOfOddLength(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := newPair(t, pairConfig{mtu: 1024})
		for i, x := range []struct {
			from, to *end
			n        int
		}{{a, b, 2049}, {a, b, 3}, {b, a, 1025}, {b, a, 1}, {a, b, 2}} {
			fill(x.to.buf[8192:8192+x.n], byte(i+1))
			for j := range x.from.buf[:x.n+8] {
				x.from.buf[j] = 0xEE
			}
			id := uint64(10 + i)
			x.from.postSend(t, qp.SendWR{WRID: id, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: []qp.SGE{x.from.sge(0, x.n)},
				RemoteAddr: x.to.mr.Addr() + 8192, RKey: x.to.mr.RKey()})
			if wc := x.from.expect(t, id, qp.WCSuccess); wc.ByteLen != uint32(x.n) {
				t.Fatalf("READ of %d bytes completed with byte_len %d", x.n, wc.ByteLen)
			}
			if !bytes.Equal(x.from.buf[:x.n], x.to.buf[8192:8192+x.n]) {
				t.Fatalf("READ of %d bytes: the data differs", x.n)
			}
			if !bytes.Equal(x.from.buf[x.n:x.n+8], bytes.Repeat([]byte{0xEE}, 8)) {
				t.Fatalf("READ of %d bytes wrote past its end: % x", x.n, x.from.buf[x.n:x.n+8])
			}
		}
		if n := a.dev.Counter("icrc_err") + b.dev.Counter("icrc_err") + a.dev.Counter("malformed") + b.dev.Counter("malformed"); n != 0 {
			t.Errorf("%d packets failed their ICRC or did not parse", n)
		}
	})
}
