package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int{"8": 8, "1K": 1024, "64M": 64 << 20, "2G": 2 << 30, "0": 0, "3k": 3072,
		"1M": 1 << 20, "4KiB": 4096, "2MiB": 2 << 20, "1GiB": 1 << 30, "16kb": 16 << 10, "3MB": 3 << 20} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "M", "-1", "1T", "x8", "1Q", "KiB", "1.5M"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) did not fail", s)
		}
	}
}

// TestFlagErrors: a bad value of a size or listen-address flag fails the
// parse, and ParseFlags prints a usage hint and then the error, last,
// naming the flag.
func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"-s", "1Q"}, {"--ui-addr", "notaport"}, {"--ui-addr", "127.0.0.1:70000"}, {"--bogus"}} {
		fs := NewFlagSet("goroce test [flags]", "about")
		var size int
		var addr string
		SizeFlag(fs, &size, "s", "size", 0, "size")
		ListenAddrFlag(fs, &addr, "ui-addr", "", "address")
		var out, errOut bytes.Buffer
		code, ok := ParseFlags(fs, args, &out, &errOut)
		lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
		name := strings.TrimLeft(args[0], "-")
		if ok || code != ExitUsage || out.Len() != 0 || len(lines) != 2 ||
			!strings.HasPrefix(lines[0], "usage: goroce test") || !strings.HasPrefix(lines[1], "goroce test: ") || !strings.Contains(lines[1], name) {
			t.Errorf("%q: code %d ok %v, stdout %q, stderr:\n%s", args, code, ok, out.String(), errOut.String())
		}
	}
	fs := NewFlagSet("goroce test [flags]", "about")
	var size int
	SizeFlag(fs, &size, "s", "size", 0, "size")
	if _, ok := ParseFlags(fs, []string{"--size", "1M"}, &bytes.Buffer{}, &bytes.Buffer{}); !ok || size != 1<<20 {
		t.Errorf("--size 1M: %d, %v", size, ok)
	}
}
