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

func TestParseTOS(t *testing.T) {
	groSize := cmsg(unix.SOL_UDP, unix.UDP_GRO, int32Bytes(1400))
	for _, tc := range []struct {
		name string
		oob  []byte
		tos  uint8
		ok   bool
	}{
		{"IPv4 ECT(0)", cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0x02}), 0x02, true},
		{"IPv4 DSCP 26 + CE", cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{26<<2 | 0x03}), 26<<2 | 0x03, true},
		{"IPv6 CE", cmsg(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int32Bytes(0x03)), 0x03, true},
		{"after another entry", append(groSize, cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0x01})...), 0x01, true},
		{"none", nil, 0, false},
		{"other entry only", groSize, 0, false},
		{"IPv6 traffic class too short", cmsg(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, []byte{3}), 0, false},
		{"length beyond buffer", cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{2})[:unix.CmsgLen(0)], 0, false},
		{"short header", make([]byte, unix.SizeofCmsghdr-1), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tos, ok := parseTOS(tc.oob)
			if tos != tc.tos || ok != tc.ok {
				t.Errorf("parseTOS = %#02x, %v; want %#02x, %v", tos, ok, tc.tos, tc.ok)
			}
		})
	}
}

// FuzzParseTOS checks that no control-message buffer makes parseTOS read
// out of bounds or loop forever.
func FuzzParseTOS(f *testing.F) {
	f.Add(cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0x02}))
	f.Add(cmsg(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int32Bytes(0x03)))
	f.Add(append(cmsg(unix.SOL_UDP, unix.UDP_GRO, int32Bytes(1400)), cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{1})...))
	f.Fuzz(func(t *testing.T, oob []byte) {
		// Control buffers are 8-byte aligned in the link; keep it so here.
		aligned := make([]uint64, (len(oob)+7)/8)
		buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(aligned))), len(aligned)*8)[:len(oob)]
		copy(buf, oob)
		parseTOS(buf)
	})
}
