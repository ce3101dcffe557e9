package pcap

import (
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/wire"
)

// The JSON form of `goroce pcap -json`: one object per line. Keys are
// stable and snake_case. Queue pair numbers, PSNs, MSNs and lengths are
// numbers; addresses, keys and 64-bit values are "0x..." strings, which no
// JSON reader rounds. Extension-header objects appear only on opcodes that
// carry them, and "len" only on opcodes that may carry payload:
//
//	{"time":0.000123,"src":"10.99.0.2","dst":"10.99.0.1","sport":49152,"ip_id":1234,"ecn":"not_ect",
//	 "opcode":"RC_RDMA_WRITE_FIRST","qp":17,"psn":4431796,"ackreq":false,"se":false,"fecn":false,"becn":false,
//	 "reth":{"va":"0x55d0c3a4b000","rkey":"0x00001234","dma_len":4096},"len":1024,"icrc":"ok"}
//	{"time":0.000456,"src":"10.99.0.2","dst":"10.99.0.1","sport":49152,"ecn":"not_ect","malformed":"unknown opcode 0x4a"}
//	{"summary":{"file":"x.pcap","packets":2,"icrc_ok":1,"icrc_bad":0,"malformed":1}}
//
// ip_id is present on IPv4 packets only. A UD SEND to QP1 that carries a
// management datagram has a "mad" object: its class and attribute ID, the
// transaction ID, and the text form's decoding of it,
//
//	"mad":{"class":"0x07","attr_id":"0x0010","tid":"0x0000000279349ee8","text":"CM_REQ comm_id=0xe89e3479 ..."}

// datagramJSON holds what every object about a RoCEv2 datagram has.
type datagramJSON struct {
	Time  jsonSeconds `json:"time"` // seconds since the capture's first record
	Src   string      `json:"src"`
	Dst   string      `json:"dst"`
	SPort uint16      `json:"sport"`
	IPID  *uint16     `json:"ip_id,omitempty"`
	ECN   string      `json:"ecn"`           // not_ect, ect0, ect1, ce
	GSO   int         `json:"gso,omitempty"` // packet K of a GSO run (see GSOOf)
	GSOOf int         `json:"gso_of,omitempty"`
}

// malformedJSON is a datagram that wire.Parse rejected.
type malformedJSON struct {
	datagramJSON
	Malformed string `json:"malformed"`
}

// packetJSON is a parsed RoCEv2 packet.
type packetJSON struct {
	datagramJSON
	Opcode    string         `json:"opcode"`
	QP        uint32         `json:"qp"`
	PSN       uint32         `json:"psn"`
	AckReq    bool           `json:"ackreq"`
	SE        bool           `json:"se"`
	FECN      bool           `json:"fecn"`
	BECN      bool           `json:"becn"`
	RETH      *rethJSON      `json:"reth,omitempty"`
	AETH      *aethJSON      `json:"aeth,omitempty"`
	DETH      *dethJSON      `json:"deth,omitempty"`
	Atomic    *atomicJSON    `json:"atomic,omitempty"`
	AtomicAck *atomicAckJSON `json:"atomic_ack,omitempty"`
	Imm       string         `json:"imm,omitempty"`
	InvRKey   string         `json:"inv_rkey,omitempty"`
	Len       *int           `json:"len,omitempty"` // payload bytes, pad excluded
	MAD       *madJSON       `json:"mad,omitempty"`
	ICRC      string         `json:"icrc"` // ok or bad
}

type rethJSON struct {
	VA     string `json:"va"`
	RKey   string `json:"rkey"`
	DMALen uint32 `json:"dma_len"`
}

// aethJSON decodes the syndrome: kind is ack, rnr_nak, nak or reserved;
// value is its low five bits (credits, RNR timer code or NAK code); name is
// the spelled-out form ("ACK", "NAK_PSN_SEQ_ERR", ...).
type aethJSON struct {
	Kind  string `json:"kind"`
	Value uint8  `json:"value"`
	Name  string `json:"name"`
	MSN   uint32 `json:"msn"`
}

type dethJSON struct {
	QKey  string `json:"qkey"`
	SrcQP uint32 `json:"src_qp"`
}

// atomicJSON has swap and compare on CMP_SWAP, add on FETCH_ADD.
type atomicJSON struct {
	VA      string `json:"va"`
	RKey    string `json:"rkey"`
	Swap    string `json:"swap,omitempty"`
	Compare string `json:"compare,omitempty"`
	Add     string `json:"add,omitempty"`
}

// madJSON is a management datagram: for the CM (class 0x07), text names
// the message and its key fields as wire.AppendMADText does.
type madJSON struct {
	Class  string `json:"class"`
	AttrID string `json:"attr_id"`
	TID    string `json:"tid"`
	Text   string `json:"text"`
}

