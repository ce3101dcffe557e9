//go:build unix

package ncclperf

import (
	"strconv"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// nccl-perf --device -np 2 all_reduce: no wrong element, and the PCIe
// bytes on the paths each way uses: NIC<->GPU only with GDR; GPU<->host
// and NIC<->host, equal, when staged. A ring AllReduce of S bytes on 2
// ranks sends S and receives S per rank.
func TestNcclPerfDevice(t *testing.T) {
	for _, gdr := range []string{"on", "off"} {
		code, out, errOut := clitest.Goroce(t, run, "nccl-perf", "all_reduce", "-np", "2", "-b", "64K", "-e", "256K", "-f", "4",
			"-n", "3", "-w", "1", "--device", "--gdr="+gdr, "--addr-base", clitest.TestBase())
		if code != cli.ExitOK {
			t.Fatalf("--gdr=%s: exit %d\nstdout:\n%s\nstderr:\n%s", gdr, code, out, errOut)
		}
		wantPath := map[string]string{"on": "path GDR", "off": "path staged"}[gdr]
		if !strings.Contains(out, wantPath) || !strings.Contains(out, "# Out of bounds values : 0 OK") {
			t.Errorf("--gdr=%s: no %q or not OK:\n%s", gdr, wantPath, out)
		}
		rows := 0
		for _, line := range strings.Split(out, "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			rows++
			f := strings.Fields(line)
			if len(f) != 16 || f[8] != "0" || f[12] != "0" {
				t.Fatalf("--gdr=%s: row %q: want 16 fields, #wrong 0", gdr, line)
			}
			size, _ := strconv.Atoi(f[0])
			var b [3]int
			for i := range b {
				b[i], _ = strconv.Atoi(f[13+i])
			}
			want := [3]int{0, 0, 2 * size}
			if gdr == "off" {
				want = [3]int{2 * size, 2 * size, 0}
			}
			if b != want {
				t.Errorf("--gdr=%s: row %q: PCIe bytes GPU-host, NIC-host, NIC-GPU %v, want %v", gdr, line, b, want)
			}
		}
		if rows != 2 {
			t.Errorf("--gdr=%s: %d rows:\n%s", gdr, rows, out)
		}
	}
}

// NCCL_NET_GDR_LEVEL is respected: PIX placement with level LOC stages.
func TestNcclPerfDeviceGDRLevel(t *testing.T) {
	t.Setenv("NCCL_NET_GDR_LEVEL", "LOC")
	code, out, errOut := clitest.Goroce(t, run, "nccl-perf", "all_reduce", "-np", "2", "-b", "4K", "-e", "4K",
		"-n", "1", "-w", "0", "--device", "--gdr=on", "--addr-base", clitest.TestBase())
	if code != cli.ExitOK || !strings.Contains(out, "path staged (GPU0-NIC0 distance PIX is beyond NCCL_NET_GDR_LEVEL LOC)") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestNcclPerfDeviceUsage(t *testing.T) {
	for _, args := range [][]string{
		{"nccl-perf", "all_reduce", "--gdr=off"},
		{"nccl-perf", "all_reduce", "--preset", "sys"},
		{"nccl-perf", "all_reduce", "--device", "--gdr=maybe"},
		{"nccl-perf", "all_reduce", "--device", "--preset", "loc"},
		{"nccl-perf", "sendrecv", "--device"},
	} {
		if code, _, errOut := clitest.Goroce(t, run, args...); code != cli.ExitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, cli.ExitUsage, errOut)
		}
	}
}
