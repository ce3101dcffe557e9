package docs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Shown output. A chapter's ```text block that shows what the commands
// print is marked so on the line before its fence, and checked against a
// fresh run, so that the course cannot go stale:
//
//	<!-- output -->
//	```text
//	A 0.001995 send 10.0.0.1:4791 > 10.0.0.2:4791 RC_SEND_ONLY qp=0xf53bc2 psn=0x000a00 ackreq len=12
//	...
//	```
//
// The block is compared with the output of the checked blocks between it
// and the previous output block (if there are none, with that block's
// output again, for a line shown a second time to be taken apart). Lines
// of "..." stand for lines left out; each run of lines between them must
// be consecutive lines of the output, the runs in order. "<!-- output: in
// any order -->" asks only that every line shown be a distinct line of the
// output, for the traces of processes that run at once, whose lines
// interleave differently from run to run. "numbers vary" (after
// "output:" or "output: in any order,") lets any number stand for any
// other, for counts that differ from run to run (a simulation whose
// events race, the message counts of concurrent ranks): the lines, their
// words and the QPN and PSN relations are still checked. Every other
// ```text block says
// why it is not output, "<!-- not output: a diagram -->", so that no
// output goes unchecked by oversight.
//
// The comparison ignores blank lines and the width of white space, and
// only what legitimately changes from run to run:
//
//   - numbers with a decimal point: timestamps, times, rates (a run may
//     print such a number without decimals); except in the output of
//     commands that print the same numbers on every run, where they must
//     be as shown: `goroce lesson`, whose lab runs in virtual time, and
//     `goroce pcap`, which prints the times a capture file holds (see
//     repeatable);
//   - QPNs, keys and virtual addresses (the hex number after "qp=",
//     "qp ", "QP ", "QPN ", "srcqp=", "rkey=", "rkey ", "rkey is ", "lkey=",
//     "va="),
//     which are random: the shown value stands for whatever the run
//     printed, the same run value every time it is shown, and two shown
//     values for two run values;
//   - PSNs ("psn=", "psn ", "PSN ", "expected "), whose start is random in
//     some commands: a shown PSN within 256 of another shown one must be
//     the same distance from that one's run value.
//
// Everything else must be as shown: opcode names, flags, lengths, MSNs,
// counters, the lines themselves. A lost or added line, or a renamed
// opcode, fails the test.

// repeatable reports whether every command of a checked block prints the
// same numbers on every run (QPNs, keys and addresses aside, which are
// random): goroce lesson and goroce pcap. A shown block of their output
// must show their decimal numbers, the trace's timestamps among them, as
// they come out.
func repeatable(b checkedBlock) bool {
	for _, c := range b.commands {
		if c.program != "goroce" || len(c.args) == 0 || c.args[0] != "lesson" && c.args[0] != "pcap" {
			return false
		}
	}
	return true
}

// A numbersRule says which numbers of a shown line may differ from the
// run's.
type numbersRule int

const (
	decimalsVary numbersRule = iota // numbers with a decimal point (the default)
	allVary                         // every number: "numbers vary"
	noneVary                        // none: the output of repeatable commands
)

// An outputMode says how a ```text block relates to the commands' output.
type outputMode int

const (
	notOutput outputMode = iota
	inOrder              // <!-- output -->
	anyOrder             // <!-- output: in any order -->
)

// A shownBlock is a ```text block marked as output.
type shownBlock struct {
	line  int // of the opening fence
	mode  outputMode
	loose bool     // numbers vary: any number stands for any number
	lines []string // as shown, blank lines dropped; "..." kept
}

// markRE is the comment before a ```text block.
var markRE = regexp.MustCompile(`^<!-- (output(: in any order)?(,? numbers vary)?|output: numbers vary|not output: .+) -->$`)

// textMode reads the comment on the line before a ```text fence.
func textMode(prev string) (mode outputMode, loose bool, err error) {
	m := markRE.FindStringSubmatch(prev)
	switch {
	case m == nil:
		return 0, false, fmt.Errorf("a ```text block needs <!-- output -->, <!-- output: in any order -->, " +
			"<!-- output: numbers vary --> (or both) or <!-- not output: WHY --> on the line before it")
	case strings.HasPrefix(m[1], "not output"):
		return notOutput, false, nil
	}
	loose = strings.Contains(m[1], "numbers vary")
	if strings.Contains(m[1], "in any order") {
		return anyOrder, loose, nil
	}
	return inOrder, loose, nil
}

