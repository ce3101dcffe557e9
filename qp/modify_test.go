package qp_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// The libibverbs names and values of enum ibv_qp_attr_mask
// (infiniband/verbs.h), written out here independently of types.go.
var ibvMask = []struct {
	bit  qp.AttrMask
	val  uint32
	name string
}{
	{qp.AttrState, 1 << 0, "IBV_QP_STATE"},
	{qp.AttrCurState, 1 << 1, "IBV_QP_CUR_STATE"},
	{qp.AttrEnSQDAsyncNotify, 1 << 2, "IBV_QP_EN_SQD_ASYNC_NOTIFY"},
	{qp.AttrAccessFlags, 1 << 3, "IBV_QP_ACCESS_FLAGS"},
	{qp.AttrPKeyIndex, 1 << 4, "IBV_QP_PKEY_INDEX"},
	{qp.AttrPort, 1 << 5, "IBV_QP_PORT"},
	{qp.AttrQKey, 1 << 6, "IBV_QP_QKEY"},
	{qp.AttrAV, 1 << 7, "IBV_QP_AV"},
	{qp.AttrPathMTU, 1 << 8, "IBV_QP_PATH_MTU"},
	{qp.AttrTimeout, 1 << 9, "IBV_QP_TIMEOUT"},
	{qp.AttrRetryCnt, 1 << 10, "IBV_QP_RETRY_CNT"},
	{qp.AttrRNRRetry, 1 << 11, "IBV_QP_RNR_RETRY"},
	{qp.AttrRQPSN, 1 << 12, "IBV_QP_RQ_PSN"},
	{qp.AttrMaxQPRdAtomic, 1 << 13, "IBV_QP_MAX_QP_RD_ATOMIC"},
	{qp.AttrAltPath, 1 << 14, "IBV_QP_ALT_PATH"},
	{qp.AttrMinRNRTimer, 1 << 15, "IBV_QP_MIN_RNR_TIMER"},
	{qp.AttrSQPSN, 1 << 16, "IBV_QP_SQ_PSN"},
	{qp.AttrMaxDestRdAtomic, 1 << 17, "IBV_QP_MAX_DEST_RD_ATOMIC"},
	{qp.AttrPathMigState, 1 << 18, "IBV_QP_PATH_MIG_STATE"},
	{qp.AttrCap, 1 << 19, "IBV_QP_CAP"},
	{qp.AttrDestQPN, 1 << 20, "IBV_QP_DEST_QPN"},
	{qp.AttrRateLimit, 1 << 25, "IBV_QP_RATE_LIMIT"},
}

func maskName(bit qp.AttrMask) string {
	for _, m := range ibvMask {
		if m.bit == bit {
			return m.name
		}
	}
	return ""
}

func TestAttrMaskMatchesLibibverbs(t *testing.T) {
	for _, m := range ibvMask {
		if uint32(m.bit) != m.val {
			t.Errorf("%s = %#x, libibverbs has %#x", m.name, uint32(m.bit), m.val)
		}
		if got := m.bit.String(); got != m.name {
			t.Errorf("AttrMask(%#x).String() = %q, want %q", m.val, got, m.name)
		}
	}
	if got, want := (qp.AttrState | qp.AttrRQPSN | qp.AttrDestQPN).String(), "IBV_QP_STATE|IBV_QP_RQ_PSN|IBV_QP_DEST_QPN"; got != want {
		t.Errorf("combined mask String() = %q, want %q", got, want)
	}
}

