package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// capture is tcpdump writing the RoCEv2 packets on the lab's bridge to a
// pcap file, for one case.
type capture struct {
	cmd   *exec.Cmd
	path  string
	lines chan []string      // tcpdump's stderr, whole, once it has exited
	info  chan tcpdumpCounts // its answers to SIGUSR1
}

// tcpdumpCounts are tcpdump's counts of the packets it has written to
// the file (captured), that the kernel's filter has passed to it
// (received) and that the kernel dropped for want of room.
type tcpdumpCounts struct {
	captured, received, dropped int
	ok                          bool // tcpdump printed them
}

// startCapture starts tcpdump in the namespace and returns once it
// listens (so the case's first packet is not missed).
func startCapture(ctx context.Context, l *lab, path string) (*capture, error) {
	cmd := l.inNS(ctx, "tcpdump", "-i", "br0", "-n", "-U", "--immediate-mode", "-B", "32768", "-s", "0",
		"-w", path, "udp", "port", "4791")
	c, err := watchCapture(cmd, path)
	if err != nil {
		return nil, fmt.Errorf("tcpdump: %w", err)
	}
	return c, nil
}

// watchCapture starts cmd, a tcpdump writing path, and returns once it
// listens, reading its stderr on: its answers to SIGUSR1, and the whole
// once it has exited.
func watchCapture(cmd *exec.Cmd, path string) (*capture, error) {
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 3 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	listening := make(chan bool, 1)
	lines := make(chan []string, 1)
	info := make(chan tcpdumpCounts, 32)
	go func() {
		sc := bufio.NewScanner(stderr)
		ok := false
		var all []string
		for sc.Scan() {
			all = append(all, sc.Text())
			if !ok && strings.Contains(sc.Text(), "listening on") {
				ok = true
				listening <- true
			}
			if n, found := parseInfo(sc.Text()); found {
				select {
				case info <- n:
				default: // an answer nobody waits for any more
				}
			}
		}
		if !ok {
			listening <- false
		}
		lines <- all
	}()
	select {
	case ok := <-listening:
		if ok {
			return &capture{cmd: cmd, path: path, lines: lines, info: info}, nil
		}
	case <-time.After(5 * time.Second):
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	return nil, errors.New("did not start listening within 5 s")
}

// stop ends tcpdump, which flushes the file on SIGINT, once the file has
// stopped growing (a loaded host's tcpdump lags behind the bridge, by
// seconds at times) and tcpdump, asked for its counts (SIGUSR1, for askFor at most),
// has written every packet its filter had taken: the case is over, so
// those are the case's packets. A packet that passes the filter after that (rxe retransmitting
// once more, and goroce's answer) may reach tcpdump as it stops and stay
// out of the file, which loses nothing of the case. stop returns an error
// if the file misses a packet the case sent: dropped by the kernel, or
// taken by the filter before the stop and never written.
func (c *capture) stop() error {
	last := int64(-1)
	for range 30 {
		fi, err := os.Stat(c.path)
		if err != nil || fi.Size() == last {
			break
		}
		last = fi.Size()
		time.Sleep(100 * time.Millisecond)
	}
	var at tcpdumpCounts
	for end := time.Now().Add(askFor); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if at = c.counts(time.Until(end)); at.ok && at.captured >= at.received {
			break
		}
	}
	c.cmd.Process.Signal(os.Interrupt)
	c.cmd.Wait()
	return captureComplete(at, <-c.lines)
}

// askFor bounds how long stop asks tcpdump for its counts.
const askFor = 3 * time.Second

// counts asks tcpdump for its counts (SIGUSR1) and waits up to wait for
// the answer, after dropping any answer to an earlier ask that came too
// late. Without an answer the counts are not ok.
func (c *capture) counts(wait time.Duration) tcpdumpCounts {
	for len(c.info) > 0 {
		<-c.info
	}
	if c.cmd.Process.Signal(syscall.SIGUSR1) != nil {
		return tcpdumpCounts{}
	}
	select {
	case n := <-c.info:
		return n
	case <-time.After(wait):
		return tcpdumpCounts{}
	}
}

