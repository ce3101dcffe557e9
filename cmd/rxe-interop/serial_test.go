package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const serialSample = "RXELAB[g1]: rxe0 is up uptime=2.82 state=4: ACTIVE\r\n" +
	"RXE-INTEROP gid v4=1 v6=2\r\n" +
	"RXELAB-CASE BEGIN rc_pingpong-server-ipv4-mtu1024 role=server: ibv_rc_pingpong -d rxe0 -g 1\r\n" +
	"  local address:  LID 0x0000, QPN 0x000011\r\n" +
	"Terminated\r\n" +
	"RXELAB-CASE END rc_pingpong-server-ipv4-mtu1024 rc=143\r\n" +
	"RXE-INTEROP mtu 9000: \t\t\tactive_mtu:\t\t4096 (5)\r\n" +
	"RXELAB-CASE BEGIN ud_pingpong-client-ipv4-mtu4096 role=client: ibv_ud_pingpong\r\n" +
	"RXELAB-CASE END ud_pingpong-client-ipv4-mtu4096 rc=0\r\n" +
	"RXELAB[g1]: cmd done rc=1 uptime=9.87\r\n"

func TestSerialLogInPieces(t *testing.T) {
	l := newSerialLog("", 0)
	// QEMU writes whenever it likes: feed the console in odd pieces.
	for b := []byte(serialSample); len(b) > 0; {
		n := min(7, len(b))
		l.feed(b[:n])
		b = b[n:]
	}
	if rc, ok := l.ended["rc_pingpong-server-ipv4-mtu1024"]; !ok || rc != 143 {
		t.Errorf("rc case: ended=%v rc=%d, want rc=143", ok, rc)
	}
	if rc, ok := l.ended["ud_pingpong-client-ipv4-mtu4096"]; !ok || rc != 0 {
		t.Errorf("ud case: ended=%v rc=%d, want rc=0", ok, rc)
	}
	want := []string{"  local address:  LID 0x0000, QPN 0x000011", "Terminated"}
	if got := l.lastLines("rc_pingpong-server-ipv4-mtu1024", 4); !slices.Equal(got, want) {
		t.Errorf("rc case output %q, want %q", got, want)
	}
	if l.mtu[9000] != 4096 {
		t.Errorf("active MTU after 9000: %d, want 4096", l.mtu[9000])
	}
	if !l.done || l.doneRC != 1 {
		t.Errorf("done=%v rc=%d, want done with rc=1", l.done, l.doneRC)
	}
}

func TestSerialLogFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guest.log")
	half := len(serialSample) / 2
	if err := os.WriteFile(path, []byte(serialSample[:half]), 0o644); err != nil {
		t.Fatal(err)
	}
	l := newSerialLog(path, 0)
	l.refresh()
	if l.done {
		t.Fatal("done after half the log")
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(serialSample[half:])
	f.Close()
	l.refresh()
	if !l.done || len(l.ended) != 2 {
		t.Errorf("after the whole log: done=%v ended=%v", l.done, l.ended)
	}
}
