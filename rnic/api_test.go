package rnic_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/simlink"
)

// apiEnv is what a row of TestAPIMisuse works on: a device with a PD, a CQ
// and a registered buffer, and a second device whose objects are foreign to
// the first. Each row gets its own, so rows cannot disturb each other.
type apiEnv struct {
	dev, other *rnic.Device
	pd         *mr.PD
	cq         *qp.CQ
	buf        []byte
	mr         *mr.MR
}

// The simulated addresses of apiEnv's devices, and a peer that does not
// exist (Modify and PostSend never need it to).
var (
	apiAddr  = netip.MustParseAddrPort("10.9.0.1:4791")
	apiOther = netip.MustParseAddrPort("10.9.0.2:4791")
	apiPeer  = netip.MustParseAddr("::ffff:10.9.0.3")
)

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	network := simlink.NewNetwork(simlink.Config{})
	t.Cleanup(func() { network.Close() })
	open := func(addr netip.AddrPort) *rnic.Device {
		port, err := network.Attach(addr, simlink.PortConfig{})
		if err != nil {
			t.Fatal(err)
		}
		dev, err := rnic.Open(rnic.Config{Addr: addr, Link: port, MTU: 1024})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		return dev
	}
	e := &apiEnv{dev: open(apiAddr), other: open(apiOther), buf: make([]byte, 4096)}
	var err error
	if e.pd, err = e.dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = e.dev.CreateCQ(64); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, mr.AccessLocalWrite|mr.AccessRemoteWrite|mr.AccessRemoteRead|mr.AccessRemoteAtomic); err != nil {
		t.Fatal(err)
	}
	return e
}

// initAttr returns valid creation attributes for a QP of type typ.
func (e *apiEnv) initAttr(typ qp.Type) *qp.InitAttr {
	return &qp.InitAttr{Type: typ, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: qp.Cap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}}
}

// qp creates a QP of type typ and moves it to state (RESET to RTS), with
// the attributes each transition requires, towards apiPeer.
func (e *apiEnv) qp(t *testing.T, typ qp.Type, state qp.State) *rnic.QP {
	t.Helper()
	q, err := e.dev.CreateQP(e.pd, e.initAttr(typ))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, PortNum: 1, AccessFlags: mr.AccessRemoteWrite, QKey: 0x1111},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: apiPeer}, PathMTU: qp.MTU1024, DestQPN: 0x42, MaxDestRdAtomic: 1},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN},
		{qp.Attr{State: qp.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}, qp.AttrState | qp.AttrSQPSN},
	}
	switch typ {
	case qp.RC:
		steps[1].mask |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
		steps[2].mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
	case qp.UD:
		steps[0].mask = qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey
		steps[1].mask = qp.AttrState
	}
	for _, s := range steps[:state] { // StateInit is 1, StateRTS 3
		if err := q.Modify(&s.attr, s.mask); err != nil {
			t.Fatalf("modify %v QP to %v: %v", typ, s.attr.State, err)
		}
	}
	return q
}

// sge addresses n bytes of the env's buffer from off.
func (e *apiEnv) sge(off, n int) qp.SGE {
	return qp.SGE{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}
}

