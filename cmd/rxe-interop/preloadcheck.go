package main

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/goroce/goroce/wire"
)

// The data checks of the preloaded cases, where both sides run the same
// Debian program and neither prints what it received. The capture is the
// oracle, where the programs' buffers are known:
//
//   - ibv_rc/uc/ud_pingpong -c: both sides fill their buffer with 0x7b,
//     the client writes a zero at the start of each page of it, and each
//     side sends what it last received (one buffer for both), so every
//     message either way must be 0x7b with a zero at each page start;
//     ibv_srq_pingpong fills its buffer with zeros, so its messages must
//     be zeros;
//   - ib_write_lat: the buffers are zeros, and each side writes its
//     message count into the last byte before each WRITE, so the k-th
//     WRITE either way must be zeros ending in byte k;
//   - ib_atomic_bw: its FETCH_ADDs go round atomicSlots 64-byte slots of
//     the passive side's (rand()) buffer, so from the second round on,
//     the original value returned for a slot must be the one returned
//     for it before plus that FETCH_ADD's add (checkOrigValues); the
//     preloaded atomic_bw cases run two rounds.
//
// The other perftest programs fill their buffers with rand(), once: what
// they send then stays the same, so every READ response of ib_read_bw and
// ib_read_lat (one remote buffer read again and again) and every WRITE or
// SEND of ib_write_bw and ib_send_bw (one local buffer sent again and
// again) must carry the bytes of the first. ib_send_lat receives into the
// buffer it sends from, so its data is not checked, and the result line
// says so.

// atomicSlots is how many targets ib_atomic_bw's FETCH_ADDs go round:
// its cycle buffer (a page) in cache lines (64 B), as rxe's own run shows
// (wire/testdata/ib_atomic_bw.pcap: va +0x40 each).
const atomicSlots = pageSize / 64

// pageSize is the page size of both sides (x86-64), which -c's zeros
// follow.
const pageSize = 4096

// pingpongFill is byte off of a message of an rdma-core example run with
// -c: 0x7b, but a zero at each page start.
func pingpongFill(off int) byte {
	if off%pageSize == 0 {
		return 0
	}
	return 0x7b
}

// writeLatFill is byte off of the k-th WRITE (from 1) of a size-byte
// ib_write_lat: zeros, and the count in the last byte.
func writeLatFill(k, size int) func(off int) byte {
	return func(off int) byte {
		if off == size-1 {
			return byte(k)
		}
		return 0
	}
}

// message is one message of a capture, reassembled: its destination QP,
// its number among that QP's messages (from 1), its bytes, and the
// index in sent of its first packet.
type message struct {
	qp    uint32
	k     int
	bytes []byte
	first int
}

// messages reassembles the messages of kind op in sent, per destination
// QP. A packet sent again (a PSN seen before on its QP: rxe's rare
// duplicates, which the wire counts bound) is not a message of its own.
func messages(sent []sentPayload, op wire.Op) []message {
	type psnKey struct {
		qp  uint32
		psn wire.PSN
	}
	seen := map[psnKey]bool{}
	open := map[uint32]*message{} // each QP's message in progress
	count := map[uint32]int{}
	var out []message
	for i, s := range sent {
		info := s.op.Info()
		if info.Op != op || seen[psnKey{s.qp, s.psn}] {
			continue
		}
		seen[psnKey{s.qp, s.psn}] = true
		if info.Position&wire.First != 0 || open[s.qp] == nil {
			count[s.qp]++
			open[s.qp] = &message{qp: s.qp, k: count[s.qp], first: i}
		}
		m := open[s.qp]
		m.bytes = append(m.bytes, s.payload...)
		if info.Position&wire.Last != 0 {
			out = append(out, *m)
			open[s.qp] = nil
		}
	}
	return out
}

