package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"regexp"
	"strconv"
	"strings"

	"github.com/goroce/goroce/wire"
)

// The perftest cases' data checks. perftest fills its buffers with
// rand() bytes (write_lat: zeros), so what rxe sends cannot be known in
// advance; the capture holds it. goroce perf fills what it sends, and a
// target the peer READs or updates atomically, with byte i = i mod 251
// from the start of each half of its buffer, and with --data-report
// prints a CRC-32 of the first -s bytes of both halves when done. So:
//
//   - every payload goroce sends (SEND, WRITE, READ response) must be a
//     run of that pattern: each byte one more than the last, mod 251
//     (write_lat's last byte is its iteration marker);
//   - each original value goroce returns for an atomic must be what its
//     memory held: the pattern's 8 bytes at that offset (little-endian)
//     plus the adds before it; rxe's must grow by the adds the same way;
//   - what goroce received last must be in its buffer: the last READ's
//     response bytes or the last atomic's original value (local half), the
//     last SEND's bytes or the last WRITE's (target half), by CRC.

// reDataReport finds goroce perf's --data-report line.
var reDataReport = regexp.MustCompile(`data: local VAddr (0x[0-9a-f]+) crc32 (0x[0-9a-f]+), target VAddr (0x[0-9a-f]+) crc32 (0x[0-9a-f]+)`)

// dataReport is goroce's --data-report line.
type dataReport struct {
	localVA, targetVA   uint64
	localCRC, targetCRC uint32
}

func parseDataReport(out string) (dataReport, bool) {
	m := reDataReport.FindStringSubmatch(out)
	if m == nil {
		return dataReport{}, false
	}
	n := make([]uint64, 4)
	for i := range n {
		n[i], _ = strconv.ParseUint(m[i+1], 0, 64)
	}
	return dataReport{localVA: n[0], localCRC: uint32(n[1]), targetVA: n[2], targetCRC: uint32(n[3])}, true
}

// patternAt is byte i of goroce perf's pattern.
func patternAt(i uint64) byte { return byte(i % 251) }

// isPatternRun reports the first byte of p that does not continue a run
// of the pattern, or -1.
func isPatternRun(p []byte) int {
	for j := range p {
		if p[j] >= 251 || j > 0 && p[j] != byte((int(p[j-1])+1)%251) {
			return j
		}
	}
	return -1
}

// dataProblems checks perftest case c's data (see above) and says what it
// checked.
func dataProblems(c interopCase, w wireCount, goroceOut string) (problems []string, checked string) {
	rep, ok := parseDataReport(goroceOut)
	if !ok {
		return []string{"goroce perf printed no data report"}, ""
	}
	var what []string
	// What goroce sent.
	if n := checkSentRuns(c, w.goroce.Data); n < 0 {
		problems = append(problems, "goroce sent bytes that are not its pattern: "+sentRunError(c, w.goroce.Data))
	} else if n > 0 {
		what = append(what, fmt.Sprintf("%d payloads goroce sent", n))
	}
	// Atomics: the original values each side returned.
	if len(w.rxe.Atomics) > 0 {
		if err := checkOrigValues(w.rxe.Atomics, w.goroce.OrigValues, func(va uint64) (uint64, bool) {
			off := va - rep.targetVA
			var b [8]byte
			for i := range b {
				b[i] = patternAt(off + uint64(i))
			}
			return binary.LittleEndian.Uint64(b[:]), true
		}); err != nil {
			problems = append(problems, "goroce's atomic original values: "+err.Error())
		} else {
			what = append(what, fmt.Sprintf("%d original values goroce returned", len(w.goroce.OrigValues)))
		}
	}
	if len(w.goroce.Atomics) > 0 {
		if err := checkOrigValues(w.goroce.Atomics, w.rxe.OrigValues, nil); err != nil {
			problems = append(problems, "rxe's atomic original values: "+err.Error())
		}
	}
	// What goroce received last.
	want, half, ok := lastReceived(c, w, rep)
	if va, isWrite := lastWriteVA(w.rxe.Data); ok && isWrite && half == "target" && va != rep.targetVA {
		problems = append(problems, fmt.Sprintf("rxe's last WRITE went to %#x, not goroce's target %#x", va, rep.targetVA))
	} else if ok {
		got := rep.localCRC
		if half == "target" {
			got = rep.targetCRC
		}
		if crc := crc32.ChecksumIEEE(want); crc != got {
			problems = append(problems, fmt.Sprintf("goroce's %s buffer has crc32 %#08x, the capture's last %d bytes from rxe %#08x",
				half, got, len(want), crc))
		} else {
			what = append(what, fmt.Sprintf("the last %d B goroce received (crc32 %#08x)", len(want), crc))
		}
	}
	if len(what) == 0 && len(problems) == 0 {
		problems = append(problems, "no data to check in the capture")
	}
	return problems, strings.Join(what, ", ")
}

