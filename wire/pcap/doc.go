// Package pcap reads and writes capture files around RoCEv2 packets, so that
// what goroce sends can be watched in Wireshark and what Linux rxe (or a
// real RNIC) sent can be decoded and checked by goroce.
//
// The container formats (pcap and pcapng) are handled by gopacket's pcapgo;
// this package adds what RoCE needs on each side of it:
//
//   - Reading: Open tells pcap from pcapng by the magic number, and Next
//     returns each record with the IP packet found inside its link-layer
//     header (Ethernet with VLAN tags, Linux cooked SLL and SLL2, raw IPv4
//     and IPv6, BSD loopback). Record.RoCEv2 splits it into IP header, UDP
//     header and the RoCEv2 packet (BTH to ICRC) when it is UDP to port
//     4791. Decoding the packet is package wire's job (wire.Parse,
//     wire.AppendText), and so is the ICRC check (wire.VerifyICRC), which
//     uses the real IP and UDP headers from the capture: in a capture the
//     IPv4 Identification that a UDP socket never sees is visible, so every
//     packet gets the full 32-bit check.
//
//   - Writing: a Writer takes RoCEv2 packets as goroce builds them (BTH to
//     ICRC) plus their endpoints, and synthesises Ethernet, IP and UDP
//     headers exactly as wire.Endpoints assumes them, so the ICRC still
//     verifies in the file and Wireshark decodes every packet as InfiniBand.
//
// Where it sits: below the device (rnic), next to package wire, which it
// uses. It owns no goroutines and no sockets. `goroce pcap` is its command.
package pcap
