package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// backgroundGoRun is a shell line that starts `go run` in the background.
// Killing that job kills `go run`, not the program it built and started,
// which keeps its sockets (UDP 4791, TCP 18515) until someone finds it:
// the docs start a built binary in the background instead.
var backgroundGoRun = regexp.MustCompile(`^\s*(\$ )?(sudo )?(\S+=\S+ )*go run .*&\s*(#.*)?$`)

// TestNoBackgroundGoRun checks the README and every Markdown file under
// docs for such lines (issue 25 item 7).
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
