package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	cc "github.com/goroce/goroce/dcqcn"
)

// Markers: what marks CE at the bottleneck.
const (
	// markerRED is Linux's RED qdisc with ecn (sch_red) as the htb class's
	// queue: it marks ECT packets CE with RED's probability of the average
	// queue, Kmin ... Kmax, Pmax, and marks every one above Kmax.
	markerRED = "red"
	// markerNFT is for kernels built without sch_red: an nftables rule on
	// the router's forward path in front of the htb class, "oifname rx ip
	// ecn != not-ect limit rate over R bytes/second burst K bytes counter
	// ip ecn set ce". nft's limit is a token bucket of rate R and depth K:
	// it runs out exactly when a queue drained at R would hold more than K
	// bytes, so it marks the packets that arrive while the htb queue is
	// above K (a step at K, as DCTCP marks: Kmin = Kmax = K, Pmax 1). The
	// packets it marks take no tokens, so under a sustained overload the
	// htb queue runs ahead of the bucket; the marks stay on while it does.
	markerNFT = "nft"
)

// phantomShare is the share of the bottleneck's rate at which the nft
// marker's bucket refills: its "queue" drains slower than the real one.
const phantomShare = 0.95

// bottleneck is the router's egress towards the receiver: an htb class
// of rate Rate holding a byte-limited queue (Limit bytes, tail drop), and
// the marker.
type bottleneck struct {
	// tc runs tc where the bottleneck is (a namespace, the router guest).
	tc func(ctx context.Context, args ...string) ([]byte, error)
	// qdiscs returns `tc -s -j qdisc show dev DEV` there.
	qdiscs  func(ctx context.Context) ([]byte, error)
	ns, dev string // ns: the router's namespace (the nft marker's), if any
	rate    cc.Rate
	limit   int
	frame   int // bytes of a full data packet's Ethernet frame, as htb counts it
	burst   int // the htb class's burst and cburst, bytes; 0: htb's (a 1600-byte minimum)
	red     cc.RED
	marker  string
	nft     *nftables.Conn
	nsFile  *os.File // the namespace nft's connections dial into
	rule    *nftables.Rule
	table   *nftables.Table
	chain   *nftables.Chain
}

// redAvailable reports whether the kernel has the RED qdisc, by adding one
// to lo in namespace ns.
func redAvailable(ctx context.Context, ns string) bool {
	err := run(ctx, "tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "handle", "1:", "red",
		"limit", "100000", "min", "10000", "max", "30000", "avpkt", "1000", "burst", "20",
		"probability", "0.1", "bandwidth", "100mbit", "ecn")
	if err != nil {
		return false
	}
	_ = run(ctx, "tc", "-n", ns, "qdisc", "del", "dev", "lo", "root")
	return true
}

// setup installs the qdiscs (and the nft rule) on b.dev.
func (b *bottleneck) setup(ctx context.Context) error {
	tc := func(args ...string) error {
		_, err := b.tc(ctx, args...)
		return err
	}
	// A root qdisc left by an earlier run on the same interface (the
	// guest's) goes, with its counters; a fresh interface has none.
	_ = tc("qdisc", "del", "dev", b.dev, "root")
	rate := fmt.Sprintf("%dbit", int64(b.rate))
	if err := tc("qdisc", "add", "dev", b.dev, "root", "handle", "1:", "htb", "default", "1"); err != nil {
		return err
	}
	// quantum 1514: one frame per round; the default (rate/r2q) is far
	// larger at these rates and htb warns.
	class := []string{"class", "add", "dev", b.dev, "parent", "1:", "classid", "1:1", "htb",
		"rate", rate, "ceil", rate, "quantum", "1514"}
	if b.burst > 0 {
		class = append(class, "burst", fmt.Sprint(b.burst), "cburst", fmt.Sprint(b.burst))
	}
	if err := tc(class...); err != nil {
		return err
	}
	switch b.marker {
	case markerRED:
		avpkt, burst := redAveraging(b.red.Kmin)
		// tc hands the kernel Pmax as a 32-bit fraction, Pmax·2^32: a
		// Pmax of 1 does not fit, goes as 0, and the kernel then derives
		// its own from min and max (0.754 at 20 Mb/s, `tc -d` shows it).
		// 0.9999 is the paper's 1 as near as the field holds it.
		pmax := min(b.red.Pmax, maxREDProbability)
		return tc("qdisc", "add", "dev", b.dev, "parent", "1:1", "handle", "10:", "red",
			"limit", fmt.Sprint(b.limit), "min", fmt.Sprint(b.red.Kmin), "max", fmt.Sprint(b.red.Kmax),
			"avpkt", fmt.Sprint(avpkt), "burst", fmt.Sprint(burst), "probability", fmt.Sprint(pmax),
			"bandwidth", rate, "ecn")
	case markerNFT:
		if err := tc("qdisc", "add", "dev", b.dev, "parent", "1:1", "handle", "10:", "bfifo",
			"limit", fmt.Sprint(b.limit)); err != nil {
			return err
		}
		return b.addNFTMarker()
	}
	return fmt.Errorf("marker %q: want %q or %q", b.marker, markerRED, markerNFT)
}

