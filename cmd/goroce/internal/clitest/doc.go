// Package clitest holds what the tests of the goroce command packages
// share: running a command line in-process (Command, Goroce) or as a
// re-executed test binary (Main), loopback addresses for RNICs (LoopbackPair,
// TestBase), a server's "listening on port N" line (PortWriter), two
// processes of the goroce binary (RunTwoProcesses), and the side channels
// of the rxe captures in wire/testdata, the oracle of the pingpong and perf
// exchanges (ReadGoldenCapture, ReplayPeer, ShapeDiff, CheckPeerPackets).
//
// Only tests import it.
package clitest
