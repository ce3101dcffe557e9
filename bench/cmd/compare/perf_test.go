package main

import "testing"

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
