// Package ib is the collective library's transport over goroce devices,
// modelled on NCCL's IB transport with its Simple protocol and its
// registered user buffers (ncclCommRegister).
//
// Every pair of ranks shares one RC queue pair. A message is cut into
// fragments of SlotSize bytes (at least one, so a zero-length message is
// one empty fragment), each written by one RDMA WRITE WITH IMMEDIATE. A
// fragment lands in one of two places:
//
//   - a slot: each direction of a connection has a FIFO of Slots receive
//     slots registered at the receiver, used in order (0, 1, …, Slots-1,
//     0, …), which the receiver mirrors because RC delivers in order. The
//     sender copies the fragment into a staging slot (or writes it
//     straight from a registered buffer, Register) and the receiver copies
//     or reduces it into the receive's buffer. A slot is there before any
//     receive is posted: a message leaves as soon as it is sent.
//   - the receive's buffer itself ("direct"): a receive of more than one
//     fragment into a registered buffer sends the sender a CTS (clear to
//     send) with the buffer's address and rkey, and the sender writes the
//     fragments still unsent there, from its own registered buffer. The
//     bytes are then where they belong when they land; a reducing receive
//     combines them in place. An IrecvReduce whose output is its input
//     takes the slots, so that nothing writes its input before it is read.
//
// Both kinds take a credit: the sender holds one per fragment the
// receiver has room to take (Slots at the start) and spends one per
// fragment of either kind, so at most Slots fragments are in flight each
// way and the receive queue (reposted on every completion) never runs
// dry: no RNR NAKs.
//
//	sender                                          receiver
//	                 ◄── WRITE WITH IMM(CTS | credits), 32 bytes ──  Irecv into a registered buffer
//	                      into the next entry of the sender's CTS ring
//	fragment i ── WRITE WITH IMM(slot | credits) ──► slot s   ─copy/reduce─► buffer
//	fragment j ── WRITE WITH IMM(direct | credits) ─────────────────────► buffer + j×SlotSize
//	credits++  ◄── the immediate of the receiver's next WRITE, any kind ──
//
// The immediate says which kind a WRITE is and returns credits in the
// same packet: fragment credits for fragments consumed, CTS credits for
// ring entries freed (imm.go). So the credits of a connection with
// traffic both ways, as recursive doubling's exchanges have, ride on the
// data and never cost a packet of their own; a WRITE for credits alone
// goes only once half the slots (or half the ring) are owed, which the
// peer may be waiting for, and when the transport flushes.
//
// The CTS ring. CTS entries land in a ring of Slots entries at the sender,
// in host memory (the CPU reads them), one CTS credit per entry. Receives
// are numbered in post order on each connection, and so are sends; a CTS
// carries its receive's number and length, the sender matches it to the
// send of the same number, and passes over (frees) a CTS for a message it
// has finished. A CTS can arrive after the sender has begun its message
// through the slots: the fragments not yet sent then go direct. A CTS of
// another length is not used, so the receive finds the length wrong on
// the slot path and fails as it would without one. Nothing ever waits for
// a CTS: without one (no CTS credit, an unregistered buffer, a receive
// posted late) a message takes the slots. The executor of package nccl
// posts a phase's receives a phase early where nothing else touches their
// bytes, so that the CTS reaches the sender before it starts.
//
// Everything a peer writes is checked: more credits than slots, more CTS
// than the ring holds, CTS numbers going back, a direct fragment for a
// receive no CTS named, a fragment longer than a slot or than the receive
// fail the connection (ErrProtocol, transport.ErrLength). A peer can write
// into a registered buffer only where a CTS named it and only while it
// stays registered; a communicator drops every registration when one of
// its operations fails (DeregisterAll), so that a peer on its way cannot
// write into buffers the caller has taken back.
//
// A send that fits one slot is done as soon as its data is in the
// staging slot, as NCCL's sends are done once their data is in the FIFO;
// a longer one sent straight from a registered buffer (Register) is done
// when the peer has acknowledged every fragment. Flush waits until the
// peer has acknowledged everything sent, or returned every credit.
//
// A send posted with IsendAfter forwards a receive into the same bytes:
// its fragment i is written as soon as fragment i of the receive has
// landed (and, for IrecvReduce, been reduced), as NCCL's recvReduceSend
// and recvCopySend pass each slot on. The ring's blocks thus flow from
// rank to rank a fragment at a time instead of a phase at a time, from
// one rank's output buffer into the next one's where their CTS came in
// time.
//
// Where it sits: under nccl's executor, on top of package rnic's verbs
// (AllocPD, RegMR, CreateCQ, CreateQP, Modify, PostSend, PostRecv, Poll,
// Wait), exactly as NCCL's net_ib sits on libibverbs.
//
// Connection set-up: New creates the QPs (in INIT, receives posted), the
// slots and the CTS rings, LocalInfo serialises what the peers need (GID,
// UDP port, and per peer the QPN, start PSN, slot and CTS ring addresses
// and rkeys), the caller exchanges these blobs (nccl/bootstrap), and
// Connect moves every QP to RTS.
package ib
