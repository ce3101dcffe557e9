// Package bootstrap is the TCP rendezvous that lets the ranks of a new
// communicator find each other and swap connection details, NCCL's
// bootstrap network in miniature.
//
// One process runs the Root (the rank-0 process, listening at the address
// in the unique ID). Every rank, rank 0 included, dials it as a Client.
// The root serves each connection on its own, under a short hello timeout
// (a silent connection delays nobody): it sends a random challenge, and
// the client answers with its hello (magic, rank, number of ranks and an
// HMAC of the challenge and those under the job's secret, see Job). A
// hello without a valid MAC is refused, counted (Root.Refused) and
// logged, and takes no rank's place. When all ranks have arrived the root
// answers each; if some have not within the timeout, it answers the ones
// present with an error listing the absent ranks, so every rank fails
// with the culprits named. After that the clients run rounds: each sends
// one blob, the root answers every client with all blobs in rank order
// (AllGather; Barrier is an AllGather of nothing).
//
// Frames on the wire: a 4-byte big-endian length, then the payload, of at
// most 16 bytes for the challenge, 48 for a hello, 64 KiB for a control
// frame and 64 MiB for a round's; a longer frame ends the connection on
// its header. Challenge: 16 random bytes. Hello: magic (8), rank (4),
// nranks (4), MAC (32). Answers: a status byte (0 ok, 1 error)
// and either the error text or, for a round, n × (length (4), blob).
//
// Watch mode. The last round is Watch: the connections then stay open as
// the communicator's failure channel. A rank Reports a dead or stalled
// rank and the root relays the notice to the others; a client whose
// connection closes without a goodbye (a killed process) is reported dead
// by the root itself, and a client that loses the root reports rank 0
// (watch.go). Control frames set the top bit of the length.
//
// Where it sits: used by nccl.CommInitRank, before and beside the RDMA
// transport: the rendezvous, then failure notices; nothing on the data
// path.
package bootstrap
