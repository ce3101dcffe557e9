package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// This file holds the rdma_cm cases: goroce rping against librdmacm's
// rping on rxe. There is no side channel: the two connect with CM MADs on
// QP1 (REQ, REP, RTU), then the client SENDs buffer advertisements and
// the server RDMA READs and WRITEs, and the client disconnects (DREQ,
// DREP). Both sides run -V: rping's client compares what the server wrote
// back with what it sent; goroce's server also checks what it read.

// rdmacmPrograms are the librdmacm examples the suite can run against
// goroce's own version of them.
var rdmacmPrograms = []string{"rping"}

// rpingSize is the ping data size (-S): rping's default.
const rpingSize = 64

// rpingArgs is rping's command line, the same on both sides: -V
// validates, -v prints each ping's data (the suite counts the lines).
func (c interopCase) rpingArgs(server bool, addr string) []string {
	role := "-c"
	if server {
		role = "-s"
	}
	return []string{"rping", role, "-a", addr, "-p", strconv.Itoa(c.Port),
		"-C", strconv.Itoa(c.Iters), "-S", strconv.Itoa(c.Size), "-V", "-v"}
}

// rpingGoroceArgs is goroce rping's command line: as the server it binds
// its own address; as the client it connects to the guest from it.
func (c interopCase) rpingGoroceArgs() []string {
	mtu := []string{"--mtu", strconv.Itoa(c.MTU)}
	if c.RxeRole == rxeClient {
		return slices.Concat(c.rpingArgs(true, c.goroceAddr()), mtu)
	}
	return slices.Concat(c.rpingArgs(false, c.guestAddr()), []string{"-I", c.goroceAddr()}, mtu)
}

// rpingRxeCommand is the guest's rping: the server binds the guest's
// address of the case's family, the client connects to goroce's.
func (c interopCase) rpingRxeCommand() string {
	if c.RxeRole == rxeServer {
		return strings.Join(c.rpingArgs(true, c.guestAddr()), " ")
	}
	return strings.Join(c.rpingArgs(false, c.goroceAddr()), " ")
}

// guestAddr is the guest's address of the case's family.
func (c interopCase) guestAddr() string {
	if c.Family == ipv6 {
		return guestIPv6
	}
	return guestIPv4
}

// rpingPing is ping number n of rping's data, size bytes, as rping.c's
// rping_test_client writes it: "rdma-ping-N: ", then printable characters
// from 'A' + N mod 58 on, wrapping from 'z' to 'A', and a NUL last.
// Written here from rping.c again, apart from goroce rping's own code,
// so that the suite does not take goroce's word for what rping sends.
func rpingPing(n, size int) []byte {
	b := []byte(fmt.Sprintf("rdma-ping-%d: ", n))
	for len(b) < size-1 {
		b = append(b, byte('A'+(n+len(b)-len(fmt.Sprintf("rdma-ping-%d: ", n)))%58))
	}
	return append(b[:size-1], 0)
}

// rpingProblems checks an rping case beyond the exit statuses and ICRCs
// that judge checks: each side printed -C pings of the right data, and the
// capture shows one connection (REQ, REP, RTU from the right sides, then
// DREQ and DREP) and, for each ping, an RDMA READ whose response carries
// the client's ping data and a WRITE that carries it back.
func rpingProblems(c interopCase, o observed) (problems []string, checked string) {
	goroceLine, rxeLine := "ping data: ", "server ping data: "
	if c.RxeRole == rxeClient {
		goroceLine, rxeLine = rxeLine, goroceLine
	}
	count := func(lines []string, prefix string) int {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				n++
			}
		}
		return n
	}
	goroceLines := slices.Collect(strings.Lines(o.goroceOut))
	if n := count(goroceLines, goroceLine); n != c.Iters {
		problems = append(problems, fmt.Sprintf("goroce printed %d pings (%q), want %d", n, goroceLine, c.Iters))
	}
	if n := count(o.rxeOut, rxeLine); n != c.Iters {
		problems = append(problems, fmt.Sprintf("rxe printed %d pings (%q), want %d", n, rxeLine, c.Iters))
	}
	client := c.goroceAddr()
	if c.RxeRole == rxeClient {
		client = c.guestAddr()
	}
	problems = append(problems, rpingWireProblems(o.pcapPath, client, c.Port, c.Iters, c.Size)...)
	return problems, fmt.Sprintf(", data checked: -V on both sides, and %d READ responses and WRITEs on the wire hold rping's data", c.Iters)
}

