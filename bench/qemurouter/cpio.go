package qemurouter

import (
	"fmt"
	"io"
	"io/fs"
)

// cpioEntry is one member of an initramfs archive: a directory (Data nil,
// Mode with fs.ModeDir) or a regular file.
type cpioEntry struct {
	Name string
	Mode fs.FileMode
	Data []byte
}

// writeCPIO writes entries as a cpio archive in the "newc" format the
// kernel unpacks into its initramfs (Documentation/driver-api/early-userspace/
// buffer-format.rst): per member a 110-byte ASCII header, the name with a
// NUL, padding to 4 bytes, the data, padding to 4 bytes; then the member
// "TRAILER!!!". The kernel accepts such an archive appended to another,
// compressed or not, and a later member replaces an earlier one of the
// same name.
func writeCPIO(w io.Writer, entries []cpioEntry) error {
	var off int64
	put := func(b []byte) error {
		n, err := w.Write(b)
		off += int64(n)
		return err
	}
	pad := func() error { return put(make([]byte, (4-off%4)%4)) }
	member := func(ino int, name string, mode uint32, nlink int, data []byte) error {
		hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		if err := put([]byte(hdr + name + "\x00")); err != nil {
			return err
		}
		if err := pad(); err != nil {
			return err
		}
		if err := put(data); err != nil {
			return err
		}
		return pad()
	}
	for i, e := range entries {
		mode, nlink := uint32(0o100000), 1 // S_IFREG
		if e.Mode.IsDir() {
			mode, nlink = 0o040000, 2 // S_IFDIR
		}
		if err := member(i+1, e.Name, mode|uint32(e.Mode.Perm()), nlink, e.Data); err != nil {
			return err
		}
	}
	return member(0, "TRAILER!!!", 0, 1, nil)
}
