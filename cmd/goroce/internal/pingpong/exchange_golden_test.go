package pingpong

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// run is the goroce command line with this package's command alone.
var run = clitest.Command("pingpong", Run)

// waitWriter collects output and closes seen once it contains want.
type waitWriter struct {
	want string
	seen chan struct{}

	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
}

func (w *waitWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *waitWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// loopbackGID rewrites the GID of a captured pingpong message to a
// loopback address nothing listens on, so that a replayed peer never
// makes goroce send packets off this host.
func loopbackGID(msg []byte) []byte {
	d, err := parseDest(msg)
	if err != nil {
		return msg
	}
	d.gid = netip.MustParseAddr("::ffff:127.66.255.254")
	return destMsg(d)
}

// TestPingpongGoldenMessages reads the address messages ibv_rc_pingpong
// traded over IPv4 and IPv6 GIDs: goroce parses each, writes the same 52
// bytes back from what it parsed, and what it parsed is what the RoCEv2
// packets then used (QPNs, PSNs, the GID as the sender's IP address). The
// client ends with "done" and its NUL.
func TestPingpongGoldenMessages(t *testing.T) {
	for _, name := range []string{"rc_pingpong", "rc_pingpong_ipv6"} {
		t.Run(name, func(t *testing.T) {
			g := clitest.ReadGoldenCapture(t, name)
			cli, srv := g.From(true), g.From(false)
			if len(cli) != 2 || len(srv) != 1 || string(cli[1]) != pingpongDone {
				t.Fatalf("client sent %q, server %q: want an address each and the client's done", cli, srv)
			}
			var d [2]ppDest
			for i, msg := range [][]byte{cli[0], srv[0]} {
				if len(msg) != pingpongMsgLen {
					t.Errorf("message %q: %d bytes, goroce's pingpongMsgLen %d", msg, len(msg), pingpongMsgLen)
				}
				var err error
				if d[i], err = parseDest(msg); err != nil {
					t.Fatal(err)
				}
				if again := destMsg(d[i]); !bytes.Equal(again, msg) {
					t.Errorf("goroce writes %+v as\n%q\nrxe wrote\n%q", d[i], again, msg)
				}
			}
			clitest.CheckPeerPackets(t, g, d[0].gid, d[1].gid, d[0].qpn, d[1].qpn, d[0].psn, d[1].psn)
		})
	}
}

// TestPingpongGoldenServerExchange plays ibv_rc_pingpong's client, its
// captured bytes, against goroce pingpong's server: the server's answer
// has the shape of rxe's (52 bytes, the same separators and NUL) and
// names the server's own QP, and the server takes the client's "done".
func TestPingpongGoldenServerExchange(t *testing.T) {
	g := clitest.ReadGoldenCapture(t, "rc_pingpong")
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	remote, err := parseDest(loopbackGID(g.From(true)[0]))
	if err != nil {
		t.Fatal(err)
	}
	srvAddr, _ := clitest.LoopbackPair()
	// The server prints the remote address once it has the client's done.
	srvOut := &waitWriter{want: "  remote address: " + remote.line() + "\n", seen: make(chan struct{})}
	port, srvCode, _ := clitest.StartServer(t, ctx, run, []string{"pingpong", "--addr", srvAddr, "-p", "0", "-n", "5", "-s", "1024", "-g", "0"}, srvOut)
	conn, err := net.Dial("tcp", net.JoinHostPort(srvAddr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := clitest.ReplayPeer(conn, g.Segments, true, loopbackGID)
	if err != nil {
		t.Fatalf("replaying the client: %v", err)
	}
	if err := clitest.ShapeDiff(got[0], g.From(false)[0]); err != nil {
		t.Errorf("server's address message: %v", err)
	}
	d, err := parseDest(got[0])
	if err != nil || d.gid != netip.MustParseAddr("::ffff:"+srvAddr) || d.lid != 0 {
		t.Errorf("server's address message %q: %+v %v, want LID 0 and GID ::ffff:%s", got[0], d, err, srvAddr)
	}
	select {
	case <-srvOut.seen:
	case code := <-srvCode:
		t.Fatalf("server exited %d before taking the client's done:\n%s", code, srvOut)
	}
	// Past its exchange, the server waits for a ping that never comes.
	cancel()
	<-srvCode
	if want := "  local address:  " + d.line() + "\n"; !strings.Contains(srvOut.String(), want) {
		t.Errorf("server output has no %q:\n%s", want, srvOut)
	}
}
