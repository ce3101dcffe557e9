// Package vtime runs a function in virtual time in an ordinary program, the
// way `go test` runs a test in a testing/synctest bubble, so that the goroce
// command's DCQCN experiments (dcqcn/experiment) are as exact as the tests'.
//
// Where it sits: a helper of dcqcn/experiment for cmd/goroce; nothing in the
// device stack uses it.
//
// # How
//
// Go 1.26 offers a bubble only through synctest.Test, which needs the
// *testing.T of a running test. Run gets one the way a test binary does:
// it registers the testing flags (testing.Init), leaves them at their
// defaults, builds a testing.M with testing.MainStart around one test, and
// runs it. The test's body is synctest.Test around f.
//
// testing.MainStart is exported for the test main that `go test` generates
// and is outside the Go 1 compatibility promise: its testDeps interface may
// change between Go releases. This package implements that interface for Go
// 1.26 (deps.go); a toolchain that changes it fails to compile here, loudly,
// rather than misbehave.
//
// # What a caller must know
//
//   - Not inside a test binary's tests: there the testing flags are parsed
//     and live, and a second testing.M would obey them (-test.run,
//     -test.count, profiles). Tests call synctest.Test themselves; Run
//     returns ErrInTest.
//   - One bubble at a time: testing.M is global state. Run serializes calls.
//   - While f runs, os.Stdout is a pipe that Run drains: the testing
//     package prints PASS or FAIL there, which belongs to no command's
//     output. Write output through an io.Writer taken before the call (the
//     goroce command's stdout is).
//   - The bubble's rules hold for f: goroutines it starts are in the
//     bubble, must not wait on channels made outside it, and must all
//     return before f does. Breaking them panics, and a panic in f ends
//     the program with its stack, as it ends a test binary.
//   - The context Run passes to f is the bubble's own: a bubble cannot wait
//     on the caller's. A goroutine of the bubble looks at the caller's
//     context every PollInterval of virtual time and cancels f's when it
//     has ended; so Ctrl-C stops a run, and f waiting on its context keeps
//     virtual time moving.
package vtime
