//go:build linux

package shmlink

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/rnic/link"
)

// The victim's and the attacker's addresses in the trap tests.
var (
	victimAddr = netip.MustParseAddrPort("127.137.1.1:4791")
	evilAddr   = netip.MustParseAddrPort("127.137.1.9:4791")
)

// wantRefused checks that err refuses an untrusted file or directory and
// names it and each of want.
func wantRefused(t *testing.T, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, ErrUntrusted) {
		t.Fatalf("err = %v, want ErrUntrusted", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
}

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestDirectoryOthersMayWriteIsRefused: this user's own directory with
// mode 0777 could hold anything anybody planted: Open refuses it, naming
// it and its mode, and leaves nothing in it. One that others may only
// read is tightened to 0700 and used; a symbolic link to a directory is
// refused.
func TestDirectoryOthersMayWriteIsRefused(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	_, err := Open(Config{Local: addrA, Dir: open})
	wantRefused(t, err, open, "0777")
	if n := names(t, open); len(n) != 0 {
		t.Errorf("the refused directory holds %q", n)
	}

	readable := filepath.Join(base, "readable")
	os.Mkdir(readable, 0o700)
	os.Chmod(readable, 0o755)
	openLink(t, readable, addrA, Config{})
	if fi, err := os.Stat(readable); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a 0755 directory of this user's is %v after Open (%v), want 0700", fi.Mode(), err)
	}

	linked := filepath.Join(base, "linked")
	if err := os.Symlink(readable, linked); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{Local: addrB, Dir: linked})
	wantRefused(t, err, linked, "symbolic link")
}

// TestOwnStaleLockLinkIsReplaced: a symbolic link of this user's own
// where a lock file belongs (nobody can hold a lock through it) is
// replaced, never followed: the file it points at is not made.
func TestOwnStaleLockLinkIsReplaced(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "made-through-the-link")
	lockPath := filepath.Join(dir, lockName(addrA))
	if err := os.Symlink(target, lockPath); err != nil {
		t.Fatal(err)
	}
	openLink(t, dir, addrA, Config{})
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open followed the lock file's link: %s exists (%v)", target, err)
	}
	if fi, err := os.Lstat(lockPath); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the lock file is %v (%v), want a regular file", fi.Mode(), err)
	}
}

// TestRingOthersMayWriteIsRefused: a ring file of this user's own that
// others may write (mode 0666) is not mapped: counted (RxUntrusted) and
// logged once, naming the file, and its datagrams are not read.
func TestRingOthersMayWriteIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ringName(netipAddrC, addrA))
	writeEvilRing(t, path, netipAddrC, addrA)
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	a := openLink(t, dir, addrA, Config{Logger: zap.New(core)})
	publishEvilFrame(t, path, netipAddrC, addrA)
	checkRingRefused(t, a, logs, path, "0666")
}

// writeEvilRing writes at path a well-formed ring from src to dst, as an
// attacker would plant it (the file is then made its owner's).
func writeEvilRing(t *testing.T, path string, src, dst netip.AddrPort) {
	t.Helper()
	mem := make([]byte, ringLen(8, 256))
	initRing(mem, 8, 256, 4242, 1, 0)
	if err := os.WriteFile(path, mem, 0o644); err != nil {
		t.Fatal(err)
	}
}

// publishEvilFrame writes one well-formed UDP datagram from src to dst
// into the ring file at path and publishes it, as the file's owner may
// at any time.
func publishEvilFrame(t *testing.T, path string, src, dst netip.AddrPort) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := mapFile(f, ringLen(8, 256))
	if err != nil {
		t.Fatal(err)
	}
	defer unmap(mem)
	r, err := attachRing(mem)
	if err != nil {
		t.Fatal(err)
	}
	p := producer{ring: r}
	p.next = p.head.Load()
	payload := []byte("planted")
	b := p.claim(headersLen(false) + len(payload))
	h := putHeaders(b, src, dst, false, len(payload))
	copy(b[h:], payload)
	p.publish()
}

// checkRingRefused checks that l reads nothing from the ring at path and
// counted and logged it once, the log naming the file and each of want.
func checkRingRefused(t *testing.T, l *Link, logs *observer.ObservedLogs, path string, want ...string) {
	t.Helper()
	for i := 0; i < 2; i++ {
		pkts := []link.Packet{{Buf: make([]byte, 512)}}
		if n, err := l.Poller().TryReadBatch(pkts); n != 0 || err != nil {
			t.Fatalf("read from the refused ring: %d datagrams (%q), %v", n, pkts[0].Buf, err)
		}
		l.scan()
	}
	if s := l.Stats(); s.RxUntrusted != 1 {
		t.Errorf("RxUntrusted = %d, want 1", s.RxUntrusted)
	}
	entries := logs.FilterMessage("shmlink: refusing an untrusted file").All()
	if len(entries) != 1 {
		t.Fatalf("%d log lines refusing it, want 1: %v", len(entries), logs.All())
	}
	msg := fmt.Sprint(entries[0].ContextMap())
	for _, w := range append(want, path) {
		if !strings.Contains(msg, w) {
			t.Errorf("the log line does not say %q: %s", w, msg)
		}
	}
}

// unusedUID returns a user ID that no account has, for a second user.
func unusedUID(t *testing.T) int {
	t.Helper()
	for uid := 61000 + os.Getpid()%1000; uid < 65000; uid++ {
		if _, err := user.LookupId(strconv.Itoa(uid)); err != nil {
			if _, err := user.LookupGroupId(strconv.Itoa(uid)); err != nil {
				return uid
			}
		}
	}
	t.Fatal("no unused uid in 61000..65000")
	return 0
}

