package shmlink

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Which files the link trusts: a directory of this user's own with mode
// 0700, and in it files of this user's own closed to others, opened
// without following a symbolic link and checked with fstat on the
// descriptor that is then used. What fails is refused with ErrUntrusted,
// its path named with what to do; a stale file of this user's own is
// replaced, another user's never.

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
