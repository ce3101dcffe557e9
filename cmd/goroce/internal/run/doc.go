// Package run is `goroce run -n N CMD` (Run), the torchrun-style launcher:
// N ranks of a command on this host, each with its own RNIC address,
// bound to CPUs (--bind-to), their output prefixed, all stopped on the
// first failure. Relaunch is the same launcher for the commands that start
// ranks of themselves (nccl-perf -np, demo).
package run
