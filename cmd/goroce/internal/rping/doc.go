// Package rping is `goroce rping`: librdmacm's rping example (rdma-core
// librdmacm/examples/rping.c) over a goroce device, connected through
// goroce's connection manager (rnic/cm) instead of a TCP side channel.
package rping
