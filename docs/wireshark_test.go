package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goroce/goroce/bench/testenv"
)

// TestWiresharkReadsTheLessonCapture runs chapter 1's tshark commands, as
// the chapter writes them, on the capture of `goroce lesson send`: tshark
// (Wireshark's dissectors, not goroce's) must decode every packet as RoCE
// and find none malformed (issue 25 item 12: the first SEND used to show
// as "[Malformed Packet: RPCoRDMA]"), with the chapter's advice applied.
func TestWiresharkReadsTheLessonCapture(t *testing.T) {
	tshark := testenv.LookPath(t, "tshark", "tshark")
	chapter, err := os.ReadFile(filepath.Join("course", "01-trace.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := regexp.MustCompile(`(?m)^tshark -r send\.pcap( [^#\n]*?)\s*(#.*)?$`).FindAllStringSubmatch(string(chapter), -1)
	if len(cmds) == 0 {
		t.Fatal("chapter 1 shows no `tshark -r send.pcap ...` line")
	}
	bin := buildGoroce(t)
	pcap := filepath.Join(t.TempDir(), "send.pcap")
	if out, err := exec.Command(bin, "lesson", "send", "--pcap", pcap).CombinedOutput(); err != nil {
		t.Fatalf("goroce lesson send --pcap: %v\n%s", err, out)
	}
	for _, c := range cmds {
		args := append([]string{"-r", pcap}, strings.Fields(c[1])...)
		out, err := exec.Command(tshark, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if strings.Contains(string(out), "Malformed") {
			t.Errorf("tshark%s marks a packet malformed:\n%s", c[1], out)
		}
		if !strings.Contains(c[1], "-V") {
			// One line per packet: six, each RoCE.
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if !strings.HasPrefix(l, "Running as user") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 6 {
				t.Errorf("tshark%s: %d lines, want 6:\n%s", c[1], len(lines), out)
			}
			for _, l := range lines {
				if !strings.Contains(l, "RRoCE") {
					t.Errorf("not decoded as RoCE: %s", l)
				}
			}
		}
	}
}