// maxREDProbability is the largest RED probability tc passes on as
// itself (see bottleneck.setup).
const maxREDProbability = 0.9999

// redAveraging returns the avpkt and burst options that make Linux's RED
// mark on the queue as it is, as DCQCN's congestion point does (the
// paper's switches, like DCTCP's, mark on the instantaneous queue; so does
// dcqcn.RED): RED marks on an average of the queue, updated at each
// enqueue with weight W = 2^-Wlog, and tc derives Wlog from burst and
// avpkt (tc_red_eval_ewma: the least Wlog with burst + 1 − min/avpkt ≤
// (1 − (1−W)^burst)/W). avpkt = kmin/2 and burst 2 give Wlog 1, W = 1/2:
// the average follows the queue within two packets.
//
// The weight matters under htb: RED starts an idle period, which decays
// its average, only when it is asked for a packet it does not have, and
// htb never asks an empty class. With tc-red(8)'s suggested burst,
// (2·min + max)/(3·avpkt), W is 1/256: after a bunch of packets has come
// and gone, the average stays above min for hundreds of packets, so RED
// keeps marking for seconds flows whose rates it has already cut to a
// tenth.
func redAveraging(kmin int) (avpkt, burst int) {
	return max(1, kmin/2), 2
}

// addNFTMarker installs the nftables marking rule (see markerNFT).
func (b *bottleneck) addNFTMarker() error {
	// Every netlink call dials anew in the namespace of this handle, so
	// it stays open until close.
	fd, err := os.Open(netnsDir + "/" + b.ns)
	if err != nil {
		return err
	}
	b.nsFile = fd
	c, err := nftables.New(nftables.WithNetNSFd(int(fd.Fd())))
	if err != nil {
		return err
	}
	b.nft = c
	b.table = c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "goroce_dcqcn"})
	accept := nftables.ChainPolicyAccept
	b.chain = c.AddChain(&nftables.Chain{Name: "forward", Table: b.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	ifname := make([]byte, unix.IFNAMSIZ)
	copy(ifname, b.dev)
	const tosOffset, checksumOffset = 1, 10 // in the IPv4 header
	b.rule = c.AddRule(&nftables.Rule{Table: b.table, Chain: b.chain, Exprs: []expr.Any{
		// oifname == dev
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname},
		// ip ecn != not-ect: only ECN-capable packets may be marked
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: tosOffset, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x03}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0}},
		// limit rate over R/frame packets/second burst K/frame packets
		&expr.Limit{Type: expr.LimitTypePkts, Rate: uint64(phantomShare * float64(b.rate) / 8 / float64(b.frame)),
			Unit: expr.LimitTimeSecond, Over: true, Burst: uint32(max(1, b.red.Kmax/b.frame))},
		&expr.Counter{},
		// ip ecn set ce: TOS ← (TOS & 0xfc) ^ 0x03, header checksum fixed
		// up. The write covers the header's first 16-bit word (version,
		// IHL and TOS), as nft itself writes it: the kernel adjusts the
		// checksum by the written bytes as whole words, and a lone odd
		// byte would be taken for the high half of one.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 0, Len: 2},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: []byte{0xff, 0xfc}, Xor: []byte{0, 0x03}},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: expr.PayloadBaseNetworkHeader,
			Offset: 0, Len: 2, CsumType: expr.CsumTypeInet, CsumOffset: checksumOffset},
	}})
	return c.Flush()
}

