// Package perf is `goroce perf TEST` (Run): perftest's send_bw, write_bw,
// read_bw, atomic_bw, send_lat, write_lat and read_lat over a goroce
// device, with perftest's flags and report columns, over goroce's own
// side channel or, with --exchange perftest, perftest's.
package perf