// checkFill checks each message of kind op in sent against
// fill(k)(offset) for the k-th message of its QP, and returns how many
// messages it checked.
func checkFill(sent []sentPayload, op wire.Op, fill func(k int) func(off int) byte) (int, error) {
	ms := messages(sent, op)
	for _, m := range ms {
		f := fill(m.k)
		for off, b := range m.bytes {
			if want := f(off); b != want {
				return 0, fmt.Errorf("message %d to QP %#x (from packet %d), byte %d is %#02x, want %#02x",
					m.k, m.qp, m.first+1, off, b, want)
			}
		}
	}
	return len(ms), nil
}

// checkAlike checks that every message of kind op in sent has the bytes
// of the first, and returns how many messages it checked.
func checkAlike(sent []sentPayload, op wire.Op) (int, error) {
	ms := messages(sent, op)
	for _, m := range ms {
		if !bytes.Equal(m.bytes, ms[0].bytes) {
			return 0, fmt.Errorf("message %d to QP %#x (from packet %d) differs from the first (%d B, crc32 %#08x vs %#08x)",
				m.k, m.qp, m.first+1, len(m.bytes), crc32.ChecksumIEEE(m.bytes), crc32.ChecksumIEEE(ms[0].bytes))
		}
	}
	return len(ms), nil
}

// preloadDataProblems checks preloaded case c's data in the capture (see
// above) and says what it checked.
func preloadDataProblems(c interopCase, w wireCount) (problems []string, checked string) {
	active, passive := w.goroce, w.rxe
	activeWho, passiveWho := "goroce", "rxe"
	if c.RxeRole == rxeClient {
		active, passive = w.rxe, w.goroce
		activeWho, passiveWho = "rxe", "goroce"
	}
	type check struct {
		who  string
		sent []sentPayload
	}
	var fill func(int) func(int) byte // nil: the messages must be alike
	var checks []check
	op := wire.OpSend
	switch c.Perftest {
	case "":
		fill = func(int) func(int) byte { return pingpongFill }
		if c.Transport == "srq" {
			fill = func(int) func(int) byte { return func(int) byte { return 0 } }
		}
		checks = []check{{"goroce", w.goroce.Data}, {"rxe", w.rxe.Data}}
	case "write_lat":
		fill = func(k int) func(int) byte { return writeLatFill(k, c.Size) }
		op = wire.OpWrite
		checks = []check{{"goroce", w.goroce.Data}, {"rxe", w.rxe.Data}}
	case "atomic_bw":
		if err := checkOrigValues(active.Atomics, passive.OrigValues, nil); err != nil {
			return []string{"atomic original values: " + err.Error()}, ""
		}
		again, seen := 0, map[uint64]bool{}
		for _, a := range active.Atomics {
			if seen[a.va] {
				again++
			}
			seen[a.va] = true
		}
		if again == 0 {
			return []string{fmt.Sprintf("no FETCH_ADD of %d went to an address again: no original value to check", len(active.Atomics))}, ""
		}
		return nil, fmt.Sprintf("%d original values from %s, each the last for its address plus its add", again, passiveWho)
	case "read_bw", "read_lat":
		op = wire.OpReadResponse
		checks = []check{{passiveWho, passive.Data}}
	case "write_bw":
		op = wire.OpWrite
		checks = []check{{activeWho, active.Data}}
	case "send_bw":
		checks = []check{{activeWho, active.Data}}
	default:
		return nil, "none (perftest fills its buffers with rand(), and receives into what it sends)"
	}
	var what []string
	for _, ch := range checks {
		var n int
		var err error
		if fill != nil {
			n, err = checkFill(ch.sent, op, fill)
		} else {
			n, err = checkAlike(ch.sent, op)
		}
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s sent other bytes than %s: %v", ch.who, c.program(), err))
		case n == 0:
			problems = append(problems, fmt.Sprintf("no message from %s to check", ch.who))
		case fill != nil:
			what = append(what, fmt.Sprintf("%d messages from %s", n, ch.who))
		default:
			what = append(what, fmt.Sprintf("the %d messages from %s alike", n, ch.who))
		}
	}
	if len(problems) > 0 {
		return problems, ""
	}
	if fill == nil {
		return nil, strings.Join(what, " and ") + " (perftest's rand() fill, which its buffer keeps)"
	}
	return nil, strings.Join(what, " and ") + " hold the program's fill"
}
