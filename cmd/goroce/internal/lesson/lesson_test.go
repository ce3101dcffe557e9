package lesson

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	pcapcmd "github.com/goroce/goroce/cmd/goroce/internal/pcap"
)

// run is the goroce command line with this package's command alone.
var run = clitest.Command("lesson", Run)

// lessonWants are, for each lesson, lines its --trace output must have:
// the packets and QP events the lesson stages, as regular expressions.
var lessonWants = map[string][]string{
	"send": {
		`A [0-9.]+ send 10\.0\.0\.1:4791 > 10\.0\.0\.2:4791 RC_SEND_ONLY qp=0x[0-9a-f]{6} psn=0x000a00 ackreq len=12`,
		`B [0-9.]+ send .* RC_ACKNOWLEDGE qp=0x[0-9a-f]{6} psn=0x000a00 aeth\(ACK msn=1\)`,
		`RC_SEND_FIRST .* psn=0x000a01 len=1024`,
		`RC_SEND_MIDDLE .* psn=0x000a02 len=1024`,
		`RC_SEND_LAST .* psn=0x000a03 ackreq len=452`,
		`B [0-9.]+ send .* RC_ACKNOWLEDGE .* psn=0x000a03 aeth\(ACK msn=2\)`,
	},
	"write": {
		`RC_RDMA_WRITE_FIRST .* psn=0x000a00 reth\(va=0x[0-9a-f]+ rkey=0x[0-9a-f]{8} len=2500\) len=1024`,
		`RC_RDMA_WRITE_LAST .* psn=0x000a02 ackreq len=452`,
		`-> B: no completion`,
		`RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE .* psn=0x000a03 ackreq reth\(.* len=16\) imm=0x00c0ffee len=16`,
		`B [0-9.]+ qp 0x[0-9a-f]{6}: completion wr_id=7 RECV_RDMA_WITH_IMM status="success" len=16`,
	},
	"read": {
		`A [0-9.]+ send .* RC_RDMA_READ_REQUEST .* psn=0x000a00 ackreq reth\(.* len=2500\)`,
		`B [0-9.]+ send .* RC_RDMA_READ_RESPONSE_FIRST .* psn=0x000a00 aeth\(ACK msn=1\) len=1024`,
		`B [0-9.]+ send .* RC_RDMA_READ_RESPONSE_MIDDLE .* psn=0x000a01 len=1024`,
		`B [0-9.]+ send .* RC_RDMA_READ_RESPONSE_LAST .* psn=0x000a02 aeth\(ACK msn=1\) len=452`,
		`RC_RDMA_READ_REQUEST .* psn=0x000a03 ackreq`,
		`RC_RDMA_READ_RESPONSE_ONLY .* psn=0x000a03 aeth\(ACK msn=2\) len=8`,
	},
	"atomic": {
		`RC_FETCH_ADD .* psn=0x000a00 ackreq atomic\(va=0x[0-9a-f]+ rkey=0x[0-9a-f]{8} add=0x2\)`,
		`RC_ATOMIC_ACKNOWLEDGE .* psn=0x000a00 aeth\(ACK msn=1\) orig=0x28`,
		`RC_COMPARE_SWAP .* swap=0x7 compare=0x2a\)`,
		`RC_ATOMIC_ACKNOWLEDGE .* psn=0x000a02 aeth\(ACK msn=3\) orig=0x7`,
		`B's counter now holds 7`,
	},
	"lost-packet": {
		`S [0-9.]+ drop .* RC_SEND_MIDDLE .* psn=0x000a01`,
		`B [0-9.]+ qp 0x[0-9a-f]{6}: psn 0x000a02 ahead of expected 0x000a01: NAK sequence error`,
		`RC_ACKNOWLEDGE .* psn=0x000a01 aeth\(NAK_PSN_SEQ_ERR msn=0\)`,
		`A [0-9.]+ qp 0x[0-9a-f]{6}: NAK PSN sequence error: go back to psn 0x000a01`,
		`S [0-9.]+ drop .* RC_SEND_LAST .* psn=0x000a05 ackreq`,
		`A [0-9.]+ qp 0x[0-9a-f]{6}: ACK timeout: go back to psn 0x000a03 \(6 retries left\)`,
		`S [0-9.]+ drop 10\.0\.0\.2:4791 > 10\.0\.0\.1:4791 RC_ACKNOWLEDGE .* psn=0x000a06`,
		`ACK timeout: go back to psn 0x000a06`,
		`B's counters: out_of_seq_request=1 duplicate_request=3`,
	},
	"rnr": {
		`B [0-9.]+ qp 0x[0-9a-f]{6}: psn 0x000a00: no receive WQE posted: RNR NAK`,
		`RC_ACKNOWLEDGE .* psn=0x000a00 aeth\(RNR_NAK timer=20 msn=0\)`,
		`A [0-9.]+ qp 0x[0-9a-f]{6}: RNR NAK psn 0x000a00: wait 10.24ms, then resend`,
		`RNR wait over: resend from psn 0x000a00`,
		`completion wr_id=2 SEND status="RNR retry counter exceeded"`,
		`A's QP 0x[0-9a-f]{6} is now ERR`,
	},
	"access-error": {
		`RC_RDMA_WRITE_ONLY .* psn=0x000a00 ackreq reth\(`,
		`B [0-9.]+ qp 0x[0-9a-f]{6}: psn 0x000a00: .*invalid key: NAK_REMOTE_ACCESS_ERROR, QP to ERR`,
		`RC_ACKNOWLEDGE .* psn=0x000a00 aeth\(NAK_REMOTE_ACCESS_ERROR msn=0\)`,
		`completion wr_id=1 RDMA_WRITE status="remote access error"`,
		`completion wr_id=2 SEND status="Work Request Flushed Error"`,
		`B: async event IBV_EVENT_QP_ACCESS_ERR`,
	},
	"uc-loss": {
		`S [0-9.]+ drop .* UC_SEND_LAST .* psn=0x000a03`,
		`B [0-9.]+ recv .* UC_SEND_FIRST .* psn=0x000a04`,
		`B's receive wr_id 2 holds message 3`,
		`B's counters: uc_dropped_msgs=1`,
	},
	"ud": {
		`A [0-9.]+ send 10\.0\.0\.1:4791 > 10\.0\.0\.2:4791 UD_SEND_ONLY qp=0x[0-9a-f]{6} psn=0x000a00 deth\(qkey=0x11111111 srcqp=0x[0-9a-f]{6}\) len=14`,
		`A [0-9.]+ send 10\.0\.0\.1:4791 > 10\.0\.0\.3:4791 UD_SEND_ONLY .* psn=0x000a01 deth\(qkey=0x11111111`,
		`B: 54 bytes = 40 of GRH \+ "datagram for B"`,
		`deth\(qkey=0x22222222`,
		`exceeds the path MTU 1024`,
		`B's counters: drop_bad_qkey=1`,
	},
}

