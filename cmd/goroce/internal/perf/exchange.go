package perf

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
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

// This file is perf's side channel: a TCP connection carrying text lines
// (see perfAbout for the format). The client speaks first; the server
// connects its QPs before it answers, so the client's first packet finds
// the server ready.

// errBadPerfLine reports a side-channel line that is not what the
// protocol expects.
var errBadPerfLine = errors.New("malformed side-channel line from the peer")

// sideChannel is the connection to the peer.
type sideChannel struct {
	conn net.Conn
	rd   *bufio.Reader
}

// perfLineMax bounds the parameter line and the QP lines. The longest QP
// line ("qp 1023 qpn=0xffffff psn=0xffffff gid=<45-char IPv6> rkey=...
// addr=... size=...") is about 150 bytes, the parameter line about 100.
const perfLineMax = 256

// doneLineMax bounds the done line of qps QPs: "done" and a count of at
// most 20 digits, with its space, per QP.
func doneLineMax(qps int) int { return len("done") + 21*qps }

// errLineTooLong reports a side-channel line longer than the protocol
// allows: the reader stops there, having buffered no more than the limit.
var errLineTooLong = errors.New("perf side channel: line too long")

// readLine reads one line of at most limit bytes, without its newline. A
// longer line fails as soon as limit bytes have come without a newline,
// so a peer cannot make this side buffer more.
func (sc *sideChannel) readLine(limit int) (string, error) {
	var line []byte
	tooLong := func() error {
		return fmt.Errorf("%w: longer than %d bytes from %s", errLineTooLong, limit, sc.conn.RemoteAddr())
	}
	for {
		if sc.rd.Buffered() == 0 {
			if _, err := sc.rd.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return "", err
			}
		}
		buf, _ := sc.rd.Peek(sc.rd.Buffered())
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			if len(line)+i > limit {
				return "", tooLong()
			}
			line = append(line, buf[:i]...)
			sc.rd.Discard(i + 1)
			return string(line), nil
		}
		if len(line)+len(buf) > limit {
			return "", tooLong()
		}
		line = append(line, buf...)
		sc.rd.Discard(len(buf))
	}
}

// writeLines writes lines, each ended by a newline, in one write.
func (sc *sideChannel) writeLines(lines ...string) error {
	_, err := io.WriteString(sc.conn, strings.Join(lines, "\n")+"\n")
	return err
}

// String is d's line for QP i.
func (d perfDest) line(i int) string {
	return fmt.Sprintf("qp %d qpn=%#06x psn=%#06x gid=%s rkey=%#08x addr=%#016x size=%d",
		i, d.qpn, uint32(d.psn), d.gid, d.rkey, d.addr, d.size)
}

// parsePerfDest reads the line of QP i.
func parsePerfDest(s string, i int) (perfDest, error) {
	bad := func(why string, a ...any) (perfDest, error) {
		return perfDest{}, fmt.Errorf("%w: %q: %s", errBadPerfLine, s, fmt.Sprintf(why, a...))
	}
	f := strings.Fields(s)
	if len(f) != 8 || f[0] != "qp" || f[1] != strconv.Itoa(i) {
		return bad("want \"qp %d qpn=... psn=... gid=... rkey=... addr=... size=...\"", i)
	}
	var v [6]string
	for k, key := range []string{"qpn", "psn", "gid", "rkey", "addr", "size"} {
		val, ok := strings.CutPrefix(f[2+k], key+"=")
		if !ok {
			return bad("field %d is not %s=", 3+k, key)
		}
		v[k] = val
	}
	var d perfDest
	var n [5]uint64
	bits := [5]int{24, 24, 32, 64, 31}
	for k, idx := range []int{0, 1, 3, 4, 5} {
		x, err := strconv.ParseUint(v[idx], 0, bits[k])
		if err != nil {
			return bad("%v", err)
		}
		n[k] = x
	}
	gid, err := netip.ParseAddr(v[2])
	if err != nil {
		return bad("gid: %v", err)
	}
	if gid.Is4() {
		gid = netip.AddrFrom16(gid.As16())
	}
	d = perfDest{qpn: uint32(n[0]), psn: wire.PSN(n[1]), gid: gid, rkey: uint32(n[2]), addr: n[3], size: int(n[4])}
	return d, nil
}

// openPerfChannel connects the side channel: the client dials the
// server (retrying a refused connect for cfg.dialFor), the server accepts
// one client. The connection is closed when ctx ends.
func openPerfChannel(ctx context.Context, cfg perfConfig, stderr io.Writer) (*sideChannel, error) {
	var conn net.Conn
	var err error
	if cfg.client() {
		hostPort := net.JoinHostPort(cfg.server, strconv.Itoa(cfg.port))
		if conn, err = cli.DialRetry(ctx, hostPort, cfg.dialFor); err != nil {
			return nil, fmt.Errorf("couldn't connect to %s: %w", hostPort, err)
		}
	} else if conn, err = cli.AcceptPeer(ctx, cfg.scAddr, cfg.port, "goroce perf "+cfg.test.name, stderr); err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { conn.Close() })
	return &sideChannel{conn: conn, rd: bufio.NewReader(conn)}, nil
}

