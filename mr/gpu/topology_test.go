package gpu

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/mr"
)

func TestPresetPathTypes(t *testing.T) {
	for _, want := range []PathType{PathPIX, PathPXB, PathPHB, PathSYS} {
		sys, d, nic, err := Preset(want, 1<<20, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := sys.PathType(d.Node(), nic)
		if err != nil || got != want {
			t.Errorf("Preset(%v): GPU-NIC path %v (%v)", want, got, err)
		}
		if back, _ := sys.PathType(nic, d.Node()); back != got {
			t.Errorf("Preset(%v): path not symmetric: %v", want, back)
		}
		if loc, _ := sys.PathType(nic, nic); loc != PathLOC {
			t.Errorf("NIC to itself: %v", loc)
		}
	}
	_, _, _, err := Preset(PathLOC, 1, Options{})
	wantErr(t, "Preset(LOC)", err, ErrInvalidArgument)
}

func TestParsePathType(t *testing.T) {
	for in, want := range map[string]PathType{"loc": PathLOC, "PIX": PathPIX, " pxb ": PathPXB, "PHB": PathPHB,
		"NODE": PathPHB, "SYS": PathSYS, "0": PathLOC, "4": PathSYS} {
		if got, err := ParsePathType(in); err != nil || got != want {
			t.Errorf("ParsePathType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	_, err := ParsePathType("NVL")
	wantErr(t, "ParsePathType(NVL)", err, ErrInvalidArgument)
}

func TestTopologyErrors(t *testing.T) {
	sys := NewSystem(Options{})
	cpu, _ := sys.AddCPU("CPU0", Link{})
	_, err := sys.AddSwitch("SW", cpu, Link{Gen: 7, Width: 16})
	wantErr(t, "Gen7", err, ErrInvalidArgument)
	_, err = sys.AddSwitch("SW", cpu, Link{Gen: 4, Width: 3})
	wantErr(t, "x3", err, ErrInvalidArgument)
	_, err = sys.AddNIC("NIC", 42, Gen4x16)
	wantErr(t, "unknown parent", err, ErrInvalidArgument)
	nic, _ := sys.AddNIC("NIC", cpu, Gen4x16)
	_, err = sys.AddGPU("GPU", nic, Gen4x16, 1)
	wantErr(t, "GPU under a NIC", err, ErrInvalidArgument)
	_, err = sys.AddNIC("NIC", cpu, Gen4x16)
	wantErr(t, "duplicate name", err, ErrInvalidArgument)
	_, err = sys.Transfer(nic, 99, 1)
	wantErr(t, "Transfer to unknown node", err, ErrInvalidArgument)
	_, err = sys.Transfer(nic, cpu, -1)
	wantErr(t, "negative Transfer", err, ErrInvalidArgument)
}

// Every path's bytes land on exactly the links of its route, per
// direction, and in its flow; the modelled time is the sum of latencies
// plus bytes over the slowest link.
func TestMeterLinksAndFlows(t *testing.T) {
	sys := NewSystem(Options{})
	cpu0, _ := sys.AddCPU("CPU0", UPI)
	cpu1, _ := sys.AddCPU("CPU1", UPI)
	sw, _ := sys.AddSwitch("SW0", cpu0, Link{Gen: 4, Width: 16, Latency: time.Microsecond})
	g0, _ := sys.AddGPU("GPU0", sw, Link{Gen: 4, Width: 16, Latency: time.Microsecond}, 1<<20)
	nic0, _ := sys.AddNIC("NIC0", sw, Link{Gen: 3, Width: 8, Latency: time.Microsecond})
	nic1, _ := sys.AddNIC("NIC1", cpu1, Gen4x16)
	g1, _ := sys.AddGPU("GPU1", cpu1, Gen4x16, 1<<20)
	m := sys.Meter()

	p, _ := g0.Alloc(1000)
	CopyHtoD(p, make([]byte, 1000))              // CPU0 -> SW0 -> GPU0
	CopyDtoH(make([]byte, 300), p)               // GPU0 -> SW0 -> CPU0
	d, err := sys.Transfer(g0.Node(), nic0, 500) // GDR: GPU0 -> SW0 -> NIC0
	if err != nil {
		t.Fatal(err)
	}
	// 2 µs of latency plus 500 bytes at Gen3 x8, the slower link.
	gen3x8 := 8e9 * 128 / 130 / 8 * 8
	if want := 2*time.Microsecond + time.Duration(500/gen3x8*1e9); d != want {
		t.Errorf("modelled time %v, want %v", d, want)
	}
	q, _ := g1.Alloc(1000)
	CopyDtoD(q, p) // GPU0 -> SW0 -> CPU0 -> SYS -> CPU1 -> GPU1
	sys.Transfer(cpu1, nic1, 70)

	for _, c := range []struct {
		node     NodeID
		up, down int64
	}{
		{sw, 300 + 1000, 1000},
		{g0.Node(), 300 + 500 + 1000, 1000},
		{nic0, 0, 500},
		{cpu0, 1000, 0},
		{cpu1, 0, 1000},
		{g1.Node(), 0, 1000},
		{nic1, 0, 70},
	} {
		if got := m.Link(c.node); got.Up != c.up || got.Down != c.down {
			t.Errorf("link %s: up %d down %d, want %d %d", got.Name, got.Up, got.Down, c.up, c.down)
		}
	}
	for f, want := range map[Flow][2]int64{FlowGPUHost: {1300, 2}, FlowNICGPU: {500, 1},
		FlowGPUGPU: {1000, 1}, FlowNICHost: {70, 1}, FlowOther: {0, 0}} {
		if got := m.Flow(f); got.Bytes != want[0] || got.Transfers != want[1] {
			t.Errorf("flow %v: %d bytes in %d, want %d in %d", f, got.Bytes, got.Transfers, want[0], want[1])
		}
	}
	if got := m.Flow(FlowNICGPU).Time; got != d {
		t.Errorf("NIC<->GPU time %v, want %v", got, d)
	}
	if n := len(m.Links()); n != 7 {
		t.Errorf("Links() has %d links, want 7", n)
	}
	m.Reset()
	if m.Link(g0.Node()).Up != 0 || m.Flow(FlowGPUHost).Bytes != 0 {
		t.Errorf("Reset left counts")
	}
}

// With Emulate a copy takes its modelled time (virtual time here).
func TestEmulatedTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys, d, _, _ := Preset(PathPIX, 1<<30, Options{Emulate: true})
		p, _ := d.Alloc(1 << 24)
		start := time.Now()
		if err := CopyHtoD(p, make([]byte, 1<<24)); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		want := sys.Meter().Flow(FlowGPUHost).Time
		// Two links (switch, GPU) of 500 ns, 16 MiB at 31.5 GB/s.
		formula := 2*DefaultLatency + time.Duration(float64(1<<24)/Gen4x16.BytesPerSecond()*1e9)
		if took != want || want != formula {
			t.Errorf("16 MiB HtoD over Gen4 x16 took %v, modelled %v, formula %v", took, want, formula)
		}
	})
}

// Device memory registers with the NIC only with peer memory, and the
// region is the allocation itself.
func TestRegisterDeviceMemory(t *testing.T) {
	_, d, _ := newGPU(t, 1<<20)
	p, _ := d.Alloc(4096)
	mem, err := d.Memory(p)
	if err != nil || !mem.DeviceMemory() || len(mem.Bytes()) != 4096 {
		t.Fatalf("Memory: %v", err)
	}
	off, _ := mr.NewTable(mr.Limits{})
	pd, _ := off.AllocPD()
	_, err = pd.RegMemory(mem, mr.AccessLocalWrite|mr.AccessRemoteWrite)
	if !errors.Is(err, mr.ErrDeviceMemory) {
		t.Errorf("RegMemory without peer memory: %v, want mr.ErrDeviceMemory", err)
	}
	on, _ := mr.NewTable(mr.Limits{PeerMemory: true})
	pd, _ = on.AllocPD()
	region, err := pd.RegMemory(mem, mr.AccessLocalWrite|mr.AccessRemoteWrite)
	if err != nil || !region.IsDeviceMemory() {
		t.Fatalf("RegMemory with peer memory: %v", err)
	}
	// What the NIC writes through the region is what a DtoH copy reads.
	dst, err := on.CheckRemote(pd, region.RKey(), region.Addr()+8, 3, mr.AccessRemoteWrite, 0)
	if err != nil {
		t.Fatal(err)
	}
	copy(dst, "GDR")
	got := make([]byte, 3)
	s, _ := p.Slice(8, 3)
	if CopyDtoH(got, s); string(got) != "GDR" {
		t.Errorf("device memory after NIC write: %q", got)
	}
}
