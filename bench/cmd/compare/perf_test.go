package main

import (
	"strings"
	"testing"
)

// The parsers read goroce perf's perftest-style output; these are lines it
// prints.
func TestParse(t *testing.T) {
	bw := ` #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      2000             923.95             691.28 		   0.011061
---------------------------------------------------------------------------------------`
	if got, err := parseBW(bw); err != nil || got < 0.7248 || got > 0.7249 {
		t.Errorf("parseBW = %v, %v; want 691.28 MiB/s = 0.72486 GB/s", got, err)
	}
	lat := ` #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 8       2000          21.22          948.75       35.38    	       47.76       	29.41  		172.08  		382.35 `
	if got, err := parseRTT(lat, false); err != nil || got != 70.76 {
		t.Errorf("parseRTT = %v, %v; want 70.76", got, err)
	}
	if got, err := parseRTT(lat, true); err != nil || got != 344.16 {
		t.Errorf("parseRTT p99 = %v, %v; want 344.16", got, err)
	}
	if _, err := parseBW("no table here"); err == nil {
		t.Error("parseBW accepted output without a table")
	}
}

// The targets table: each target's ratio of medians and its verdict, the
// bound's direction respected, and the cases a -quick run lacks named.
func TestPrintTargets(t *testing.T) {
	results := map[string][]float64{
		gso:                           {4, 5, 6}, // median 5
		pingBusy:                      {10},
		"goroce write_bw 64 KiB":      {4.5, 4, 9}, // 4.5/5 = 0.90x >= 0.85
		"goroce shm write_bw 64 KiB":  {7},         // 1.40x, not >= 1.5
		"goroce send_lat 8 B RTT":     {14},        // 1.40x, not <= 1.3
		"goroce shm send_lat 8 B RTT": {5},         // 0.50x <= 0.5
		listRate:                      {1.0},
		onePerPost:                    {0.7, 0.9, 0.95}, // 0.90x >= 0.8
	}
	var b strings.Builder
	printTargets(&b, results)
	t.Log("\n" + b.String())
	for _, want := range []string{
		"goroce write_bw 64 KiB >= 0.85x udp GSO/GRO 0.90x: met",
		"goroce shm write_bw 64 KiB >= 1.50x udp GSO/GRO 1.40x: not met",
		"goroce send_lat 8 B RTT <= 1.30x udp ping-pong busy RTT 1.40x: not met",
		"goroce shm send_lat 8 B RTT <= 0.50x udp ping-pong busy RTT 0.50x: met",
		"goroce write_bw 64 B msg rate >= 1.50x udp batched 64 B not measured",
		"goroce write_bw 64 B msg rate 1 WR/post >= 0.80x goroce write_bw 64 B msg rate 0.90x: met",
		"goroce write_bw 64 B msg rate 1 WR/post >= 1.50x udp batched 64 B not measured",
		"goroce write_bw 4 KiB >= 0.50x udp GSO/GRO not measured",
	} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
