package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/wire"
)

// This file holds the UCX cases (-ucx): Debian's ucx_perftest (UCX 1.13)
// at UCT level over rc_verbs, on goroce under `goroce exec` and on rxe in
// the guest, the two meeting on ucx_perftest's TCP side channel:
//
//   - am_lat_rc: active-message ping-pong of 8 bytes (-t am_lat), an RC
//     SEND each way per iteration;
//   - put_bw_rc: RDMA WRITEs of 64 KiB from the client (-t put_bw -D
//     zcopy).
//
// ucx_perftest's server takes every option from its client, the device
// too, and the two sides' devices differ (goroce0:1, rxe0:1): each side
// runs the same test from a batch file of its own (-b) that names its own
// device, which a batch line sets over what the client sent. On rxe the
// GID is chosen by UCX_IB_GID_INDEX (the case's family's).
//
// A case passes when both programs exit 0, the client reports the test's
// iterations ("Final:"), the capture's ICRCs verify and shows no NAK,
// retransmission or duplicate from goroce, and what went on the wire is
// the test's: for am_lat, the last -n SENDs each way are UCX's active
// message 5 (the perftest's id) with the 8-byte header holding the
// iteration's sequence number, 0 to -n - 1, in order; for put_bw, the
// client's RDMA WRITE messages are each 64 KiB, at least -n of them (the
// warm-up's runs add some more), and the server writes nothing. The put buffer holds no pattern of
// ucx_perftest's to check. They run at MTU 1024 only, in both roles and
// both families.

// ucxPrograms are the -ucx items.
var ucxPrograms = []string{"am_lat_rc", "put_bw_rc"}

// ucxMTU is the one path MTU of the UCX cases.
const ucxMTU = 1024

// ucxCaseTimeout bounds one UCX case on either side: UCX takes seconds to
// start in a TCG guest.
const ucxCaseTimeout = 40 * time.Second

// ucxWarmup is the warm-up iterations of every UCX case (-w): ucx_perftest
// runs them in runs of 1, 2, 4, ... iterations, each counting from 0,
// until it has run as many or 100 ms have passed.
const ucxWarmup = 10

// ucxAMID is the active-message id ucx_perftest's UCT tests send with
// (UCT_PERF_TEST_AM_ID).
const ucxAMID = 5

// ucxCase is item's case.
func (p plan) ucxCase(item string, r role, f family, port int) interopCase {
	c := interopCase{Transport: "rc", UCX: strings.TrimSuffix(item, "_rc"), Preload: true, RxeRole: r, Family: f,
		MTU: ucxMTU, Port: port}
	switch c.UCX {
	case "am_lat":
		c.Size, c.Iters = 8, 200
	case "put_bw":
		c.Size, c.Iters = 65536, 20
	}
	return c
}

// ucxBatchLine is the case's test as a line of a ucx_perftest batch file,
// on device dev.
func (c interopCase) ucxBatchLine(dev string) string {
	l := fmt.Sprintf("%s -t %s -x rc_verbs -d %s:1 -n %d -w %d -s %d", c.UCX, c.UCX, dev, c.Iters, ucxWarmup, c.Size)
	if c.UCX == "put_bw" {
		l += " -D zcopy"
	}
	return l
}

// writeUCXBatches writes goroce's side's batch file of each UCX case into
// dir and gives the case its path.
func writeUCXBatches(dir string, cases []interopCase) error {
	for i, c := range cases {
		if c.UCX == "" {
			continue
		}
		path := filepath.Join(dir, c.Name()+".ucx-batch")
		if err := os.WriteFile(path, []byte(c.ucxBatchLine("goroce0")+"\n"), 0o644); err != nil {
			return err
		}
		cases[i].UCXBatch = path
	}
	return nil
}

// ucxArgs is ucx_perftest on goroce0 under goroce exec: the client of the
// guest's side channel, or the server.
func (c interopCase) ucxArgs() []string {
	args := append(c.execArgs(), "ucx_perftest", "-p", strconv.Itoa(c.Port), "-b", c.UCXBatch)
	if c.RxeRole == rxeServer {
		args = append(args, guestIPv4) // the side channel is IPv4 only
	}
	return args
}

// ucxRxeCommand is the guest's side: its batch file written, then
// ucx_perftest on rxe0 with the case's family's GID.
func (c interopCase) ucxRxeCommand() string {
	gid := c.rxeGID()
	batch := fmt.Sprintf("/tmp/ucx-%d.batch", c.Port)
	run := fmt.Sprintf("ucx_perftest -p %d -b %s", c.Port, batch)
	if c.RxeRole == rxeClient {
		run += " " + goroceIPv4
	}
	return fmt.Sprintf(`env UCX_IB_GID_INDEX=%s sh -c "printf '%%s\n' '%s' > %s && exec %s"`, gid, c.ucxBatchLine("rxe0"), batch, run)
}

// reUCXFinal is the client's report of the test: "Final:" and the
// iterations.
var reUCXFinal = regexp.MustCompile(`(?m)^Final:\s+(\d+)\s`)

