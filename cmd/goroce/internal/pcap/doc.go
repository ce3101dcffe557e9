// Package pcap is `goroce pcap`: it decodes the RoCEv2 packets of pcap and
// pcapng captures, one line (or JSON object) each, and checks their ICRC
// (Run).
package pcap