// asUser runs the shell script as uid (and gid uid, no supplementary
// groups) in dir: a second local user, the attacker.
func asUser(t *testing.T, uid int, dir, script string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-ec", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid %d: %s: %v\n%s", uid, script, err, out)
	}
}

// TestAnotherUsersTraps plays a second local user against a victim (this
// process, root, as in CI) who uses shared-memory links. The attacker, a
// process of an unused uid, plants each trap; the victim must refuse
// each with its error, naming the file and the attacker's uid, and
// create nothing outside its directory:
//
//   - the directory made first, mode 0777 (or a symbolic link to one of
//     the attacker's): the victim would use it and its files;
//   - a lock file that is a symbolic link to a path outside (as root the
//     victim would create any file on the host), or a regular lock file
//     the attacker holds;
//   - a ring addressed to the victim, which the attacker writes after the
//     victim mapped it: the victim would read forged datagrams;
//   - a peer's port file, to which the victim would send.
//
// The last three are planted in the victim's own directory while it was
// open to others (mode 0777), before the victim closed it (0700).
func TestAnotherUsersTraps(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "planting files as a second user needs root (to run a process as an unused uid)")
	}
	// A sticky directory everyone may write, as /dev/shm is.
	base, err := os.MkdirTemp(filepath.Dir(DefaultDir()), "goroce-traps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o1777); err != nil {
		t.Fatal(err)
	}
	evil := unusedUID(t)
	evilUID := fmt.Sprintf("uid %d", evil)
	asUser(t, evil, base, "mkdir outside && chmod 0777 outside")
	outside := filepath.Join(base, "outside")
	t.Cleanup(func() {
		if n := names(t, outside); len(n) != 0 {
			t.Errorf("the victim created %q outside its directory", n)
		}
	})
	// victimDir makes the victim's directory open to others, lets the
	// attacker run script in it, then closes it.
	victimDir := func(t *testing.T, name, script string) string {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		asUser(t, evil, dir, script)
		os.Chmod(dir, 0o700)
		return dir
	}

	t.Run("directory made first", func(t *testing.T) {
		asUser(t, evil, base, "mkdir made-first && chmod 0777 made-first")
		dir := filepath.Join(base, "made-first")
		_, err := Open(Config{Local: victimAddr, Dir: dir})
		wantRefused(t, err, dir, evilUID, "rm -r "+dir)
		if n := names(t, dir); len(n) != 0 {
			t.Errorf("the victim left %q in the attacker's directory", n)
		}
	})
	t.Run("directory linked", func(t *testing.T) {
		asUser(t, evil, base, "ln -s outside linked")
		dir := filepath.Join(base, "linked")
		_, err := Open(Config{Local: victimAddr, Dir: dir})
		wantRefused(t, err, dir, "symbolic link", evilUID)
	})
	t.Run("lock file linked outside", func(t *testing.T) {
		dir := victimDir(t, "lock-linked", fmt.Sprintf("ln -s %s %s", filepath.Join(outside, "made-by-the-victim"), lockName(victimAddr)))
		_, err := Open(Config{Local: victimAddr, Dir: dir})
		wantRefused(t, err, filepath.Join(dir, lockName(victimAddr)), "symbolic link", evilUID)
		if n := names(t, dir); len(n) != 1 {
			t.Errorf("the victim's refused Open left %q", n)
		}
	})
	t.Run("lock file held", func(t *testing.T) {
		dir := victimDir(t, "lock-held", "touch "+lockName(victimAddr))
		_, err := Open(Config{Local: victimAddr, Dir: dir})
		wantRefused(t, err, filepath.Join(dir, lockName(victimAddr)), "regular file", evilUID)
	})
	t.Run("ring planted", func(t *testing.T) {
		staged := filepath.Join(base, "staged.ring")
		writeEvilRing(t, staged, evilAddr, victimAddr)
		dir := victimDir(t, "ring-planted", "cp ../staged.ring "+ringName(evilAddr, victimAddr))
		core, logs := observer.New(zap.WarnLevel)
		l := openLink(t, dir, victimAddr, Config{Logger: zap.New(core)})
		path := filepath.Join(dir, ringName(evilAddr, victimAddr))
		publishEvilFrame(t, path, evilAddr, victimAddr)
		checkRingRefused(t, l, logs, path, evilUID)
	})
	t.Run("peer port planted", func(t *testing.T) {
		mem := make([]byte, portFileSize)
		initPort(mem, 4242, 7)
		if err := os.WriteFile(filepath.Join(base, "staged.port"), mem, 0o644); err != nil {
			t.Fatal(err)
		}
		dir := victimDir(t, "port-planted", "cp ../staged.port "+portName(evilAddr))
		core, logs := observer.New(zap.WarnLevel)
		l := openLink(t, dir, victimAddr, Config{Logger: zap.New(core)})
		for i := 0; i < 2; i++ {
			if n, err := l.WriteBatch([]link.Packet{{Buf: []byte("secret"), Addr: evilAddr}}); n != 1 || err != nil {
				t.Fatalf("WriteBatch = %d, %v", n, err)
			}
			delete(l.tx.absent, evilAddr) // try the port again at once
		}
		if s := l.Stats(); s.TxNoPeer != 2 || s.TxUntrusted != 1 {
			t.Errorf("TxNoPeer = %d, TxUntrusted = %d; want 2 and 1", s.TxNoPeer, s.TxUntrusted)
		}
		if _, err := os.Lstat(filepath.Join(dir, ringName(victimAddr, evilAddr))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the victim made a ring to the planted port (%v)", err)
		}
		entries := logs.FilterMessage("shmlink: refusing an untrusted file").All()
		if len(entries) != 1 || !strings.Contains(fmt.Sprint(entries[0].ContextMap()), evilUID) {
			t.Errorf("log lines refusing the port: %v, want one naming %s", logs.All(), evilUID)
		}
	})
}