// hexRE finds the hex numbers that vary from run to run: group 1 a QPN,
// key or address, group 2 a PSN.
var hexRE = regexp.MustCompile(`\b(?:(?:qp[= ]|QPN? |srcqp=|rkey(?:[= ]| is )|lkey=|va=)(0x[0-9a-f]+)|(?:psn[= ]|PSN |expected )(0x[0-9a-f]+))`)

// numberRE finds numbers, with their sign, dotted ones included: those
// with one dot are decimal numbers, those with more something else
// (10.0.0.1).
var numberRE = regexp.MustCompile(`-?(?:[0-9][0-9.]*[0-9]|[0-9])`)

// A token is one varying part of a line.
type token struct {
	kind  byte   // 'k' QPN, key or address; 'p' PSN; 'n' number
	value uint64 // of a 'k' or 'p'
	text  string // of an 'n'
}

// A shape is a line with its varying parts taken out: the text around them
// and the parts.
type shape struct {
	text   string // with \x00 for each part, white space collapsed
	tokens []token
}

// shapeOf takes a line apart: the hex numbers first, then the numbers in
// what is left.
func shapeOf(line string) shape {
	line = strings.Join(strings.Fields(line), " ")
	var s shape
	var b strings.Builder
	last := 0
	for _, m := range hexRE.FindAllStringSubmatchIndex(line, -1) {
		for g, kind := range []byte{'k', 'p'} {
			lo, hi := m[2+2*g], m[3+2*g]
			if lo < 0 {
				continue
			}
			v, _ := strconv.ParseUint(line[lo+2:hi], 16, 64)
			b.WriteString(line[last:lo])
			b.WriteByte(0)
			last = hi
			s.tokens = append(s.tokens, token{kind: kind, value: v})
		}
	}
	b.WriteString(line[last:])
	s.text = numberRE.ReplaceAllStringFunc(b.String(), func(n string) string {
		if strings.Count(n, ".") > 1 {
			return n
		}
		s.tokens = append(s.tokens, token{kind: 'n', text: n})
		return "\x00"
	})
	return s
}

// bindings map the values shown to the values of the run.
type bindings struct {
	keys    map[uint64]uint64 // shown → run
	keysRev map[uint64]uint64 // run → shown
	psns    map[uint64]uint64 // shown → run
}

func newBindings() *bindings {
	return &bindings{keys: map[uint64]uint64{}, keysRev: map[uint64]uint64{}, psns: map[uint64]uint64{}}
}

func (b *bindings) clone() *bindings {
	c := newBindings()
	for k, v := range b.keys {
		c.keys[k] = v
	}
	for k, v := range b.keysRev {
		c.keysRev[k] = v
	}
	for k, v := range b.psns {
		c.psns[k] = v
	}
	return c
}

// psnNear is how close two shown PSNs must be for the run's to keep their
// distance: the PSNs of one QP's messages in a chapter.
const psnNear = 256

// bind reports whether shown value s can stand for run value r, and if so
// records it.
func (b *bindings) bind(kind byte, s, r uint64) bool {
	switch kind {
	case 'k':
		rs, ok1 := b.keys[s]
		sr, ok2 := b.keysRev[r]
		if ok1 || ok2 {
			return ok1 && ok2 && rs == r && sr == s
		}
		b.keys[s], b.keysRev[r] = r, s
		return true
	case 'p':
		if v, ok := b.psns[s]; ok {
			return v == r
		}
		for s2, r2 := range b.psns {
			d := (s - s2) & 0xffffff
			if d < psnNear || d > 0x1000000-psnNear {
				if (r2+d)&0xffffff != r {
					return false
				}
			}
		}
		b.psns[s] = r
		return true
	}
	return false
}

// match reports whether run line r is shown line s under b, recording the
// new bindings in b.
func (b *bindings) match(s, r shape) bool {
	return b.matchNumbers(s, r, decimalsVary)
}

