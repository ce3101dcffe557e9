package udplink

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cmsg builds one control-message entry as the kernel lays it out.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func int32Bytes(v int32) []byte {
	return binary.NativeEndian.AppendUint32(nil, uint32(v))
}

// TestParseTOS reads control-message buffers laid out as the kernel lays
// them out and checks the TOS byte and the UDP GRO segment size found.
func TestParseTOS(t *testing.T) {
	groSize := cmsg(unix.SOL_UDP, unix.UDP_GRO, int32Bytes(1400))
	for _, tc := range []struct {
		name string
		oob  []byte
		tos  uint8
		ok   bool
		seg  int
	}{
		{"IPv4 ECT(0)", cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0x02}), 0x02, true, 0},
		{"IPv4 DSCP 26 + CE", cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{26<<2 | 0x03}), 26<<2 | 0x03, true, 0},
		{"IPv6 CE", cmsg(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int32Bytes(0x03)), 0x03, true, 0},
		{"after another entry", append(groSize, cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0x01})...), 0x01, true, 1400},
		{"GRO after TOS", append(cmsg(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int32Bytes(0x02)), cmsg(unix.SOL_UDP, unix.UDP_GRO, int32Bytes(9000))...), 0x02, true, 9000},
		{"none", nil, 0, false, 0},
		{"other entry only", groSize, 0, false, 1400},
		{"GRO size too short", cmsg(unix.SOL_UDP, unix.UDP_GRO, []byte{0x78, 0x05}), 0, false, 0},
		{"IPv6 traffic class too short", cmsg(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, []byte{3}), 0, false, 0},
		{"length beyond buffer", cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{2})[:unix.CmsgLen(0)], 0, false, 0},
		{"short header", make([]byte, unix.SizeofCmsghdr-1), 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tos, ok := parseTOS(tc.oob)
			if tos != tc.tos || ok != tc.ok {
				t.Errorf("parseTOS = %#02x, %v; want %#02x, %v", tos, ok, tc.tos, tc.ok)
			}
			if c := parseControl(tc.oob); c.segSize != tc.seg {
				t.Errorf("GRO segment size %d, want %d", c.segSize, tc.seg)
			}
		})
	}
}

// controlOracle says what parseControl should find in oob: it walks the
// entries with x/sys/unix's parser of control messages, which the link
// does not use, and keeps the last TOS (IP_TOS, one byte, or IPV6_TCLASS,
// an int) and the last UDP_GRO segment size (an int).
func controlOracle(oob []byte) control {
	var c control
	for len(oob) >= unix.CmsgLen(0) {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			break
		}
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			c.tos, c.tosOK = data[0], true
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			c.tos, c.tosOK = byte(int32(binary.NativeEndian.Uint32(data))), true
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			c.segSize = int(int32(binary.NativeEndian.Uint32(data)))
		}
		oob = rest
	}
	return c
}

// FuzzParseTOS checks that no control-message buffer makes parseTOS read
// out of bounds or loop forever, and that the TOS byte and the UDP GRO
// segment size found are what controlOracle finds.
func FuzzParseTOS(f *testing.F) {
	f.Add(cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0x02}))
	f.Add(cmsg(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int32Bytes(0x03)))
	f.Add(append(cmsg(unix.SOL_UDP, unix.UDP_GRO, int32Bytes(1400)), cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{1})...))
	f.Add(append(cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{2}), cmsg(unix.SOL_UDP, unix.UDP_GRO, int32Bytes(4124))...))
	f.Add(cmsg(unix.SOL_UDP, unix.UDP_GRO, int32Bytes(-1)))
	f.Fuzz(func(t *testing.T, oob []byte) {
		// Control buffers are 8-byte aligned in the link; keep it so here.
		aligned := make([]uint64, (len(oob)+7)/8)
		buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(aligned))), len(aligned)*8)[:len(oob)]
		copy(buf, oob)
		want := controlOracle(buf)
		if got := parseControl(buf); got != want {
			t.Errorf("parseControl(% x) = %+v, want %+v", buf, got, want)
		}
		if tos, ok := parseTOS(buf); tos != want.tos || ok != want.tosOK {
			t.Errorf("parseTOS(% x) = %#02x, %v; want %#02x, %v", buf, tos, ok, want.tos, want.tosOK)
		}
	})
}
