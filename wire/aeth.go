package wire

import (
	"encoding/binary"
	"fmt"
	"time"
)

// AETHLen is the length of the ACK Extended Transport Header.
const AETHLen = 4

// AETH is a view of the ACK Extended Transport Header, carried by
// acknowledgements, negative acknowledgements and read responses:
//
//	| Syndrome (8) | MSN (24) |
//
// The syndrome's top bits say what kind of answer it is (see Syndrome); the
// MSN is the message sequence number: how many requests the responder has
// completed.
type AETH []byte

// Syndrome returns the syndrome byte.
func (a AETH) Syndrome() Syndrome { return Syndrome(a[0]) }

// MSN returns the message sequence number.
func (a AETH) MSN() uint32 { return binary.BigEndian.Uint32(a) & 0xFFFFFF }

// Fields decodes the header.
func (a AETH) Fields() AETHFields { return AETHFields{Syndrome: a.Syndrome(), MSN: a.MSN()} }

// AETHFields holds the values of an AETH for encoding.
type AETHFields struct {
	Syndrome Syndrome
	MSN      uint32
}

// Encode writes the fields into a.
func (f *AETHFields) Encode(a AETH) {
	binary.BigEndian.PutUint32(a, f.MSN&0xFFFFFF)
	a[0] = byte(f.Syndrome)
}

// Syndrome is the first byte of an AETH:
//
//	0b000xxxxx  ACK; xxxxx = credit count (31 = invalid, what rxe sends)
//	0b001xxxxx  RNR NAK; xxxxx = RNR timer code (how long to wait)
//	0b011xxxxx  NAK; xxxxx = NAK code (NAKPSNSeqErr, ...)
type Syndrome uint8

// AETH syndrome kinds (the top three bits).
const (
	SyndromeACK    = 0x00
	SyndromeRNRNAK = 0x20
	SyndromeNAK    = 0x60
	syndromeKind   = 0xE0
)

// NAK codes (the low five bits of a NAK syndrome).
const (
	NAKPSNSeqErr    = 0 // PSN sequence error: a packet is missing; carries the expected PSN
	NAKInvalidReq   = 1 // invalid request: bad opcode order, length or alignment
	NAKRemAccessErr = 2 // remote access error: key, bounds or permission
	NAKRemOpErr     = 3 // remote operational error: the responder failed
	NAKInvalidRDReq = 4 // invalid RD request (RD only)
)

// ACKInvalidCredits is the credit field of an ACK that carries no credit
// information, which is what rxe sends (syndrome 0x1F).
const ACKInvalidCredits = 0x1F

// Syndromes goroce sends.
const (
	SynACK          Syndrome = SyndromeACK | ACKInvalidCredits
	SynNAKSeqErr    Syndrome = SyndromeNAK | NAKPSNSeqErr
	SynNAKInvReq    Syndrome = SyndromeNAK | NAKInvalidReq
	SynNAKRemAccess Syndrome = SyndromeNAK | NAKRemAccessErr
	SynNAKRemOp     Syndrome = SyndromeNAK | NAKRemOpErr
)

// RNRNAK returns the syndrome of an RNR NAK asking the requester to wait for
// the given timer code (see RNRTimer).
func RNRNAK(timerCode uint8) Syndrome { return Syndrome(SyndromeRNRNAK | timerCode&0x1F) }

// IsACK reports whether the syndrome is a positive acknowledgement.
func (s Syndrome) IsACK() bool { return s&syndromeKind == SyndromeACK }

// IsRNRNAK reports whether the syndrome is a receiver-not-ready NAK.
func (s Syndrome) IsRNRNAK() bool { return s&syndromeKind == SyndromeRNRNAK }

// IsNAK reports whether the syndrome is a NAK (other than RNR).
func (s Syndrome) IsNAK() bool { return s&syndromeKind == SyndromeNAK }

// Value returns the low five bits: credits, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s) & 0x1F }

// String decodes the syndrome: "ACK", "ACK(credits=3)", "RNR_NAK(timer=14:
// 960µs)", "NAK_PSN_SEQ_ERR", ...
func (s Syndrome) String() string {
	switch {
	case s.IsACK():
		if s.Value() == ACKInvalidCredits {
			return "ACK"
		}
		return fmt.Sprintf("ACK(credits=%d)", s.Value())
	case s.IsRNRNAK():
		return fmt.Sprintf("RNR_NAK(timer=%d:%v)", s.Value(), RNRTimer(s.Value()))
	case s.IsNAK():
		switch s.Value() {
		case NAKPSNSeqErr:
			return "NAK_PSN_SEQ_ERR"
		case NAKInvalidReq:
			return "NAK_INVALID_REQUEST"
		case NAKRemAccessErr:
			return "NAK_REMOTE_ACCESS_ERROR"
		case NAKRemOpErr:
			return "NAK_REMOTE_OPERATIONAL_ERROR"
		case NAKInvalidRDReq:
			return "NAK_INVALID_RD_REQUEST"
		}
		return fmt.Sprintf("NAK(code=%d)", s.Value())
	}
	return fmt.Sprintf("SYNDROME(%#02x)", uint8(s))
}

// rnrTimers is the IBTA RNR NAK timer table (9.7.5.2.8): code 0 is the
// longest wait, 655.36 ms; codes 1–31 run from 0.01 ms to 491.52 ms.
var rnrTimers = [32]time.Duration{
	655360 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond,
	40 * time.Microsecond, 60 * time.Microsecond, 80 * time.Microsecond, 120 * time.Microsecond,
	160 * time.Microsecond, 240 * time.Microsecond, 320 * time.Microsecond, 480 * time.Microsecond,
	640 * time.Microsecond, 960 * time.Microsecond, 1280 * time.Microsecond, 1920 * time.Microsecond,
	2560 * time.Microsecond, 3840 * time.Microsecond, 5120 * time.Microsecond, 7680 * time.Microsecond,
	10240 * time.Microsecond, 15360 * time.Microsecond, 20480 * time.Microsecond, 30720 * time.Microsecond,
	40960 * time.Microsecond, 61440 * time.Microsecond, 81920 * time.Microsecond, 122880 * time.Microsecond,
	163840 * time.Microsecond, 245760 * time.Microsecond, 327680 * time.Microsecond, 491520 * time.Microsecond,
}

// RNRTimer returns how long a requester waits after an RNR NAK with the given
// timer code (the min_rnr_timer attribute of the responder's QP).
func RNRTimer(code uint8) time.Duration { return rnrTimers[code&0x1F] }

// LocalACKTimeout returns the transport timer for the QP attribute timeout:
// 4.096 µs × 2^timeout; 0 means infinite and returns 0.
func LocalACKTimeout(timeout uint8) time.Duration {
	if timeout == 0 || timeout > 31 {
		return 0
	}
	return 4096 * time.Nanosecond << timeout
}
