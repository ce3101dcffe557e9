package experiment

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// WriteCSV writes the run's time series, one row per sample:
//
//	t_ms, queue_bytes, queue_max_bytes, marked, cnps, drops, retransmitted,
//	goodput_gbps, flow0_gbps ... flowN-1_gbps, flow0_rate_gbps ... flowN-1_rate_gbps
//
// flowI_gbps is flow I's delivered throughput over the interval ending at
// t_ms, flowI_rate_gbps its DCQCN rate at t_ms; goodput_gbps is the
// flows' goodput, all together, over that interval (Sample.Goodput); the
// counters are running totals.
func WriteCSV(w io.Writer, r *Result) error {
	cw := csv.NewWriter(w)
	n := r.Scenario.Flows
	head := []string{"t_ms", "queue_bytes", "queue_max_bytes", "marked", "cnps", "drops", "retransmitted", "goodput_gbps"}
	for i := range n {
		head = append(head, fmt.Sprintf("flow%d_gbps", i))
	}
	for i := range n {
		head = append(head, fmt.Sprintf("flow%d_rate_gbps", i))
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	row := make([]string, 0, len(head))
	for _, s := range r.Samples {
		row = append(row[:0], f(s.At.Seconds()*1e3), strconv.Itoa(s.QueueBytes), strconv.Itoa(s.QueueMax),
			u(s.Marked), u(s.CNPs), u(s.TailDrops), u(s.Retransmitted), f(float64(s.Goodput)/1e9))
		for _, tp := range s.Throughput {
			row = append(row, f(float64(tp)/1e9))
		}
		for _, rate := range s.Rate {
			row = append(row, f(float64(rate)/1e9))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