// TestAPIMisuse calls every public verb of rnic, qp and mr with a bad
// argument, or in a state where it is not allowed, and checks that the call
// fails (never panics) with the expected sentinel and a message that names
// what was wrong. It is about breadth: one row per mistake; the deeper
// checks of each verb live next to it (qp/modify_test.go, qp/post_test.go,
// mr/*_test.go).
func TestAPIMisuse(t *testing.T) {
	atomicWR := func(e *apiEnv, remote uint64) *qp.SendWR {
		return &qp.SendWR{Opcode: qp.WRAtomicFetchAndAdd, SGL: []qp.SGE{e.sge(0, 8)}, RemoteAddr: remote, RKey: 1}
	}
	rows := []struct {
		name string
		call func(t *testing.T, e *apiEnv) error
		want error
		key  string // the message names what was wrong
		// bug, if set, says why the row does not yet behave: the row is
		// logged, not failed, and fails once the bug is fixed, so that the
		// note is removed.
		bug string
	}{
		// Device.
		{name: "Open without an address", want: rnic.ErrInvalidArg, key: "Config.Addr",
			call: func(t *testing.T, e *apiEnv) error { _, err := rnic.Open(rnic.Config{}); return err }},
		{name: "Open with MTU 1500", want: rnic.ErrInvalidArg, key: "MTU 1500",
			call: func(t *testing.T, e *apiEnv) error {
				_, err := rnic.Open(rnic.Config{Addr: apiAddr, MTU: 1500})
				return err
			}},
		{name: "QueryPort(2)", want: rnic.ErrInvalidArg, key: "port 2",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.QueryPort(2); return err }},
		{name: "QueryPort(0)", want: rnic.ErrInvalidArg, key: "port 0",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.QueryPort(0); return err }},
		{name: "QueryGID index 1", want: rnic.ErrNoGID, key: "GID 1",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.QueryGID(1, 1); return err }},
		{name: "QueryGID index 1024", want: rnic.ErrInvalidArg, key: "GID 1024",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.QueryGID(1, 1024); return err }},
		{name: "QueryGID port 2", want: rnic.ErrInvalidArg, key: "port 2",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.QueryGID(2, 0); return err }},

		// CQ.
		{name: "CreateCQ depth 0", want: qp.ErrCQSize, key: "0 (want 1 to",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.CreateCQ(0); return err }},
		{name: "CreateCQ negative depth", want: qp.ErrCQSize, key: "-1",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.CreateCQ(-1); return err }},
		{name: "CreateCQ above max_cqe", want: rnic.ErrInvalidArg, key: "max_cqe",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.CreateCQ(rnic.MaxCQE + 1); return err }},

		// SRQ.
		{name: "CreateSRQ with a nil PD", want: rnic.ErrWrongDevice, key: "PD",
			call: func(t *testing.T, e *apiEnv) error {
				_, err := e.dev.CreateSRQ(nil, qp.SRQAttr{MaxWR: 8, MaxSGE: 1})
				return err
			}},
		{name: "CreateSRQ with a foreign PD", want: rnic.ErrWrongDevice, key: "PD",
			call: func(t *testing.T, e *apiEnv) error {
				pd, _ := e.other.AllocPD()
				_, err := e.dev.CreateSRQ(pd, qp.SRQAttr{MaxWR: 8, MaxSGE: 1})
				return err
			}},
		{name: "CreateSRQ max_wr 0", want: qp.ErrInvalidWR, key: "max_wr 0",
			call: func(t *testing.T, e *apiEnv) error {
				_, err := e.dev.CreateSRQ(e.pd, qp.SRQAttr{MaxWR: 0, MaxSGE: 1})
				return err
			}},
		{name: "CreateSRQ max_sge 33", want: qp.ErrInvalidWR, key: "max_sge 33",
			call: func(t *testing.T, e *apiEnv) error {
				_, err := e.dev.CreateSRQ(e.pd, qp.SRQAttr{MaxWR: 8, MaxSGE: 33})
				return err
			}},
		{name: "SRQ.Modify limit above max_wr", want: qp.ErrInvalidWR, key: "srq_limit 9",
			call: func(t *testing.T, e *apiEnv) error {
				srq, err := e.dev.CreateSRQ(e.pd, qp.SRQAttr{MaxWR: 8, MaxSGE: 1})
				if err != nil {
					t.Fatal(err)
				}
				return srq.Modify(9)
			}},
		{name: "SRQ.PostRecv with too many SGEs", want: qp.ErrTooManySGE, key: "SGE",
			call: func(t *testing.T, e *apiEnv) error {
				srq, err := e.dev.CreateSRQ(e.pd, qp.SRQAttr{MaxWR: 8, MaxSGE: 1})
				if err != nil {
					t.Fatal(err)
				}
				return srq.PostRecv(&qp.RecvWR{SGL: []qp.SGE{e.sge(0, 8), e.sge(8, 8)}})
			}},

		// CreateQP.
		{name: "CreateQP with a nil PD", want: rnic.ErrWrongDevice, key: "PD",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.CreateQP(nil, e.initAttr(qp.RC)); return err }},
		{name: "CreateQP with a foreign PD", want: rnic.ErrWrongDevice, key: "PD",
			call: func(t *testing.T, e *apiEnv) error {
				pd, _ := e.other.AllocPD()
				_, err := e.dev.CreateQP(pd, e.initAttr(qp.RC))
				return err
			}},
		{name: "CreateQP with a deallocated PD", want: mr.ErrDestroyed, key: "deallocated",
			call: func(t *testing.T, e *apiEnv) error {
				pd, _ := e.dev.AllocPD()
				if err := pd.Dealloc(); err != nil {
					t.Fatal(err)
				}
				_, err := e.dev.CreateQP(pd, e.initAttr(qp.RC))
				return err
			}},
		{name: "CreateQP with nil InitAttr", want: rnic.ErrInvalidArg, key: "InitAttr",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.CreateQP(e.pd, nil); return err }},
		{name: "CreateQP of an unknown type", want: qp.ErrInvalidAttr, key: "QP type",
			call: func(t *testing.T, e *apiEnv) error {
				ia := e.initAttr(qp.RC)
				ia.Type = 99
				_, err := e.dev.CreateQP(e.pd, ia)
				return err
			}},
		{name: "CreateQP without a send CQ", want: qp.ErrInvalidAttr, key: "send_cq",
			call: func(t *testing.T, e *apiEnv) error {
				ia := e.initAttr(qp.RC)
				ia.SendCQ = nil
				_, err := e.dev.CreateQP(e.pd, ia)
				return err
			}},
		{name: "CreateQP max_send_wr 0", want: qp.ErrInvalidAttr, key: "max_send_wr 0",
			call: func(t *testing.T, e *apiEnv) error {
				ia := e.initAttr(qp.RC)
				ia.Cap.MaxSendWR = 0
				_, err := e.dev.CreateQP(e.pd, ia)
				return err
			}},
		{name: "CreateQP max_recv_wr 0 without an SRQ", want: qp.ErrInvalidAttr, key: "max_recv_wr 0",
			call: func(t *testing.T, e *apiEnv) error {
				ia := e.initAttr(qp.RC)
				ia.Cap.MaxRecvWR = 0
				_, err := e.dev.CreateQP(e.pd, ia)
				return err
			}},
		{name: "CreateQP max_send_wr above the device's", want: qp.ErrInvalidAttr, key: "max_send_wr",
			call: func(t *testing.T, e *apiEnv) error {
				ia := e.initAttr(qp.RC)
				ia.Cap.MaxSendWR = rnic.MaxQPWR + 1
				_, err := e.dev.CreateQP(e.pd, ia)
				return err
			}},
		{name: "CreateQP max_send_sge above the device's", want: qp.ErrInvalidAttr, key: "max_send_sge",
			call: func(t *testing.T, e *apiEnv) error {
				ia := e.initAttr(qp.RC)
				ia.Cap.MaxSendSGE = rnic.MaxSGE + 1
				_, err := e.dev.CreateQP(e.pd, ia)
				return err
			}},
		{name: "CreateQP max_inline_data above the device's", want: qp.ErrInvalidAttr, key: "max_inline_data",
			call: func(t *testing.T, e *apiEnv) error {
				ia := e.initAttr(qp.RC)
				ia.Cap.MaxInlineData = rnic.MaxInline + 1
				_, err := e.dev.CreateQP(e.pd, ia)
				return err
			}},

		// Modify.
		{name: "Modify RESET to RTS", want: qp.ErrBadTransition, key: "RESET to RTS",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateReset).Modify(&qp.Attr{State: qp.StateRTS}, qp.AttrState|qp.AttrSQPSN)
			}},
		{name: "Modify to an unknown state", want: qp.ErrInvalidAttr, key: "state 42",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateReset).Modify(&qp.Attr{State: 42}, qp.AttrState)
			}},
		{name: "Modify to INIT without IBV_QP_ACCESS_FLAGS", want: qp.ErrMissingAttr, key: "IBV_QP_ACCESS_FLAGS",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateReset).Modify(&qp.Attr{State: qp.StateInit, PortNum: 1},
					qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort)
			}},
		{name: "Modify UD to INIT with IBV_QP_ACCESS_FLAGS", want: qp.ErrExtraAttr, key: "IBV_QP_ACCESS_FLAGS",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.UD, qp.StateReset).Modify(&qp.Attr{State: qp.StateInit, PortNum: 1},
					qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrQKey|qp.AttrAccessFlags)
			}},
		{name: "Modify RC to RTR without IBV_QP_DEST_QPN", want: qp.ErrMissingAttr, key: "IBV_QP_DEST_QPN",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateInit).Modify(&qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: apiPeer}, PathMTU: qp.MTU1024},
					qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer)
			}},
		{name: "Modify to INIT on port 2", want: qp.ErrInvalidAttr, key: "port_num",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateReset).Modify(&qp.Attr{State: qp.StateInit, PortNum: 2},
					qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
			}},
		{name: "Modify to INIT with pkey_index 1", want: qp.ErrInvalidAttr, key: "pkey_index",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateReset).Modify(&qp.Attr{State: qp.StateInit, PortNum: 1, PKeyIndex: 1},
					qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
			}},
		{name: "Modify to RTR with a path MTU above the port's", want: qp.ErrInvalidAttr, key: "path_mtu",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.UC, qp.StateInit).Modify(&qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: apiPeer}, PathMTU: qp.MTU4096, DestQPN: 2},
					qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN)
			}},
		{name: "Modify to RTR with a 25-bit dest QPN", want: qp.ErrInvalidAttr, key: "dest_qp_num",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.UC, qp.StateInit).Modify(&qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: apiPeer}, PathMTU: qp.MTU1024, DestQPN: 1 << 24},
					qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN)
			}},
		{name: "Modify to RTR without a GID", want: qp.ErrInvalidAttr, key: "dgid",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.UC, qp.StateInit).Modify(&qp.Attr{State: qp.StateRTR, PathMTU: qp.MTU1024, DestQPN: 2},
					qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN)
			}},
		{name: "Modify to RTR with an IPv6 GID on an IPv4 device", want: qp.ErrInvalidAttr, key: "address family",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.UC, qp.StateInit).Modify(&qp.Attr{State: qp.StateRTR, AH: qp.AH{GID: netip.MustParseAddr("fd00::1")}, PathMTU: qp.MTU1024, DestQPN: 2},
					qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN)
			}},
		{name: "Modify to RTS with retry_cnt 8", want: qp.ErrInvalidAttr, key: "retry_cnt",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTR).Modify(&qp.Attr{State: qp.StateRTS, RetryCnt: 8},
					qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic)
			}},
		{name: "Modify to RTS with timeout 32", want: qp.ErrInvalidAttr, key: "timeout",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTR).Modify(&qp.Attr{State: qp.StateRTS, Timeout: 32},
					qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic)
			}},
		{name: "Modify to RTS with max_rd_atomic above the device's", want: qp.ErrInvalidAttr, key: "max_rd_atomic",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTR).Modify(&qp.Attr{State: qp.StateRTS, MaxRdAtomic: rnic.MaxRdAtomic + 1},
					qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic)
			}},
		{name: "Modify with a wrong IBV_QP_CUR_STATE", want: qp.ErrInvalidAttr, key: "IBV_QP_CUR_STATE",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTS).Modify(&qp.Attr{State: qp.StateRTS, CurState: qp.StateSQD},
					qp.AttrState|qp.AttrCurState)
			}},
		{name: "Modify with a nil Attr", want: qp.ErrInvalidAttr, key: "Attr",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateReset).Modify(nil, qp.AttrState)
			}},

		// PostRecv.
		{name: "PostRecv in RESET", want: qp.ErrInvalidState, key: "RESET",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateReset).PostRecv(&qp.RecvWR{SGL: []qp.SGE{e.sge(0, 8)}})
			}},
		{name: "PostRecv with too many SGEs", want: qp.ErrTooManySGE, key: "SGE",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateInit).PostRecv(&qp.RecvWR{SGL: []qp.SGE{e.sge(0, 8), e.sge(8, 8), e.sge(16, 8)}})
			}},
		{name: "PostRecv on a QP with an SRQ", want: qp.ErrInvalidWR, key: "SRQ",
			call: func(t *testing.T, e *apiEnv) error {
				srq, err := e.dev.CreateSRQ(e.pd, qp.SRQAttr{MaxWR: 8, MaxSGE: 1})
				if err != nil {
					t.Fatal(err)
				}
				ia := e.initAttr(qp.RC)
				ia.SRQ = srq
				q, err := e.dev.CreateQP(e.pd, ia)
				if err != nil {
					t.Fatal(err)
				}
				return q.PostRecv(&qp.RecvWR{SGL: []qp.SGE{e.sge(0, 8)}})
			}},
		{name: "PostRecv beyond max_recv_wr", want: qp.ErrQueueFull, key: "full",
			call: func(t *testing.T, e *apiEnv) error {
				q := e.qp(t, qp.RC, qp.StateInit)
				for i := range 8 {
					if err := q.PostRecv(&qp.RecvWR{WRID: uint64(i)}); err != nil {
						t.Fatal(err)
					}
				}
				return q.PostRecv(&qp.RecvWR{WRID: 8})
			}},

		// PostSend.
		{name: "PostSend in RESET", want: qp.ErrInvalidState, key: "RESET",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateReset).PostSend(&qp.SendWR{Opcode: qp.WRSend})
			}},
		{name: "PostSend in RTR", want: qp.ErrInvalidState, key: "RTR",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTR).PostSend(&qp.SendWR{Opcode: qp.WRSend})
			}},
		{name: "PostSend with too many SGEs", want: qp.ErrTooManySGE, key: "max_send_sge",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTS).PostSend(&qp.SendWR{Opcode: qp.WRSend,
					SGL: []qp.SGE{e.sge(0, 8), e.sge(8, 8), e.sge(16, 8)}})
			}},
		{name: "PostSend inline above max_inline_data", want: qp.ErrInvalidWR, key: "max_inline_data",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTS).PostSend(&qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendInline,
					SGL: []qp.SGE{e.sge(0, 65)}})
			}},
		{name: "PostSend RDMA READ on a UC QP", want: qp.ErrInvalidWR, key: "UC",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.UC, qp.StateRTS).PostSend(&qp.SendWR{Opcode: qp.WRRDMARead, SGL: []qp.SGE{e.sge(0, 8)}})
			}},
		{name: "PostSend RDMA WRITE on a UD QP", want: qp.ErrInvalidWR, key: "UD",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.UD, qp.StateRTS).PostSend(&qp.SendWR{Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{e.sge(0, 8)}})
			}},
		{name: "PostSend with an unknown opcode", want: qp.ErrInvalidWR, key: "not supported",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTS).PostSend(&qp.SendWR{Opcode: 200})
			}},
		{name: "PostSend UD without an address handle", want: qp.ErrInvalidWR, key: "address handle",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.UD, qp.StateRTS).PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{e.sge(0, 8)}, RemoteQPN: 2})
			}},
		{name: "PostSend UD above the MTU", want: qp.ErrInvalidWR, key: "MTU",
			call: func(t *testing.T, e *apiEnv) error {
				ah, err := e.dev.CreateAH(e.pd, qp.AH{GID: apiPeer})
				if err != nil {
					t.Fatal(err)
				}
				return e.qp(t, qp.UD, qp.StateRTS).PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{e.sge(0, 1025)},
					AH: &ah.AH, RemoteQPN: 2})
			}},
		{name: "PostSend atomic to a misaligned address", want: qp.ErrInvalidWR, key: "aligned",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTS).PostSend(atomicWR(e, 0x1004))
			}},
		{name: "PostSend atomic of 4 bytes", want: qp.ErrInvalidWR, key: "8-byte SGE",
			call: func(t *testing.T, e *apiEnv) error {
				wr := atomicWR(e, 0x1000)
				wr.SGL[0].Length = 4
				return e.qp(t, qp.RC, qp.StateRTS).PostSend(wr)
			}},
		{name: "PostSend BIND_MW without a window", want: qp.ErrInvalidWR, key: "memory window",
			call: func(t *testing.T, e *apiEnv) error {
				return e.qp(t, qp.RC, qp.StateRTS).PostSend(&qp.SendWR{Opcode: qp.WRBindMW})
			}},
		{name: "PostSend beyond max_send_wr", want: qp.ErrQueueFull, key: "max_send_wr",
			call: func(t *testing.T, e *apiEnv) error {
				q := e.qp(t, qp.RC, qp.StateRTS)
				// The peer does not exist: nothing is ever acknowledged,
				// so the 8 WRs stay outstanding.
				for i := range 8 {
					if err := q.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend}); err != nil {
						t.Fatal(err)
					}
				}
				return q.PostSend(&qp.SendWR{WRID: 8, Opcode: qp.WRSend})
			}},
		{name: "PostSend with a nil WR", want: qp.ErrInvalidWR, key: "nil",
			call: func(t *testing.T, e *apiEnv) error { return e.qp(t, qp.RC, qp.StateRTS).PostSend(nil) }},
		{name: "PostRecv with a nil WR", want: qp.ErrInvalidWR, key: "nil",
			call: func(t *testing.T, e *apiEnv) error { return e.qp(t, qp.RC, qp.StateInit).PostRecv(nil) }},

		// Destroy.
		{name: "QP.Destroy twice", want: rnic.ErrInvalidArg, key: "already destroyed",
			call: func(t *testing.T, e *apiEnv) error {
				q := e.qp(t, qp.RC, qp.StateReset)
				if err := q.Destroy(); err != nil {
					t.Fatal(err)
				}
				return q.Destroy()
			}},

		// Address handles.
		{name: "CreateAH with a nil PD", want: rnic.ErrWrongDevice, key: "PD",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.CreateAH(nil, qp.AH{GID: apiPeer}); return err }},
		{name: "CreateAH with a foreign PD", want: rnic.ErrWrongDevice, key: "PD",
			call: func(t *testing.T, e *apiEnv) error {
				pd, _ := e.other.AllocPD()
				_, err := e.dev.CreateAH(pd, qp.AH{GID: apiPeer})
				return err
			}},
		{name: "CreateAH without a GID", want: rnic.ErrInvalidArg, key: "without a GID",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.dev.CreateAH(e.pd, qp.AH{}); return err }},
		{name: "CreateAH with a multicast GID", want: rnic.ErrInvalidArg, key: "unicast",
			call: func(t *testing.T, e *apiEnv) error {
				_, err := e.dev.CreateAH(e.pd, qp.AH{GID: netip.MustParseAddr("::ffff:239.1.1.1")})
				return err
			}},
		{name: "CreateAH with the unspecified GID", want: rnic.ErrInvalidArg, key: "unicast",
			call: func(t *testing.T, e *apiEnv) error {
				_, err := e.dev.CreateAH(e.pd, qp.AH{GID: netip.MustParseAddr("::ffff:0.0.0.0")})
				return err
			}},
		{name: "CreateAH with an IPv6 GID on an IPv4 device", want: rnic.ErrInvalidArg, key: "IPv6",
			call: func(t *testing.T, e *apiEnv) error {
				_, err := e.dev.CreateAH(e.pd, qp.AH{GID: netip.MustParseAddr("fd00::1")})
				return err
			}},
		{name: "AH.Destroy twice", want: rnic.ErrInvalidArg, key: "already destroyed",
			call: func(t *testing.T, e *apiEnv) error {
				ah, err := e.dev.CreateAH(e.pd, qp.AH{GID: apiPeer})
				if err != nil {
					t.Fatal(err)
				}
				if err := ah.Destroy(); err != nil {
					t.Fatal(err)
				}
				return ah.Destroy()
			}},

		// Memory regions, windows and PDs.
		{name: "RegMR REMOTE_WRITE without LOCAL_WRITE", want: mr.ErrInvalidAccess, key: "LOCAL_WRITE",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.pd.RegMR(e.buf, mr.AccessRemoteWrite); return err }},
		{name: "RegMR REMOTE_ATOMIC without LOCAL_WRITE", want: mr.ErrInvalidAccess, key: "LOCAL_WRITE",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.pd.RegMR(e.buf, mr.AccessRemoteAtomic); return err }},
		{name: "RegMR with an unknown access bit", want: mr.ErrInvalidAccess, key: "not supported",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.pd.RegMR(e.buf, 1<<30); return err }},
		{name: "RegMR of an empty buffer", want: mr.ErrInvalidArgument, key: "empty",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.pd.RegMR(nil, mr.AccessLocalWrite); return err }},
		{name: "RegMR on a deallocated PD", want: mr.ErrDestroyed, key: "deallocated",
			call: func(t *testing.T, e *apiEnv) error {
				pd, _ := e.dev.AllocPD()
				if err := pd.Dealloc(); err != nil {
					t.Fatal(err)
				}
				_, err := pd.RegMR(e.buf, mr.AccessLocalWrite)
				return err
			}},
		{name: "RegMR on a nil PD", want: mr.ErrInvalidArgument, key: "nil PD",
			call: func(t *testing.T, e *apiEnv) error {
				var pd *mr.PD
				_, err := pd.RegMR(e.buf, mr.AccessLocalWrite)
				return err
			}},
		{name: "RegMRIOVA wrapping around 2^64", want: mr.ErrInvalidArgument, key: "wraps",
			call: func(t *testing.T, e *apiEnv) error {
				_, err := e.pd.RegMRIOVA(e.buf, ^uint64(0)-10, mr.AccessLocalWrite)
				return err
			}},
		{name: "MR.Dereg twice", want: mr.ErrDestroyed, key: "already deregistered",
			call: func(t *testing.T, e *apiEnv) error {
				if err := e.mr.Dereg(); err != nil {
					t.Fatal(err)
				}
				return e.mr.Dereg()
			}},
		{name: "PD.Dealloc with an MR registered", want: mr.ErrBusy, key: "1 MRs",
			call: func(t *testing.T, e *apiEnv) error { return e.pd.Dealloc() }},
		{name: "PD.Dealloc with a QP on it", want: mr.ErrBusy, key: "QPs",
			call: func(t *testing.T, e *apiEnv) error {
				pd, _ := e.dev.AllocPD()
				if _, err := e.dev.CreateQP(pd, e.initAttr(qp.RC)); err != nil {
					t.Fatal(err)
				}
				return pd.Dealloc()
			}},
		{name: "PD.Dealloc with an AH on it", want: mr.ErrBusy, key: "AHs",
			call: func(t *testing.T, e *apiEnv) error {
				pd, _ := e.dev.AllocPD()
				if _, err := e.dev.CreateAH(pd, qp.AH{GID: apiPeer}); err != nil {
					t.Fatal(err)
				}
				return pd.Dealloc()
			}},
		{name: "PD.Dealloc with an SRQ on it", want: mr.ErrBusy, key: "other objects",
			call: func(t *testing.T, e *apiEnv) error {
				pd, _ := e.dev.AllocPD()
				if _, err := e.dev.CreateSRQ(pd, qp.SRQAttr{MaxWR: 8, MaxSGE: 1}); err != nil {
					t.Fatal(err)
				}
				return pd.Dealloc()
			}},
		{name: "PD.Dealloc twice", want: mr.ErrDestroyed, key: "already deallocated",
			call: func(t *testing.T, e *apiEnv) error {
				pd, _ := e.dev.AllocPD()
				if err := pd.Dealloc(); err != nil {
					t.Fatal(err)
				}
				return pd.Dealloc()
			}},
		{name: "AllocMW of an unknown type", want: mr.ErrInvalidArgument, key: "type 7",
			call: func(t *testing.T, e *apiEnv) error { _, err := e.pd.AllocMW(7); return err }},
		{name: "MW.Dealloc twice", want: mr.ErrDestroyed, key: "already deallocated",
			call: func(t *testing.T, e *apiEnv) error {
				mw, err := e.pd.AllocMW(mr.MWType1)
				if err != nil {
					t.Fatal(err)
				}
				if err := mw.Dealloc(); err != nil {
					t.Fatal(err)
				}
				return mw.Dealloc()
			}},
		{name: "MW.Bind of a type-2 window", want: mr.ErrInvalidArgument, key: "type",
			call: func(t *testing.T, e *apiEnv) error {
				mw, err := e.pd.AllocMW(mr.MWType2)
				if err != nil {
					t.Fatal(err)
				}
				_, err = mw.Bind(e.mr, e.mr.Addr(), 8, mr.AccessRemoteRead)
				return err
			}},
		{name: "MW.Bind to an MR without MW_BIND", want: mr.ErrAccessDenied, key: "MW_BIND",
			call: func(t *testing.T, e *apiEnv) error {
				mw, err := e.pd.AllocMW(mr.MWType1)
				if err != nil {
					t.Fatal(err)
				}
				_, err = mw.Bind(e.mr, e.mr.Addr(), 8, mr.AccessRemoteRead)
				return err
			}},

		// A closed device.
		{name: "CreateQP on a closed device", want: rnic.ErrClosed, key: "closed",
			call: func(t *testing.T, e *apiEnv) error {
				e.dev.Close()
				_, err := e.dev.CreateQP(e.pd, e.initAttr(qp.RC))
				return err
			}},
		{name: "CreateAH on a closed device", want: rnic.ErrClosed, key: "closed",
			call: func(t *testing.T, e *apiEnv) error {
				e.dev.Close()
				_, err := e.dev.CreateAH(e.pd, qp.AH{GID: apiPeer})
				return err
			}},
		{name: "CreateCQ on a closed device", want: rnic.ErrClosed, key: "closed",
			call: func(t *testing.T, e *apiEnv) error {
				e.dev.Close()
				_, err := e.dev.CreateCQ(8)
				return err
			}},
		{name: "AllocPD on a closed device", want: rnic.ErrClosed, key: "closed",
			call: func(t *testing.T, e *apiEnv) error {
				e.dev.Close()
				_, err := e.dev.AllocPD()
				return err
			}},
		{name: "CreateSRQ on a closed device", want: rnic.ErrClosed, key: "closed",
			call: func(t *testing.T, e *apiEnv) error {
				e.dev.Close()
				_, err := e.dev.CreateSRQ(e.pd, qp.SRQAttr{MaxWR: 8, MaxSGE: 1})
				return err
			}},
		{name: "Modify on a closed device", want: rnic.ErrClosed, key: "closed",
			call: func(t *testing.T, e *apiEnv) error {
				q := e.qp(t, qp.RC, qp.StateReset)
				e.dev.Close()
				return q.Modify(&qp.Attr{State: qp.StateInit, PortNum: 1}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
			}},
		{name: "PostSend on a closed device", want: rnic.ErrClosed, key: "closed",
			call: func(t *testing.T, e *apiEnv) error {
				q := e.qp(t, qp.RC, qp.StateRTS)
				e.dev.Close()
				return q.PostSend(&qp.SendWR{Opcode: qp.WRSend})
			}},
		{name: "PostRecv on a closed device", want: rnic.ErrClosed, key: "closed",
			call: func(t *testing.T, e *apiEnv) error {
				q := e.qp(t, qp.RC, qp.StateRTS)
				e.dev.Close()
				return q.PostRecv(&qp.RecvWR{})
			}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			e := newAPIEnv(t)
			err, panicked := callNoPanic(func() error { return r.call(t, e) })
			problem := ""
			switch {
			case panicked != nil:
				problem = fmt.Sprintf("panicked: %v", panicked)
			case err == nil:
				problem = "succeeded"
			case !errors.Is(err, r.want):
				problem = fmt.Sprintf("error %q is not %q", err, r.want)
			case !strings.Contains(err.Error(), r.key):
				problem = fmt.Sprintf("error %q does not say %q", err, r.key)
			}
			switch {
			case r.bug != "" && problem == "":
				t.Errorf("known bug fixed (%s): remove the row's bug note", r.bug)
			case r.bug != "":
				t.Logf("KNOWN BUG: %s: %s", r.bug, problem)
			case problem != "":
				t.Error(problem)
			default:
				t.Logf("%v", err)
			}
		})
	}
}

// callNoPanic runs f and returns its error, or what it panicked with.
func callNoPanic(f func() error) (err error, panicked any) {
	defer func() { panicked = recover() }()
	return f(), nil
}
