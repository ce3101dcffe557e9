// Package shmlink is a link.Link between devices on one host that carries
// RoCEv2 frames through rings in shared memory instead of UDP sockets, in
// the spirit of memif (the shared-memory packet interface of VPP and DPDK).
//
// Where it sits: wire < link < udplink, simlink, shmlink (this package) <
// rnic. Every layer above is unchanged: the device builds the same packets,
// PSNs, ACKs, ICRCs and DCQCN state as over udplink, and its trace and pcap
// show the same bytes.
//
// # What crosses the ring
//
// Each slot holds one whole IP datagram: an IPv4 header (20 bytes, TOS
// ECT(0), Identification 0, DF, TTL 64, a valid header checksum) or an IPv6
// header (40 bytes, traffic class ECT(0), flow label 0, hop limit 64),
// a UDP header (checksum 0, as Linux rxe sends) from the device's port to
// the peer's, and the RoCEv2 packet from BTH to ICRC: what udplink's socket
// would put on the wire. The receiver reads the source address, port and
// TOS byte from those headers, so link.Caps reports TOS true and IPv4ID 0,
// and the ICRC verifies as it does for a UDP link with IPv4 ID 0. A frame
// crosses as one copy into the ring and, for a device, none out of it
// (the device reads it in place, LendReads), with nothing in between
// that could flip a bit, so link.Caps reports Intact as well: the
// device accepts the frame without verifying its ICRC (which only a buggy
// or hostile writer of the ring could have got wrong, and a hostile one
// can compute a valid ICRC as well), unless rnic.Config.AlwaysVerifyICRC.
// The sender's ICRC is computed in the pass that copies the payload into
// the slot (link.Caps.CopiesICRC; wire.CopyICRC), which reads the
// payload once instead of once for the ICRC and once for the copy.
//
// # Files and rings
//
// All files live in one directory (Config.Dir, by default
// /dev/shm/goroce-<uid>), mode 0600, and are addressed by IP:port as
// udplink addresses its peers. Another local user must not be able to
// plant, read or redirect them, so the link trusts only what this user
// owns and nobody else may write (ErrUntrusted otherwise, naming the file
// and what to do):
//
//   - the directory must be this user's own with mode 0700, not a
//     symbolic link: Open makes it so if it is missing, tightens one of
//     this user's that others may only read (0755) to 0700, and refuses
//     any other (someone who made /dev/shm/goroce-<uid> first would own
//     the victim's rings);
//   - every file is opened with O_NOFOLLOW and O_CLOEXEC and checked with
//     fstat (a regular file, or the wake FIFO, of this user's own, mode
//     0600), so that what is checked is what is used: a planted symbolic
//     link is never followed (a lock file linked to /etc/x must not make
//     a root process create /etc/x);
//   - a stale or foreign file is replaced only when it is this user's own:
//     a planted lock file fails Open, a planted ring addressed to the link
//     is not mapped (Stats.RxUntrusted), a planted peer port is not sent
//     to (Stats.TxUntrusted), each logged once.
//
// The files:
//
//   - "<addr>.lock": held with flock(2) by the link that owns addr while it
//     is open; the kernel lets go when the process dies. A second Open of
//     the same address fails with ErrAddrInUse.
//   - "<addr>.port": the device's port, one page: its owner's pid and a
//     random generation, how many of its receive goroutines sleep, whether
//     one of them polls, a counter senders bump when they make a new
//     ring, and a closed flag.
//   - "<addr>.wake": a FIFO the owner sleeps on and senders write a byte
//     to, to wake it. Open replaces a stale one (its lock is free)
//     with a fresh file, so a sender still holding the old one can tell.
//   - "<src>,<dst>.ring": one single-producer single-consumer ring from
//     src to dst, made by the sender on its first packet to dst, owned by
//     it (its pid and generation in the header, and the generation of the
//     port it was made for). A sender always makes a
//     fresh ring file and renames it over a stale one; the receiver maps
//     every ring addressed to it, at Open and whenever the port's ring
//     counter changes.
//
// A ring is a header and a power-of-two number of fixed-size slots
// (Config.Slots of Config.SlotSize bytes). The producer writes a slot's
// length and bytes, then publishes its head index; the consumer copies the
// slot out, or lends it to its reader in place (link.Lender, which rnic's
// device uses: the payload goes from the slot straight into the MR), then
// publishes its tail index, for a lent batch once the reader releases it
// (ReleaseBatch, or its next read). The tail is an index, so releasing a
// batch frees every slot of it, those of frames the link or the device
// dropped too, exactly once. A process that dies leaves
// each slot published or not, never torn, so the ring stays consistent:
// the next receiver at the address drops what its predecessor left unread,
// and what a ring made for its predecessor holds (a sender that found the
// port file of a killed process), counting both (Stats.RxStale), as a
// closed socket drops its queue, and reads on; a
// sender that restarts makes a fresh ring.
//
// # Untrusted memory
//
// Any process of the same user can write the files (and only such a
// process: see above). The link therefore
// keeps its own copy of each ring's geometry (checked against the file's
// size once, when it maps it), and bounds every index and length it reads
// from shared memory before use: a head more than a ring's worth ahead of
// the tail, or a slot length beyond the slot, drops the ring's contents and
// is counted (Stats.RxBadRing). A slot's length is read once and bounds
// the frame cut from it; the IP and UDP lengths are read once each
// (wire.SplitUDP), and so are the opcode and pad count that lay out the
// RoCEv2 packet (wire.Parse). A writer that changes a frame's bytes while
// it is read, copied out or lent in place, changes values, never where the
// receiver reads or writes. A file truncated under the mapping makes the
// next access fault; the link, and the device reading a lent frame, turn
// that fault into a dropped ring or packet
// (runtime/debug.SetPanicOnFault) instead of a crash. Close leaves the
// rings of a lent batch mapped until it is released.
//
// # Waking up
//
// A receiver that finds its rings empty (after Config.Spin, default none,
// of looking again) announces that it sleeps (the port's sleeper count),
// looks once more and reads its wake FIFO with a timeout. A sender that
// publishes a packet and sees a sleeper writes a byte to the FIFO: one
// system call per batch and peer, only when the peer sleeps. The FIFO,
// unlike a futex, is read through Go's poller, so a sleeping receiver
// holds no thread and no P: the other goroutines of its process run (a
// futex sleep kept a P until the runtime's monitor took it back, up to
// 10 ms later, which made a blocking round trip slower than over UDP). A device
// in polling mode (rnic.Config.BusyPoll) polls through link.Poller's
// TryReadBatch and never sleeps while it polls; one that waits does not
// burn the CPU that the other ranks on the host need (a 20 µs spin
// halved a 4-rank AllReduce on a loaded 2-CPU host).
//
// A polling device still has a goroutine asleep in WaitReadable, for the
// packets that come while nobody polls. So that its senders do not write
// its FIFO after every batch while a poller takes the packets anyway,
// TryReadBatch raises the port's polling flag, and senders skip the
// wake-up while it is up (Stats.TxWakesSkipped). The flag comes down,
// and the rings are looked at once more, when the poller says it stops
// (link.PollStopper, which rnic calls when CQ.Wait stops spinning), or
// when the sleeping goroutine, which then sleeps a lease (1 ms) at a
// time, finds that a whole lease passed without a poll. Raising the flag
// wakes that goroutine, in case it sleeps for long. That goroutine reads
// with TryReadBatch too once woken; an empty read of its own (the only
// poll since it woke, or since a poller stopped) does not count as
// polling. A flag that another
// process raises costs the receiver wake-ups, never more than one sleep
// (50 ms) each: the receiver clears it before it sleeps unless it polls.
//
// A full ring pushes back: the sender sleeps up to Config.FullWait on a
// futex word in the ring (it holds the device's send lock anyway), which
// the consumer bumps when it frees slots and sees the sender waiting, then drops the packet, and drops the next
// ones at once until the consumer moves again, so a dead peer cannot stall
// it.
//
// The package works on Linux only (futex, flock, mmap); elsewhere Open
// returns an error.
package shmlink
