package nccl

import (
	"fmt"
	"os"

	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/wire/pcap"
)

// observeFromEnv applies goroce's observation variables to the device a
// rank opens: GOROCE_TRACE (any value) prints the device's packet and QP
// trace to stderr; GOROCE_PCAP=PATH writes every packet it sends or
// receives to PATH.rankN.pcap. The returned function flushes the capture;
// call it after the device is closed.
func observeFromEnv(cfg *rnic.Config, rank int) (func() error, error) {
	if os.Getenv("GOROCE_TRACE") != "" {
		cfg.Trace = os.Stderr
	}
	path := os.Getenv("GOROCE_PCAP")
	if path == "" {
		return func() error { return nil }, nil
	}
	name := fmt.Sprintf("%s.rank%d.pcap", path, rank)
	w, closeFile, err := pcap.Create(name)
	if err != nil {
		return nil, fmt.Errorf("GOROCE_PCAP: %w", err)
	}
	cfg.Tap = w
	return closeFile, nil
}
