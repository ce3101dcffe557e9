// Package docs holds goroce's documentation. Its only code is this test,
// which keeps the course "RDMA from the wire up" (docs/course) honest:
// every command a chapter marks as checked runs, exits 0 and prints what
// the chapter says it prints.
//
// The convention, visible in every chapter:
//
//	```sh
//	$ goroce lesson send --trace
//	```
//	<!-- expect: RC_SEND_ONLY qp=0x[0-9a-f]{6} psn=0x000a00 ackreq -->
//	<!-- expect: aeth\(ACK msn=1\) -->
//
// A ```sh block whose lines all start with "$ " is checked. Each line is
// one goroce command, optionally preceded by VAR=value settings and
// followed by " &" to run it in the background (it must still end, with
// status 0, before the block is checked), or a gcc command that builds a
// chapter's C program from docs/course/c (the chapter's directory has
// docs/ in it, as a clone does); such a chapter, and one that runs
// "goroce exec", needs gcc and libibverbs-dev, and skips without them
// (fails under GOROCE_CI_STRICT=1, see bench/testenv). An MPI chapter's
// lines are Open MPI's mpicc, which builds its program as gcc does, and
// mpirun, which starts "goroce exec" for each rank: goroce is first on
// their PATH, and as root (CI) Open MPI is told that root may run it
// (OMPI_ALLOW_RUN_AS_ROOT), as a reader who is not root never needs to. The "<!-- expect: REGEXP -->"
// comments right after the block are Go regular expressions (multi-line
// mode: ^ and $ match at line ends) that must each match the block's
// output, stdout and stderr together. A checked block needs at least one.
// The blocks of a chapter run in order in one fresh directory, so one
// block can read a file another wrote. Other blocks (```sh without "$ ",
// examples in other languages) are not run.
//
// The ```text blocks that show what the commands print, the traces the
// chapters explain line by line, are compared with a fresh run of the
// commands above them (see shown_test.go for the marks and the rules), so
// a change in what goroce prints fails the test until the chapter follows.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/cmd/goroce-verbs/build"
)

// blockTimeout bounds the commands of one block together. It is a guard
// against a hang, not a verdict: the slowest block, an incast without
// DCQCN (11-incast.md), takes 7 s on an idle 2-CPU machine and was killed
// at 30 s with two busy loops and other tests on it; 5 minutes is ten
// times the slowest seen.
const blockTimeout = 5 * time.Minute

// A checkedBlock is one ```sh block of a chapter with its expectations.
type checkedBlock struct {
	line     int // of the opening fence, for messages
	commands []courseCommand
	expects  []*regexp.Regexp
	// shown are the ```text blocks marked as output between this block
	// and the next checked one (see shown_test.go).
	shown []shownBlock
}

// A courseCommand is one "$ " line of a block.
type courseCommand struct {
	line       int
	text       string   // as written, after "$ "
	program    string   // "goroce", "gcc", "mpicc" or "mpirun"
	env        []string // VAR=value settings before the program
	args       []string // after the program
	background bool     // ended with " &"
}

