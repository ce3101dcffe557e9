package docs

import (
	"go/scanner"
	gotoken "go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoIssueNumbersInComments checks every Go file of the module, tests
// included, for a comment that names an issue (issueRef): a comment states
// the rule the code keeps, and the issue tracker is not in a clone. A
// comment split across lines is read as one, so that "issue" at the end
// of one line and its number on the next are found too.
func TestNoIssueNumbersInComments(t *testing.T) {
	files := 0
	pending := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, c := range commentRuns(src) {
			flat := strings.Join(c.lines, " ")
			for _, m := range issueRef.FindAllStringIndex(flat, -1) {
				rel, _ := filepath.Rel("..", path)
				rel = filepath.ToSlash(rel)
				if _, ok := commentsRewrittenElsewhere[rel]; ok {
					pending[rel] = true
					continue
				}
				t.Errorf("%s:%d: %q names an issue: state the rule instead (the story and the number go in the commit message)",
					rel, c.lineOf(m[0]), flat[m[0]:m[1]])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files from the repository root: expected the whole module", files)
	}
	for f, why := range commentsRewrittenElsewhere {
		if !pending[f] {
			t.Errorf("%s names no issue any more: remove it from commentsRewrittenElsewhere (%s)", f, why)
		}
	}
}

// commentsRewrittenElsewhere are the files whose comments still name an
// issue because another branch rewrites them whole; each must still name
// one, so that the entry goes once that branch has landed.
var commentsRewrittenElsewhere = map[string]string{}

// commentRun is the text of comments on consecutive lines, one entry per
// line without its comment marker and the space around it, and the line the run starts on.
type commentRun struct {
	line  int
	lines []string
}

// lineOf returns the file line of byte i of the run's lines joined by
// single spaces.
func (c commentRun) lineOf(i int) int {
	for k, l := range c.lines {
		if i <= len(l) {
			return c.line + k
		}
		i -= len(l) + 1
	}
	return c.line + len(c.lines) - 1
}

// commentRuns returns the comments of a Go source file, those on
// consecutive lines joined into one run. It tokenizes the file (go/scanner)
// rather than matching "//", so that a string holding "//" is no comment.
func commentRuns(src []byte) []commentRun {
	fset := gotoken.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var runs []commentRun
	last := -1
	for {
		pos, tok, lit := s.Scan()
		if tok == gotoken.EOF {
			return runs
		}
		if tok != gotoken.COMMENT {
			continue
		}
		line := file.Line(pos)
		var text []string
		if strings.HasPrefix(lit, "//") {
			text = []string{strings.TrimSpace(strings.TrimPrefix(lit, "//"))}
		} else {
			text = strings.Split(strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/"), "\n")
			for i := range text {
				text[i] = strings.TrimSpace(text[i])
			}
		}
		if n := len(runs); n > 0 && line == last+1 {
			runs[n-1].lines = append(runs[n-1].lines, text...)
		} else {
			runs = append(runs, commentRun{line: line, lines: text})
		}
		last = line + len(text) - 1
	}
}