// ucxProblems checks a UCX case beyond the exit statuses and ICRCs that
// judge checks (see the top of this file), and says what it checked.
func ucxProblems(c interopCase, o observed) (problems []string, checked string) {
	clientOut, client := o.goroceOut, "goroce"
	if c.RxeRole == rxeClient {
		clientOut, client = strings.Join(o.rxeOut, "\n"), "rxe"
	}
	if m := reUCXFinal.FindStringSubmatch(clientOut); m == nil || m[1] != strconv.Itoa(c.Iters) {
		problems = append(problems, fmt.Sprintf("%s's ucx_perftest did not report %d iterations", client, c.Iters))
	}
	for _, s := range []struct {
		who string
		f   flow
		max int
	}{{"goroce", o.wire.goroce, 0}, {"rxe", o.wire.rxe, maxRxeDuplicates}} {
		if s.f.NAKs > 0 || s.f.Retransmits > 0 || s.f.Duplicates > s.max {
			problems = append(problems, fmt.Sprintf("%s sent %d NAKs, %d retransmissions and %d duplicates on a clean bridge",
				s.who, s.f.NAKs, s.f.Retransmits, s.f.Duplicates))
		}
	}
	switch c.UCX {
	case "am_lat":
		for _, s := range []struct {
			who string
			f   flow
		}{{"goroce", o.wire.goroce}, {"rxe", o.wire.rxe}} {
			if err := ucxAMSequence(s.f.Data, c.Iters); err != nil {
				problems = append(problems, s.who+"'s active messages: "+err.Error())
			}
		}
		checked = fmt.Sprintf(", checked: %s reported %d iterations; each way the last %d SENDs are active message %d with sequence numbers 0..%d",
			client, c.Iters, c.Iters, ucxAMID, c.Iters-1)
	case "put_bw":
		putter, other := o.wire.goroce, o.wire.rxe
		putterWho, otherWho := "goroce", "rxe"
		if c.RxeRole == rxeClient {
			putter, other, putterWho, otherWho = other, putter, otherWho, putterWho
		}
		msgs, err := writeMessages(putter.Data)
		switch {
		case err != nil:
			problems = append(problems, putterWho+"'s WRITEs: "+err.Error())
		case len(msgs) < c.Iters:
			problems = append(problems, fmt.Sprintf("%s sent %d WRITE messages, want at least %d", putterWho, len(msgs), c.Iters))
		}
		for _, n := range msgs {
			if n != c.Size {
				problems = append(problems, fmt.Sprintf("%s sent a WRITE message of %d bytes, want %d", putterWho, n, c.Size))
				break
			}
		}
		if others, _ := writeMessages(other.Data); len(others) > 0 {
			problems = append(problems, fmt.Sprintf("%s, the server, sent %d WRITE messages", otherWho, len(others)))
		}
		checked = fmt.Sprintf(", checked: %s reported %d iterations; %s sent %d WRITE messages of %d B",
			client, c.Iters, putterWho, len(msgs), c.Size)
	}
	return problems, checked
}

// ucxAMSequence checks the SENDs of one side of an am_lat case: each is
// active message ucxAMID with an 8-byte header, and the last n carry the
// sequence numbers 0 to n-1 in order (the warm-up's runs before them
// count from 0 too).
func ucxAMSequence(data []sentPayload, n int) error {
	var sn []uint64
	for _, d := range data {
		if d.op != wire.RCSendOnly {
			continue
		}
		if len(d.payload) != 9 || d.payload[0] != ucxAMID {
			return fmt.Errorf("a SEND of %d bytes starting % x, want active message %d with an 8-byte header", len(d.payload),
				d.payload[:min(len(d.payload), 9)], ucxAMID)
		}
		sn = append(sn, binary.LittleEndian.Uint64(d.payload[1:]))
	}
	if len(sn) < n {
		return fmt.Errorf("%d SENDs, want at least %d", len(sn), n)
	}
	for i, v := range sn[len(sn)-n:] {
		if v != uint64(i%256) { // ucx_perftest's sequence numbers are 8-bit
			return fmt.Errorf("the %d-th of the last %d SENDs has sequence number %d", i, n, v)
		}
	}
	return nil
}

// writeMessages gives the payload size of each RDMA WRITE message in one
// side's packets (FIRST, MIDDLE... LAST, or ONLY, in order); zero-length
// WRITEs, which UCX sends to flush, carry no payload and are not in data.
func writeMessages(data []sentPayload) ([]int, error) {
	var sizes []int
	open := -1
	for _, d := range data {
		switch d.op {
		case wire.RCWriteOnly, wire.RCWriteOnlyImm:
			if open >= 0 {
				return nil, fmt.Errorf("a WRITE_ONLY inside a message")
			}
			sizes = append(sizes, len(d.payload))
		case wire.RCWriteFirst:
			if open >= 0 {
				return nil, fmt.Errorf("a WRITE_FIRST inside a message")
			}
			open = len(d.payload)
		case wire.RCWriteMiddle, wire.RCWriteLast, wire.RCWriteLastImm:
			if open < 0 {
				return nil, fmt.Errorf("a WRITE_MIDDLE or _LAST outside a message")
			}
			open += len(d.payload)
			if d.op != wire.RCWriteMiddle {
				sizes, open = append(sizes, open), -1
			}
		}
	}
	if open >= 0 {
		return nil, fmt.Errorf("the capture ends inside a WRITE message")
	}
	return sizes, nil
}

// isUCXItem reports whether s is a -ucx item.
func isUCXItem(s string) bool { return slices.Contains(ucxPrograms, s) }
