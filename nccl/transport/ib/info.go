package ib

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// ErrInfo is returned (wrapped) by Connect for a peer's connection details
// that cannot be used.
var ErrInfo = errors.New("ib: bad peer connection info")

const infoMagic = 0x4752_4943 // "GRIC": entries with the CTS ring

// peerEntry is what rank r tells rank p about the QP, slots and CTS ring
// it set up for p.
type peerEntry struct {
	QPN, PSN uint32
	Addr     uint64 // the slots' address in r's MR
	RKey     uint32
	CTSAddr  uint64 // the CTS ring's address in its MR
	CTSRKey  uint32
}

const entryLen = 4 + 4 + 8 + 4 + 8 + 4

// info is one rank's connection details: header then one entry per rank.
type info struct {
	Rank, Size     int
	GID            netip.Addr
	Port           uint16
	Slots, SlotLen int
	Entries        []peerEntry
}

const headerLen = 4 + 4 + 4 + 16 + 2 + 4 + 4

func (in *info) marshal() []byte {
	b := make([]byte, headerLen+entryLen*len(in.Entries))
	be := binary.BigEndian
	be.PutUint32(b[0:], infoMagic)
	be.PutUint32(b[4:], uint32(in.Rank))
	be.PutUint32(b[8:], uint32(in.Size))
	gid := in.GID.As16()
	copy(b[12:28], gid[:])
	be.PutUint16(b[28:], in.Port)
	be.PutUint32(b[30:], uint32(in.Slots))
	be.PutUint32(b[34:], uint32(in.SlotLen))
	for i, e := range in.Entries {
		o := headerLen + i*entryLen
		be.PutUint32(b[o:], e.QPN)
		be.PutUint32(b[o+4:], e.PSN)
		be.PutUint64(b[o+8:], e.Addr)
		be.PutUint32(b[o+16:], e.RKey)
		be.PutUint64(b[o+20:], e.CTSAddr)
		be.PutUint32(b[o+28:], e.CTSRKey)
	}
	return b
}

func parseInfo(b []byte) (*info, error) {
	be := binary.BigEndian
	if len(b) < headerLen || be.Uint32(b) != infoMagic {
		return nil, fmt.Errorf("%w: %d bytes, not a goroce ib blob", ErrInfo, len(b))
	}
	in := &info{Rank: int(be.Uint32(b[4:])), Size: int(be.Uint32(b[8:])),
		GID: netip.AddrFrom16([16]byte(b[12:28])), Port: be.Uint16(b[28:]),
		Slots: int(be.Uint32(b[30:])), SlotLen: int(be.Uint32(b[34:]))}
	if in.Size < 1 || in.Size > 1<<16 || len(b) != headerLen+entryLen*in.Size {
		return nil, fmt.Errorf("%w: %d bytes for %d ranks", ErrInfo, len(b), in.Size)
	}
	for i := range in.Size {
		o := headerLen + i*entryLen
		in.Entries = append(in.Entries, peerEntry{QPN: be.Uint32(b[o:]), PSN: be.Uint32(b[o+4:]),
			Addr: be.Uint64(b[o+8:]), RKey: be.Uint32(b[o+16:]), CTSAddr: be.Uint64(b[o+20:]), CTSRKey: be.Uint32(b[o+28:])})
	}
	return in, nil
}