// TestCourse runs every checked block of every chapter against a goroce
// built from this tree.
func TestCourse(t *testing.T) {
	chapters, err := filepath.Glob(filepath.Join("course", "*.md"))
	if err != nil || len(chapters) == 0 {
		t.Fatalf("no chapters in docs/course: %v", err)
	}
	parsed := make(map[string][]checkedBlock)
	for _, ch := range chapters {
		blocks, err := parseChapter(ch)
		if err != nil {
			t.Fatal(err)
		}
		// A numbered chapter is an exercise: it has something to run.
		if numbered.MatchString(filepath.Base(ch)) && len(blocks) == 0 {
			t.Errorf("%s has no checked command block", ch)
		}
		parsed[ch] = blocks
	}
	if t.Failed() {
		return
	}
	bin := buildGoroce(t)
	env := cleanEnv(os.Environ())
	docs, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	verbsBuilt := false
	for _, ch := range chapters {
		t.Run(strings.TrimSuffix(filepath.Base(ch), ".md"), func(t *testing.T) {
			if needsVerbs(parsed[ch]) && !verbsBuilt {
				buildVerbsLibs(t)
				verbsBuilt = true
			}
			if needsMPI(parsed[ch]) {
				testenv.LookPath(t, "mpicc", "libopenmpi-dev")
				testenv.LookPath(t, "mpirun", "openmpi-bin")
			}
			dir := t.TempDir()
			// The chapter's commands run where a reader runs them, at the
			// top of a clone: its C sources are under docs/.
			if err := os.Symlink(docs, filepath.Join(dir, "docs")); err != nil {
				t.Fatal(err)
			}
			// So are the captures of Linux hosts they decode, under
			// wire/testdata.
			if err := os.Symlink(filepath.Join(docs, "..", "wire"), filepath.Join(dir, "wire")); err != nil {
				t.Fatal(err)
			}
			// The output the next shown block is compared with: that of
			// the blocks run since the last shown block, or that block's;
			// and whether those blocks print the same numbers every run.
			var pending, current strings.Builder
			pendingOK, currentOK := true, true
			pendingExact, currentExact := true, true
			for _, b := range parsed[ch] {
				out, ok := runBlock(t, ch, b, bin, dir, env)
				pending.WriteString(out)
				pendingOK = pendingOK && ok
				pendingExact = pendingExact && repeatable(b)
				for _, sb := range b.shown {
					if pending.Len() > 0 {
						current.Reset()
						current.WriteString(pending.String())
						currentOK, currentExact = pendingOK, pendingExact
						pending.Reset()
						pendingOK, pendingExact = true, true
					}
					if !currentOK {
						continue // the failed command is reported
					}
					if msg := checkShown(sb, current.String(), currentExact); msg != "" {
						t.Errorf("%s:%d: the output shown is not what the commands print now: %s", ch, sb.line, msg)
					}
				}
			}
		})
	}
}

// TestParseChapter checks the parser on the mistakes it must catch, so a
// chapter cannot silently lose its checks.
func TestParseChapter(t *testing.T) {
	cases := []struct {
		name, text, err string // err: "" for a valid chapter
		blocks, expects int
	}{
		{"checked", "```sh\n$ goroce lesson send\n```\n<!-- expect: A -->\n<!-- expect: B -->\n", "", 1, 2},
		{"env and background", "```sh\n$ NCCL_ALGO=Ring goroce nccl-perf all_reduce &\n$ goroce help\n```\n<!-- expect: x -->\n", "", 1, 1},
		{"excerpts are not run", "<!-- not output: an excerpt -->\n```text\n$ goroce lesson send\n```\n```sh\ngo build ./cmd/goroce\n```\n", "", 0, 0},
		{"output", "```sh\n$ goroce help\n```\n<!-- expect: x -->\n<!-- output -->\n```text\nx\n```\n<!-- output: in any order, numbers vary -->\n```text\ny\n```\n", "", 1, 1},
		{"unmarked text", "```sh\n$ goroce help\n```\n<!-- expect: x -->\n```text\nx\n```\n", "needs <!-- output -->", 0, 0},
		{"output first", "<!-- output -->\n```text\nx\n```\n", "before any checked block", 0, 0},
		{"orphan mark", "<!-- output -->\nText.\n", "not right before a ```text block", 0, 0},
		{"no expectation", "```sh\n$ goroce lesson send\n```\n\nText.\n", "no <!-- expect", 0, 0},
		{"orphan expectation", "Text.\n<!-- expect: A -->\n", "not right after a checked block", 0, 0},
		{"mixed block", "```sh\n$ goroce lesson send\ngoroce lesson read\n```\n<!-- expect: A -->\n", "every line", 0, 0},
		{"gcc", "```sh\n$ gcc -O2 -o p docs/course/c/p.c -libverbs\n$ goroce exec -- ./p &\n```\n<!-- expect: x -->\n", "", 1, 1},
		{"mpi", "```sh\n$ mpicc -o p docs/course/c/p.c\n$ mpirun -np 2 goroce exec -- ./p\n```\n<!-- expect: x -->\n", "", 1, 1},
		{"mpirun in the background", "```sh\n$ mpirun -np 2 goroce exec -- ./p &\n```\n<!-- expect: A -->\n", "in the background", 0, 0},
		{"not goroce", "```sh\n$ rm -rf /\n```\n<!-- expect: A -->\n", "only goroce, gcc, mpicc and mpirun commands", 0, 0},
		{"gcc in the background", "```sh\n$ gcc -o p p.c &\n```\n<!-- expect: A -->\n", "in the background", 0, 0},
		{"gcc substitution", "```sh\n$ gcc -o p $(echo p.c)\n```\n<!-- expect: A -->\n", "no pipes", 0, 0},
		{"bad regexp", "```sh\n$ goroce help\n```\n<!-- expect: ( -->\n", "expect", 0, 0},
		{"unclosed", "```sh\n$ goroce help\n", "not closed", 0, 0},
		{"nested fences", "````markdown\n```sh\n$ goroce help\n```\n<!-- expect: x -->\n````\n", "", 0, 0},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "chapter.md")
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		blocks, err := parseChapter(path)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.err)
		case c.err == "" && (len(blocks) != c.blocks || c.blocks > 0 && len(blocks[0].expects) != c.expects):
			t.Errorf("%s: %d blocks %+v, want %d with %d expectations", c.name, len(blocks), blocks, c.blocks, c.expects)
		}
	}
}

