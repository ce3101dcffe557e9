// Package exec is `goroce exec` (Run): it runs an unmodified libibverbs
// program (ibv_rc_pingpong, ib_write_bw, ...) on a goroce device by
// preloading the goroce-verbs shim, built from the source on first use.
package exec