// TestVerbsEnumsMatchLibibverbs spot-checks the other enums that cross the
// verbs API against their libibverbs values.
func TestVerbsEnumsMatchLibibverbs(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"IBV_QPT_RC", int(qp.RC), 2}, {"IBV_QPT_UC", int(qp.UC), 3}, {"IBV_QPT_UD", int(qp.UD), 4},
		{"IBV_QPS_RESET", int(qp.StateReset), 0}, {"IBV_QPS_RTS", int(qp.StateRTS), 3}, {"IBV_QPS_ERR", int(qp.StateErr), 6},
		{"IBV_MTU_256", int(qp.MTU256), 1}, {"IBV_MTU_4096", int(qp.MTU4096), 5},
		{"IBV_WC_WR_FLUSH_ERR", int(qp.WCWRFlushErr), 5}, {"IBV_WC_REM_ACCESS_ERR", int(qp.WCRemAccessErr), 10},
		{"IBV_WC_RETRY_EXC_ERR", int(qp.WCRetryExcErr), 12}, {"IBV_WC_RNR_RETRY_EXC_ERR", int(qp.WCRnrRetryExcErr), 13},
		{"IBV_WR_RDMA_READ", int(qp.WRRDMARead), 4}, {"IBV_WR_SEND_WITH_INV", int(qp.WRSendWithInv), 9},
		{"IBV_SEND_INLINE", int(qp.SendInline), 8}, {"IBV_WC_RECV", int(qp.WCRecv), 128},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, libibverbs has %d", c.name, c.got, c.want)
		}
	}
	if got := qp.WCRetryExcErr.String(); got != "transport retry counter exceeded" {
		t.Errorf("WCRetryExcErr.String() = %q, want ibv_wc_status_str's text", got)
	}
}

type edge struct{ from, to qp.State }

// rule is what one transition requires and accepts besides IBV_QP_STATE.
type rule struct{ req, opt qp.AttrMask }

// kernelTable is Linux's qp_state_table (drivers/infiniband/core/verbs.c)
// for RC, UC and UD: the legal transitions and, for each QP type, their
// required and optional attributes. One extension: goroce paces every QP
// type, so it takes IBV_QP_RATE_LIMIT wherever the kernel takes it for raw
// packet QPs (RTR→RTS, RTS→RTS, SQD→RTS). SQE is left out as a source
// state: no Modify enters it.
var kernelTable = func() map[edge]map[qp.Type]rule {
	const (
		pkey, port, qkey, access = qp.AttrPKeyIndex, qp.AttrPort, qp.AttrQKey, qp.AttrAccessFlags
		av, mtu, dqpn, rqpsn     = qp.AttrAV, qp.AttrPathMTU, qp.AttrDestQPN, qp.AttrRQPSN
		maxDest, minRNR, alt     = qp.AttrMaxDestRdAtomic, qp.AttrMinRNRTimer, qp.AttrAltPath
		timeout, retry, rnrRetry = qp.AttrTimeout, qp.AttrRetryCnt, qp.AttrRNRRetry
		sqpsn, maxRd, cur, mig   = qp.AttrSQPSN, qp.AttrMaxQPRdAtomic, qp.AttrCurState, qp.AttrPathMigState
		rate, sqdNotify          = qp.AttrRateLimit, qp.AttrEnSQDAsyncNotify
	)
	same := func(r rule) map[qp.Type]rule { return map[qp.Type]rule{qp.RC: r, qp.UC: r, qp.UD: r} }
	none := same(rule{})
	t := map[edge]map[qp.Type]rule{
		{qp.StateReset, qp.StateReset}: none,
		{qp.StateReset, qp.StateInit}: {
			qp.RC: {req: pkey | port | access}, qp.UC: {req: pkey | port | access}, qp.UD: {req: pkey | port | qkey}},
		{qp.StateInit, qp.StateInit}: {
			qp.RC: {opt: pkey | port | access}, qp.UC: {opt: pkey | port | access}, qp.UD: {opt: pkey | port | qkey}},
		{qp.StateInit, qp.StateRTR}: {
			qp.RC: {req: av | mtu | dqpn | rqpsn | maxDest | minRNR, opt: alt | access | pkey},
			qp.UC: {req: av | mtu | dqpn | rqpsn, opt: alt | access | pkey},
			qp.UD: {opt: pkey | qkey}},
		{qp.StateRTR, qp.StateRTS}: {
			qp.RC: {req: timeout | retry | rnrRetry | sqpsn | maxRd, opt: cur | alt | access | minRNR | mig | rate},
			qp.UC: {req: sqpsn, opt: cur | alt | access | mig | rate},
			qp.UD: {req: sqpsn, opt: cur | qkey | rate}},
		{qp.StateRTS, qp.StateSQD}: same(rule{opt: sqdNotify}),
		{qp.StateSQD, qp.StateSQD}: {
			qp.RC: {opt: port | av | timeout | retry | rnrRetry | maxRd | maxDest | alt | access | pkey | minRNR | mig},
			qp.UC: {opt: av | alt | access | pkey | mig},
			qp.UD: {opt: pkey | qkey}},
	}
	toRTS := map[qp.Type]rule{
		qp.RC: {opt: cur | access | alt | mig | minRNR | rate},
		qp.UC: {opt: cur | access | alt | mig | rate},
		qp.UD: {opt: cur | qkey | rate}}
	t[edge{qp.StateRTS, qp.StateRTS}] = toRTS
	t[edge{qp.StateSQD, qp.StateRTS}] = toRTS
	// Every state but RESET may go to RESET or ERR, with no attributes.
	for s := qp.StateInit; s <= qp.StateErr; s++ {
		t[edge{s, qp.StateReset}] = none
		t[edge{s, qp.StateErr}] = none
	}
	return t
}()

