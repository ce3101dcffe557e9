package rnic

// LinkRcvdPkts returns the link_rcvd_pkts counter, the datagrams the link
// has handed the device, without building the list Counters returns: a
// loop that polls the device can read it on every turn to see whether
// anything arrived, at the cost of one atomic load.
func (d *Device) LinkRcvdPkts() uint64 { return d.dev.LinkRcvdPkts.Load() }
