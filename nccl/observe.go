package nccl

import (
	"fmt"

	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire/pcap"
)

// openCapture makes cfg's device capture every packet it sends or
// receives to path.rankN.pcap (Options.Pcap, GOROCE_PCAP); "" captures
// nothing. The returned function flushes the capture; call it after the
// device is closed.
func openCapture(cfg *rnic.Config, path string, rank int) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	w, closeFile, err := pcap.Create(fmt.Sprintf("%s.rank%d.pcap", path, rank))
	if err != nil {
		return nil, fmt.Errorf("GOROCE_PCAP: %w", err)
	}
	cfg.Tap = w
	return closeFile, nil
}