// queueStats is what the bottleneck reports at one instant.
type queueStats struct {
	Sent    uint64 // bytes the htb sent on (Ethernet frames)
	Backlog int    // bytes queued
	Drops   uint64 // packets dropped (queue full)
	Marked  uint64 // packets marked CE
}

// tcQdisc is one entry of `tc -s -j qdisc show`.
type tcQdisc struct {
	Kind    string `json:"kind"`
	Handle  string `json:"handle"`
	Bytes   uint64 `json:"bytes"`
	Drops   uint64 `json:"drops"`
	Backlog int    `json:"backlog"`
	// Marked is RED's count of packets marked CE: tc -j prints a qdisc's
	// extended statistics beside the basic ones, not in an object.
	Marked uint64 `json:"marked"`
}

// stats reads the qdiscs' counters with `tc -s -j qdisc show`, and the
// nft rule's counter.
func (b *bottleneck) stats(ctx context.Context) (queueStats, error) {
	out, err := b.qdiscs(ctx)
	if err != nil {
		return queueStats{}, err
	}
	var qs []tcQdisc
	if err := json.Unmarshal(out, &qs); err != nil {
		return queueStats{}, fmt.Errorf("tc -j output: %w", err)
	}
	var s queueStats
	for _, q := range qs {
		switch q.Handle {
		case "1:": // htb: its drops and backlog include its class's queue
			s.Sent, s.Backlog, s.Drops = q.Bytes, q.Backlog, q.Drops
		case "10:":
			s.Marked = q.Marked // RED's; zero for bfifo
		}
	}
	if b.marker == markerNFT {
		n, err := b.nftMarked()
		if err != nil {
			return s, err
		}
		s.Marked = n
	}
	return s, nil
}

// nftMarked reads the packet count of the marking rule's counter.
func (b *bottleneck) nftMarked() (uint64, error) {
	rules, err := b.nft.GetRules(b.table, b.chain)
	if err != nil {
		return 0, err
	}
	for _, r := range rules {
		for _, e := range r.Exprs {
			if c, ok := e.(*expr.Counter); ok {
				return c.Packets, nil
			}
		}
	}
	var kinds []string
	for _, r := range rules {
		for _, e := range r.Exprs {
			kinds = append(kinds, fmt.Sprintf("%T", e))
		}
	}
	return 0, fmt.Errorf("nft: the marking rule's counter is gone (%d rules: %v)", len(rules), kinds)
}

// inNamespace points b's tc at router namespace ns.
func (b *bottleneck) inNamespace(ns string) {
	b.ns = ns
	b.tc = func(ctx context.Context, args ...string) ([]byte, error) {
		return output(ctx, "tc", append([]string{"-n", ns}, args...)...)
	}
	b.qdiscs = func(ctx context.Context) ([]byte, error) { return b.tc(ctx, "-s", "-j", "qdisc", "show", "dev", b.dev) }
}

// inGuest points b's tc at the router guest g.
func (b *bottleneck) inGuest(g *guestRouter) {
	b.tc = func(ctx context.Context, args ...string) ([]byte, error) { return g.Run(ctx, "/sbin/tc", args...) }
	b.qdiscs = func(ctx context.Context) ([]byte, error) { return g.Qdiscs(ctx, b.dev) }
}

// figures returns `tc -s -d qdisc show` and `tc -s class show` of b.dev,
// as tc prints them, less blank lines and trailing blanks. With -d, RED's
// line shows the averaging weight the kernel holds ("ewma" Wlog).
func (b *bottleneck) figures(ctx context.Context) (string, error) {
	q, err := b.tc(ctx, "-s", "-d", "qdisc", "show", "dev", b.dev)
	if err != nil {
		return "", err
	}
	c, err := b.tc(ctx, "-s", "class", "show", "dev", b.dev)
	var lines []string
	for l := range strings.Lines(string(q) + string(c)) {
		if l = strings.TrimRight(l, " \n"); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n"), err
}

// close releases the netlink connection; the namespace's removal takes
// the qdiscs and the rule with it.
func (b *bottleneck) close() {
	if b.nsFile != nil {
		b.nsFile.Close()
	}
}
