package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/goroce/goroce/wire"
)

// run251 is n bytes of goroce perf's pattern from offset off, written out
// here as the capture would show them.
func run251(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((off + i) % 251)
	}
	return b
}

// TestDataChecks: a write_bw with rxe as the passive server, and an
// atomic_bw with goroce as the passive one, as their captures would show
// them; then the same with one thing wrong each.
func TestDataChecks(t *testing.T) {
	const target = 0x7f0000001000
	report := func(local, tgt []byte) string {
		return fmt.Sprintf(" data: local VAddr 0x7f0000000000 crc32 %#08x, target VAddr %#x crc32 %#08x (first 8 bytes)\n",
			crc32.ChecksumIEEE(local), target, crc32.ChecksumIEEE(tgt))
	}
	// write_bw, goroce active: two 2-packet WRITEs from its pattern.
	wc := interopCase{Transport: "rc", Perftest: "write_bw", RxeRole: rxeServer, MTU: 1024, Size: 2048, Iters: 2}
	var w wireCount
	for range 2 {
		w.goroce.Data = append(w.goroce.Data,
			sentPayload{op: wire.RCWriteFirst, payload: run251(0, 1024), va: 0x5600},
			sentPayload{op: wire.RCWriteLast, payload: run251(1024, 1024)})
	}
	out := report(nil, nil)
	if ps, what := dataProblems(wc, w, out); len(ps) > 0 || !strings.Contains(what, "4 payloads goroce sent") {
		t.Errorf("good write_bw: %q, %q", ps, what)
	}
	w.goroce.Data[3].payload[700] ^= 1
	if ps, _ := dataProblems(wc, w, out); len(ps) != 1 || !strings.Contains(ps[0], "packet 4 (RC_RDMA_WRITE_LAST) byte 700") {
		t.Errorf("a flipped bit: %q", ps)
	}

	// atomic_bw, goroce passive: rxe adds 1 twice at target+16 and once
	// at target+24; goroce's memory started as its pattern.
	ac := interopCase{Transport: "rc", Perftest: "atomic_bw", RxeRole: rxeClient, MTU: 1024, Size: 8, Iters: 3}
	at := func(off int) uint64 { return binary.LittleEndian.Uint64(run251(off, 8)) }
	var a wireCount
	a.rxe.Atomics = []atomicReq{{target + 16, 1}, {target + 24, 1}, {target + 16, 1}}
	a.goroce.OrigValues = []uint64{at(16), at(24), at(16) + 1}
	if ps, what := dataProblems(ac, a, report(nil, nil)); len(ps) > 0 || !strings.Contains(what, "3 original values goroce returned") {
		t.Errorf("good atomic_bw: %q, %q", ps, what)
	}
	a.goroce.OrigValues[2] = at(16) // the first add lost
	if ps, _ := dataProblems(ac, a, report(nil, nil)); len(ps) != 1 || !strings.Contains(ps[0], "atomic 3 at") {
		t.Errorf("a lost add: %q", ps)
	}

	// atomic_bw, goroce active: it must hold rxe's last original value.
	ac.RxeRole = rxeServer
	var b wireCount
	b.goroce.Atomics = []atomicReq{{0x5600, 1}, {0x5600, 1}}
	b.rxe.OrigValues = []uint64{0x1234, 0x1235}
	last := binary.LittleEndian.AppendUint64(nil, 0x1235)
	if ps, what := dataProblems(ac, b, report(last, nil)); len(ps) > 0 || !strings.Contains(what, "the last 8 B goroce received") {
		t.Errorf("good active atomic_bw: %q, %q", ps, what)
	}
	if ps, _ := dataProblems(ac, b, report(make([]byte, 8), nil)); len(ps) != 1 || !strings.Contains(ps[0], "goroce's local buffer has crc32") {
		t.Errorf("nothing placed: %q", ps)
	}
	if ps, _ := dataProblems(ac, b, "no report\n"); len(ps) != 1 || ps[0] != "goroce perf printed no data report" {
		t.Errorf("no report: %q", ps)
	}
}
