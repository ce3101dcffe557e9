package ui

import (
	"math"

	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/rnic"
)

// devicesJSON is the answer to GET /api/devices.
type devicesJSON struct {
	Title   string       `json:"title"`
	PollMS  int64        `json:"poll_ms"`
	Devices []deviceJSON `json:"devices"`
}

// deviceJSON is one device: its address, its QPs and its counters.
type deviceJSON struct {
	Name     string        `json:"name"`
	Addr     string        `json:"addr"`
	GID      string        `json:"gid"`
	QPs      []qpJSON      `json:"qps"`
	Counters []counterJSON `json:"counters"`
}

// qpJSON is one QP, the fields of `rdma res show qp` plus the DCQCN rate.
// PSNs are the 24-bit values as numbers.
type qpJSON struct {
	QPN      uint32  `json:"qpn"`
	Type     string  `json:"type"`  // RC, UC, UD
	State    string  `json:"state"` // RESET, INIT, RTR, RTS, SQD, SQE, ERR
	DestQPN  uint32  `json:"dest_qpn"`
	SendPSN  uint32  `json:"sq_psn"`    // next PSN the requester sends
	AckedPSN uint32  `json:"acked_psn"` // oldest PSN not yet acknowledged (RC)
	RecvPSN  uint32  `json:"rq_psn"`    // PSN the responder expects next
	SendWRs  int     `json:"send_wrs"`  // send WRs posted and not yet completed
	RecvWRs  int     `json:"recv_wrs"`  // receives posted (0 with an SRQ)
	MTU      int     `json:"mtu"`       // path MTU in bytes
	Rate     float64 `json:"rate_bps"`  // DCQCN rate, bits per second
	DCQCN    bool    `json:"dcqcn"`     // false: no reaction point (UD, or DCQCN off)
}

// counterJSON is one device counter, under rxe's name.
type counterJSON struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// viewDevice reads dev's QPs and counters now.
func viewDevice(name string, dev *rnic.Device) deviceJSON {
	d := deviceJSON{Name: name, Addr: dev.Addr().String(), GID: dev.GID().String()}
	for _, r := range dev.Resources() {
		d.QPs = append(d.QPs, qpJSON{
			QPN: r.QPN, Type: r.Type.String(), State: r.State.String(), DestQPN: r.DestQPN,
			SendPSN: uint32(r.SendPSN), AckedPSN: uint32(r.AckedPSN), RecvPSN: uint32(r.RecvPSN),
			SendWRs: r.SendWRs, RecvWRs: r.RecvWRs, MTU: r.PathMTU.Bytes(), Rate: bps(r.Rate), DCQCN: r.DCQCN,
		})
	}
	for _, c := range dev.Counters() {
		d.Counters = append(d.Counters, counterJSON{c.Name, c.Value})
	}
	if d.QPs == nil {
		d.QPs = []qpJSON{} // [] rather than null for the page
	}
	return d
}

// bps returns r in bits per second, with 0 for a value JSON cannot carry
// (NaN, ±Inf).
func bps(r dcqcn.Rate) float64 {
	v := float64(r)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
