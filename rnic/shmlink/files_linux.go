package shmlink

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The link's files: their names, making one afresh (written under a
// temporary name and renamed over the old, so a mapping of the old file
// keeps the old file), mapping one, and the wake FIFO. Every open goes
// through trust_linux.go's checks.

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
