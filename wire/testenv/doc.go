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
// Where it sits: at the bottom of the stack, under wire, and importing
// nothing of goroce's, so that the tests of every package (wire itself
// included) can use it without an import cycle or an upward arrow.
package testenv
