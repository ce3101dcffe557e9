package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/goroce/goroce/rnic"
)

// DeviceStat is a device's counters and QPs at one moment: what /stat.json
// serves and `goroce stat -j` prints.
type DeviceStat struct {
	// Link names the device as the rdma tool names a port: goroce_ADDR/1.
	Link string `json:"link"`
	// Counters are the device's counters, in rxe's order.
	Counters Counters `json:"counters"`
	// QPs are the device's QPs, by QPN.
	QPs []QPStat `json:"qps"`
}

// QPStat is one QP, with the fields `rdma res show qp` prints.
type QPStat struct {
	LQPN       uint32 `json:"lqpn"`
	RQPN       uint32 `json:"rqpn"`
	Type       string `json:"type"`
	State      string `json:"state"`
	RQPSN      uint32 `json:"rq_psn"`
	SQPSN      uint32 `json:"sq_psn"`
	UnackedPSN uint32 `json:"unacked_psn"`
	SendWRs    int    `json:"send_wrs"`
	RecvWRs    int    `json:"recv_wrs"`
	MTU        int    `json:"mtu"`
	// DCQCN reports whether the QP runs DCQCN; RateBPS is then its rate
	// in bits per second (0 without DCQCN).
	DCQCN   bool    `json:"dcqcn"`
	RateBPS float64 `json:"rate_bps"`
	PID     int     `json:"pid"`
}

// Counters are named counter values in order. In JSON they are one object,
// {"sent_pkts": N, ...}, its keys in that order.
type Counters []rnic.Counter

// MarshalJSON writes the counters as one object, in order.
func (cs Counters) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(c.Name)
		fmt.Fprintf(&b, "%s:%d", name, c.Value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object of counters, keeping the keys' order.
func (cs *Counters) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("counters: want an object, got %v (%v)", t, err)
	}
	*cs = (*cs)[:0]
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var v uint64
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("counter %v: %w", t, err)
		}
		*cs = append(*cs, rnic.Counter{Name: t.(string), Value: v})
	}
	return nil
}

// Get returns the named counter's value and whether there is one.
func (cs Counters) Get(name string) (uint64, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

// StatOf takes dev's counters and QPs.
func StatOf(dev *rnic.Device) DeviceStat {
	s := DeviceStat{Link: LinkName(dev), Counters: dev.Counters(), QPs: []QPStat{}}
	for _, r := range dev.Resources() {
		q := QPStat{LQPN: r.QPN, RQPN: r.DestQPN, Type: r.Type.String(), State: r.State.String(),
			RQPSN: uint32(r.RecvPSN), SQPSN: uint32(r.SendPSN), UnackedPSN: uint32(r.AckedPSN),
			SendWRs: r.SendWRs, RecvWRs: r.RecvWRs, MTU: r.PathMTU.Bytes(), DCQCN: r.DCQCN, PID: os.Getpid()}
		if r.DCQCN {
			q.RateBPS = float64(r.Rate)
		}
		s.QPs = append(s.QPs, q)
	}
	return s
}

// statWidth is where WriteStatText wraps a line's name-value pairs.
const statWidth = 100

// WriteStatText prints s as `rdma statistic show` and `rdma res show qp`
// print rxe's (the -p layout): the link's counters on one logical line,
// then one per QP, each "name value" pairs wrapped at 100 columns with the
// continuation lines indented. QPNs are hex, as goroce prints them
// everywhere.
func WriteStatText(w io.Writer, s *DeviceStat) {
	var pairs []string
	for _, c := range s.Counters {
		pairs = append(pairs, fmt.Sprintf("%s %d", c.Name, c.Value))
	}
	writeWrapped(w, "link "+s.Link, pairs)
	for _, q := range s.QPs {
		rate := "-"
		if q.DCQCN {
			rate = fmt.Sprintf("%.0fMb/s", q.RateBPS/1e6)
		}
		writeWrapped(w, fmt.Sprintf("link %s lqpn %#x", s.Link, q.LQPN), []string{
			fmt.Sprintf("rqpn %#x", q.RQPN), "type " + q.Type, "state " + q.State,
			fmt.Sprintf("rq-psn %#x", q.RQPSN), fmt.Sprintf("sq-psn %#x", q.SQPSN), fmt.Sprintf("unacked-psn %#x", q.UnackedPSN),
			fmt.Sprintf("send-wrs %d", q.SendWRs), fmt.Sprintf("recv-wrs %d", q.RecvWRs), fmt.Sprintf("mtu %d", q.MTU),
			"dcqcn-rate " + rate, fmt.Sprintf("pid %d", q.PID), "comm goroce"})
	}
}

// writeWrapped prints head and then pairs, wrapping before statWidth.
func writeWrapped(w io.Writer, head string, pairs []string) {
	var b strings.Builder
	b.WriteString(head)
	col := len(head)
	for _, p := range pairs {
		if col+1+len(p) > statWidth {
			b.WriteString("\n   ")
			col = 3
		}
		b.WriteString(" " + p)
		col += 1 + len(p)
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}
