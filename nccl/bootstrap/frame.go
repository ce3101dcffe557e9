package bootstrap

import (
	"encoding/binary"
	"fmt"
	"io"
)

// maxFrame bounds a frame so a confused peer cannot make us allocate
// without limit.
const maxFrame = 64 << 20

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

// readFrame reads a data frame; a control frame is a protocol error.
func readFrame(r io.Reader) ([]byte, error) {
	b, control, err := readFrameKind(r)
	if err == nil && control {
		err = fmt.Errorf("%w: control frame where data was expected", ErrProtocol)
	}
	return b, err
}

func readFrameKind(r io.Reader) (b []byte, control bool, err error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, false, err
	}
	n := binary.BigEndian.Uint32(h[:])
	control = n&controlBit != 0
	n &^= controlBit
	if n > maxFrame {
		return nil, false, fmt.Errorf("%w: frame of %d bytes", ErrProtocol, n)
	}
	b = make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, control, err
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