var (
	reTcpdumpCount = regexp.MustCompile(`^(\d+) packets? (captured|received by filter|dropped by kernel)`)
	reTcpdumpInfo  = regexp.MustCompile(`(\d+) packets? captured, (\d+) packets? received by filter, (\d+) packets? dropped by kernel`)
)

// parseInfo reads tcpdump's answer to SIGUSR1, one line: "tcpdump: N
// packets captured, N packets received by filter, N packets dropped by
// kernel".
func parseInfo(line string) (tcpdumpCounts, bool) {
	m := reTcpdumpInfo.FindStringSubmatch(line)
	if m == nil {
		return tcpdumpCounts{}, false
	}
	n := tcpdumpCounts{ok: true}
	n.captured, _ = strconv.Atoi(m[1])
	n.received, _ = strconv.Atoi(m[2])
	n.dropped, _ = strconv.Atoi(m[3])
	return n, true
}

// captureComplete judges a capture by tcpdump's counts when the case was
// over (at, its answer to SIGUSR1; if it never answered, the closing
// counts stand in) and its closing counts in lines ("N packets
// captured", "N packets received by filter", "N packets dropped by
// kernel"): complete when the kernel dropped nothing and the file holds
// at least every packet the filter had taken when the case was over.
func captureComplete(at tcpdumpCounts, lines []string) error {
	n := map[string]int{}
	for _, l := range lines {
		if m := reTcpdumpCount.FindStringSubmatch(l); m != nil {
			n[m[2]], _ = strconv.Atoi(m[1])
		}
	}
	want := n["received by filter"]
	if at.ok {
		want = at.received
	}
	if n["dropped by kernel"] > 0 || n["captured"] < want {
		return fmt.Errorf("capture incomplete: tcpdump captured %d of %d packets (%d of %d when the case was over), %d dropped by the kernel",
			n["captured"], n["received by filter"], at.captured, at.received, n["dropped by kernel"])
	}
	return nil
}

// pcapReport is what `goroce pcap` says about one case's capture.
type pcapReport struct {
	Packets, ICRCOK, ICRCBad, Malformed int
	FromGoroce, FromRxe                 int      // packets by sender
	Lines                               []string // one decoded packet each
}

var rePcapSummary = regexp.MustCompile(`summary: packets=(\d+) icrc_ok=(\d+) icrc_bad=(\d+) malformed=(\d+)`)

// decodePcap runs `goroce pcap` on the capture and counts the packets of
// each side (goroce's address is goroceAddr).
func decodePcap(ctx context.Context, goroce, path, goroceAddr string) (pcapReport, error) {
	var r pcapReport
	out, err := exec.CommandContext(ctx, goroce, "pcap", path).Output()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ExitCode() != 1 {
		return r, fmt.Errorf("goroce pcap: exit status %d: %s", ee.ExitCode(), bytes.TrimSpace(ee.Stderr))
	} else if err != nil && !ok {
		return r, fmt.Errorf("goroce pcap: %w", err)
	}
	return parsePcapReport(string(out), goroceAddr)
}

// parsePcapReport reads `goroce pcap`'s lines: "T SRC > DST ..." per
// packet, then the summary.
func parsePcapReport(out, goroceAddr string) (pcapReport, error) {
	var r pcapReport
	found := false
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if m := rePcapSummary.FindStringSubmatch(line); m != nil {
			n := make([]int, 4)
			for i := range n {
				n[i], _ = strconv.Atoi(m[i+1])
			}
			r.Packets, r.ICRCOK, r.ICRCBad, r.Malformed = n[0], n[1], n[2], n[3]
			found = true
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != ">" {
			continue
		}
		r.Lines = append(r.Lines, line)
		if f[1] == goroceAddr {
			r.FromGoroce++
		} else {
			r.FromRxe++
		}
	}
	if !found {
		return r, errors.New("goroce pcap printed no summary")
	}
	return r, nil
}
