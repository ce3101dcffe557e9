package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serialLog follows the guest's serial console, a file QEMU appends to,
// and keeps what the suite needs from it: which cases began and ended
// (with rxe's exit status), what each case printed, the MTU reports, and
// whether the guest's command is done. Not safe for concurrent use.
type serialLog struct {
	path string
	pid  int // the guest's qemu; 0 if unknown

	off     int64  // bytes of the file consumed
	partial []byte // an unfinished last line

	begun  map[string]bool
	ended  map[string]int      // case -> rxe's exit status
	output map[string][]string // case -> lines between its markers
	mtu    map[int]int         // eth0 MTU -> rxe active_mtu reported after setting it
	cur    string              // the case between its markers, if any
	done   bool                // "cmd done" seen, or qemu is gone
	doneRC int                 // the guest command's exit status (-1: qemu vanished)
}

func newSerialLog(path string, pid int) *serialLog {
	return &serialLog{path: path, pid: pid, begun: map[string]bool{}, ended: map[string]int{},
		output: map[string][]string{}, mtu: map[int]int{}}
}

var (
	reBegin     = regexp.MustCompile(`^RXELAB-CASE BEGIN (\S+) `)
	reEnd       = regexp.MustCompile(`^RXELAB-CASE END (\S+) rc=(\d+)`)
	reCmdDone   = regexp.MustCompile(`^RXELAB\[[^\]]*\]: cmd done rc=(\d+)`)
	reActiveMTU = regexp.MustCompile(`^` + markerMTU + `(\d+):.*active_mtu:\s*(\d+)`)
)

// feed takes the next bytes of the console.
func (l *serialLog) feed(b []byte) {
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return
		}
		l.line(strings.TrimRight(string(l.partial[:i]), "\r"))
		l.partial = l.partial[i+1:]
	}
}

// line takes one complete console line.
func (l *serialLog) line(s string) {
	if m := reBegin.FindStringSubmatch(s); m != nil {
		l.cur = m[1]
		l.begun[l.cur] = true
		return
	}
	if m := reEnd.FindStringSubmatch(s); m != nil {
		rc, _ := strconv.Atoi(m[2])
		l.ended[m[1]] = rc
		l.cur = ""
		return
	}
	if m := reCmdDone.FindStringSubmatch(s); m != nil {
		l.doneRC, _ = strconv.Atoi(m[1])
		l.done = true
		return
	}
	if m := reActiveMTU.FindStringSubmatch(s); m != nil {
		eth, _ := strconv.Atoi(m[1])
		active, _ := strconv.Atoi(m[2])
		l.mtu[eth] = active
		return
	}
	if l.cur != "" {
		l.output[l.cur] = append(l.output[l.cur], s)
	}
}

// refresh reads what the guest wrote since the last call, and notices a
// qemu that is gone without finishing its command.
func (l *serialLog) refresh() {
	l.readNew()
	if !l.done && l.pid > 0 && syscall.Kill(l.pid, 0) == syscall.ESRCH {
		l.readNew() // qemu's last words may have landed after the first read
		if !l.done {
			l.done, l.doneRC = true, -1
		}
	}
}

// readNew feeds the bytes appended to the console file since the last read.
func (l *serialLog) readNew() {
	f, err := os.Open(l.path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return
	}
	b, _ := io.ReadAll(f)
	l.off += int64(len(b))
	l.feed(b)
}

// waitFor polls the console until cond holds, the guest is done, timeout
// passes or ctx ends; it reports whether cond held.
func (l *serialLog) waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		l.refresh()
		if cond() {
			return true
		}
		if l.done {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// lastLines is the end of what the case printed on rxe's side.
func (l *serialLog) lastLines(name string, n int) []string {
	out := l.output[name]
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
