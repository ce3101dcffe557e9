// Package ncclperf is `goroce nccl-perf COLL` (Run), nccl-tests'
// all_reduce_perf and its siblings over goroce RNICs (algbw, busbw,
// #wrong; --device for simulated GPU memory), and `goroce demo` (RunDemo),
// the tour that runs every collective of nccl-perf on checked data with 4
// ranks and reports what the RNICs counted. Both start their ranks with
// run.Relaunch when no launcher did.
package ncclperf