// numbered matches the file name of a chapter, 00-setup.md and on.
var numbered = regexp.MustCompile(`^[0-9]{2}-.*\.md$`)

// expectRE is an expectation comment.
var expectRE = regexp.MustCompile(`^<!-- expect: (.*) -->$`)

// parseChapter returns the checked blocks of a chapter.
func parseChapter(path string) ([]checkedBlock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	var blocks []checkedBlock
	for i := 0; i < len(lines); i++ {
		where := fmt.Sprintf("%s:%d", path, i+1)
		if expectRE.MatchString(lines[i]) {
			return nil, fmt.Errorf("%s: an expectation not right after a checked block", where)
		}
		if markRE.MatchString(lines[i]) {
			if n, info := openFence(next(lines, i)); n == 0 || info != "text" {
				return nil, fmt.Errorf("%s: %s not right before a ```text block", where, lines[i])
			}
		}
		fence, info := openFence(lines[i])
		if fence == 0 {
			continue
		}
		open := i
		var body []int // line indexes of the block's lines
		for i++; i < len(lines) && !closesFence(lines[i], fence); i++ {
			body = append(body, i)
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: the fenced block is not closed", where)
		}
		if info == "text" {
			prev := ""
			if open > 0 {
				prev = lines[open-1]
			}
			mode, loose, err := textMode(prev)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
			if mode == notOutput {
				continue
			}
			if len(blocks) == 0 {
				return nil, fmt.Errorf("%s: output shown before any checked block", where)
			}
			sb := shownBlock{line: open + 1, mode: mode, loose: loose}
			for _, j := range body {
				if strings.TrimSpace(lines[j]) != "" {
					sb.lines = append(sb.lines, strings.TrimRight(lines[j], " \t"))
				}
			}
			last := &blocks[len(blocks)-1]
			last.shown = append(last.shown, sb)
			continue
		}
		if info != "sh" {
			continue // an example in another language
		}
		b := checkedBlock{line: open + 1}
		dollar := 0
		for _, j := range body {
			if strings.HasPrefix(lines[j], "$ ") {
				dollar++
			}
		}
		if dollar == 0 {
			continue // an illustration, not a checked block
		}
		if dollar != len(body) {
			return nil, fmt.Errorf("%s: in a checked block every line must start with \"$ \"", where)
		}
		for _, j := range body {
			cmd, err := parseCommand(strings.TrimPrefix(lines[j], "$ "))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, j+1, err)
			}
			cmd.line = j + 1
			b.commands = append(b.commands, cmd)
		}
		for i+1 < len(lines) && expectRE.MatchString(lines[i+1]) {
			i++
			re, err := regexp.Compile("(?m)" + expectRE.FindStringSubmatch(lines[i])[1])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: expect: %v", path, i+1, err)
			}
			b.expects = append(b.expects, re)
		}
		if len(b.expects) == 0 {
			return nil, fmt.Errorf("%s: checked block with no <!-- expect: REGEXP --> after it", where)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// next returns the line after i, "" at the end.
func next(lines []string, i int) string {
	if i+1 < len(lines) {
		return lines[i+1]
	}
	return ""
}

// openFence reports the number of backticks of a fence that opens a code
// block on line (0 if it opens none) and the block's info string.
func openFence(line string) (n int, info string) {
	t := strings.TrimSpace(line)
	n = len(t) - len(strings.TrimLeft(t, "`"))
	if n < 3 {
		return 0, ""
	}
	return n, strings.TrimSpace(t[n:])
}

// closesFence reports whether line closes a block opened by a fence of n
// backticks: at least n backticks and nothing else (CommonMark).
func closesFence(line string, n int) bool {
	t := strings.TrimSpace(line)
	return len(t) >= n && strings.Trim(t, "`") == ""
}

// envRE is a VAR=value setting before a command.
var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// parseCommand reads one command line: [VAR=value ...] goroce ARGS [&],
// or [VAR=value ...] gcc|mpicc|mpirun ARGS. Arguments split at spaces;
// single or double quotes keep spaces in one.
func parseCommand(text string) (courseCommand, error) {
	c := courseCommand{text: text}
	if s, ok := strings.CutSuffix(strings.TrimSpace(text), " &"); ok {
		text, c.background = s, true
	}
	words, err := splitWords(text)
	if err != nil {
		return c, err
	}
	for len(words) > 0 && envRE.MatchString(words[0]) {
		c.env, words = append(c.env, words[0]), words[1:]
	}
	if len(words) == 0 || !slices.Contains([]string{"goroce", "gcc", "mpicc", "mpirun"}, words[0]) {
		return c, fmt.Errorf("%q: a checked block runs only goroce, gcc, mpicc and mpirun commands", text)
	}
	c.program, c.args = words[0], words[1:]
	if c.program != "goroce" && c.background {
		return c, fmt.Errorf("%q: %s does not run in the background: the next command needs what it builds, or it is the job", text, c.program)
	}
	for _, w := range c.args {
		if strings.ContainsAny(w, "|;<>`$") {
			return c, fmt.Errorf("%q: no pipes, redirections or substitutions in a checked command", text)
		}
	}
	return c, nil
}

// splitWords splits s at spaces, honouring single and double quotes.
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unbalanced quote", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// buildGoroce builds cmd/goroce from this tree into the build cache
// (build.Cached) and returns its path.
func buildGoroce(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), blockTimeout)
	defer cancel()
	dir, err := build.Cached(ctx, "..", build.Goroce, nil)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, build.GoroceBin)
}