// sources are the states a Modify can start from (SQE is entered only by a
// send error on UC/UD, never by Modify).
var sources = []qp.State{qp.StateReset, qp.StateInit, qp.StateRTR, qp.StateRTS, qp.StateSQD, qp.StateErr}

// TestModifyStateMachine walks every (type, from, to) pair: each legal
// transition passes with exactly its required attributes and with all of
// its optional ones too; leaving out any required attribute fails with
// ErrMissingAttr naming it; adding any attribute the transition does not
// accept fails with ErrExtraAttr naming it; an illegal transition fails with
// ErrBadTransition. A failed Modify changes nothing.
func TestModifyStateMachine(t *testing.T) {
	undefined := []qp.AttrMask{1 << 21, 1 << 24, 1 << 31} // bits libibverbs does not define for ibv_modify_qp
	for _, typ := range []qp.Type{qp.RC, qp.UC, qp.UD} {
		for _, from := range sources {
			for to := qp.StateReset; to <= qp.StateErr; to++ {
				t.Run(fmt.Sprintf("%v/%v→%v", typ, from, to), func(t *testing.T) {
					modify := func(mask qp.AttrMask) (*qp.QP, error) {
						t.Helper()
						f := newFixture(t, typ, 4, 4)
						bring(t, f.qp, from)
						before := f.qp.Query()
						a := goodAttr(to)
						a.CurState = from
						err := f.qp.Modify(&a, qp.AttrState|mask, time.Time{})
						if err != nil {
							if after := f.qp.Query(); after != before {
								t.Errorf("failed Modify(%v) changed the QP:\n before %+v\n after  %+v", mask, before, after)
							}
						}
						return f.qp, err
					}
					r, legal := kernelTable[edge{from, to}][typ]
					if !legal {
						// Offer the attributes the target state would need
						// from its usual predecessor: the transition is
						// still illegal.
						var natural qp.AttrMask
						for e, rs := range kernelTable {
							if e.to == to && e.from != to {
								natural |= rs[typ].req
							}
						}
						if _, err := modify(natural); !errors.Is(err, qp.ErrBadTransition) {
							t.Fatalf("illegal transition: err = %v, want ErrBadTransition", err)
						}
						return
					}
					for _, mask := range []qp.AttrMask{r.req, r.req | r.opt} {
						q, err := modify(mask)
						if err != nil {
							t.Fatalf("Modify(IBV_QP_STATE|%v): %v", mask, err)
						}
						if q.State() != to {
							t.Fatalf("after Modify the QP is in %v, want %v", q.State(), to)
						}
					}
					for _, m := range ibvMask {
						bit := m.bit
						switch {
						case bit == qp.AttrState:
						case r.req&bit != 0:
							_, err := modify(r.req &^ bit)
							if !errors.Is(err, qp.ErrMissingAttr) || !strings.Contains(err.Error(), m.name) {
								t.Errorf("without %s: err = %v, want ErrMissingAttr naming %s", m.name, err, m.name)
							}
						case r.opt&bit == 0:
							_, err := modify(r.req | bit)
							if !errors.Is(err, qp.ErrExtraAttr) || !strings.Contains(err.Error(), m.name) {
								t.Errorf("with %s: err = %v, want ErrExtraAttr naming %s", m.name, err, m.name)
							}
						}
					}
					for _, bit := range undefined {
						if _, err := modify(r.req | bit); !errors.Is(err, qp.ErrExtraAttr) {
							t.Errorf("with undefined mask bit %#x: err = %v, want ErrExtraAttr", uint32(bit), err)
						}
					}
				})
			}
		}
	}
}

