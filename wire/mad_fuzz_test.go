package wire_test

import (
	"bytes"
	"testing"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// FuzzParseMAD feeds arbitrary payloads to the MAD parser. It is seeded
// with the CM MADs of the rxe rping capture, and with the REQ's bytes under
// every other CM attribute ID, with all-ones messages of each, and with
// two that are not MADs. Whatever ParseMAD accepts must print (alone
// and as the payload of a UD SEND to QP1), and a CM message's Fields must
// encode to bytes that decode to the same Fields and encode again to the
// same bytes; nothing may panic.
func FuzzParseMAD(f *testing.F) {
	var req []byte
	forRecords(f, "testdata/rping.pcap", func(_ int, rec *pcap.Record) {
		d, ok := rec.RoCEv2()
		if !ok {
			return
		}
		if p, err := wire.Parse(d.Payload); err == nil && p.BTH().DestQP() == wire.GSIQPN {
			f.Add(bytes.Clone(p.Payload()))
			if req == nil {
				req = bytes.Clone(p.Payload())
			}
		}
	})
	v2 := bytes.Clone(req)
	v2[0] = 2
	f.Add(v2)        // not base version 1
	f.Add(req[:255]) // one byte short
	ones := bytes.Repeat([]byte{0xFF}, wire.MADLen)
	ones[0], ones[1] = wire.MADBaseVersion, wire.MgmtClassCM
	for attr := uint16(wire.CMAttrClassPortInfo); attr <= wire.CMAttrAPR+1; attr++ {
		for _, b := range [][]byte{bytes.Clone(req), bytes.Clone(ones)} {
			b[16], b[17] = byte(attr>>8), byte(attr)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := wire.ParseMAD(b)
		if (err == nil) != (len(b) == wire.MADLen && b[0] == 1) {
			t.Fatalf("ParseMAD(%d bytes, version %d): %v", len(b), b[0], err)
		}
		if err != nil {
			return
		}
		text := wire.AppendMADText(nil, m)
		pkt := make([]byte, wire.PacketLen(wire.UDSendOnly, len(b)))
		h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.UDSendOnly, PKey: 0xFFFF, DestQP: wire.GSIQPN},
			DETH: wire.DETHFields{QKey: wire.GSIQKey, SrcQP: wire.GSIQPN}}
		if _, err := wire.Build(pkt, &h, b); err != nil {
			t.Fatal(err)
		}
		p, err := wire.Parse(pkt)
		if err != nil {
			t.Fatal(err)
		}
		if line := wire.AppendText(nil, p); !bytes.HasSuffix(line, append([]byte{' '}, text...)) {
			t.Fatalf("packet line %q does not end with the MAD's %q", line, text)
		}

		fields := cmFields(m)
		if !m.IsCM() || fields == nil {
			return
		}
		out := make([]byte, wire.MADLen)
		hdr := m.Header().Fields()
		hdr.Encode(out)
		encodeCM(fields, out[wire.MADHeaderLen:])
		m2, err := wire.ParseMAD(out)
		if err != nil {
			t.Fatalf("ParseMAD of an encoded MAD: %v", err)
		}
		if m2.Header().Fields() != hdr || cmFields(m2) != fields {
			t.Fatalf("re-encoded MAD decodes differently:\n%+v\n%+v", fields, cmFields(m2))
		}
		again := make([]byte, wire.MADLen)
		hdr.Encode(again)
		encodeCM(cmFields(m2), again[wire.MADHeaderLen:])
		if !bytes.Equal(again, out) {
			t.Fatalf("encoding is not stable:\n% x\n% x", again, out)
		}
		if r, ok := fields.(wire.CMReqFields); ok {
			ch := wire.CMAHeader(r.PrivateData[:wire.CMAHeaderLen]).Fields()
			buf := make([]byte, wire.CMAHeaderLen)
			ch.Encode(buf)
			if got := wire.CMAHeader(buf).Fields(); got != ch {
				t.Fatalf("rdma_cm header %+v re-encodes to %+v", ch, got)
			}
		}
	})
}
