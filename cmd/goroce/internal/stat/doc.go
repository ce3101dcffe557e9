// Package stat is `goroce stat ADDR` (Run): it prints the counters and QPs
// of a running device that serves them (a command started with
// --metrics-addr, see cli.StartMetrics), as rdma statistic show and rdma
// res show qp print rxe's.
package stat
