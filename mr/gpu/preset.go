package gpu

// Preset builds a System with one GPU ("GPU0", memBytes of memory) and one
// NIC ("NIC0"), both on Gen4 x16 links, placed the ways apart:
//
//	PathPIX  GPU and NIC under one PCIe switch of socket 0
//	PathPXB  GPU and NIC under two switches below a common switch
//	PathPHB  GPU and NIC on two root ports of socket 0 (one host bridge)
//	PathSYS  GPU on socket 0, NIC on socket 1
//
// Other path types fail with ErrInvalidArgument.
func Preset(p PathType, memBytes int64, opts Options) (sys *System, dev *Device, nic NodeID, err error) {
	sys = NewSystem(opts)
	cpu0, err := sys.AddCPU("CPU0", UPI)
	if err != nil {
		return nil, nil, -1, err
	}
	gpuParent, nicParent := cpu0, cpu0
	switch p {
	case PathPIX:
		sw, _ := sys.AddSwitch("SW0", cpu0, Gen4x16)
		gpuParent, nicParent = sw, sw
	case PathPXB:
		top, _ := sys.AddSwitch("SW0", cpu0, Gen4x16)
		gpuParent, _ = sys.AddSwitch("SW1", top, Gen4x16)
		nicParent, _ = sys.AddSwitch("SW2", top, Gen4x16)
	case PathPHB:
	case PathSYS:
		nicParent, _ = sys.AddCPU("CPU1", UPI)
	default:
		return nil, nil, -1, errorf(ErrInvalidArgument, "Preset: no layout for %v", p)
	}
	if dev, err = sys.AddGPU("GPU0", gpuParent, Gen4x16, memBytes); err != nil {
		return nil, nil, -1, err
	}
	if nic, err = sys.AddNIC("NIC0", nicParent, Gen4x16); err != nil {
		return nil, nil, -1, err
	}
	return sys, dev, nic, nil
}
