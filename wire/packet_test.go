package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// randomHeaders fills every header field with random values for op.
func randomHeaders(r *rand.Rand, op Opcode) Headers {
	return Headers{
		BTH: BTHFields{Opcode: op, SE: r.IntN(2) == 0, MigReq: r.IntN(2) == 0, PKey: uint16(r.Uint32()),
			FECN: r.IntN(2) == 0, BECN: r.IntN(2) == 0, DestQP: r.Uint32() & 0xFFFFFF,
			AckReq: r.IntN(2) == 0, PSN: PSN(r.Uint32() & PSNMask)},
		RETH:      RETHFields{VA: r.Uint64(), RKey: r.Uint32(), DMALen: r.Uint32()},
		AETH:      AETHFields{Syndrome: Syndrome(r.Uint32()), MSN: r.Uint32() & 0xFFFFFF},
		DETH:      DETHFields{QKey: r.Uint32(), SrcQP: r.Uint32() & 0xFFFFFF},
		Imm:       r.Uint32(),
		InvRKey:   r.Uint32(),
		Atomic:    AtomicETHFields{VA: r.Uint64(), RKey: r.Uint32(), SwapAdd: r.Uint64(), Compare: r.Uint64()},
		AtomicAck: r.Uint64(),
	}
}

// only keeps the fields the opcode carries, so decoded headers compare equal.
func only(h Headers) Headers {
	info := h.BTH.Opcode.Info()
	out := Headers{BTH: h.BTH}
	if info.Has(HasRETH) {
		out.RETH = h.RETH
	}
	if info.Has(HasAETH) {
		out.AETH = h.AETH
	}
	if info.Has(HasDETH) {
		out.DETH = h.DETH
	}
	if info.Has(HasImmDt) {
		out.Imm = h.Imm
	}
	if info.Has(HasIETH) {
		out.InvRKey = h.InvRKey
	}
	if info.Has(HasAtomicETH) {
		out.Atomic = h.Atomic
	}
	if info.Has(HasAtomicAckETH) {
		out.AtomicAck = h.AtomicAck
	}
	return out
}

func TestBuildParseRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 5000)
	for op := 0; op < 256; op++ {
		if !Opcode(op).Info().Valid() {
			continue
		}
		for trial := 0; trial < 20; trial++ {
			h := randomHeaders(r, Opcode(op))
			var payload []byte
			if Opcode(op).Info().Payload {
				payload = make([]byte, r.IntN(4097))
				for i := range payload {
					payload[i] = byte(r.Uint32())
				}
			}
			n, err := Build(buf, &h, payload)
			if err != nil {
				t.Fatalf("%v: Build: %v", Opcode(op), err)
			}
			if n != PacketLen(Opcode(op), len(payload)) {
				t.Fatalf("%v: Build wrote %d, PacketLen says %d", Opcode(op), n, PacketLen(Opcode(op), len(payload)))
			}
			e := Endpoints{Src: netip.MustParseAddrPort("127.0.0.1:4791"), Dst: netip.MustParseAddrPort("127.0.0.2:4791")}
			SetICRC(buf[:n], e.ICRC(buf[:n-ICRCLen]))
			p, err := Parse(buf[:n])
			if err != nil {
				t.Fatalf("%v: Parse: %v", Opcode(op), err)
			}
			if got, want := p.Headers(), only(h); got != want {
				t.Fatalf("%v: decoded\n %+v\nwant\n %+v", Opcode(op), got, want)
			}
			if !bytes.Equal(p.Payload(), payload) {
				t.Fatalf("%v: payload differs", Opcode(op))
			}
			if !e.Verify(buf[:n]) {
				t.Fatalf("%v: ICRC does not verify", Opcode(op))
			}
		}
	}
}

