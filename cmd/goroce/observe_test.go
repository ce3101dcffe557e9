package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// TestPcapFlag runs pingpong with --pcap on the server and decodes the
// capture with goroce pcap: every packet the server sent and received is
// there, and every ICRC verifies.
func TestPcapFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	file := filepath.Join(t.TempDir(), "server.pcap")
	srvAddr, cliAddr := clitest.LoopbackPair()
	srvErr := clitest.NewPortWriter()
	srvCode := make(chan int, 1)
	go func() {
		var out bytes.Buffer
		srvCode <- run(ctx, []string{"pingpong", "--addr", srvAddr, "-p", "0", "-n", "3", "-s", "3000", "--pcap", file}, &out, srvErr)
	}()
	var port int
	select {
	case port = <-srvErr.Port:
	case code := <-srvCode:
		t.Fatalf("server exited %d before listening: %s", code, srvErr)
	}
	var cliOut, cliErr bytes.Buffer
	if code := run(ctx, []string{"pingpong", "--addr", cliAddr, "-p", strconv.Itoa(port), "-n", "3", "-s", "3000", srvAddr}, &cliOut, &cliErr); code != cli.ExitOK {
		t.Fatalf("client exit %d: %s", code, cliErr.String())
	}
	if code := <-srvCode; code != cli.ExitOK {
		t.Fatalf("server exit %d: %s", code, srvErr)
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"pcap", file}, &out, &errOut); code != cli.ExitOK {
		t.Fatalf("goroce pcap exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	// 3 iterations each way, 3 packets per 3000-byte SEND, plus ACKs.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	summary := lines[len(lines)-1]
	if !strings.Contains(summary, "icrc_bad=0 malformed=0") || strings.Contains(summary, "packets=0 ") ||
		strings.Count(out.String(), "RC_SEND_FIRST") != 6 {
		t.Errorf("capture decoded as:\n%s", out.String())
	}
}
