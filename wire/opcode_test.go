package wire

import "testing"

func TestOpcodeTableLayout(t *testing.T) {
	tests := []struct {
		op        Opcode
		name      string
		headerLen int
		offsets   map[Header]int
		pos       Position
		payload   bool
		ack       bool
	}{
		{RCSendOnly, "RC_SEND_ONLY", 12, nil, Only, true, true},
		{RCSendOnlyImm, "RC_SEND_ONLY_WITH_IMMEDIATE", 16, map[Header]int{HasImmDt: 12}, Only, true, true},
		{RCWriteFirst, "RC_RDMA_WRITE_FIRST", 28, map[Header]int{HasRETH: 12}, First, true, true},
		{RCWriteOnlyImm, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32, map[Header]int{HasRETH: 12, HasImmDt: 28}, Only, true, true},
		{RCReadRequest, "RC_RDMA_READ_REQUEST", 28, map[Header]int{HasRETH: 12}, Only, false, true},
		{RCReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", 12, nil, Middle, true, false},
		{RCReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", 16, map[Header]int{HasAETH: 12}, Last, true, false},
		{RCAck, "RC_ACKNOWLEDGE", 16, map[Header]int{HasAETH: 12}, Only, false, false},
		{RCAtomicAck, "RC_ATOMIC_ACKNOWLEDGE", 24, map[Header]int{HasAETH: 12, HasAtomicAckETH: 16}, Only, false, false},
		{RCCompareSwap, "RC_COMPARE_SWAP", 40, map[Header]int{HasAtomicETH: 12}, Only, false, true},
		{RCFetchAdd, "RC_FETCH_ADD", 40, map[Header]int{HasAtomicETH: 12}, Only, false, true},
		{RCSendLastInv, "RC_SEND_LAST_WITH_INVALIDATE", 16, map[Header]int{HasIETH: 12}, Last, true, true},
		{UCWriteMiddle, "UC_RDMA_WRITE_MIDDLE", 12, nil, Middle, true, false},
		{UCWriteOnlyImm, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32, map[Header]int{HasRETH: 12, HasImmDt: 28}, Only, true, false},
		{UDSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", 24, map[Header]int{HasDETH: 12, HasImmDt: 20}, Only, true, false},
		{CNPOpcode, "CNP", 28, map[Header]int{HasCNPReserved: 12}, Only, false, false},
	}
	for _, tt := range tests {
		info := tt.op.Info()
		if info.Name != tt.name || tt.op.String() != tt.name {
			t.Errorf("%#x: name %q, want %q", uint8(tt.op), info.Name, tt.name)
		}
		if info.HeaderLen != tt.headerLen {
			t.Errorf("%v: HeaderLen %d, want %d", tt.op, info.HeaderLen, tt.headerLen)
		}
		for n := 0; n < numHeaders; n++ {
			h := Header(1 << n)
			want, ok := tt.offsets[h]
			if !ok {
				want = -1
			}
			if got := info.Offset(h); got != want {
				t.Errorf("%v: offset of header bit %d = %d, want %d", tt.op, n, got, want)
			}
		}
		if info.Position != tt.pos || info.Payload != tt.payload || info.AckRequired() != tt.ack {
			t.Errorf("%v: pos %v payload %v ack %v", tt.op, info.Position, info.Payload, info.AckRequired())
		}
	}
}

func TestOpcodeTableCoverage(t *testing.T) {
	valid := 0
	for op := 0; op < 256; op++ {
		info := Opcode(op).Info()
		if !info.Valid() {
			continue
		}
		valid++
		if Transport(op>>5) != info.Transport {
			t.Errorf("%v: transport %v does not match the opcode prefix", info.Name, info.Transport)
		}
	}
	// RC 0x00–0x14 and 0x16–0x17 (23), UC SEND and WRITE (12), UD (2), CNP (1).
	if valid != 38 {
		t.Errorf("%d valid opcodes, want 38", valid)
	}
	if s := Opcode(0x15).String(); s != "OPCODE_0x15" {
		t.Errorf("unknown opcode string %q", s)
	}
}
