package flood

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the result for people: the setup, one line per phase,
// the hostile datagrams by kind, the victim's and the peer's counters, the
// kernel's drops, memory and goroutines, the problems found, and the
// Summary line.
func (r *Result) WriteTable(w io.Writer) error {
	c := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "goroce flood: hostile datagrams at a victim device over loopback UDP, %v per phase\n", c.Duration)
	fmt.Fprintf(&b, "  victim %v:4791 (QPN %#06x), peer %v:4791, attacker %v:4791 (and an ephemeral port for zero-length datagrams)\n",
		c.Victim, r.VictimQPN, c.Peer, c.Attacker)
	fmt.Fprintf(&b, "  %d CPUs (GOMAXPROCS %d) shared by the attacker, the victim and the peer, all in this one process, and by whatever else the machine runs\n",
		r.CPUs, r.GOMAXPROCS)
	icrc := "on failure, solve for the IPv4 ID (device default)"
	if c.StrictICRC {
		icrc = "strict (IPv4 ID 0 only)"
	}
	fmt.Fprintf(&b, "  legitimate: RC RDMA WRITEs of %s, %d outstanding, MTU %d; victim socket buffer %s granted of %s; ICRC check %s\n",
		size(c.WriteSize), c.Outstanding, c.MTU, size(r.VictimSocket.Read), size(r.VictimSocket.RequestedRead), icrc)
	fmt.Fprintf(&b, "  attacker: sendmmsg batches of %d, kinds in equal shares: %s\n\n", c.Batch, kindList(c.Kinds))

	t := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(t, "phase\ttime\tlegit GB/s\tvs baseline\tvalid rx pkt/s\tattack sent pkt/s\tdropped pkt/s\tvs valid rx\tnever reached victim\tdrain\t")
	base := r.Phase("baseline")
	for i := range r.Phases {
		p := &r.Phases[i]
		fmt.Fprintf(t, "%s\t%.2fs\t", p.Name, p.Elapsed.Seconds())
		if p.Legit {
			fmt.Fprintf(t, "%.3f\t%s\t%s\t", p.BandwidthGBps(), ratio(p.BandwidthGBps(), base.BandwidthGBps()), rate(p.ValidPPS()))
		} else {
			fmt.Fprintf(t, "-\t-\t%s\t", rate(p.ValidPPS()))
		}
		if p.Flood {
			fmt.Fprintf(t, "%s\t%s\t%s\t%d\t", rate(p.SentPPS()), rate(p.DroppedPPS()), ratio(p.DroppedPPS(), base.ValidPPS()), p.KernelLost())
		} else {
			fmt.Fprint(t, "-\t-\t-\t-\t")
		}
		fmt.Fprintf(t, "%s\t\n", p.Drain.Round(time.Millisecond))
	}
	t.Flush()
	b.WriteString("  valid rx: packets the victim's QP accepted (rcvd_pkts); dropped: datagrams it counted and dropped (" +
		strings.Join(DropCounters, "+") + "); never reached victim: sent minus dropped, by the end of the drain\n\n")

	b.WriteString("hostile datagrams sent, by kind, and the victim counter each should land in\n")
	t = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(t, "kind\tcounter\t")
	floods := []*Phase{}
	for i := range r.Phases {
		if p := &r.Phases[i]; p.Flood {
			floods = append(floods, p)
			fmt.Fprintf(t, "%s\t", p.Name)
		}
	}
	fmt.Fprintln(t)
	for _, k := range c.Kinds {
		fmt.Fprintf(t, "%v\t%s\t", k, k.Counter())
		for _, p := range floods {
			fmt.Fprintf(t, "%d\t", p.Sent[k])
		}
		fmt.Fprintln(t)
	}
	fmt.Fprint(t, "refused by the kernel\t\t")
	for _, p := range floods {
		fmt.Fprintf(t, "%d\t", p.SendErrors)
	}
	fmt.Fprintln(t)
	t.Flush()
	for _, p := range floods {
		if p.FirstSendError != "" {
			fmt.Fprintf(&b, "  %s: first refusal: %s\n", p.Name, p.FirstSendError)
		}
	}

	b.WriteString("\nvictim and peer counters over each phase and its drain\n")
	t = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(t, "counter\t")
	for _, p := range r.Phases {
		fmt.Fprintf(t, "%s\t", p.Name)
	}
	fmt.Fprintln(t)
	row := func(label string, f func(p *Phase) string) {
		fmt.Fprintf(t, "%s\t", label)
		for i := range r.Phases {
			fmt.Fprintf(t, "%s\t", f(&r.Phases[i]))
		}
		fmt.Fprintln(t)
	}
	victim := []string{"link_rcvd_pkts", "rcvd_pkts"}
	victim = append(victim, DropCounters...)
	victim = append(victim, "cnp_received", "icrc_ipv4_id_solved", "drop_bad_qkey", "drop_unexpected", "duplicate_request", "out_of_seq_request")
	for _, name := range victim {
		row("V "+name, func(p *Phase) string { return fmt.Sprint(p.VictimAll[name]) })
	}
	row("V unaccounted (must be 0)", func(p *Phase) string { return fmt.Sprint(p.VictimAll.Unaccounted()) })
	row("V QP state", func(p *Phase) string { return p.VictimQPState.String() })
	row("kernel: V socket drops", func(p *Phase) string { return kernel(p, p.Kernel.SocketDrops) })
	row("kernel: backlog drops (system)", func(p *Phase) string { return kernel(p, p.Kernel.BacklogDrops) })
	row("kernel: Udp RcvbufErrors (system)", func(p *Phase) string { return kernel(p, p.Kernel.RcvbufErrors) })
	row("P WRITEs completed (in time/all)", func(p *Phase) string { return fmt.Sprintf("%d/%d", p.Writes, p.WritesAll) })
	for _, name := range []string{"sent_pkts", "retransmitted_pkts", "local_ack_timeouts", "rcvd_seq_err", "completer_retry_err"} {
		row("P "+name, func(p *Phase) string { return fmt.Sprint(p.Peer[name]) })
	}
	t.Flush()

	fmt.Fprintf(&b, "\nmemory and goroutines, sampled every %v (start / max / end)\n", c.SampleEvery)
	t = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(t, "span\theap in use MiB\tRSS MiB\tgoroutines\tV socket queue max\tmallocs\tper datagram V read\t")
	mem := func(name string, m MemSpan, read uint64) {
		perRead := "-"
		if read > 0 {
			perRead = fmt.Sprintf("%.3f", float64(m.Mallocs())/float64(read))
		}
		fmt.Fprintf(t, "%s\t%.1f / %.1f / %.1f\t%.1f / %.1f / %.1f\t%d / %d / %d\t%.1f MiB\t%d\t%s\t\n", name,
			mib(m.Start.HeapInuse), mib(m.MaxHeapInuse), mib(m.End.HeapInuse),
			mib(m.Start.RSS), mib(m.MaxRSS), mib(m.End.RSS),
			m.Start.Goroutines, m.MaxGoroutines, m.End.Goroutines, mib(m.MaxRxQueue), m.Mallocs(), perRead)
	}
	for _, p := range r.Phases {
		mem(p.Name, p.Memory, p.VictimAll["link_rcvd_pkts"])
	}
	mem("whole run", r.Memory, 0)
	t.Flush()
	fmt.Fprintf(&b, "  heap growth while flooded: %+.1f MiB; goroutines before the run %d, after it %d; mallocs are the whole process's\n\n",
		float64(r.FloodHeapGrowth())/(1<<20), r.GoroutinesStart, r.GoroutinesEnd)

	problems := 0
	for _, p := range r.Phases {
		for _, s := range p.Problems {
			fmt.Fprintf(&b, "PROBLEM %s: %s\n", p.Name, s)
			problems++
		}
	}
	for _, s := range r.Problems {
		fmt.Fprintf(&b, "PROBLEM: %s\n", s)
		problems++
	}
	if problems == 0 {
		slots := 0
		for _, p := range r.Phases {
			slots = max(slots, p.SlotsVerified)
		}
		fmt.Fprintf(&b, "verified after every phase: the last WRITE to each of the victim's %d slots intact, guard bytes unchanged, "+
			"every datagram the victim read counted once, its QP in RTS, every legitimate WRITE successful\n", slots)
	}
	b.WriteString(r.Summary())
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary returns one line of the headline figures, as key=value pairs:
// the attacker's rate and the victim's drop rate in the flood phase
// (datagrams/s), the drop rate over the baseline's valid receive rate, the
// legitimate bandwidth in the baseline and under the flood (GB/s), the
// largest heap in use (MiB) and the goroutines before and after the run.
func (r *Result) Summary() string {
	var fl, base, both Phase
	if p := r.Phase("flood"); p != nil {
		fl = *p
	}
	if p := r.Phase("baseline"); p != nil {
		base = *p
	}
	if p := r.Phase("both"); p != nil {
		both = *p
	}
	dropRatio := 0.0
	if v := base.ValidPPS(); v > 0 {
		dropRatio = fl.DroppedPPS() / v
	}
	return fmt.Sprintf("summary: flood_pps=%.0f dropped_pps=%.0f drop_ratio_to_valid_rx=%.2f bw_baseline=%.3f bw_under_flood=%.3f heap_max_mib=%.1f goroutines_start=%d goroutines_end=%d",
		fl.SentPPS(), fl.DroppedPPS(), dropRatio, base.BandwidthGBps(), both.BandwidthGBps(),
		mib(r.Memory.MaxHeapInuse), r.GoroutinesStart, r.GoroutinesEnd)
}

func kindList(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = k.String()
	}
	return strings.Join(s, " ")
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// size formats a byte count in KiB or MiB when it is a whole number of them.
func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// rate formats a per-second rate with thousands grouped.
func rate(v float64) string {
	n := uint64(v + 0.5)
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func kernel(p *Phase, n uint64) string {
	if !p.Kernel.Known {
		return "?"
	}
	return fmt.Sprint(n)
}