// checkSentRuns checks that every payload in sent is a run of goroce's
// pattern (for write_lat, but its messages' last bytes) and returns how
// many it checked, or -1.
func checkSentRuns(c interopCase, sent []sentPayload) int {
	for _, s := range sent {
		p := s.payload
		if c.Perftest == "write_lat" && s.op.Info().Position&wire.Last != 0 {
			p = p[:len(p)-1] // write_lat's iteration marker
		}
		if isPatternRun(p) >= 0 {
			return -1
		}
	}
	return len(sent)
}

// sentRunError describes the first payload that is not a run.
func sentRunError(c interopCase, sent []sentPayload) string {
	for i, s := range sent {
		p := s.payload
		if c.Perftest == "write_lat" && s.op.Info().Position&wire.Last != 0 {
			p = p[:len(p)-1]
		}
		if j := isPatternRun(p); j >= 0 {
			return fmt.Sprintf("packet %d (%v) byte %d is %#02x after %#02x", i+1, s.op, j, p[j], p[max(j-1, 0)])
		}
	}
	return ""
}

// checkOrigValues replays atomic requests reqs against the original
// values origs that answered them, in order: each must be what the
// target held, which starts at initial(va) (when known) and grows by each
// add.
func checkOrigValues(reqs []atomicReq, origs []uint64, initial func(uint64) (uint64, bool)) error {
	if len(origs) != len(reqs) {
		return fmt.Errorf("%d answers to %d requests", len(origs), len(reqs))
	}
	mem := map[uint64]uint64{}
	for i, r := range reqs {
		v, seen := mem[r.va]
		if !seen && initial != nil {
			v, seen = initial(r.va)
		}
		if seen && origs[i] != v {
			return fmt.Errorf("atomic %d at %#x returned %#x, the memory held %#x", i+1, r.va, origs[i], v)
		}
		mem[r.va] = origs[i] + r.add
	}
	return nil
}

// lastReceived is what goroce must hold after the case, from the
// capture: the bytes and which half of its buffer ("local" or "target").
func lastReceived(c interopCase, w wireCount, rep dataReport) ([]byte, string, bool) {
	goroceActive := c.RxeRole == rxeServer
	switch c.Perftest {
	case "read_bw", "read_lat":
		if goroceActive {
			return lastMessage(w.rxe.Data, wire.OpReadResponse), "local", true
		}
	case "atomic_bw":
		if goroceActive && len(w.rxe.OrigValues) > 0 {
			return binary.LittleEndian.AppendUint64(nil, w.rxe.OrigValues[len(w.rxe.OrigValues)-1]), "local", true
		}
	case "send_bw", "send_lat":
		if !goroceActive || c.Perftest == "send_lat" {
			return lastMessage(w.rxe.Data, wire.OpSend), "target", true
		}
	case "write_bw", "write_lat":
		if !goroceActive || c.Perftest == "write_lat" {
			return lastMessage(w.rxe.Data, wire.OpWrite), "target", true
		}
	}
	return nil, "", false
}

// lastMessage joins the payloads of the last message of kind op in sent.
func lastMessage(sent []sentPayload, op wire.Op) []byte {
	start := -1
	for i, s := range sent {
		if info := s.op.Info(); info.Op == op && info.Position&wire.First != 0 {
			start = i
		}
	}
	if start < 0 {
		return nil
	}
	var b []byte
	for _, s := range sent[start:] {
		info := s.op.Info()
		if info.Op != op {
			continue
		}
		b = append(b, s.payload...)
		if info.Position&wire.Last != 0 {
			break
		}
	}
	return b
}

// lastWriteVA is the address of the last RDMA WRITE in sent.
func lastWriteVA(sent []sentPayload) (uint64, bool) {
	for i := len(sent) - 1; i >= 0; i-- {
		if info := sent[i].op.Info(); info.Op == wire.OpWrite && info.Position&wire.First != 0 {
			return sent[i].va, true
		}
	}
	return 0, false
}