// needsVerbs reports whether a chapter's blocks build or run a libibverbs
// program: a gcc, mpicc or mpirun command, or goroce exec.
func needsVerbs(blocks []checkedBlock) bool {
	for _, b := range blocks {
		for _, c := range b.commands {
			if c.program != "goroce" || len(c.args) > 0 && c.args[0] == "exec" {
				return true
			}
		}
	}
	return false
}

// needsMPI reports whether a chapter's blocks run Open MPI's mpicc or
// mpirun.
func needsMPI(blocks []checkedBlock) bool {
	for _, b := range blocks {
		for _, c := range b.commands {
			if c.program == "mpicc" || c.program == "mpirun" {
				return true
			}
		}
	}
	return false
}

// buildVerbsLibs builds the preloadable libibverbs (cmd/goroce-verbs) into
// the build cache, where goroce exec, built from the same source, finds
// it without building it (and so without a build message in a chapter's
// output). Without gcc or libibverbs-dev the test skips, or fails under
// GOROCE_CI_STRICT=1.
func buildVerbsLibs(t *testing.T) {
	t.Helper()
	if err := build.Check(".."); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	ctx, cancel := context.WithTimeout(t.Context(), blockTimeout)
	defer cancel()
	if _, err := build.Cached(ctx, "..", build.Verbs, nil); err != nil {
		t.Fatal(err)
	}
}

