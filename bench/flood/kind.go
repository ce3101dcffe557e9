package flood

import (
	"fmt"
	"strings"
)

// Kind is one kind of hostile packet the attacker sends. Each is built to
// end in one of the victim's drop counters (Kind.Counter).
type Kind uint8

// The kinds of hostile packets.
const (
	// UnknownQPN: a well-formed RDMA WRITE_ONLY with a valid ICRC to a QPN
	// the victim does not have (random, 24 bits). Counted as unknown_qpn.
	UnknownQPN Kind = iota
	// Malformed: datagrams that are not well-formed RoCEv2, in turn: an
	// unknown opcode, a WRITE_ONLY cut off inside its RETH, a transport
	// version (TVer) other than 0, a pad count larger than the payload,
	// and a single byte. Counted as malformed.
	Malformed
	// BadICRC: a WRITE_ONLY to the victim's real QP, PSN, rkey and address
	// whose ICRC has one bit flipped. Counted as icrc_err.
	BadICRC
	// BadSource: a WRITE_ONLY to the victim's real QP, PSN, rkey and
	// address, with a valid ICRC, from the attacker's address instead of
	// the peer's. Counted as drop_bad_source.
	BadSource
	// Oversize: like BadSource, but carrying more payload than the path
	// MTU allows (MTU+4 and twice the MTU, in turn). Counted as
	// drop_bad_source: the source check comes first.
	Oversize
	// ZeroLength: UDP datagrams with no payload at all (legal UDP; sent
	// from a second socket, as udplink refuses empty packets). Counted as
	// malformed.
	ZeroLength

	numKinds
)

var kindNames = [numKinds]string{"unknown_qpn", "malformed", "bad_icrc", "bad_source", "oversize", "zero_length"}

// kindCounters are the victim counters each kind is expected to land in.
var kindCounters = [numKinds]string{"unknown_qpn", "malformed", "icrc_err", "drop_bad_source", "drop_bad_source", "malformed"}

// String returns the kind's name as ParseKinds accepts it.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Counter names the victim's counter (rnic.Device.Counter) that a packet of
// this kind is expected to increment.
func (k Kind) Counter() string {
	if k < numKinds {
		return kindCounters[k]
	}
	return ""
}

// AllKinds returns every kind, in order: what a zero Config.Kinds means.
func AllKinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// ParseKinds parses a comma-separated list of kind names ("unknown_qpn,
// bad_icrc"), or "all". Unknown and repeated names are an error wrapping
// ErrInvalidConfig.
func ParseKinds(s string) ([]Kind, error) {
	if strings.TrimSpace(s) == "all" {
		return AllKinds(), nil
	}
	var ks []Kind
	seen := [numKinds]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		k := Kind(0)
		for k < numKinds && kindNames[k] != name {
			k++
		}
		switch {
		case k == numKinds:
			return nil, fmt.Errorf("%w: unknown kind %q (want some of %s, or all)",
				ErrInvalidConfig, name, strings.Join(kindNames[:], ","))
		case seen[k]:
			return nil, fmt.Errorf("%w: kind %q given twice", ErrInvalidConfig, name)
		}
		seen[k] = true
		ks = append(ks, k)
	}
	return ks, nil
}
