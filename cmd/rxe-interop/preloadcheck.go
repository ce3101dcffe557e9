package main

import (
	"fmt"
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
//   - ib_atomic_bw: each original value the passive side returns must be
//     the one before it plus that FETCH_ADD's add (checkOrigValues).
//
// The other perftest programs fill their buffers with rand(): their data
// is not checked, and the result line says so.

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

// checkMessages checks each message of kind op in sent, reassembled per
// destination QP, against fill(k)(offset) for the k-th message (from 1)
// of its QP, and returns how many messages it checked. A packet sent
// again (a PSN seen before on its QP: rxe's rare duplicates, which the
// wire counts bound) is not a message of its own.
func checkMessages(sent []sentPayload, op wire.Op, fill func(k int) func(off int) byte) (int, error) {
	off := map[uint32]int{}   // the next byte's offset in each QP's message
	count := map[uint32]int{} // messages begun on each QP
	type psnKey struct {
		qp  uint32
		psn wire.PSN
	}
	seen := map[psnKey]bool{}
	n := 0
	for i, s := range sent {
		info := s.op.Info()
		if info.Op != op || seen[psnKey{s.qp, s.psn}] {
			continue
		}
		seen[psnKey{s.qp, s.psn}] = true
		if info.Position&wire.First != 0 {
			off[s.qp] = 0
			count[s.qp]++
		}
		f := fill(count[s.qp])
		for j, b := range s.payload {
			if want := f(off[s.qp] + j); b != want {
				return n, fmt.Errorf("packet %d (%v to QP %#x), message byte %d is %#02x, want %#02x",
					i+1, s.op, s.qp, off[s.qp]+j, b, want)
			}
		}
		off[s.qp] += len(s.payload)
		if info.Position&wire.Last != 0 {
			n++
		}
	}
	return n, nil
}

// preloadDataProblems checks preloaded case c's data in the capture (see
// above) and says what it checked.
func preloadDataProblems(c interopCase, w wireCount) (problems []string, checked string) {
	sides := []struct {
		who  string
		sent []sentPayload
	}{{"goroce", w.goroce.Data}, {"rxe", w.rxe.Data}}
	var fill func(int) func(int) byte
	op := wire.OpSend
	switch c.Perftest {
	case "":
		fill = func(int) func(int) byte { return pingpongFill }
		if c.Transport == "srq" {
			fill = func(int) func(int) byte { return func(int) byte { return 0 } }
		}
	case "write_lat":
		fill = func(k int) func(int) byte { return writeLatFill(k, c.Size) }
		op = wire.OpWrite
	case "atomic_bw":
		active, passive := w.goroce, w.rxe
		if c.RxeRole == rxeClient {
			active, passive = w.rxe, w.goroce
		}
		if err := checkOrigValues(active.Atomics, passive.OrigValues, nil); err != nil {
			return []string{"atomic original values: " + err.Error()}, ""
		}
		return nil, fmt.Sprintf("%d original values each the last plus its add", len(passive.OrigValues))
	default:
		return nil, "none (perftest fills its buffers with rand())"
	}
	var what []string
	for _, s := range sides {
		n, err := checkMessages(s.sent, op, fill)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s sent other bytes than %s: %v", s.who, c.program(), err))
			continue
		}
		if n == 0 {
			problems = append(problems, fmt.Sprintf("no message from %s to check", s.who))
			continue
		}
		what = append(what, fmt.Sprintf("%d messages from %s", n, s.who))
	}
	if len(problems) > 0 {
		return problems, ""
	}
	return nil, strings.Join(what, " and ") + " hold the program's fill"
}
