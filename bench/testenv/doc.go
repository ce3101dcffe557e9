// Package testenv decides what a test does when the machine lacks
// something it needs (root, a network namespace, a TUN device, tshark,
// chromium, Open MPI, a kernel feature): skip, as on a developer's laptop,
// or fail, in CI, where a skipped test would let the run pass without
// checking anything.
//
// CI sets GOROCE_CI_STRICT=1 (.ci/run exports it); then SkipOrFail fails
// the test instead of skipping it. Skips that are not about the
// environment (testing.Short, the race detector) do not go through here.
//
// Where it sits: with the harnesses (bench/), because it is test support
// and not a part of the stack: the tests of every package and the
// benchmarks use it, no package of the stack does. It imports nothing of
// goroce's, so no import cycle can pass through it.
package testenv
