package pingpong

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/wire"
)

// This file holds the pingpong tools' side channel: the 52-byte
// "LID:QPN:PSN:GID" messages and the order in which client and server trade
// them. All four tools (ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong,
// ibv_srq_pingpong) speak it; ibv_srq_pingpong sends one message per slot of
// its QP table (256 of them, zero beyond -q) where the others send one.

// ppDest is one QP's connection data, struct pingpong_dest: what the side
// channel carries.
type ppDest struct {
	lid uint16
	qpn uint32
	psn wire.PSN
	gid netip.Addr // 16 bytes: IPv6 or IPv4-mapped
}

// String is the "LID:QPN:PSN:GID" message without its NUL. The GID is its 16
// bytes in network order as 32 hex digits, which is what rdma-core's
// gid_to_wire_gid produces (four big-endian 32-bit words, "%08x" each).
func (d ppDest) String() string {
	g := d.gid.As16() // all zeros for the zero Addr: an unused srq slot
	return fmt.Sprintf("%04x:%06x:%06x:%s", d.lid, d.qpn, uint32(d.psn), hex.EncodeToString(g[:]))
}

// line is the text of the "local address" / "remote address" lines.
func (d ppDest) line() string {
	return fmt.Sprintf("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s", d.lid, d.qpn, uint32(d.psn), d.gid)
}

// errBadDest reports a side-channel message that is not "LID:QPN:PSN:GID".
var errBadDest = errors.New("malformed address message from the peer")

// parseDest reads the peer's 52-byte message.
func parseDest(msg []byte) (ppDest, error) {
	s, _, _ := strings.Cut(string(msg), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return ppDest{}, fmt.Errorf("%w: %q", errBadDest, s)
	}
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, 24)
		if err != nil {
			return ppDest{}, fmt.Errorf("%w: %q: field %d: %v", errBadDest, s, i+1, err)
		}
		v[i] = n
	}
	var g [16]byte
	if _, err := hex.Decode(g[:], []byte(f[3])); err != nil {
		return ppDest{}, fmt.Errorf("%w: %q: GID: %v", errBadDest, s, err)
	}
	if v[0] > 0xFFFF {
		return ppDest{}, fmt.Errorf("%w: %q: LID above 0xffff", errBadDest, s)
	}
	return ppDest{lid: uint16(v[0]), qpn: uint32(v[1]), psn: wire.PSN(v[2]), gid: netip.AddrFrom16(g)}, nil
}

// destMsg is d's side-channel message with its NUL: 52 bytes.
func destMsg(d ppDest) []byte {
	msg := make([]byte, pingpongMsgLen)
	copy(msg, d.String())
	return msg
}

// errZeroGID: the peer did not send a GID, as the verbs pingpongs do without
// -g; RoCE cannot address it.
var errZeroGID = errors.New("the peer sent GID :: (run the ibv_*_pingpong peer with -g IDX: RoCE needs a GID)")

// errFewerQPs: an srq peer filled fewer slots of its QP table than -q.
var errFewerQPs = errors.New("the peer has fewer QPs than this side (give both sides the same -q)")

// checkRemote verifies that the first n of the peer's messages name a QP
// this side can reach.
func checkRemote(rem []ppDest, n int) error {
	for i, d := range rem[:n] {
		if d.gid.Unmap().IsUnspecified() {
			if i > 0 && d.qpn == 0 {
				return fmt.Errorf("%w: its slot %d is empty", errFewerQPs, i)
			}
			return errZeroGID
		}
	}
	return nil
}

// writeDests sends one message per entry of dests.
func writeDests(conn net.Conn, dests []ppDest) error {
	msgs := make([]byte, 0, len(dests)*pingpongMsgLen)
	for _, d := range dests {
		msgs = append(msgs, destMsg(d)...)
	}
	if _, err := conn.Write(msgs); err != nil {
		return fmt.Errorf("couldn't send local address: %w", err)
	}
	return nil
}

// readDests reads n messages.
func readDests(ctx context.Context, conn net.Conn, n int) ([]ppDest, error) {
	rem := make([]ppDest, n)
	msg := make([]byte, pingpongMsgLen)
	for i := range rem {
		if _, err := io.ReadFull(conn, msg); err != nil {
			return nil, fmt.Errorf("couldn't read remote address [%d]: %w", i, cli.CtxErr(ctx, err))
		}
		d, err := parseDest(msg)
		if err != nil {
			return nil, err
		}
		rem[i] = d
	}
	return rem, nil
}

// clientExchange is pp_client_exch_dest: connect to the server (retrying
// while it is not yet listening), send our messages, read the server's
// and answer "done". It returns the server's first used entries, one per
// local QP.
func (pp *ppContext) clientExchange(ctx context.Context, my []ppDest) ([]ppDest, error) {
	hostPort := net.JoinHostPort(pp.cfg.server, strconv.Itoa(pp.cfg.port))
	conn, err := cli.DialRetry(ctx, hostPort, pp.cfg.dialFor)
	if err != nil {
		return nil, fmt.Errorf("couldn't connect to %s: %w", hostPort, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(pp.cfg.stall))
	if err := writeDests(conn, my); err != nil {
		return nil, err
	}
	rem, err := readDests(ctx, conn, len(my))
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte(pingpongDone)); err != nil {
		return nil, fmt.Errorf("couldn't write done: %w", err)
	}
	if err := checkRemote(rem, len(pp.qps)); err != nil {
		return nil, err
	}
	return rem[:len(pp.qps)], nil
}

// serverExchange is pp_server_exch_dest: wait for a client (until ctx is
// done), read its messages, connect the QPs, answer with ours and wait for
// "done".
func (pp *ppContext) serverExchange(ctx context.Context, my []ppDest, stderr io.Writer) ([]ppDest, error) {
	conn, err := cli.AcceptPeer(ctx, pp.cfg.scAddr, pp.cfg.port, "goroce pingpong", stderr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(pp.cfg.stall))

	rem, err := readDests(ctx, conn, len(my))
	if err != nil {
		return nil, err
	}
	if err := checkRemote(rem, len(pp.qps)); err != nil {
		return nil, err
	}
	rem = rem[:len(pp.qps)]
	if err := pp.connect(my, rem); err != nil {
		return nil, fmt.Errorf("couldn't connect to remote QP: %w", err)
	}
	if err := writeDests(conn, my); err != nil {
		return nil, err
	}
	done := make([]byte, len(pingpongDone))
	if _, err := io.ReadFull(conn, done); err != nil {
		return nil, fmt.Errorf("couldn't read done: %w", cli.CtxErr(ctx, err))
	}
	if string(done) != pingpongDone {
		return nil, fmt.Errorf("the client answered %q, want \"done\"", done)
	}
	return rem, nil
}
