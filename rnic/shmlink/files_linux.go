package shmlink

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// File names; see the package documentation.
func lockName(a netip.AddrPort) string        { return a.String() + ".lock" }
func portName(a netip.AddrPort) string        { return a.String() + ".port" }
func wakeName(a netip.AddrPort) string        { return a.String() + ".wake" }
func ringName(src, dst netip.AddrPort) string { return src.String() + "," + dst.String() + ".ring" }
func ringSuffix(dst netip.AddrPort) string    { return "," + dst.String() + ".ring" }

// newGeneration returns a random nonzero generation.
func newGeneration() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		if g := binary.LittleEndian.Uint64(b[:]); g != 0 {
			return g
		}
	}
}

// mapFile maps size bytes of f shared, readable and writable.
func mapFile(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// prepareDir makes dir (mode 0700, its missing parents too) unless it
// exists, and checks that it is a directory, not a symbolic link, that
// this user owns and that no other user may write: a directory that
// another user made first, or may write, is one where the link's files
// could have been planted, read or replaced, and is refused with
// ErrUntrusted, its path named. One of this user's own that others may
// only read or enter (0755, as mkdir makes it) holds nothing planted: it
// is made 0700, and the returned note says so.
func prepareDir(dir string) (note string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("shmlink: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if unix.Lstat(dir, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return "", fmt.Errorf("%w: directory %s is a symbolic link (owned by uid %d): not following it; "+
				"remove it (rm %s) to have it made afresh, or choose a directory of your own (Config.Dir)",
				ErrUntrusted, dir, st.Uid, dir)
		}
		return "", fmt.Errorf("shmlink: directory %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("shmlink: directory %s: %w", dir, err)
	}
	me := os.Geteuid()
	switch perm := st.Mode & 0o7777; {
	case int(st.Uid) != me:
		return "", fmt.Errorf("%w: directory %s is owned by uid %d, not by this user (uid %d): another user "+
			"made it, and could read or feed this user's rings; remove it (rm -r %s) to have it made afresh, "+
			"or choose a directory of your own with mode 0700 (Config.Dir)", ErrUntrusted, dir, st.Uid, me, dir)
	case perm&0o022 != 0:
		return "", fmt.Errorf("%w: directory %s has mode %#o, not 0700: other users can plant files in it; "+
			"remove it (rm -r %s) to have it made afresh, or choose a directory of your own with mode 0700 (Config.Dir)",
			ErrUntrusted, dir, perm, dir)
	case perm != 0o700:
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return "", fmt.Errorf("shmlink: directory %s has mode %#o, not 0700, and chmod failed: %w", dir, perm, err)
		}
		return fmt.Sprintf("directory %s had mode %#o; made it 0700", dir, perm), nil
	}
	return "", nil
}

// checkOwn reports why a file the link opened is not one it may trust:
// not a regular file (or, want FIFO, a FIFO), not this user's, or open
// to others (any permission for group or others). nil means trusted.
func checkOwn(st *unix.Stat_t, path string, fifo bool) error {
	want, what := uint32(unix.S_IFREG), "a regular file"
	if fifo {
		want, what = unix.S_IFIFO, "a FIFO"
	}
	switch me := os.Geteuid(); {
	case st.Mode&unix.S_IFMT != want:
		return fmt.Errorf("%w: %s is not %s (mode %#o, owner uid %d)", ErrUntrusted, path, what, st.Mode, st.Uid)
	case int(st.Uid) != me:
		return fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d)", ErrUntrusted, path, st.Uid, me)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("%w: %s has mode %#o: others may write it", ErrUntrusted, path, st.Mode&0o7777)
	}
	return nil
}

// openOwn opens the file at path with flags (O_NOFOLLOW, O_NONBLOCK and
// O_CLOEXEC added: a symbolic link is never followed, a FIFO or device
// never waited on) and checks it with fstat (checkOwn), so that what is
// used is the file checked. A symbolic link there fails with ErrUntrusted.
func openOwn(path string, flags int, perm uint32) (*os.File, *unix.Stat_t, error) {
	fd, err := unix.Open(path, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, perm)
	if errors.Is(err, unix.ELOOP) {
		var st unix.Stat_t
		unix.Lstat(path, &st)
		return nil, nil, fmt.Errorf("%w: %s is a symbolic link (owner uid %d): not following it", ErrUntrusted, path, st.Uid)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("shmlink: %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	st := new(unix.Stat_t)
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("shmlink: %w", &os.PathError{Op: "fstat", Path: path, Err: err})
	}
	if err := checkOwn(st, path, false); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	// Regular files never block: clear O_NONBLOCK again for the
	// file's users.
	unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), path), st, nil
}