// TestModifyInvalidValues checks that out-of-range attribute values fail
// with ErrInvalidAttr, name the attribute, and leave the QP unchanged.
func TestModifyInvalidValues(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  qp.Type
		from qp.State
		to   qp.State
		set  func(a *qp.Attr)
		want string // a word the error must contain
	}{
		{"timeout 32", qp.RC, qp.StateRTR, qp.StateRTS, func(a *qp.Attr) { a.Timeout = 32 }, "timeout"},
		{"retry_cnt 8", qp.RC, qp.StateRTR, qp.StateRTS, func(a *qp.Attr) { a.RetryCnt = 8 }, "retry_cnt"},
		{"rnr_retry 8", qp.RC, qp.StateRTR, qp.StateRTS, func(a *qp.Attr) { a.RNRRetry = 8 }, "rnr_retry"},
		{"max_rd_atomic above the device's", qp.RC, qp.StateRTR, qp.StateRTS, func(a *qp.Attr) { a.MaxRdAtomic = 17 }, "max_rd_atomic"},
		{"path MTU above the port's", qp.RC, qp.StateInit, qp.StateRTR, func(a *qp.Attr) { a.PathMTU = qp.MTU2048 }, "path_mtu"},
		{"path MTU 0", qp.UC, qp.StateInit, qp.StateRTR, func(a *qp.Attr) { a.PathMTU = 0 }, "path_mtu"},
		{"path MTU 6", qp.RC, qp.StateInit, qp.StateRTR, func(a *qp.Attr) { a.PathMTU = 6 }, "path_mtu"},
		{"min_rnr_timer 32", qp.RC, qp.StateInit, qp.StateRTR, func(a *qp.Attr) { a.MinRNRTimer = 32 }, "min_rnr_timer"},
		{"max_dest_rd_atomic above the device's", qp.RC, qp.StateInit, qp.StateRTR, func(a *qp.Attr) { a.MaxDestRdAtomic = 200 }, "max_dest_rd_atomic"},
		{"dest QPN over 24 bits", qp.RC, qp.StateInit, qp.StateRTR, func(a *qp.Attr) { a.DestQPN = 1 << 24 }, "dest_qp_num"},
		{"no GID", qp.RC, qp.StateInit, qp.StateRTR, func(a *qp.Attr) { a.AH = qp.AH{} }, "dgid"},
		{"IPv6 GID on an IPv4 device", qp.UC, qp.StateInit, qp.StateRTR,
			func(a *qp.Attr) { a.AH.GID = netip.MustParseAddr("fd00::2") }, "dgid"},
		{"port 2", qp.RC, qp.StateReset, qp.StateInit, func(a *qp.Attr) { a.PortNum = 2 }, "port_num"},
		{"pkey_index 1", qp.UD, qp.StateReset, qp.StateInit, func(a *qp.Attr) { a.PKeyIndex = 1 }, "pkey_index"},
		{"state beyond ERR", qp.RC, qp.StateInit, qp.State(7), func(a *qp.Attr) {}, "state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.typ, 4, 4)
			bring(t, f.qp, c.from)
			before := f.qp.Query()
			a := goodAttr(c.to)
			c.set(&a)
			var mask qp.AttrMask
			if r, ok := kernelTable[edge{c.from, c.to}][c.typ]; ok {
				mask = r.req
			}
			err := f.qp.Modify(&a, qp.AttrState|mask, time.Time{})
			if !errors.Is(err, qp.ErrInvalidAttr) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalidAttr mentioning %q", err, c.want)
			}
			if after := f.qp.Query(); after != before {
				t.Errorf("failed Modify changed the QP:\n before %+v\n after  %+v", before, after)
			}
		})
	}

	t.Run("cur_state differs from the QP's", func(t *testing.T) {
		f := newFixture(t, qp.RC, 4, 4)
		bring(t, f.qp, qp.StateRTR)
		a := goodAttr(qp.StateRTS)
		a.CurState = qp.StateInit
		err := f.qp.Modify(&a, qp.AttrState|qp.AttrCurState|kernelTable[edge{qp.StateRTR, qp.StateRTS}][qp.RC].req, time.Time{})
		if !errors.Is(err, qp.ErrInvalidAttr) || !strings.Contains(err.Error(), "IBV_QP_CUR_STATE") {
			t.Fatalf("err = %v, want ErrInvalidAttr naming IBV_QP_CUR_STATE", err)
		}
		if s := f.qp.State(); s != qp.StateRTR {
			t.Fatalf("QP moved to %v", s)
		}
	})
}