// matchNumbers is match, with the numbers that may differ given by rule.
func (b *bindings) matchNumbers(s, r shape, rule numbersRule) bool {
	if s.text != r.text || len(s.tokens) != len(r.tokens) {
		return false
	}
	for i, t := range s.tokens {
		rt := r.tokens[i]
		switch {
		case t.kind != rt.kind:
			return false
		case t.kind == 'n':
			// A decimal number shown stands for any number (nccl-tests
			// prints a time of 42322 us without decimals); a whole
			// number must be as shown.
			vary := rule == allVary || rule == decimalsVary && strings.Contains(t.text, ".")
			if !vary && t.text != rt.text {
				return false
			}
		case !b.bind(t.kind, t.value, rt.value):
			return false
		}
	}
	return true
}

// shapesOf takes every non-blank line of text apart.
func shapesOf(lines []string) []shape {
	var out []shape
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			out = append(out, shapeOf(l))
		}
	}
	return out
}

// checkShown compares a shown block with the output of a run and returns
// what does not match ("" if all does). exact says that the commands
// print the same numbers every run (repeatable): then decimal numbers
// must be as shown too, unless the block says "numbers vary".
func checkShown(sb shownBlock, output string, exact bool) string {
	run := shapesOf(strings.Split(output, "\n"))
	b := newBindings()
	rule := decimalsVary
	switch {
	case sb.loose:
		rule = allVary
	case exact:
		rule = noneVary
	}
	if sb.mode == anyOrder {
		var shown []string
		for _, l := range sb.lines {
			if l != "..." {
				shown = append(shown, l)
			}
		}
		a := &anyMatcher{run: run, shown: shapesOf(shown), used: make([]bool, len(run)), budget: 1 << 20, rule: rule}
		if a.place(0, b) {
			return ""
		}
		return fmt.Sprintf("the run printed no line like\n\t%s\n(after lines like the %d shown before it)", shown[a.worst], a.worst)
	}
	// In order: the runs of lines between "..." at places that fit, each
	// after the one before, trying the earliest places first.
	var segs [][]shape
	var texts [][]string
	cur, text := []shape{}, []string{}
	for _, l := range sb.lines {
		if l == "..." {
			segs, texts = append(segs, cur), append(texts, text)
			cur, text = []shape{}, []string{}
			continue
		}
		cur, text = append(cur, shapeOf(l)), append(text, l)
	}
	segs, texts = append(segs, cur), append(texts, text)
	m := &matcher{run: run, segs: segs, budget: 1 << 20, rule: rule}
	if m.place(0, 0, b) {
		return ""
	}
	seg := texts[m.worstSeg]
	msg := fmt.Sprintf("the run printed no consecutive lines like\n\t%s", strings.Join(seg, "\n\t"))
	if m.worstLen < len(seg) {
		msg += fmt.Sprintf("\nat best %d of them, then it printed\n\t%s\nfor\n\t%s",
			m.worstLen, runLine(output, m.worstAt+m.worstLen), seg[m.worstLen])
	}
	return msg
}

// An anyMatcher finds distinct lines of the run for the lines shown, in
// any order.
type anyMatcher struct {
	run    []shape
	shown  []shape
	used   []bool      // run lines taken
	budget int         // line comparisons left
	rule   numbersRule // which numbers may differ
	worst  int         // the furthest shown line that found none, for the message
}

// place reports whether shown[i:] find lines under b.
func (a *anyMatcher) place(i int, b *bindings) bool {
	if i == len(a.shown) {
		return true
	}
	a.worst = max(a.worst, i)
	for j, r := range a.run {
		if a.budget <= 0 {
			return false
		}
		a.budget--
		if a.used[j] {
			continue
		}
		if c := b.clone(); c.matchNumbers(a.shown[i], r, a.rule) {
			a.used[j] = true
			if a.place(i+1, c) {
				return true
			}
			a.used[j] = false
		}
	}
	return false
}

// A matcher places the runs of a shown block in the output of a run.
type matcher struct {
	run    []shape
	segs   [][]shape
	budget int         // line comparisons left, against a search without end
	rule   numbersRule // which numbers may differ
	// The furthest run of lines that did not fit, for the message: its
	// index, and where most of its lines fit and how many.
	worstSeg, worstAt, worstLen int
}

