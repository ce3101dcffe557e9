package wire

import "fmt"

// Opcode is the first byte of the BTH. Its top three bits name the transport
// (RC, UC, RD, UD, or the CNP block) and the low five the operation.
type Opcode uint8

// Transport is the service a packet belongs to: the top three bits of its
// opcode.
type Transport uint8

// Transports, numbered as the opcode prefixes (include/rdma/ib_pack.h).
const (
	RC  Transport = 0 // reliable connected: 0x00–0x1F
	UC  Transport = 1 // unreliable connected: 0x20–0x3F
	RD  Transport = 2 // reliable datagram: 0x40–0x5F (not implemented by rxe or goroce)
	UD  Transport = 3 // unreliable datagram: 0x60–0x7F
	CNP Transport = 4 // congestion notification: 0x80–0x9F (RoCEv2 CNP is 0x81)
)

func (t Transport) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case RD:
		return "RD"
	case UD:
		return "UD"
	case CNP:
		return "CNP"
	}
	return fmt.Sprintf("Transport(%d)", uint8(t))
}

// The opcodes goroce speaks. RC has the full set; UC only SEND and RDMA WRITE;
// UD only SEND_ONLY (with and without immediate).
const (
	RCSendFirst          Opcode = 0x00
	RCSendMiddle         Opcode = 0x01
	RCSendLast           Opcode = 0x02
	RCSendLastImm        Opcode = 0x03
	RCSendOnly           Opcode = 0x04
	RCSendOnlyImm        Opcode = 0x05
	RCWriteFirst         Opcode = 0x06
	RCWriteMiddle        Opcode = 0x07
	RCWriteLast          Opcode = 0x08
	RCWriteLastImm       Opcode = 0x09
	RCWriteOnly          Opcode = 0x0A
	RCWriteOnlyImm       Opcode = 0x0B
	RCReadRequest        Opcode = 0x0C
	RCReadResponseFirst  Opcode = 0x0D
	RCReadResponseMiddle Opcode = 0x0E
	RCReadResponseLast   Opcode = 0x0F
	RCReadResponseOnly   Opcode = 0x10
	RCAck                Opcode = 0x11
	RCAtomicAck          Opcode = 0x12
	RCCompareSwap        Opcode = 0x13
	RCFetchAdd           Opcode = 0x14
	RCSendLastInv        Opcode = 0x16
	RCSendOnlyInv        Opcode = 0x17

	UCSendFirst    Opcode = 0x20
	UCSendMiddle   Opcode = 0x21
	UCSendLast     Opcode = 0x22
	UCSendLastImm  Opcode = 0x23
	UCSendOnly     Opcode = 0x24
	UCSendOnlyImm  Opcode = 0x25
	UCWriteFirst   Opcode = 0x26
	UCWriteMiddle  Opcode = 0x27
	UCWriteLast    Opcode = 0x28
	UCWriteLastImm Opcode = 0x29
	UCWriteOnly    Opcode = 0x2A
	UCWriteOnlyImm Opcode = 0x2B
	UDSendOnly     Opcode = 0x64
	UDSendOnlyImm  Opcode = 0x65
	CNPOpcode      Opcode = 0x81 // RoCEv2 congestion notification packet
)

// Op is the operation an opcode belongs to, independent of transport and of
// the packet's place in its message.
type Op uint8

// Operations.
const (
	OpSend Op = iota + 1
	OpWrite
	OpReadRequest
	OpReadResponse
	OpAck
	OpAtomicAck
	OpCompareSwap
	OpFetchAdd
	OpCNP
)

// Position is where a packet sits in its message.
type Position uint8

// Positions. A message of one packet is Only; longer messages are First,
// Middle..., Last.
const (
	First Position = 1 << iota
	Middle
	Last
	Only = First | Last
)

// Header is a bit set of the extension headers a packet carries after the BTH.
type Header uint16

// Extension headers, in the order they appear on the wire.
const (
	HasDETH         Header = 1 << iota // datagram: Q_Key and source QP (UD)
	HasRETH                            // RDMA: virtual address, R_Key, DMA length
	HasAtomicETH                       // atomic request: VA, R_Key, swap/add, compare
	HasAETH                            // acknowledge: syndrome and MSN
	HasAtomicAckETH                    // atomic response: original value
	HasImmDt                           // immediate data
	HasIETH                            // invalidate: R_Key to invalidate
	HasCNPReserved                     // the 16 reserved bytes of a RoCEv2 CNP
	numHeaders      = iota
)

// headerLens holds each extension header's length, indexed by bit number.
var headerLens = [numHeaders]int{
	DETHLen, RETHLen, AtomicETHLen, AETHLen, AtomicAckETHLen, ImmDtLen, IETHLen, CNPReservedLen,
}

