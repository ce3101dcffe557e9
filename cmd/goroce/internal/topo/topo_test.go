package topo

import (
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/mr/gpu"
)

// run is the goroce command line with this package's command alone.
var run = clitest.Command("topo", Run)

// goroce topo prints, for each preset, nvidia-smi's matrix with the cells
// the layout implies, the legend and every link.
func TestTopoMatrix(t *testing.T) {
	for _, tc := range []struct {
		preset string
		rows   []string // the matrix rows with 2 GPUs, fields joined by one space
		links  int
	}{
		{"pix", []string{"GPU0 X PIX PIX 0", "GPU1 PIX X PIX 0", "NIC0 PIX PIX X 0"}, 5},
		{"pxb", []string{"GPU0 X PIX PXB 0", "GPU1 PIX X PXB 0", "NIC0 PXB PXB X 0"}, 7},
		{"phb", []string{"GPU0 X PHB PHB 0", "GPU1 PHB X PHB 0", "NIC0 PHB PHB X 0"}, 4},
		{"sys", []string{"GPU0 X PHB SYS 0", "GPU1 PHB X SYS 0", "NIC0 SYS SYS X 1"}, 5},
	} {
		code, out, errOut := clitest.Goroce(t, run, "topo", "--preset", tc.preset, "--gpus", "2")
		if code != cli.ExitOK {
			t.Fatalf("%s: exit %d: %s", tc.preset, code, errOut)
		}
		lines := strings.Split(out, "\n")
		if got := strings.Join(strings.Fields(lines[0]), " "); got != "GPU0 GPU1 NIC0 NUMA Affinity" {
			t.Errorf("%s: header %q", tc.preset, got)
		}
		for i, want := range tc.rows {
			if got := strings.Join(strings.Fields(lines[1+i]), " "); got != want {
				t.Errorf("%s: row %d is %q, want %q", tc.preset, i, got, want)
			}
		}
		for _, want := range []string{
			"  PIX  = Connection traversing at most a single PCIe bridge\n",
			"  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n",
			"NIC Legend:", "  NIC0: goroce0",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q in\n%s", tc.preset, want, out)
			}
		}
		if n := strings.Count(out, "Gen4 x16   31.5 GB/s  500ns"); n != tc.links-strings.Count(out, "SMP (UPI)") {
			t.Errorf("%s: %d Gen4 x16 links:\n%s", tc.preset, n, out)
		}
		if n := strings.Count(out, "GB/s  ") - 0; n != tc.links {
			t.Errorf("%s: %d links, want %d:\n%s", tc.preset, n, tc.links, out)
		}
	}
	if code, _, _ := clitest.Goroce(t, run, "topo", "--preset", "loc"); code != cli.ExitUsage {
		t.Errorf("--preset loc: exit %d", code)
	}
	if code, _, _ := clitest.Goroce(t, run, "topo", "--gpus", "0"); code != cli.ExitUsage {
		t.Errorf("--gpus 0: exit %d", code)
	}
}

// With one GPU, Build is gpu.Preset: the same GPU–NIC path.
func TestBuildTopoIsPreset(t *testing.T) {
	for _, p := range []gpu.PathType{gpu.PathPIX, gpu.PathPXB, gpu.PathPHB, gpu.PathSYS} {
		topo, err := Build(p, 1, 1<<20, gpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := topo.Sys.PathType(topo.GPUs[0].Node(), topo.NIC)
		sys, dev, nic, _ := gpu.Preset(p, 1<<20, gpu.Options{})
		want, _ := sys.PathType(dev.Node(), nic)
		if err != nil || got != want || got != p {
			t.Errorf("%v: Build path %v (%v), Preset %v", p, got, err, want)
		}
	}
}
