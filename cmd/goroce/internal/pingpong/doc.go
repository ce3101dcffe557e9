// Package pingpong is `goroce pingpong` (Run): ibv_rc_pingpong and its
// -t uc, ud and srq siblings over a goroce device, with the same flags,
// output and TCP side channel, so either side may be the rdma-core tool.
package pingpong