// rpingWireProblems checks the capture at path of an rping of iters
// pings of size bytes whose client is at the address client and whose
// server listens on rdma_cm port port. Besides the connection's own CM
// messages the capture may hold REQs to the port that a REJ with reason
// 8 (no listener yet) answered, which the client tried again, and REQs
// to other ports (the cases before and after, at the capture's edges).
func rpingWireProblems(path, client string, port, iters, size int) []string {
	recs, err := pcap.ReadFile(path)
	if err != nil {
		return []string{"capture not read: " + err.Error()}
	}
	var ps []string
	var cms []cmMsg
	var reads, writes int
	for _, rec := range recs {
		d, ok := rec.RoCEv2()
		if !ok {
			continue
		}
		p, err := wire.Parse(d.Payload)
		if err != nil {
			continue // judge counts malformed packets
		}
		switch p.Opcode() {
		case wire.UDSendOnly:
			m, err := wire.ParseMAD(p.Payload())
			if err != nil || !m.IsCM() {
				ps = append(ps, "a UD SEND that is not a CM MAD")
				continue
			}
			from := "server"
			if d.Src.Addr().Unmap().String() == client {
				from = "client"
			}
			cms = append(cms, cmMsg{from: from, attr: m.Header().AttrID(), data: m.Data()})
		case wire.RCReadResponseOnly:
			if want := rpingPing(reads, size); !bytes.Equal(p.Payload(), want) {
				ps = append(ps, fmt.Sprintf("READ response %d carries %q, want %q", reads, p.Payload(), want))
			}
			reads++
		case wire.RCWriteOnly:
			if want := rpingPing(writes, size); !bytes.Equal(p.Payload(), want) {
				ps = append(ps, fmt.Sprintf("WRITE %d carries %q, want %q", writes, p.Payload(), want))
			}
			writes++
		}
	}
	ps = append(ps, cmProblems(cms, uint16(port))...)
	if reads != iters || writes != iters {
		ps = append(ps, fmt.Sprintf("%d READ responses and %d WRITEs, want %d each", reads, writes, iters))
	}
	return ps
}

// cmMsg is a CM message in a capture.
type cmMsg struct {
	from string // client or server
	attr uint16
	data []byte // the MAD's data: the message
}

// String is the message as the problems name it: "client:0x10".
func (m cmMsg) String() string { return fmt.Sprintf("%s:%#x", m.from, m.attr) }

// localCommID is the sender's communication ID, which every CM message
// starts with (IBTA 12.6).
func (m cmMsg) localCommID() uint32 { return binary.BigEndian.Uint32(m.data) }

// cmProblems checks the CM messages of an rping on port: the connection
// the REP accepted is REQ, REP, RTU from the client, then DREQ from the
// client and DREP; any other message must be a REQ to another port or a
// REQ to port that a REJ (reason 8) refused, and that REJ. A message
// that repeats the connection's previous one byte for byte is a MAD
// retransmission (IBTA 12.6: the first went unanswered, e.g. a REQ that
// reached a preloaded server before it had its device open) and counts
// once.
func cmProblems(cms []cmMsg, port uint16) []string {
	var ps []string
	conn := map[uint32]bool{}
	refused := map[uint32]bool{} // REQs a REJ with reason 8 answered
	for _, m := range cms {
		switch m.attr {
		case wire.CMAttrREP:
			if len(conn) == 0 {
				conn[wire.CMRep(m.data).LocalCommID()], conn[wire.CMRep(m.data).RemoteCommID()] = true, true
			}
		case wire.CMAttrREJ:
			if r := wire.CMRej(m.data); r.Reason() == wire.CMRejInvalidServiceID && r.MessageRejected() == wire.CMMsgREQ {
				refused[r.RemoteCommID()] = true
			}
		}
	}
	var got []string
	var last cmMsg
	for _, m := range cms {
		_, reqPort, _ := wire.SplitServiceID(wire.CMReq(m.data).ServiceID())
		switch {
		case conn[m.localCommID()] && m.from == last.from && m.attr == last.attr && bytes.Equal(m.data, last.data):
			// a retransmission of the message before it
		case conn[m.localCommID()]:
			got = append(got, m.String())
			last = m
		case m.attr == wire.CMAttrREQ && reqPort != port: // another case's
		case m.attr == wire.CMAttrREQ && refused[m.localCommID()]:
		case m.attr == wire.CMAttrREJ && refused[wire.CMRej(m.data).RemoteCommID()]:
		default:
			ps = append(ps, fmt.Sprintf("a CM message outside the connection: %v", m))
		}
	}
	want := []string{fmt.Sprintf("client:%#x", wire.CMAttrREQ), fmt.Sprintf("server:%#x", wire.CMAttrREP),
		fmt.Sprintf("client:%#x", wire.CMAttrRTU), fmt.Sprintf("client:%#x", wire.CMAttrDREQ), fmt.Sprintf("server:%#x", wire.CMAttrDREP)}
	if !slices.Equal(got, want) {
		ps = append(ps, fmt.Sprintf("CM messages %v, want %v (REQ, REP, RTU, DREQ, DREP)", got, want))
	}
	return ps
}