type atomicAckJSON struct {
	Orig string `json:"orig"`
}

// newPacketJSON returns the JSON object for pk: a packetJSON or a
// malformedJSON.
func newPacketJSON(pk *pcapPacket) any {
	d := datagramJSON{
		Time:  jsonSeconds(pk.time),
		Src:   pk.d.Src.Addr().String(),
		Dst:   pk.d.Dst.Addr().String(),
		SPort: pk.d.Src.Port(),
		ECN:   ecnName(pk.d.TOS),
		GSO:   pk.gso,
		GSOOf: pk.gsoOf,
	}
	if pk.d.IP[0]>>4 == 4 {
		id := uint16(pk.d.IP[4])<<8 | uint16(pk.d.IP[5])
		d.IPID = &id
	}
	if pk.err != nil {
		return &malformedJSON{datagramJSON: d, Malformed: pk.malformedReason()}
	}
	p := pk.pkt
	bth := p.BTH()
	j := &packetJSON{
		datagramJSON: d,
		Opcode:       p.Info().Name,
		QP:           bth.DestQP(),
		PSN:          uint32(bth.PSN()),
		AckReq:       bth.AckReq(),
		SE:           bth.SE(),
		FECN:         bth.FECN(),
		BECN:         bth.BECN(),
		ICRC:         "bad",
	}
	if pk.icrcOK {
		j.ICRC = "ok"
	}
	if r := p.RETH(); r != nil {
		j.RETH = &rethJSON{VA: hexString(r.VA(), 0), RKey: hexString(uint64(r.RKey()), 8), DMALen: r.DMALen()}
	}
	if a := p.AETH(); a != nil {
		s := a.Syndrome()
		kind := "reserved"
		switch {
		case s.IsACK():
			kind = "ack"
		case s.IsRNRNAK():
			kind = "rnr_nak"
		case s.IsNAK():
			kind = "nak"
		}
		j.AETH = &aethJSON{Kind: kind, Value: s.Value(), Name: s.String(), MSN: a.MSN()}
	}
	if x := p.DETH(); x != nil {
		j.DETH = &dethJSON{QKey: hexString(uint64(x.QKey()), 8), SrcQP: x.SrcQP()}
	}
	if a := p.AtomicETH(); a != nil {
		j.Atomic = &atomicJSON{VA: hexString(a.VA(), 0), RKey: hexString(uint64(a.RKey()), 8)}
		if p.Opcode() == wire.RCCompareSwap {
			j.Atomic.Swap, j.Atomic.Compare = hexString(a.SwapAdd(), 0), hexString(a.Compare(), 0)
		} else {
			j.Atomic.Add = hexString(a.SwapAdd(), 0)
		}
	}
	if a := p.AtomicAckETH(); a != nil {
		j.AtomicAck = &atomicAckJSON{Orig: hexString(a.OrigData(), 0)}
	}
	if i := p.ImmDt(); i != nil {
		j.Imm = hexString(uint64(i.Imm()), 8)
	}
	if i := p.IETH(); i != nil {
		j.InvRKey = hexString(uint64(i.RKey()), 8)
	}
	if p.Info().Payload {
		n := len(p.Payload())
		j.Len = &n
	}
	if p.Opcode() == wire.UDSendOnly && bth.DestQP() == wire.GSIQPN {
		if m, err := wire.ParseMAD(p.Payload()); err == nil {
			h := m.Header()
			j.MAD = &madJSON{Class: hexString(uint64(h.MgmtClass()), 2), AttrID: hexString(uint64(h.AttrID()), 4),
				TID: hexString(h.TransactionID(), 16), Text: string(wire.AppendMADText(nil, m))}
		}
	}
	return j
}

// hexString formats v as 0x and at least width hex digits, as the text form does.
func hexString(v uint64, width int) string {
	const digits = "0123456789abcdef"
	var buf [18]byte
	i := len(buf)
	for v != 0 || i == len(buf) || len(buf)-i < width {
		i--
		buf[i] = digits[v&0xF]
		v >>= 4
	}
	i--
	buf[i] = 'x'
	i--
	buf[i] = '0'
	return string(buf[i:])
}

// jsonSeconds is a duration written as a JSON number of seconds, exact to
// the nanosecond (12.071137, not 12.071136999999999).
type jsonSeconds time.Duration

func (s jsonSeconds) MarshalJSON() ([]byte, error) {
	d := time.Duration(s)
	var b []byte
	if d < 0 {
		b = append(b, '-')
		d = -d
	}
	b = strconv.AppendInt(b, int64(d/time.Second), 10)
	if ns := int64(d % time.Second); ns != 0 {
		frac := strconv.FormatInt(ns+1e9, 10)[1:] // nine digits, leading zeros kept
		b = append(b, '.')
		b = append(b, strings.TrimRight(frac, "0")...)
	}
	return b, nil
}