// TestLessons plays every lesson with --trace in virtual time, where the
// real-time switch and the devices' timers run on the bubble's clock, and
// checks that each stages what it says: its packets, NAKs, timeouts and
// completions. synctest.Test also fails if a lesson leaves a goroutine
// behind.
func TestLessons(t *testing.T) {
	for _, ls := range lessons {
		t.Run(ls.name, func(t *testing.T) {
			wants, ok := lessonWants[ls.name]
			if !ok {
				t.Fatalf("no expectations for lesson %s", ls.name)
			}
			synctest.Test(t, func(t *testing.T) {
				code, out, errOut := clitest.Goroce(t, run, "lesson", ls.name, "--trace")
				if code != cli.ExitOK || errOut != "" {
					t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
				}
				for _, w := range wants {
					if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
						t.Errorf("no line matches %s", w)
					}
				}
				if !strings.Contains(out, "What to look for (docs/course/"+ls.chapter+"):") {
					t.Errorf("no closing explanation")
				}
				if t.Failed() {
					t.Logf("output:\n%s", out)
				}
			})
		})
	}
}

// Without --trace a lesson tells the story without packets.
func TestLessonWithoutTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		code, out, _ := clitest.Goroce(t, run, "lesson", "send")
		if code != cli.ExitOK || strings.Contains(out, "RC_SEND_ONLY qp=") ||
			!strings.Contains(out, "-> B: completion wr_id=1 RECV \"success\", 12 bytes") ||
			!strings.Contains(out, "run with --trace") {
			t.Errorf("exit %d\n%s", code, out)
		}
	})
}

// --pcap captures device A's side of the conversation, which goroce pcap
// decodes with every ICRC intact.
func TestLessonPcap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "send.pcap")
	synctest.Test(t, func(t *testing.T) {
		if code, out, errOut := clitest.Goroce(t, run, "lesson", "send", "--pcap", path); code != cli.ExitOK {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
	})
	code, out, _ := clitest.Goroce(t, clitest.Command("pcap", pcapcmd.Run), "pcap", path)
	// A sent SEND_ONLY, FIRST, MIDDLE, LAST and received two ACKs.
	if code != cli.ExitOK || !strings.Contains(out, "summary: packets=6 icrc_ok=6 icrc_bad=0 malformed=0") ||
		strings.Count(out, "RC_ACKNOWLEDGE") != 2 {
		t.Errorf("exit %d\n%s", code, out)
	}
}

func TestLessonUsage(t *testing.T) {
	code, out, _ := clitest.Goroce(t, run, "lesson", "-h")
	if code != cli.ExitOK {
		t.Errorf("-h: exit %d", code)
	}
	for _, ls := range lessons {
		if !strings.Contains(out, "  "+ls.name+" ") {
			t.Errorf("-h does not list %s:\n%s", ls.name, out)
		}
	}
	for _, args := range [][]string{{"lesson"}, {"lesson", "send", "read"}, {"lesson", "sned"}, {"lesson", "send", "--bogus"}} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != cli.ExitUsage || errOut.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
	}
}

// Every lesson names the chapter that explains it, and the chapter runs
// the lesson.
func TestLessonChapters(t *testing.T) {
	for _, ls := range lessons {
		text, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "course", ls.chapter))
		if err != nil {
			t.Errorf("lesson %s: %v", ls.name, err)
			continue
		}
		if !strings.Contains(string(text), "$ goroce lesson "+ls.name+" ") {
			t.Errorf("lesson %s: docs/course/%s does not run it", ls.name, ls.chapter)
		}
	}
}
