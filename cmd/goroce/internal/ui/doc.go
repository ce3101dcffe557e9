// Package ui is goroce's live view: a small web page that shows what a
// running device is doing, refreshed a few times a second.
//
//	goroce pingpong --ui-addr 127.0.0.1:8080 ...
//	ui: serving http://127.0.0.1:8080/
//
// The page shows, for every device added with [Server.AddDevice]:
//
//   - its QPs, as `rdma res show qp` lists them: QPN, type, state, the
//     destination QPN, the next PSN the requester sends (SQ PSN), the oldest
//     PSN not yet acknowledged, the PSN the responder expects next (RQ PSN),
//     the outstanding send and receive WRs, the path MTU and the QP's DCQCN
//     rate;
//   - its packet counters under rxe's names (`rdma statistic`), each with
//     its rate of change since the previous refresh.
//
// During a DCQCN experiment ([Server.StartDCQCN], [Server.PushDCQCN]; the
// `goroce dcqcn` command feeds it) it also draws, as the run goes, each
// flow's DCQCN rate and the depth of the bottleneck switch queue over time:
// the reaction points cutting their rates as the queue crosses the RED
// thresholds, and recovering as it drains.
//
// # How it works
//
// The page is plain HTML, CSS and JavaScript embedded in the binary (no
// framework, nothing fetched from elsewhere). Its script polls two JSON
// endpoints and redraws; the charts are inline SVG the script builds:
//
//	GET /                        the page
//	GET /static/...              its script and style sheet
//	GET /api/devices             {"title", "poll_ms", "devices": [{"name", "addr", "gid",
//	                              "qps": [{"qpn", "type", "state", "dest_qpn", "sq_psn",
//	                              "acked_psn", "rq_psn", "send_wrs", "recv_wrs", "mtu",
//	                              "rate_bps"}], "counters": [{"name", "value"}]}]}
//	GET /api/dcqcn?after=SEQ     {"run_id", "run": {"name", "flows", "line_rate_bps",
//	                              "duration_ms", "buffer_bytes", "preset"} or null,
//	                              "next", "samples": [{"seq", "at_ms", "rate_bps": [...],
//	                              "throughput_bps": [...], "queue_bytes", "queue_max_bytes",
//	                              "marked", "cnps", "tail_drops", "retransmitted"}]}
//
// /api/devices reads the devices afresh at every request. /api/dcqcn
// returns the samples numbered after SEQ (all kept samples for 0), so the
// page fetches each sample once; run_id changes when a new run starts.
//
// The view only reads: nothing on the page changes a device. Still, it
// shows QPNs and PSNs, which an attacker on the network could use to inject
// packets (see ReDMArk), so serve it on a loopback address unless you mean
// to publish it.
//
// Where it sits: in the command (cmd/goroce starts it for --ui-addr),
// above package rnic, whose Device.Resources and Device.Counters it reads. It does not
// import bench/experiment: the command converts that package's samples into
// [DCQCNSample].
package ui
