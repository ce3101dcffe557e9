//go:build cgo && linux

package main

import (
	"context"
	"debug/elf"
	"fmt"
	"maps"
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

// libSym is one symbol a library exports: a function or a variable, at a
// version; hidden for a version only old binaries bind to (name@VER, not
// name@@VER).
type libSym struct {
	lib, name, version string
	function, hidden   bool
}

// exported lists what the library soname (libibverbs.so.1, librdmacm.so.1)
// the compiler links against defines in its dynamic symbol table: its
// functions and variables, with their versions, but not the version
// definitions themselves.
func exported(t *testing.T, soname string) []libSym {
	t.Helper()
	out, err := exec.Command("gcc", "-print-file-name="+soname).Output()
	path := strings.TrimSpace(string(out))
	if err != nil || !filepath.IsAbs(path) {
		testenv.SkipOrFailf(t, "gcc does not find %s (%v): apt-get install libibverbs-dev librdmacm-dev", soname, err)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var ls []libSym
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if s.Section == elf.SHN_UNDEF || s.Section == elf.SHN_ABS || (typ != elf.STT_FUNC && typ != elf.STT_OBJECT) {
			continue
		}
		ls = append(ls, libSym{lib: soname, name: s.Name, version: s.Version, function: typ == elf.STT_FUNC,
			hidden: s.HasVersion && s.VersionIndex.IsHidden()})
	}
	if len(ls) == 0 {
		t.Fatalf("%s exports nothing", path)
	}
	return ls
}

// exports are both libraries' symbols, and their names.
func exports(t *testing.T) (syms []libSym, names map[string]libSym) {
	t.Helper()
	syms = append(exported(t, "libibverbs.so.1"), exported(t, "librdmacm.so.1")...)
	names = map[string]libSym{}
	for _, s := range syms {
		if _, ok := names[s.name]; !ok || !s.hidden {
			names[s.name] = s
		}
	}
	return syms, names
}

// verbsTable reads doc.go's table of every verb: name -> what the preload
// does with it.
func verbsTable(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n// # Every verb\n")
	if start < 0 {
		t.Fatal(`doc.go has no "# Every verb" section`)
	}
	table := map[string]string{}
	re := regexp.MustCompile(`^//\t(\S+)\s+(.+)$`)
	for l := range strings.Lines(doc[start:]) {
		if strings.HasPrefix(l, "// Not in the table") {
			break
		}
		if m := re.FindStringSubmatch(strings.TrimRight(l, "\n")); m != nil {
			if _, dup := table[m[1]]; dup {
				t.Errorf("doc.go's table lists %s twice", m[1])
			}
			table[m[1]] = m[2]
		}
	}
	return table
}

// libibverbsOwn reports whether the table leaves name to the real
// library.
func libibverbsOwn(status string) bool { return strings.HasPrefix(status, "works: libibverbs' own") }

// TestVerbsTable holds doc.go's table of every verb to the libraries'
// own symbol tables: every function and variable they export is there
// once, with what the preload does with it, and nothing else is.
func TestVerbsTable(t *testing.T) {
	_, names := exports(t)
	table := verbsTable(t)
	for _, n := range slices.Sorted(maps.Keys(names)) {
		status, ok := table[n]
		switch {
		case !ok:
			t.Errorf("%s (%s) is not in doc.go's table of every verb", n, names[n].lib)
		case !strings.HasPrefix(status, "works") && !strings.HasPrefix(status, "EOPNOTSUPP as rdma-core"):
			t.Errorf("doc.go: %s is %q, want works, EOPNOTSUPP as rdma-core, or works differently from rxe", n, status)
		}
	}
	for n := range table {
		if _, ok := names[n]; !ok {
			t.Errorf("doc.go's table lists %s, which neither library exports", n)
		}
	}
}

// reSweepLine is one line of testdata/sweep.c's output.
var reSweepLine = regexp.MustCompile(`^(ok|FAIL|where) (\S+)(?: (.*))?$`)

// TestSymbolSweep runs testdata/sweep.c preloaded: every function
// libibverbs.so.1 and librdmacm.so.1 export (read from their dynamic
// symbol tables, not listed by hand) is called with valid arguments and
// with bad ones (NULL, destroyed objects, out-of-range ports and GID
// indexes, an object of the wrong kind) and must answer what rdma-core
// documents or gives for a device without it, in a process that survives
// them all. A function the sweep does not call fails the test, so a new
// libibverbs cannot slip by. Each must be the preload's own, but for the
// real library's pure helpers doc.go's table names, and so must each
// version an old binary binds to (name@IBVERBS_1.0): they would otherwise
// reach the real library's compat wrappers with goroce0's objects.
func TestSymbolSweep(t *testing.T) {
	lib := libs(t)
	syms, names := exports(t)
	table := verbsTable(t)
	prog := buildC(t, "sweep", "-libverbs", "-lrdmacm")
	var funcs []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if names[n].function {
			funcs = append(funcs, n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, _ := extAddrs()
	p := start(ctx, t, lib, addr, nil, prog, append([]string{"7471"}, funcs...)...)
	err := <-p.done
	out := p.stdout.String()
	if err != nil {
		t.Errorf("sweep: %v (it must exit 0, every check holding)\nstderr:\n%s", err, &p.stderr)
	}
	okd, where := map[string]bool{}, map[string]string{}
	for l := range strings.Lines(out) {
		m := reSweepLine.FindStringSubmatch(strings.TrimRight(l, "\n"))
		switch {
		case m == nil:
		case m[1] == "ok":
			okd[m[2]] = true
		case m[1] == "FAIL":
			t.Errorf("sweep: %s", strings.TrimSpace(l))
		case m[1] == "where":
			where[m[2]] = m[3]
		}
	}
	for _, n := range funcs {
		if !okd[n] {
			t.Errorf("%s (%s): the sweep did not call it, or a check failed", n, names[n].lib)
		}
		own := libibverbsOwn(table[n])
		switch w := where[n]; {
		case own && w != "libibverbs.so.1" && w != build.Shim:
			t.Errorf("%s resolves to %q", n, w)
		case !own && w != build.Shim:
			t.Errorf("%s resolves to %q, not the preload (%s): the real library would get goroce0's objects", n, w, build.Shim)
		}
	}
	for n := range okd {
		if _, ok := names[n]; !ok {
			t.Errorf("the sweep calls %s, which neither library exports", n)
		}
	}

	// Where binaries built against the old versions bind.
	var hidden []libSym
	for _, s := range syms {
		if s.hidden && s.function {
			hidden = append(hidden, s)
		}
	}
	if len(hidden) == 0 {
		return
	}
	var src strings.Builder
	src.WriteString("#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdio.h>\n#include <string.h>\n")
	for i, s := range hidden {
		fmt.Fprintf(&src, "__asm__(\".symver old%d, %s@%s\");\nextern void old%d(void);\n", i, s.name, s.version, i)
	}
	src.WriteString("int main(void)\n{\n\tDl_info in;\n\tconst char *s;\n")
	for i, s := range hidden {
		fmt.Fprintf(&src, "\tdladdr((void *)old%d, &in);\n\ts = strrchr(in.dli_fname, '/');\n"+
			"\tprintf(\"where %s@%s %%s\\n\", s ? s + 1 : in.dli_fname);\n", i, s.name, s.version)
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old.c"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old")
	if out, err := exec.Command("gcc", "-o", old, filepath.Join(dir, "old.c"), "-Wl,--no-as-needed", "-libverbs",
		"-lrdmacm").CombinedOutput(); err != nil {
		t.Fatalf("gcc old.c: %v\n%s", err, out)
	}
	oldOut := start(ctx, t, lib, addr, nil, old).wait(t)
	for _, s := range hidden {
		key := s.name + "@" + s.version
		want := build.Shim
		if libibverbsOwn(table[s.name]) {
			want = "libibverbs.so.1"
		}
		if !strings.Contains(oldOut, "where "+key+" "+want+"\n") {
			t.Errorf("a binary built against %s does not bind to %s:\n%s", key, want, oldOut)
		}
	}
}
