package bootstrap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// Frame size limits, so that a confused or hostile peer cannot make this
// side allocate without bound. Memory grows only as bytes arrive, never
// to a length a header merely claims.
const (
	// maxFrame bounds a round's frame from a rank that has proven itself
	// (and the root's answers): an AllGather blob, or all of them.
	maxFrame = 64 << 20
	// maxControl bounds a watch-mode control frame: a notice and its cause.
	maxControl = 64 << 10
)

// controlBit in a frame's length marks a control frame (see watch.go):
// its payload is a kind byte and its fields, not a round's blob.
const controlBit = 1 << 31

func writeFrame(w io.Writer, payload []byte) error { return writeFrameKind(w, payload, false) }

func writeFrameKind(w io.Writer, payload []byte, control bool) error {
	b := make([]byte, 4+len(payload))
	n := uint32(len(payload))
	if control {
		n |= controlBit
	}
	binary.BigEndian.PutUint32(b, n)
	copy(b[4:], payload)
	_, err := w.Write(b)
	return err
}

// readFrame reads a data frame of at most max bytes; a control frame is a
// protocol error.
func readFrame(r io.Reader, max int) ([]byte, error) {
	b, control, err := readFrameKind(r, max)
	if err == nil && control {
		err = fmt.Errorf("%w: control frame where data was expected", ErrProtocol)
	}
	return b, err
}

// readFrameKind reads a frame of at most max bytes and says whether it is
// a control frame. Its buffer grows with the bytes that arrive.
func readFrameKind(r io.Reader, max int) (b []byte, control bool, err error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, false, err
	}
	n := binary.BigEndian.Uint32(h[:])
	control = n&controlBit != 0
	n &^= controlBit
	if uint64(n) > uint64(max) {
		return nil, false, fmt.Errorf("%w: a frame of %d bytes, more than the %d allowed here", ErrProtocol, n, max)
	}
	var buf bytes.Buffer
	buf.Grow(min(int(n), 64<<10))
	if _, err := buf.ReadFrom(io.LimitReader(r, int64(n))); err != nil {
		return nil, false, err
	}
	if buf.Len() < int(n) {
		return nil, false, io.ErrUnexpectedEOF
	}
	return buf.Bytes(), control, nil
}

const (
	statusOK  = 0
	statusErr = 1
)

func okFrame(blobs [][]byte) []byte {
	b := []byte{statusOK}
	for _, x := range blobs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(x)))
		b = append(b, x...)
	}
	return b
}

func errFrame(msg string) []byte { return append([]byte{statusErr}, msg...) }

// parseAnswer splits a root answer into n blobs, or returns the root's
// error.
func parseAnswer(b []byte, n int) ([][]byte, error) {
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: empty answer", ErrProtocol)
	}
	if b[0] == statusErr {
		return nil, &RootError{Msg: string(b[1:])}
	}
	b = b[1:]
	var blobs [][]byte
	for len(b) >= 4 && len(blobs) < n {
		l := binary.BigEndian.Uint32(b)
		if uint64(l) > uint64(len(b)-4) {
			return nil, fmt.Errorf("%w: blob of %d bytes in %d", ErrProtocol, l, len(b)-4)
		}
		blobs = append(blobs, b[4:4+l])
		b = b[4+l:]
	}
	if len(blobs) != n || len(b) != 0 {
		return nil, fmt.Errorf("%w: %d blobs, want %d", ErrProtocol, len(blobs), n)
	}
	return blobs, nil
}