// cleanEnv drops the variables that would change what the commands do:
// goroce's own (GOROCE_TRACE, ...), NCCL's, and a launcher's, which would
// make nccl-perf join a job instead of starting its ranks.
func cleanEnv(env []string) []string {
	var keep []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GOROCE_"), strings.HasPrefix(k, "NCCL_"),
			strings.HasPrefix(k, "OMPI_COMM_WORLD_"), strings.HasPrefix(k, "SLURM_"):
		case k == "RANK", k == "WORLD_SIZE", k == "LOCAL_RANK", k == "MASTER_ADDR", k == "MASTER_PORT":
		default:
			keep = append(keep, kv)
		}
	}
	return keep
}

// mpirunEnv is env for mpirun: goroce's directory first on PATH, for the
// ranks' "goroce exec", and as root Open MPI's consent to run as root.
func mpirunEnv(env []string, goroceDir string) []string {
	out := make([]string, 0, len(env)+3)
	path := goroceDir
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path += ":" + p
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "PATH="+path)
	if os.Geteuid() == 0 {
		out = append(out, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	}
	return out
}

// runBlock runs a block's commands in dir and checks its expectations. It
// returns the block's output and whether every command succeeded.
func runBlock(t *testing.T, chapter string, b checkedBlock, bin, dir string, env []string) (output string, ok bool) {
	t.Helper()
	var out bytes.Buffer
	type started struct {
		c   courseCommand
		cmd *exec.Cmd
		buf *bytes.Buffer
	}
	var background []started
	ctx, cancel := context.WithTimeout(t.Context(), blockTimeout)
	defer cancel()
	begin := time.Now()
	failed := false
	for _, c := range b.commands {
		buf := new(bytes.Buffer)
		path := bin
		if c.program != "goroce" {
			path = c.program
		}
		cmd := exec.CommandContext(ctx, path, c.args...)
		cmd.Dir, cmd.Env = dir, append(append([]string(nil), env...), c.env...)
		if c.program == "mpirun" {
			cmd.Env = mpirunEnv(cmd.Env, filepath.Dir(bin))
		}
		cmd.Stdout, cmd.Stderr = buf, buf
		if c.background {
			if err := cmd.Start(); err != nil {
				t.Fatalf("%s:%d: $ %s: %v", chapter, c.line, c.text, err)
			}
			background = append(background, started{c, cmd, buf})
			continue
		}
		err := cmd.Run()
		out.Write(buf.Bytes())
		if err != nil {
			t.Errorf("%s:%d: $ %s: %v\n%s", chapter, c.line, c.text, err, buf)
			failed = true
		}
	}
	for _, s := range background {
		err := s.cmd.Wait()
		out.Write(s.buf.Bytes())
		if err != nil {
			t.Errorf("%s:%d: $ %s (in the background): %v\n%s", chapter, s.c.line, s.c.text, err, s.buf)
			failed = true
		}
	}
	t.Logf("%s:%d: %d command(s) in %v", chapter, b.line, len(b.commands), time.Since(begin).Round(time.Millisecond))
	if failed {
		return out.String(), false
	}
	for _, re := range b.expects {
		if !re.Match(out.Bytes()) {
			t.Errorf("%s:%d: the output does not match <!-- expect: %s -->", chapter, b.line, strings.TrimPrefix(re.String(), "(?m)"))
		}
	}
	if t.Failed() {
		t.Logf("output of the block at %s:%d:\n%s", chapter, b.line, out.String())
	}
	return out.String(), true
}
