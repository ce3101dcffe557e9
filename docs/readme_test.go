package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// backgroundGoRun is a shell line that starts `go run` in the background.
// Killing that job kills `go run`, not the program it built and started,
// which keeps its sockets (UDP 4791, TCP 18515) until someone finds it:
// the docs start a built binary in the background instead.
var backgroundGoRun = regexp.MustCompile(`^\s*(\$ )?(sudo )?(\S+=\S+ )*go run .*&\s*(#.*)?$`)

// TestNoBackgroundGoRun checks the README and every Markdown file under
// docs for such lines.
func TestNoBackgroundGoRun(t *testing.T) {
	files := []string{"../README.md"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if backgroundGoRun.MatchString(line) {
				t.Errorf("%s:%d: %q: killing a backgrounded `go run` leaves the program it started running; build it first (go build ./cmd/goroce) and background the binary", f, i+1, line)
			}
		}
	}
}

// TestBackgroundGoRunPattern checks the pattern on lines it must and must
// not match.
func TestBackgroundGoRunPattern(t *testing.T) {
	for line, want := range map[string]bool{
		"go run ./cmd/goroce pingpong --addr 127.0.0.1 &            # server": true,
		"$ go run ./cmd/goroce perf write_bw &":                               true,
		"GOROCE_ADDR=127.0.0.2 go run ./cmd/goroce pingpong &":                true,
		"./goroce pingpong --addr 127.0.0.1 &    # server":                    false,
		"go run ./cmd/goroce pingpong --addr 127.0.0.2 127.0.0.1":             false,
		"go run ./cmd/goroce demo && echo ok":                                 false,
	} {
		if got := backgroundGoRun.MatchString(line); got != want {
			t.Errorf("%q: matched %v, want %v", line, got, want)
		}
	}
}

// The README's count of the course's chapters is the number of chapters
// the course's own table lists (its rows numbered from 1; 0 is the
// setup).
func TestReadmeCountsChapters(t *testing.T) {
	course, err := os.ReadFile("course/README.md")
	if err != nil {
		t.Fatal(err)
	}
	chapters := len(regexp.MustCompile(`(?m)^\| [1-9][0-9]* \| \[`).FindAll(course, -1))
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`hands-on course in (\d+) short`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README does not say how many chapters the course has (\"hands-on course in N short chapters\")")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != chapters || chapters == 0 {
		t.Errorf("the README promises %d chapters; docs/course/README.md lists %d", n, chapters)
	}
}

// issueRef and machinePath are what the README and the docs must not send
// a reader to: the project's issue tracker, which a clone does not have,
// and a path of the machines it was written on.
var (
	issueRef    = regexp.MustCompile(`\b[Ii]ssues? #?[0-9]+`)
	machinePath = regexp.MustCompile(`(^|[\s(\x60'"=])/work/`)
)

// TestNoIssueNumbersOrMachinePaths checks the README and every Markdown
// file under docs for both.
func TestNoIssueNumbersOrMachinePaths(t *testing.T) {
	files := []string{"../README.md"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// A newline as a space: "issue" may end a line and its number
		// start the next. The indexes stay those of the file.
		flat := strings.ReplaceAll(string(b), "\n", " ")
		for _, m := range issueRef.FindAllStringIndex(flat, -1) {
			t.Errorf("%s:%d: %q names an issue: say what it means instead", f, 1+strings.Count(string(b[:m[0]]), "\n"), flat[m[0]:m[1]])
		}
		for i, line := range strings.Split(string(b), "\n") {
			if machinePath.MatchString(line) {
				t.Errorf("%s:%d: a path of this machine (/work/...): give it relative to the repository", f, i+1)
			}
		}
	}
}
