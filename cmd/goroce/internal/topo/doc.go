// Package topo is `goroce topo` (Run): it prints the simulated GPU/NIC PCIe
// topology as nvidia-smi topo -m does. Build and ParsePreset make that
// topology for the other commands that simulate GPUs (nccl-perf --device,
// demo).
package topo
