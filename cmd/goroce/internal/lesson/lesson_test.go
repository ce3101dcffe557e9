package lesson

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	pcapcmd "github.com/goroce/goroce/cmd/goroce/internal/pcap"
	"github.com/goroce/goroce/rnic/clock"
	"github.com/goroce/goroce/wire/pcap"
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

// TestLessons plays every lesson with --trace and checks that each
// stages what it says: its packets, NAKs, timeouts and completions. The
// lesson runs on its own virtual clock; synctest.Test is there to fail if
// a lesson leaves a goroutine behind.
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

// randomRE finds what is random by design in a lesson's output, QPNs, keys
// and the buffers' addresses, as shown_test.go in docs names them.
var randomRE = regexp.MustCompile(`\b(qp[= ]|QPN? |srcqp=|rkey(?:[= ]| is )|lkey=|va=)(0x[0-9a-f]+)`)

// unrandom replaces each random value in out by its rank of first
// appearance: two runs that differ only in those read the same.
func unrandom(out string) string {
	seen := make(map[string]int)
	return randomRE.ReplaceAllStringFunc(out, func(m string) string {
		sub := randomRE.FindStringSubmatch(m)
		n, ok := seen[sub[2]]
		if !ok {
			n = len(seen)
			seen[sub[2]] = n
		}
		return fmt.Sprintf("%s#%d", sub[1], n)
	})
}

// TestLessonsRepeat plays every lesson twice, outside any synctest bubble,
// and requires the same output, byte for byte with every timestamp, once
// the QPNs, keys and addresses (random, as on real RNICs) are numbered in
// the order they appear: the lab's clock, not the machine, decides what
// happens when. A lesson whose script raced a timer in real time (B posts
// its receive between two RNR retries) would print another trace, or
// another count, on a loaded machine.
func TestLessonsRepeat(t *testing.T) {
	for _, ls := range lessons {
		t.Run(ls.name, func(t *testing.T) {
			var outs [2]string
			for i := range outs {
				code, out, errOut := clitest.Goroce(t, run, "lesson", ls.name, "--trace")
				if code != cli.ExitOK || errOut != "" {
					t.Fatalf("run %d: exit %d\nstdout:\n%s\nstderr:\n%s", i+1, code, out, errOut)
				}
				outs[i] = unrandom(out)
			}
			if outs[0] != outs[1] {
				a, b := strings.Split(outs[0], "\n"), strings.Split(outs[1], "\n")
				for i := 0; i < min(len(a), len(b)); i++ {
					if a[i] != b[i] {
						t.Fatalf("the two runs differ from line %d on:\n\t%s\n\t%s", i+1, a[i], b[i])
					}
				}
				t.Fatalf("one run printed %d lines, the other %d", len(a), len(b))
			}
		})
	}
}

// traceLineRE is a trace line of device A or B: its name, its time and
// what happened.
var traceLineRE = regexp.MustCompile(`(?m)^([AB]) ([0-9]+\.[0-9]{6}) (.*)$`)

// traceTimes returns the times, in microseconds, of the trace lines of
// device who whose event matches event, in order.
func traceTimes(out, who string, event *regexp.Regexp) []int64 {
	var times []int64
	for _, m := range traceLineRE.FindAllStringSubmatch(out, -1) {
		if m[1] == who && event.MatchString(m[3]) {
			us, _ := strconv.ParseInt(strings.ReplaceAll(m[2], ".", ""), 10, 64)
			times = append(times, us)
		}
	}
	return times
}