// goroceMagic starts goroce's parameter line; a perftest client starts
// with its version string instead.
const goroceMagic = "goroce-perf "

// chooseExchange returns the side channel's format: the client's is
// --exchange (goroce's unless told otherwise); the server follows
// --exchange if given, else looks at the client's first bytes.
func (sc *sideChannel) chooseExchange(cfg perfConfig) (string, error) {
	if cfg.exchange != "" || cfg.client() {
		return cmp.Or(cfg.exchange, exchangeGoroce), nil
	}
	sc.conn.SetDeadline(time.Now().Add(cfg.stall))
	head, err := sc.rd.Peek(len(goroceMagic))
	if err != nil {
		return "", fmt.Errorf("couldn't read the client's first message: %w", err)
	}
	if string(head) == goroceMagic {
		return exchangeGoroce, nil
	}
	return exchangePerftest, nil
}

// exchange trades the parameter line and the QP lines with the peer and
// connects every QP. The server connects before it answers.
func (pc *perfContext) exchange(ctx context.Context, sc *sideChannel) error {
	cfg := pc.cfg
	conn := sc.conn
	conn.SetDeadline(time.Now().Add(cfg.stall))
	mine := []string{cfg.paramLine()}
	for i, q := range pc.qps {
		mine = append(mine, q.local.line(i))
	}
	fail := func(err error) error {
		conn.Close()
		return cli.CtxErr(ctx, err)
	}
	if cfg.client() {
		if err := sc.writeLines(mine...); err != nil {
			return fail(fmt.Errorf("couldn't send local address: %w", err))
		}
	}
	if err := pc.readPeer(sc); err != nil {
		if !cfg.client() {
			sc.writeLines(mine[0]) // so the client learns the mismatch too
		}
		if cfg.client() && errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w (a perftest server? try --exchange perftest)", err)
		}
		return fail(err)
	}
	for _, q := range pc.qps {
		if err := pc.connect(q); err != nil {
			return fail(err)
		}
	}
	if !cfg.client() {
		if err := sc.writeLines(mine...); err != nil {
			return fail(fmt.Errorf("couldn't send local address: %w", err))
		}
	}
	conn.SetDeadline(time.Time{})
	return nil
}

// readPeer reads the peer's parameter line, checks it matches ours, and
// reads its QP lines.
func (pc *perfContext) readPeer(sc *sideChannel) error {
	line, err := sc.readLine(perfLineMax)
	if err != nil {
		return fmt.Errorf("couldn't read the peer's parameters: %w", err)
	}
	if want := pc.cfg.paramLine(); line != want {
		return fmt.Errorf("the peer runs %q, this side %q: give both sides the same TEST and flags", line, want)
	}
	for i, q := range pc.qps {
		line, err := sc.readLine(perfLineMax)
		if err != nil {
			return fmt.Errorf("couldn't read remote address: %w", err)
		}
		if q.remote, err = parsePerfDest(line, i); err != nil {
			return err
		}
		if q.remote.gid == netip.IPv6Unspecified() {
			return fmt.Errorf("%w: %q: GID ::", errBadPerfLine, line)
		}
	}
	return nil
}

// doneLine is the client's final line: how many operations each QP
// completed.
func doneLine(counts []int) string {
	s := "done"
	for _, n := range counts {
		s += " " + strconv.Itoa(n)
	}
	return s
}

// parseDone reads the client's final line for qps QPs.
func parseDone(s string, qps int) ([]int, error) {
	f := strings.Fields(s)
	if len(f) != qps+1 || f[0] != "done" {
		return nil, fmt.Errorf("%w: %q: want \"done\" and %d counts", errBadPerfLine, s, qps)
	}
	counts := make([]int, qps)
	for i := range counts {
		n, err := strconv.Atoi(f[i+1])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: %q: count %d", errBadPerfLine, s, i+1)
		}
		counts[i] = n
	}
	return counts, nil
}

// peerDone is what the server learns from the client's final line.
type peerDone struct {
	counts []int
	err    error
}

// awaitDone reads the client's final line in the background. The channel
// delivers exactly one value.
func (sc *sideChannel) awaitDone(qps int) <-chan peerDone {
	ch := make(chan peerDone, 1)
	go func() {
		line, err := sc.readLine(doneLineMax(qps))
		if err != nil {
			ch <- peerDone{err: fmt.Errorf("couldn't read the client's done: %w", err)}
			return
		}
		counts, err := parseDone(line, qps)
		ch <- peerDone{counts, err}
	}()
	return ch
}

// finishClient sends the client's done line and waits for the server's
// "done".
func (sc *sideChannel) finishClient(counts []int, stall time.Duration) error {
	sc.conn.SetDeadline(time.Now().Add(stall))
	if err := sc.writeLines(doneLine(counts)); err != nil {
		return fmt.Errorf("couldn't send done: %w", err)
	}
	line, err := sc.readLine(perfLineMax)
	if err != nil {
		return fmt.Errorf("couldn't read the server's done: %w", err)
	}
	if line != "done" {
		return fmt.Errorf("%w: %q, want \"done\"", errBadPerfLine, line)
	}
	return nil
}
