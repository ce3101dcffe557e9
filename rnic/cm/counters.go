package cm

import (
	"sync/atomic"

	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire"
)

// attrNames are the CM messages by attribute ID minus CMAttrREQ, as ib_cm
// names its per-message counters (cm.c cm_counter_group_names and
// cm_attr_names: /sys/class/infiniband/<dev>/ports/<n>/cm_tx_msgs/req ...).
var attrNames = [...]string{"req", "mra", "rej", "rep", "rtu", "dreq", "drep", "sidr_req", "sidr_rep", "lap", "apr"}

// counters are the CM's: ib_cm's four groups per message, and the drops,
// each a reason a received MAD went no further.
type counters struct {
	txMsgs, txRetries, rxMsgs, rxDups [len(attrNames)]atomic.Uint64

	txErr       atomic.Uint64 // MADs QP1 could not send
	badMAD      atomic.Uint64 // not a CM MAD ib_cm accepts (length, version, class, method, attribute)
	unmatched   atomic.Uint64 // no connection has the comm IDs the message names
	badSource   atomic.Uint64 // the message came from another address than the connection's peer
	badState    atomic.Uint64 // the message is not expected in the connection's state
	unsupported atomic.Uint64 // LAP and APR messages, which this CM does not implement
	noListener  atomic.Uint64 // REQs for a service nobody listens on (answered with REJ)
	badCMAHdr   atomic.Uint64 // REQs whose rdma_cm header does not match the listener (answered with REJ)
	backlogFull atomic.Uint64 // REQs dropped because the listener's backlog was full
	noResources atomic.Uint64 // REQs dropped because Config.MaxConnections was reached
}

func attrIndex(attr uint16) int {
	if i := int(attr) - wire.CMAttrREQ; i >= 0 && i < len(attrNames) {
		return i
	}
	return -1
}

func (c *counters) tx(attr uint16) {
	if i := attrIndex(attr); i >= 0 {
		c.txMsgs[i].Add(1)
	}
}

// Counters returns the CM's counters in a stable order: ib_cm's
// cm_tx_msgs/<msg>, cm_tx_retries/<msg>, cm_rx_msgs/<msg> and
// cm_rx_duplicates/<msg> (as cm_tx_msgs_req ...), then the drops. While
// the CM is open, its device lists them too (rnic.Device.Counters).
func (c *CM) Counters() []rnic.Counter { return c.appendCounters(nil) }

// appendCounters appends the CM's counters (Counters) to out.
func (c *CM) appendCounters(out []rnic.Counter) []rnic.Counter {
	groups := []struct {
		name string
		v    *[len(attrNames)]atomic.Uint64
	}{{"cm_tx_msgs", &c.cnt.txMsgs}, {"cm_tx_retries", &c.cnt.txRetries}, {"cm_rx_msgs", &c.cnt.rxMsgs},
		{"cm_rx_duplicates", &c.cnt.rxDups}}
	for _, g := range groups {
		for i, n := range attrNames[:9] {
			out = append(out, rnic.Counter{Name: g.name + "_" + n, Value: g.v[i].Load()})
		}
	}
	return append(out,
		rnic.Counter{Name: "cm_tx_err", Value: c.cnt.txErr.Load()},
		rnic.Counter{Name: "cm_rx_drop_bad_mad", Value: c.cnt.badMAD.Load()},
		rnic.Counter{Name: "cm_rx_drop_unmatched", Value: c.cnt.unmatched.Load()},
		rnic.Counter{Name: "cm_rx_drop_bad_source", Value: c.cnt.badSource.Load()},
		rnic.Counter{Name: "cm_rx_drop_bad_state", Value: c.cnt.badState.Load()},
		rnic.Counter{Name: "cm_rx_drop_unsupported", Value: c.cnt.unsupported.Load()},
		rnic.Counter{Name: "cm_req_no_listener", Value: c.cnt.noListener.Load()},
		rnic.Counter{Name: "cm_req_bad_cma_header", Value: c.cnt.badCMAHdr.Load()},
		rnic.Counter{Name: "cm_req_backlog_full", Value: c.cnt.backlogFull.Load()},
		rnic.Counter{Name: "cm_req_no_resources", Value: c.cnt.noResources.Load()},
	)
}

// Counter returns the value of the named counter (0 if unknown).
func (c *CM) Counter(name string) uint64 {
	for _, x := range c.Counters() {
		if x.Name == name {
			return x.Value
		}
	}
	return 0
}