// TestModifyQuery checks that Query returns what Modify set, through the
// whole path and a later RTS→RTS change.
func TestModifyQuery(t *testing.T) {
	f := newFixture(t, qp.RC, 8, 16)
	want := qp.Attr{
		PathMTU: qp.MTU512, RQPSN: 0xABCDEF, SQPSN: 0x123456, DestQPN: 0xFEDCBA,
		AccessFlags: mr.AccessRemoteRead | mr.AccessRemoteAtomic,
		AH:          qp.AH{GID: peerGID, Port: 5000, HopLimit: 9, TrafficClass: 0x68, SL: 3},
		PortNum:     1, MaxRdAtomic: 3, MaxDestRdAtomic: 5, MinRNRTimer: 17,
		Timeout: 18, RetryCnt: 5, RNRRetry: 6,
	}
	steps := []struct {
		to   qp.State
		mask qp.AttrMask
	}{
		{qp.StateInit, kernelTable[edge{qp.StateReset, qp.StateInit}][qp.RC].req},
		{qp.StateRTR, kernelTable[edge{qp.StateInit, qp.StateRTR}][qp.RC].req},
		{qp.StateRTS, kernelTable[edge{qp.StateRTR, qp.StateRTS}][qp.RC].req},
	}
	for _, s := range steps {
		a := want
		a.State = s.to
		if err := f.qp.Modify(&a, qp.AttrState|s.mask, time.Time{}); err != nil {
			t.Fatalf("to %v: %v", s.to, err)
		}
	}
	want.State, want.CurState = qp.StateRTS, qp.StateRTS
	want.Cap = qp.Cap{MaxSendWR: 8, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 32}
	if got := f.qp.Query(); got != want {
		t.Fatalf("Query after RESET→INIT→RTR→RTS:\n got  %+v\n want %+v", got, want)
	}

	// RTS→RTS may change the access flags and the RNR timer, and nothing else.
	change := qp.Attr{AccessFlags: mr.AccessRemoteWrite, MinRNRTimer: 3}
	if err := f.qp.Modify(&change, qp.AttrAccessFlags|qp.AttrMinRNRTimer, time.Time{}); err != nil {
		t.Fatal(err)
	}
	want.AccessFlags, want.MinRNRTimer = mr.AccessRemoteWrite, 3
	if got := f.qp.Query(); got != want {
		t.Fatalf("Query after RTS→RTS:\n got  %+v\n want %+v", got, want)
	}

	// A UD QP keeps its Q_Key.
	u := newFixture(t, qp.UD, 4, 4)
	bring(t, u.qp, qp.StateRTS)
	if got := u.qp.Query(); got.QKey != 0x11111111 || got.SQPSN != 0x200 || got.State != qp.StateRTS {
		t.Fatalf("UD Query: %+v", got)
	}
}
