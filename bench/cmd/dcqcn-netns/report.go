package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/goroce/goroce/bench/experiment"
)

// Errors preflight returns: a machine that cannot run the experiment.
var (
	errNeedsRoot  = errors.New("dcqcn-netns needs root (network namespaces, tc)")
	errNeedsTools = errors.New("dcqcn-netns needs iproute2 (ip, tc)")
)

// Verdict thresholds, as fractions of the bottleneck.
const (
	minJain        = 0.95
	minUtilization = 0.9
)

// What -judge holds a run to.
const (
	judgeAll       = "all"
	judgeMechanism = "mechanism"
)

// okOr is "ok" for no misses, else the misses.
func okOr(bad []string) string {
	if len(bad) == 0 {
		return "ok"
	}
	return "MISSED: " + strings.Join(bad, "; ")
}

// verdict checks a run against the criteria and returns what it
// missed: the mechanism's (mechanism) and the performance's (performance).
func verdict(o *outcome, sum experiment.Summary) []string {
	return append(mechanism(o), performance(o, sum)...)
}

// mechanism returns what a run missed of the loop itself, which a loaded
// machine does not change. Always: every flow ran to the end, CE marks the
// kernel set reached the receiver's notification point, and no packet
// failed its ICRC. DCQCN on: the kernel marked and the receiver sent CNPs.
// DCQCN off: the queue rose past Kmax and packets were dropped or sent
// again (go-back-N).
func mechanism(o *outcome) []string {
	r := o.res
	t := &r.Totals
	var bad []string
	miss := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	for i, err := range r.FlowErrors {
		if err != nil {
			miss("flow %d stopped: %v", i, err)
		}
	}
	if o.ECNMarked == 0 {
		miss("no CE mark reached the receiver")
	}
	if o.ICRCErrors != 0 {
		miss("%d packets failed their ICRC", o.ICRCErrors)
	}
	if s := experiment.Summarize(r); s.Goodput <= 0 {
		miss("goodput %v over the second half: no WRITE completed, or none was counted", s.Goodput)
	}
	if !r.Scenario.DisableDCQCN {
		if t.Marked == 0 {
			miss("no CE marks")
		}
		if t.CNPsSent == 0 {
			miss("no CNPs")
		}
		return bad
	}
	if t.QueueMaxBytes <= r.Scenario.RED.Kmax {
		miss("queue peaked at %d bytes, not above Kmax %d", t.QueueMaxBytes, r.Scenario.RED.Kmax)
	}
	if t.TailDrops == 0 && t.Retransmitted == 0 {
		miss("no drops and no retransmissions")
	}
	return bad
}

// performance returns what a DCQCN run missed of the targets: the
// queue never overflowed, and over the second half the flows shared the
// bottleneck fairly (Jain ≥ 0.95) and filled it (utilisation ≥ 0.9).
// These are real-time results: the command checks them (-verdict), run
// alone, as .ci/run does; a machine whose CPUs are busy with other work
// wakes the senders late and can miss them.
func performance(o *outcome, sum experiment.Summary) []string {
	r := o.res
	if r.Scenario.DisableDCQCN {
		return nil
	}
	var bad []string
	if d := r.Totals.TailDrops; d != 0 {
		bad = append(bad, fmt.Sprintf("%d drops at the bottleneck", d))
	}
	if sum.Jain < minJain {
		bad = append(bad, fmt.Sprintf("jain %.4f < %v", sum.Jain, minJain))
	}
	if sum.Utilization < minUtilization {
		bad = append(bad, fmt.Sprintf("utilization %.4f < %v", sum.Utilization, minUtilization))
	}
	return bad
}

// report prints a run (summary line, kernel and goroce counters, verdict),
// writes its CSV and PNG into dir unless dir is empty, and returns the
// verdict's misses.
func report(w io.Writer, o *outcome, dir string) []string {
	r := o.res
	sc := &r.Scenario
	t := &r.Totals
	sum := experiment.Summarize(r)
	mode := "on"
	if sc.DisableDCQCN {
		mode = "off"
	}
	fmt.Fprintf(w, "%s flows=%d dcqcn=%s marker=%s rate=%v kmin=%d kmax=%d pmax=%g limit=%d duration=%v\n",
		sc.Name, sc.Flows, mode, o.marker, sc.LineRate, sc.RED.Kmin, sc.RED.Kmax, sc.RED.Pmax, sc.Buffer, sc.Duration)
	fmt.Fprintln(w, sum)
	fmt.Fprintf(w, "tc: sent_bytes=%d marked=%d dropped=%d backlog_max_bytes=%d backlog_end_bytes=%d\n",
		o.queue.Sent, t.Marked, t.TailDrops, t.QueueMaxBytes, o.queue.Backlog)
	fmt.Fprintf(w, "goroce: icrc_err=%d ecn_marked_packets=%d cnp_sent=%d cnp_handled=%d rate_reductions=%d retransmitted_pkts=%d local_ack_timeouts=%d\n",
		o.ICRCErrors, o.ECNMarked, t.CNPsSent, t.CNPsHandled, t.RateReductions, t.Retransmitted, t.Timeouts)
	if o.figures != "" {
		fmt.Fprintf(w, "tc -s qdisc, class:\n  %s\n", strings.ReplaceAll(o.figures, "\n", "\n  "))
	}
	var mb []string
	for _, d := range r.Delivered {
		mb = append(mb, fmt.Sprintf("%.1f", float64(d)*8/r.Elapsed.Seconds()/1e6))
	}
	fmt.Fprintf(w, "per-flow mean Mb/s: %s\n", strings.Join(mb, " "))
	if dir != "" {
		csvPath, pngPath, err := experiment.WriteFiles(dir, r)
		if err != nil {
			fmt.Fprintf(w, "files: %v\n", err)
		} else {
			fmt.Fprintf(w, "files: %s %s\n", csvPath, pngPath)
		}
	}
	bad := verdict(o, sum)
	fmt.Fprintf(w, "verdict: %s\n", okOr(bad))
	return bad
}
