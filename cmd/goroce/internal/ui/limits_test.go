package ui

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest sends req on a new connection to the server at addr and
// returns the status of its answer (0 if it hung up without one).
func rawRequest(t *testing.T, addr, req string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// serveLoopback serves a Server on a loopback port for the test and
// returns its host:port.
func serveLoopback(t *testing.T) string {
	u := startServer(t, New(Options{}))
	return strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/")
}

// TestRequestLimits: the server answers a GET with 64 KiB of headers
// with 431 (net/http's own limit is 1 MiB), and a request with a body
// with 413, while the same GET with short headers works.
func TestRequestLimits(t *testing.T) {
	addr := serveLoopback(t)
	get := "GET /api/devices HTTP/1.1\r\nHost: x\r\n"
	if code := rawRequest(t, addr, get+"\r\n"); code != http.StatusOK {
		t.Fatalf("a plain GET: %d, want 200", code)
	}
	long := get + "X-Filler: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
	if code := rawRequest(t, addr, long); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB of headers: %d, want 431", code)
	}
	body := get + "Content-Length: 5\r\n\r\nhello"
	if code := rawRequest(t, addr, body); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a request with a body: %d, want 413", code)
	}
}

// TestStalledRequestClosed: a client that starts a request and stops is
// hung up on within the header timeout (5 s), not kept forever.
func TestStalledRequestClosed(t *testing.T) {
	addr := serveLoopback(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /api/devices HTTP/1.1\r\nHost: x\r\n")
	start := time.Now()
	c.SetReadDeadline(start.Add(readHeaderTimeout + 10*time.Second))
	_, err = io.ReadAll(c)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatalf("the server kept a stalled request open for %v", time.Since(start))
	}
	if el := time.Since(start); el < readHeaderTimeout/2 || el > readHeaderTimeout+3*time.Second {
		t.Errorf("the server hung up after %v, want its header timeout %v", el, readHeaderTimeout)
	}
}