// place reports whether runs segs[i:] fit in run[at:] under b.
func (m *matcher) place(i, at int, b *bindings) bool {
	for i < len(m.segs) && len(m.segs[i]) == 0 {
		i++
	}
	if i == len(m.segs) {
		return true
	}
	seg := m.segs[i]
	if i > m.worstSeg {
		m.worstSeg, m.worstAt, m.worstLen = i, at, -1
	}
	for start := at; start+len(seg) <= len(m.run) && m.budget > 0; start++ {
		c := b.clone()
		n := 0
		for n < len(seg) && c.matchNumbers(seg[n], m.run[start+n], m.rule) {
			n++
		}
		m.budget -= n + 1
		if i == m.worstSeg && n > m.worstLen && n < len(seg) {
			m.worstAt, m.worstLen = start, n
		}
		if n == len(seg) && m.place(i+1, start+n, c) {
			return true
		}
	}
	if i == m.worstSeg && m.worstLen < 0 {
		m.worstLen = 0
	}
	return false
}

// runLine returns the i-th non-blank line of output.
func runLine(output string, i int) string {
	for _, l := range strings.Split(output, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if i == 0 {
			return l
		}
		i--
	}
	return "(the end of the output)"
}

// TestCheckShown checks the comparison on a lesson's output and on the
// changes it must catch.
func TestCheckShown(t *testing.T) {
	run := `== A SENDs 12 bytes (wr_id 1)
A 0.001995 send 10.0.0.1:4791 > 10.0.0.2:4791 RC_SEND_ONLY qp=0x11aa22 psn=0x000a00 ackreq len=12
B 0.002124 recv 10.0.0.1:4791 > 10.0.0.2:4791 RC_SEND_ONLY qp=0x11aa22 psn=0x000a00 ackreq len=12
B 0.002225 send 10.0.0.2:4791 > 10.0.0.1:4791 RC_ACKNOWLEDGE qp=0x33bb44 psn=0x000a00 aeth(ACK msn=1)
A 0.002260 recv 10.0.0.2:4791 > 10.0.0.1:4791 RC_ACKNOWLEDGE qp=0x33bb44 psn=0x000a00 aeth(ACK msn=1)
A 0.002345 send 10.0.0.1:4791 > 10.0.0.2:4791 RC_SEND_FIRST qp=0x11aa22 psn=0x000a01 len=1024
A 0.002349 send 10.0.0.1:4791 > 10.0.0.2:4791 RC_SEND_LAST qp=0x11aa22 psn=0x000a02 ackreq len=452
B 0.002392 send 10.0.0.2:4791 > 10.0.0.1:4791 RC_ACKNOWLEDGE qp=0x33bb44 psn=0x000a02 aeth(ACK msn=2)
`
	// As a chapter shows it: other QPNs and times, the first PSN elsewhere.
	shown := strings.Split(`== A SENDs 12 bytes (wr_id 1)
A 1.5 send 10.0.0.1:4791 > 10.0.0.2:4791 RC_SEND_ONLY qp=0xf53bc2 psn=0x100000 ackreq len=12
...
B 0.1 send 10.0.0.2:4791 > 10.0.0.1:4791 RC_ACKNOWLEDGE qp=0xcdacdb psn=0x100000 aeth(ACK msn=1)
A 0.2 recv 10.0.0.2:4791 > 10.0.0.1:4791 RC_ACKNOWLEDGE qp=0xcdacdb psn=0x100000 aeth(ACK msn=1)
A 0.3 send 10.0.0.1:4791 > 10.0.0.2:4791 RC_SEND_FIRST qp=0xf53bc2 psn=0x100001 len=1024
A 0.4 send 10.0.0.1:4791 > 10.0.0.2:4791 RC_SEND_LAST qp=0xf53bc2 psn=0x100002 ackreq len=452`, "\n")
	for _, mode := range []outputMode{inOrder, anyOrder} {
		if msg := checkShown(shownBlock{mode: mode, lines: shown}, run, false); msg != "" {
			t.Errorf("mode %d: %s", mode, msg)
		}
	}
	change := func(i int, old, new string) []string {
		c := append([]string(nil), shown...)
		c[i] = strings.Replace(c[i], old, new, 1)
		return c
	}
	for _, c := range []struct {
		name  string
		lines []string
		modes []outputMode
	}{
		{"opcode renamed", change(5, "SEND_FIRST", "SEND_MIDDLE"), []outputMode{inOrder, anyOrder}},
		{"ACK missing from the run", nil, []outputMode{inOrder, anyOrder}},
		{"a line left out without ...", append(append([]string(nil), shown[:4]...), shown[5:]...), []outputMode{inOrder}},
		{"two QPNs for one", change(4, "qp=0xcdacdb", "qp=0xcdacdc"), []outputMode{inOrder, anyOrder}},
		{"one QPN for two", change(4, "qp=0xcdacdb", "qp=0xf53bc2"), []outputMode{inOrder, anyOrder}},
		{"PSN off by one", change(6, "psn=0x100002", "psn=0x100003"), []outputMode{inOrder, anyOrder}},
		{"length", change(6, "len=452", "len=453"), []outputMode{inOrder, anyOrder}},
		{"lines swapped", append(append([]string(nil), shown[:5]...), shown[6], shown[5]), []outputMode{inOrder}},
	} {
		r := run
		lines := c.lines
		if lines == nil { // the run lost the last ACK
			r = strings.Replace(run, "B 0.002392 send 10.0.0.2:4791 > 10.0.0.1:4791 RC_ACKNOWLEDGE qp=0x33bb44 psn=0x000a02 aeth(ACK msn=2)\n", "", 1)
			lines = append(append([]string(nil), shown...),
				"B 0.5 send 10.0.0.2:4791 > 10.0.0.1:4791 RC_ACKNOWLEDGE qp=0xcdacdb psn=0x100002 aeth(ACK msn=2)")
			if msg := checkShown(shownBlock{mode: inOrder, lines: lines}, run, false); msg != "" {
				t.Errorf("%s: the full run does not match: %s", c.name, msg)
			}
		}
		for _, mode := range c.modes {
			if checkShown(shownBlock{mode: mode, lines: lines}, r, false) == "" {
				t.Errorf("%s, mode %d: passed", c.name, mode)
			}
		}
	}
	// Numbers vary: any count stands for any other, the rest still counts.
	counts := []string{"marked=14808 cnps=10822 drops=0"}
	if checkShown(shownBlock{mode: inOrder, lines: counts}, "marked=1 cnps=2 drops=3\n", false) == "" {
		t.Error("other counts passed")
	}
	if msg := checkShown(shownBlock{mode: inOrder, loose: true, lines: counts}, "marked=1 cnps=2 drops=3\n", true); msg != "" {
		t.Errorf("numbers vary: %s", msg)
	}
	if checkShown(shownBlock{mode: inOrder, loose: true, lines: counts}, "marked=1 cnps=2 timeouts=3\n", false) == "" {
		t.Error("numbers vary: another counter passed")
	}
	// The output of a repeatable command: the times must be as shown, the
	// QPNs and PSNs still stand for the run's.
	exact := strings.Split(`B 0.002124 recv 10.0.0.1:4791 > 10.0.0.2:4791 RC_SEND_ONLY qp=0xf53bc2 psn=0x100000 ackreq len=12
B 0.002225 send 10.0.0.2:4791 > 10.0.0.1:4791 RC_ACKNOWLEDGE qp=0xcdacdb psn=0x100000 aeth(ACK msn=1)`, "\n")
	for _, mode := range []outputMode{inOrder, anyOrder} {
		if msg := checkShown(shownBlock{mode: mode, lines: exact}, run, true); msg != "" {
			t.Errorf("exact, mode %d: %s", mode, msg)
		}
		late := append([]string{strings.Replace(exact[0], "0.002124", "0.002125", 1)}, exact[1:]...)
		if checkShown(shownBlock{mode: mode, lines: late}, run, true) == "" {
			t.Errorf("exact, mode %d: a time off by a microsecond passed", mode)
		}
		if msg := checkShown(shownBlock{mode: mode, lines: late}, run, false); msg != "" {
			t.Errorf("not exact, mode %d: a time off by a microsecond failed: %s", mode, msg)
		}
	}
}
