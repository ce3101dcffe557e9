package wire

import "testing"

// TestDETHReservedByte: the DETH's byte 4 is reserved (IBTA 9.5.2:
// | Q_Key 32 | resv 8 | Source QP 24 |). A sender may leave junk there; the
// source QP is the low 24 bits whatever it holds, and Encode writes it
// zero whatever high bits a QPN carries.
func TestDETHReservedByte(t *testing.T) {
	d := DETH{0x11, 0x22, 0x33, 0x44, 0xAB, 0x12, 0x34, 0x56}
	if got := d.SrcQP(); got != 0x123456 {
		t.Errorf("SrcQP with reserved byte 0xAB = %#x, want 0x123456", got)
	}
	if got := d.QKey(); got != 0x11223344 {
		t.Errorf("QKey = %#x, want 0x11223344", got)
	}
	if f := d.Fields(); f != (DETHFields{QKey: 0x11223344, SrcQP: 0x123456}) {
		t.Errorf("Fields = %+v", f)
	}
	out := make(DETH, DETHLen)
	(&DETHFields{QKey: 0x80010000, SrcQP: 0xFF000001}).Encode(out)
	if want := (DETH{0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}); string(out) != string(want) {
		t.Errorf("Encode of SrcQP 0xFF000001 = % x, want % x", []byte(out), []byte(want))
	}
}
