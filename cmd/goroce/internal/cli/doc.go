// Package cli holds what the goroce commands share, so that each command
// package (cmd/goroce/internal/NAME) keeps only its own names:
//
//   - the exit statuses (ExitOK, ExitFail, ExitUsage) and the flag
//     conventions: NewFlagSet and ParseFlags, the verbs tools' short and
//     long flag names (IntFlag), --addr (AddrFlag), getopt's HOST among
//     the flags (ParseWithHosts);
//   - the TCP side channel of the two-process tools (AcceptPeer,
//     DialRetry, RandomPSN);
//   - ObserveFlags, the --trace, --pcap, --metrics-addr and --ui-addr
//     flags of the commands that open a device, with the metrics server
//     (StartMetrics) and the live web view (StartUI, StartDeviceUI) they
//     start;
//   - RanksProcs, the GOMAXPROCS of each of n ranks on one host.
//
// Where it sits: below the command packages, above the public packages
// (rnic, cmd/goroce/internal/ui, wire); it knows no command.
package cli
