package qemurouter

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goroce/goroce/bench/testenv"
)

// TestWriteCPIO has GNU cpio, an independent reader of the newc format,
// list and unpack an archive of directories and files whose lengths
// leave each padding case (0 to 3 bytes), and compares names, order,
// modes and contents.
func TestWriteCPIO(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		testenv.SkipOrFailf(t, "no cpio to check the archive with: %v", err)
	}
	entries := []cpioEntry{
		{Name: "lib", Mode: fs.ModeDir | 0o755},
		{Name: "lib/modules", Mode: fs.ModeDir | 0o700},
		{Name: "lib/modules/a.ko", Mode: 0o644, Data: []byte("abcde")},
		{Name: "init", Mode: 0o755, Data: []byte("#!/bin/sh\necho hi\n")},
		{Name: "empty", Mode: 0o600},
		{Name: "lib/three", Mode: 0o640, Data: []byte("xyz")},
		{Name: "lib/modules/sixteen", Mode: 0o644, Data: bytes.Repeat([]byte{0, 0xff}, 8)},
	}
	var archive bytes.Buffer
	if err := writeCPIO(&archive, entries); err != nil {
		t.Fatal(err)
	}
	list := exec.Command("cpio", "-t", "--quiet")
	list.Stdin = bytes.NewReader(archive.Bytes())
	out, err := list.Output()
	if err != nil {
		t.Fatalf("cpio -t: %v", err)
	}
	var want []string
	for _, e := range entries {
		want = append(want, e.Name)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("cpio -t lists %q, want %q", got, want)
	}
	dir := t.TempDir()
	unpack := exec.Command("cpio", "-i", "--quiet", "--no-absolute-filenames")
	unpack.Dir, unpack.Stdin = dir, bytes.NewReader(archive.Bytes())
	if msg, err := unpack.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v: %s", err, msg)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name)
		st, err := os.Lstat(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if st.Mode() != e.Mode {
			t.Errorf("%s: mode %v, want %v", e.Name, st.Mode(), e.Mode)
		}
		if e.Mode.IsDir() {
			continue
		}
		if data, err := os.ReadFile(path); err != nil || !bytes.Equal(data, e.Data) {
			t.Errorf("%s: %q (%v), want %q", e.Name, data, err, e.Data)
		}
	}
}
