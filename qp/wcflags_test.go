package qp_test

import (
	"testing"

	"github.com/goroce/goroce/qp"
)

// The completion flags carry enum ibv_wc_flags' values (rdma-core's
// libibverbs/verbs.h), so that a libibverbs stand-in passes them through.
func TestWCFlagsAreLibibverbs(t *testing.T) {
	for _, c := range []struct {
		flag qp.WCFlags
		want uint
		name string
	}{
		{qp.WCWithGRH, 1 << 0, "IBV_WC_GRH"},
		{qp.WCWithImm, 1 << 1, "IBV_WC_WITH_IMM"},
		{qp.WCWithInv, 1 << 3, "IBV_WC_WITH_INV"}, // 1 << 2 is IBV_WC_IP_CSUM_OK
	} {
		if uint(c.flag) != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, uint(c.flag), c.want)
		}
	}
}
