//go:build !amd64

package wire

import "github.com/klauspost/crc32"

// crcUpdate is crc32.Update(crc, crcTable, p).
func crcUpdate(crc uint32, p []byte) uint32 { return crc32.Update(crc, crcTable, p) }

// copyUpdate copies src to the start of dst, which must be at least as
// long, and returns the CRC continued from crc over the bytes copied.
func copyUpdate(crc uint32, dst, src []byte) uint32 {
	dst = dst[:len(src)]
	copy(dst, src)
	return crcUpdate(crc, dst)
}
