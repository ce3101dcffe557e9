// Package soak is `goroce soak` (Run): a long mixed RC/UC/UD workload
// under loss (package bench/soak) on a simulated switch and over real UDP,
// checked for lost work requests and for leaks of memory and goroutines.
package soak