// The timers of the lessons fire exactly when the IBTA says, as the trace
// shows them: an RNR wait of timer code 20 is 10.24 ms after the RNR NAK
// arrived; a local ACK timeout of 14 is 4.096 µs × 2^14 = 67.108864 ms
// after the request went out (the trace prints microseconds, so ±1).
func TestLessonTimersExact(t *testing.T) {
	code, out, errOut := clitest.Goroce(t, run, "lesson", "rnr", "--trace")
	if code != cli.ExitOK {
		t.Fatalf("rnr: exit %d\n%s\n%s", code, out, errOut)
	}
	naks := traceTimes(out, "A", regexp.MustCompile(`RNR NAK psn 0x000a00: wait 10\.24ms`))
	overs := traceTimes(out, "A", regexp.MustCompile(`RNR wait over`))
	// Two waits in scene 1; one in scene 2, whose second RNR NAK is fatal.
	if len(naks) != 3 || len(overs) != 3 {
		t.Fatalf("rnr: %d RNR waits begun and %d over, want 3 and 3\n%s", len(naks), len(overs), out)
	}
	for i, over := range overs {
		if d := over - naks[i]; d != 10240 {
			t.Errorf("rnr: RNR wait %d lasted %d µs, want 10240\n%s", i+1, d, out)
		}
	}

	code, out, errOut = clitest.Goroce(t, run, "lesson", "lost-packet", "--trace")
	if code != cli.ExitOK {
		t.Fatalf("lost-packet: exit %d\n%s\n%s", code, out, errOut)
	}
	// Scene 3: the SEND_ONLY whose ACK the switch loses, then the timeout.
	sent := traceTimes(out, "A", regexp.MustCompile(`^send .* RC_SEND_ONLY .* psn=0x000a06 `))
	fired := traceTimes(out, "A", regexp.MustCompile(`ACK timeout: go back to psn 0x000a06`))
	if len(sent) != 2 || len(fired) != 1 {
		t.Fatalf("lost-packet: %d sends of psn 0x000a06 and %d timeouts, want 2 and 1\n%s", len(sent), len(fired), out)
	}
	if d := fired[0] - sent[0]; d < 67108 || d > 67110 {
		t.Errorf("lost-packet: the ACK timeout fired %d µs after the send, want 67108.864 ± 1\n%s", d, out)
	}
}

// A lesson whose context ends (Ctrl-C, or its time in real time is up)
// stops at its next wait, says so, and leaves nothing running.
func TestLessonInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"lesson", "rnr"}, &out, &errOut)
		if code != cli.ExitFail || !strings.Contains(errOut.String(), "context canceled") ||
			!strings.Contains(errOut.String(), "counter rcvd_rnr_err stayed at 0, want 2") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
		}
	})
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
// decodes with every ICRC intact, stamped with the lab's virtual time:
// from clock.Epoch on, each packet at the time the trace gives it.
func TestLessonPcap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "send.pcap")
	var trace string
	synctest.Test(t, func(t *testing.T) {
		code, out, errOut := clitest.Goroce(t, run, "lesson", "send", "--trace", "--pcap", path)
		if code != cli.ExitOK {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		trace = out
	})
	code, out, _ := clitest.Goroce(t, clitest.Command("pcap", pcapcmd.Run), "pcap", path)
	// A sent SEND_ONLY, FIRST, MIDDLE, LAST and received two ACKs.
	if code != cli.ExitOK || !strings.Contains(out, "summary: packets=6 icrc_ok=6 icrc_bad=0 malformed=0") ||
		strings.Count(out, "RC_ACKNOWLEDGE") != 2 {
		t.Errorf("exit %d\n%s", code, out)
	}
	recs, err := pcap.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	times := traceTimes(trace, "A", regexp.MustCompile(`^(send|recv) `))
	if len(recs) != len(times) {
		t.Fatalf("%d packets in the capture, %d send and recv lines of A in the trace\n%s", len(recs), len(times), trace)
	}
	if !recs[0].Time.Equal(clock.Epoch) {
		t.Errorf("the first packet is stamped %v, want the lab clock's start %v", recs[0].Time, clock.Epoch)
	}
	for i, rec := range recs {
		if us := rec.Time.Sub(clock.Epoch).Round(time.Microsecond).Microseconds(); us != times[i] {
			t.Errorf("packet %d is stamped %d µs after the start, the trace says %d", i+1, us, times[i])
		}
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