func TestParseMalformed(t *testing.T) {
	good := make([]byte, 64)
	h := Headers{BTH: BTHFields{Opcode: RCWriteOnly, PKey: DefaultPKey, DestQP: 0x11, PSN: 7}}
	n, _ := Build(good, &h, []byte("hello"))
	good = good[:n]
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"shorter than BTH+ICRC", good[:15], ErrTruncated},
		{"RETH cut", good[:BTHLen+8+ICRCLen], ErrTruncated},
		{"unknown opcode", append([]byte{0x15}, good[1:]...), ErrBadOpcode},
		{"TVer 1", func() []byte { b := bytes.Clone(good); b[1] |= 1; return b }(), ErrBadVersion},
		{"pad beyond payload", func() []byte {
			b := make([]byte, BTHLen+ICRCLen+1)
			f := BTHFields{Opcode: RCSendOnly, PadCnt: 3}
			f.Encode(b)
			return b
		}(), ErrBadPad},
		{"payload on an ACK", func() []byte {
			b := make([]byte, BTHLen+AETHLen+4+ICRCLen)
			b[0] = byte(RCAck)
			return b
		}(), ErrNoPayload},
	}
	for _, tt := range tests {
		if _, err := Parse(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: Parse error %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := Parse(good); err != nil {
		t.Fatalf("good packet: %v", err)
	}
}

func TestSyndrome(t *testing.T) {
	tests := []struct {
		s    Syndrome
		want string
	}{
		{SynACK, "ACK"},
		{0x03, "ACK(credits=3)"},
		{RNRNAK(14), "RNR_NAK(timer=14:1.28ms)"},
		{SynNAKSeqErr, "NAK_PSN_SEQ_ERR"},
		{SynNAKInvReq, "NAK_INVALID_REQUEST"},
		{SynNAKRemAccess, "NAK_REMOTE_ACCESS_ERROR"},
		{SynNAKRemOp, "NAK_REMOTE_OPERATIONAL_ERROR"},
		{0x40, "SYNDROME(0x40)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%#x: %q, want %q", uint8(tt.s), got, tt.want)
		}
	}
	if RNRTimer(0).Milliseconds() != 655 || RNRTimer(1).Microseconds() != 10 || RNRTimer(31).Microseconds() != 491520 {
		t.Error("RNR timer table is wrong")
	}
	if LocalACKTimeout(14).Microseconds() != 67108 || LocalACKTimeout(0) != 0 {
		t.Errorf("LocalACKTimeout(14) = %v", LocalACKTimeout(14))
	}
}

func TestCNP(t *testing.T) {
	b := make([]byte, CNPLen)
	n := BuildCNP(b, 0xABCDEF)
	if n != 32 {
		t.Fatalf("CNP length %d", n)
	}
	p, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.Opcode() != CNPOpcode || !p.BTH().BECN() || p.BTH().DestQP() != 0xABCDEF || p.BTH().PKey() != 0xFFFF {
		t.Errorf("CNP decoded as %v", p)
	}
	if got := p.String(); got != "CNP qp=0xabcdef psn=0x000000 becn" {
		t.Errorf("CNP text %q", got)
	}
}

func TestZeroAllocations(t *testing.T) {
	payload := make([]byte, 4096)
	buf := make([]byte, 4200)
	h := Headers{BTH: BTHFields{Opcode: RCWriteFirst, PKey: DefaultPKey, DestQP: 0x12, PSN: 100},
		RETH: RETHFields{VA: 0x1000, RKey: 0xdeadbeef, DMALen: 1 << 20}}
	e := Endpoints{Src: netip.MustParseAddrPort("127.0.0.1:4791"), Dst: netip.MustParseAddrPort("127.0.0.2:4791")}
	text := make([]byte, 0, 256)
	var n int
	allocs := testing.AllocsPerRun(100, func() {
		n, _ = Build(buf, &h, payload)
		SetICRC(buf[:n], e.ICRC(buf[:BTHLen+RETHLen], buf[BTHLen+RETHLen:n-ICRCLen]))
		p, err := Parse(buf[:n])
		if err != nil || !e.Verify(buf[:n]) {
			t.Fatal("round trip failed")
		}
		_ = p.RETH().RKey()
		text = AppendText(text[:0], p)
	})
	if allocs != 0 {
		t.Errorf("build+ICRC+parse+verify+text: %v allocations per packet, want 0", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		if _, ok := e.SolveIPv4ID(buf[:n]); !ok {
			t.Fatal("SolveIPv4ID failed")
		}
	})
	if allocs != 0 {
		t.Errorf("SolveIPv4ID: %v allocations, want 0", allocs)
	}
}

// TestParsedLayoutHoldsWhenBytesChange rewrites a parsed packet's opcode and
// pad count, as a sender that can still write the buffer (a shared-memory
// ring) could: the packet keeps the layout Parse checked, so its header
// views and its payload stay inside the bytes Parse measured.
func TestParsedLayoutHoldsWhenBytesChange(t *testing.T) {
	buf := make([]byte, 64)
	h := Headers{BTH: BTHFields{Opcode: RCSendOnly, DestQP: 7}}
	n, err := Build(buf, &h, nil) // no payload, no pad: a payload area of 0
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	buf[0] = byte(RCAtomicAck) // a layout with an AETH and an AtomicAckETH
	buf[1] |= 3 << 4           // a pad count of 3 in an area of 0 bytes
	if got := p.Opcode(); got != RCSendOnly {
		t.Errorf("Opcode() = %v after the byte changed, want %v as parsed", got, RCSendOnly)
	}
	if got := len(p.Payload()); got != 0 {
		t.Errorf("len(Payload()) = %d after the pad count changed, want 0 as parsed", got)
	}
	if p.AtomicAckETH() != nil || p.AETH() != nil {
		t.Errorf("headers of the new opcode appeared: AETH %v, AtomicAckETH %v", p.AETH(), p.AtomicAckETH())
	}
}