// OpInfo describes one opcode: everything needed to parse or build a packet
// of it. It is the single source of header layout.
type OpInfo struct {
	Name      string    // as Wireshark and rxe print it, e.g. "RC_SEND_ONLY"
	Transport Transport // RC, UC, UD or CNP
	Op        Op        // SEND, RDMA WRITE, ...
	Position  Position  // First, Middle, Last or Only
	Headers   Header    // extension headers present
	Payload   bool      // whether the packet may carry payload
	Request   bool      // sent by a requester (false: a response or a CNP)
	HeaderLen int       // BTH plus all extension headers

	offsets [numHeaders]uint8 // offset of each present extension header
}

// Valid reports whether the opcode is one goroce knows.
func (i *OpInfo) Valid() bool { return i.Name != "" }

// Has reports whether the packet carries extension header h.
func (i *OpInfo) Has(h Header) bool { return i.Headers&h != 0 }

// AckRequired reports whether the responder acknowledges this opcode: every
// RC request does (an ACK, a read response or an atomic ACK answers it),
// nothing else does.
func (i *OpInfo) AckRequired() bool { return i.Transport == RC && i.Request }

// Offset returns the offset of extension header h from the start of the BTH,
// or -1 if the opcode does not carry it.
func (i *OpInfo) Offset(h Header) int {
	if !i.Has(h) {
		return -1
	}
	for n := 0; n < numHeaders; n++ {
		if h == 1<<n {
			return int(i.offsets[n])
		}
	}
	return -1
}

// Info returns the opcode's layout. For an unknown opcode it returns an
// OpInfo whose Valid method reports false.
func (o Opcode) Info() *OpInfo { return &opTable[o] }

// String returns the opcode's name, or its hex value when unknown.
func (o Opcode) String() string {
	if i := &opTable[o]; i.Valid() {
		return i.Name
	}
	return fmt.Sprintf("OPCODE_%#02x", uint8(o))
}

// opTable is built once from opDefs by computing each header's offset in wire
// order.
var opTable = func() (t [256]OpInfo) {
	for _, d := range opDefs {
		info := d.info
		info.Transport = Transport(d.op >> 5)
		off := BTHLen
		for n := 0; n < numHeaders; n++ {
			if info.Headers&(1<<n) != 0 {
				info.offsets[n] = uint8(off)
				off += headerLens[n]
			}
		}
		info.HeaderLen = off
		t[d.op] = info
	}
	return t
}()

type opDef struct {
	op   Opcode
	info OpInfo
}