// openLock opens (making it if missing) the lock file at path: a regular
// file of this user's own, never followed. Anything else of this user's
// own there (a symbolic link, a FIFO) is stale, since no link can hold it,
// and is replaced; anybody else's is refused (ErrUntrusted). A lock file
// of this user's whose mode lets others in is made 0600: a live link may
// hold it, so it is not replaced.
func openLock(path string) (*os.File, error) {
	me := os.Geteuid()
	for try := 0; ; try++ {
		var st unix.Stat_t
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
		switch {
		case err == nil:
			if err := unix.Fstat(fd, &st); err != nil {
				unix.Close(fd)
				return nil, fmt.Errorf("shmlink: %w", &os.PathError{Op: "fstat", Path: path, Err: err})
			}
			if st.Mode&unix.S_IFMT == unix.S_IFREG && int(st.Uid) == me {
				if st.Mode&0o077 != 0 {
					unix.Fchmod(fd, 0o600)
				}
				unix.SetNonblock(fd, false)
				return os.NewFile(uintptr(fd), path), nil
			}
			unix.Close(fd)
		case errors.Is(err, unix.ELOOP):
			if err := unix.Lstat(path, &st); err != nil {
				return nil, fmt.Errorf("shmlink: %w", &os.PathError{Op: "lstat", Path: path, Err: err})
			}
		default:
			return nil, fmt.Errorf("shmlink: %w", &os.PathError{Op: "open", Path: path, Err: err})
		}
		kind := fmt.Sprintf("a file of mode %#o", st.Mode)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			kind = "a symbolic link"
		case unix.S_IFREG:
			kind = "a regular file"
		}
		if int(st.Uid) != me {
			return nil, fmt.Errorf("%w: lock file %s is %s owned by uid %d, not by this user (uid %d): "+
				"not following or replacing it; remove it (rm %s), and the directory's other files an unknown user left",
				ErrUntrusted, path, kind, st.Uid, me, path)
		}
		if try > 0 {
			return nil, fmt.Errorf("%w: lock file %s is %s again after it was replaced", ErrUntrusted, path, kind)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("shmlink: %w", err)
		}
	}
}

// replaceable reports whether the link may replace what is at path: a
// file of this user's own, or nothing. Another user's file is refused
// (ErrUntrusted), never removed or renamed over.
func replaceable(path string) error {
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("shmlink: %w", &os.PathError{Op: "lstat", Path: path, Err: err})
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d): not replacing it; remove it (rm %s) if it is not yours",
			ErrUntrusted, path, st.Uid, os.Geteuid(), path)
	}
	return nil
}

// createMapped makes a file of size zero bytes at path, by writing it
// under a temporary name and renaming it over whatever path held (so a
// process mapping the old file keeps the old file), and maps it. fill
// writes its header before it appears under path. What path held must be
// this user's own (replaceable). It returns the mapping and the new
// file's inode.
func createMapped(path string, size int, fill func(mem []byte)) ([]byte, uint64, error) {
	if err := replaceable(path); err != nil {
		return nil, 0, err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if replaceable(tmp) == nil {
		os.Remove(tmp)
	}
	// O_EXCL: a file that appeared in between, or a symbolic link, fails.
	f, _, err := openOwn(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		os.Remove(tmp)
		return nil, 0, err
	}
	mem, err := mapFile(f, size)
	if err != nil {
		os.Remove(tmp)
		return nil, 0, err
	}
	fill(mem)
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		unix.Munmap(mem)
		os.Remove(tmp)
		return nil, 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		unix.Munmap(mem)
		os.Remove(tmp)
		return nil, 0, err
	}
	return mem, st.Ino, nil
}

// openMapped maps an existing file at path whole, provided it is this
// user's own regular file, closed to others (openOwn: never a symbolic
// link followed, ErrUntrusted otherwise), of at least min bytes and at
// most max, and returns the mapping and its inode.
func openMapped(path string, min, max int) ([]byte, uint64, error) {
	f, st, err := openOwn(path, unix.O_RDWR, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if st.Size < int64(min) || st.Size > int64(max) {
		return nil, 0, fmt.Errorf("shmlink: %s: not a regular file of %d to %d bytes", filepath.Base(path), min, max)
	}
	mem, err := mapFile(f, int(st.Size))
	if err != nil {
		return nil, 0, err
	}
	return mem, st.Ino, nil
}

// inode returns the inode of what is at path (a symbolic link's own, not
// followed), or 0 if there is nothing.
func inode(path string) uint64 {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return 0
	}
	return st.Ino
}

// unmap releases a mapping.
func unmap(mem []byte) { unix.Munmap(mem) }

// makeWakeFIFO makes a fresh FIFO at path, replacing what was there if it
// is this user's own (replaceable), and opens it for reading and writing
// (so that it never reports end of file) through Go's poller, so that a
// goroutine waiting on it holds no thread. What it opens must be the FIFO
// it made: never a symbolic link followed, checked with fstat.
func makeWakeFIFO(path string) (*os.File, error) {
	if err := replaceable(path); err != nil {
		return nil, err
	}
	os.Remove(path)
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	// Fstat through SyscallConn: f.Fd would take the file out of the
	// poller.
	var st unix.Stat_t
	var statErr error
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) { statErr = unix.Fstat(int(fd), &st) })
	}
	if err == nil {
		err = statErr
	}
	if err == nil {
		err = checkOwn(&st, path, true)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openWake opens the FIFO at path for writing without blocking, or
// returns -1 if there is none, or something else is there: a symbolic
// link, another kind of file, or a FIFO not this user's own.
func openWake(path string) int {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || checkOwn(&st, path, true) != nil {
		unix.Close(fd)
		return -1
	}
	return fd
}

var wakeByte = [1]byte{1}

// wake writes a byte to a wake FIFO opened by openWake; a full pipe
// already holds a wake-up, so a write that would block is dropped.
func wake(fd int) {
	if fd >= 0 {
		unix.Write(fd, wakeByte[:])
	}
}

// closeWake closes a wake FIFO opened by openWake.
func closeWake(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}
