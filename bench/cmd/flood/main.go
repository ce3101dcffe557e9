// Command flood measures what a hostile flood does to a goroce device over
// real UDP sockets on loopback: a victim device serving RDMA WRITEs from
// its peer, and an attacker sending it unknown QPNs, malformed headers, bad
// ICRCs, WRITEs from the wrong address, oversize payloads and zero-length
// datagrams as fast as sendmmsg goes. It runs three phases (the WRITEs
// alone, the flood alone, both) and prints a table and a summary line; see
// package bench/flood.
//
//	go run ./bench/cmd/flood [-d 2s] [-batch 64] [-kinds all|unknown_qpn,malformed,...] [-strict]
//
// It exits with status 1 if the victim broke an invariant (a WRITE failed,
// memory outside a WRITE changed, a datagram went uncounted, the QP left
// RTS, a goroutine was left behind), 2 if the run could not be made.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/goroce/goroce/bench/flood"
)

func main() {
	var cfg flood.Config
	kinds := flag.String("kinds", "all", "hostile packets to send, comma-separated: "+kindNames()+", or all")
	flag.DurationVar(&cfg.Duration, "d", 0, "length of each phase (default 2s)")
	flag.IntVar(&cfg.Batch, "batch", 0, "hostile datagrams per sendmmsg call (default 64)")
	flag.BoolVar(&cfg.StrictICRC, "strict", false, "the victim accepts only ICRCs computed with IPv4 ID 0 (rnic.Config.StrictICRC)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "flood: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ks, err := flood.ParseKinds(*kinds)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.Kinds = ks

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := flood.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(2)
	}
	if err := res.WriteTable(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(2)
	}
	if !res.OK() {
		os.Exit(1)
	}
}

func kindNames() string {
	var s []string
	for _, k := range flood.AllKinds() {
		s = append(s, k.String())
	}
	return strings.Join(s, ",")
}