// The layout of every opcode, after the IBTA specification's table 38 and
// Linux rxe's rxe_opcode.c.
var opDefs = []opDef{
	{RCSendFirst, OpInfo{Name: "RC_SEND_FIRST", Op: OpSend, Position: First, Payload: true, Request: true}},
	{RCSendMiddle, OpInfo{Name: "RC_SEND_MIDDLE", Op: OpSend, Position: Middle, Payload: true, Request: true}},
	{RCSendLast, OpInfo{Name: "RC_SEND_LAST", Op: OpSend, Position: Last, Payload: true, Request: true}},
	{RCSendLastImm, OpInfo{Name: "RC_SEND_LAST_WITH_IMMEDIATE", Op: OpSend, Position: Last, Headers: HasImmDt, Payload: true, Request: true}},
	{RCSendOnly, OpInfo{Name: "RC_SEND_ONLY", Op: OpSend, Position: Only, Payload: true, Request: true}},
	{RCSendOnlyImm, OpInfo{Name: "RC_SEND_ONLY_WITH_IMMEDIATE", Op: OpSend, Position: Only, Headers: HasImmDt, Payload: true, Request: true}},
	{RCWriteFirst, OpInfo{Name: "RC_RDMA_WRITE_FIRST", Op: OpWrite, Position: First, Headers: HasRETH, Payload: true, Request: true}},
	{RCWriteMiddle, OpInfo{Name: "RC_RDMA_WRITE_MIDDLE", Op: OpWrite, Position: Middle, Payload: true, Request: true}},
	{RCWriteLast, OpInfo{Name: "RC_RDMA_WRITE_LAST", Op: OpWrite, Position: Last, Payload: true, Request: true}},
	{RCWriteLastImm, OpInfo{Name: "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Op: OpWrite, Position: Last, Headers: HasImmDt, Payload: true, Request: true}},
	{RCWriteOnly, OpInfo{Name: "RC_RDMA_WRITE_ONLY", Op: OpWrite, Position: Only, Headers: HasRETH, Payload: true, Request: true}},
	{RCWriteOnlyImm, OpInfo{Name: "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Op: OpWrite, Position: Only, Headers: HasRETH | HasImmDt, Payload: true, Request: true}},
	{RCReadRequest, OpInfo{Name: "RC_RDMA_READ_REQUEST", Op: OpReadRequest, Position: Only, Headers: HasRETH, Request: true}},
	{RCReadResponseFirst, OpInfo{Name: "RC_RDMA_READ_RESPONSE_FIRST", Op: OpReadResponse, Position: First, Headers: HasAETH, Payload: true}},
	{RCReadResponseMiddle, OpInfo{Name: "RC_RDMA_READ_RESPONSE_MIDDLE", Op: OpReadResponse, Position: Middle, Payload: true}},
	{RCReadResponseLast, OpInfo{Name: "RC_RDMA_READ_RESPONSE_LAST", Op: OpReadResponse, Position: Last, Headers: HasAETH, Payload: true}},
	{RCReadResponseOnly, OpInfo{Name: "RC_RDMA_READ_RESPONSE_ONLY", Op: OpReadResponse, Position: Only, Headers: HasAETH, Payload: true}},
	{RCAck, OpInfo{Name: "RC_ACKNOWLEDGE", Op: OpAck, Position: Only, Headers: HasAETH}},
	{RCAtomicAck, OpInfo{Name: "RC_ATOMIC_ACKNOWLEDGE", Op: OpAtomicAck, Position: Only, Headers: HasAETH | HasAtomicAckETH}},
	{RCCompareSwap, OpInfo{Name: "RC_COMPARE_SWAP", Op: OpCompareSwap, Position: Only, Headers: HasAtomicETH, Request: true}},
	{RCFetchAdd, OpInfo{Name: "RC_FETCH_ADD", Op: OpFetchAdd, Position: Only, Headers: HasAtomicETH, Request: true}},
	{RCSendLastInv, OpInfo{Name: "RC_SEND_LAST_WITH_INVALIDATE", Op: OpSend, Position: Last, Headers: HasIETH, Payload: true, Request: true}},
	{RCSendOnlyInv, OpInfo{Name: "RC_SEND_ONLY_WITH_INVALIDATE", Op: OpSend, Position: Only, Headers: HasIETH, Payload: true, Request: true}},

	{UCSendFirst, OpInfo{Name: "UC_SEND_FIRST", Op: OpSend, Position: First, Payload: true, Request: true}},
	{UCSendMiddle, OpInfo{Name: "UC_SEND_MIDDLE", Op: OpSend, Position: Middle, Payload: true, Request: true}},
	{UCSendLast, OpInfo{Name: "UC_SEND_LAST", Op: OpSend, Position: Last, Payload: true, Request: true}},
	{UCSendLastImm, OpInfo{Name: "UC_SEND_LAST_WITH_IMMEDIATE", Op: OpSend, Position: Last, Headers: HasImmDt, Payload: true, Request: true}},
	{UCSendOnly, OpInfo{Name: "UC_SEND_ONLY", Op: OpSend, Position: Only, Payload: true, Request: true}},
	{UCSendOnlyImm, OpInfo{Name: "UC_SEND_ONLY_WITH_IMMEDIATE", Op: OpSend, Position: Only, Headers: HasImmDt, Payload: true, Request: true}},
	{UCWriteFirst, OpInfo{Name: "UC_RDMA_WRITE_FIRST", Op: OpWrite, Position: First, Headers: HasRETH, Payload: true, Request: true}},
	{UCWriteMiddle, OpInfo{Name: "UC_RDMA_WRITE_MIDDLE", Op: OpWrite, Position: Middle, Payload: true, Request: true}},
	{UCWriteLast, OpInfo{Name: "UC_RDMA_WRITE_LAST", Op: OpWrite, Position: Last, Payload: true, Request: true}},
	{UCWriteLastImm, OpInfo{Name: "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Op: OpWrite, Position: Last, Headers: HasImmDt, Payload: true, Request: true}},
	{UCWriteOnly, OpInfo{Name: "UC_RDMA_WRITE_ONLY", Op: OpWrite, Position: Only, Headers: HasRETH, Payload: true, Request: true}},
	{UCWriteOnlyImm, OpInfo{Name: "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Op: OpWrite, Position: Only, Headers: HasRETH | HasImmDt, Payload: true, Request: true}},

	{UDSendOnly, OpInfo{Name: "UD_SEND_ONLY", Op: OpSend, Position: Only, Headers: HasDETH, Payload: true, Request: true}},
	{UDSendOnlyImm, OpInfo{Name: "UD_SEND_ONLY_WITH_IMMEDIATE", Op: OpSend, Position: Only, Headers: HasDETH | HasImmDt, Payload: true, Request: true}},

	{CNPOpcode, OpInfo{Name: "CNP", Op: OpCNP, Position: Only, Headers: HasCNPReserved}},
}
