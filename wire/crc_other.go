//go:build !amd64

package wire

import "github.com/klauspost/crc32"

// crcUpdate is crc32.Update(crc, crcTable, p).
func crcUpdate(crc uint32, p []byte) uint32 { return crc32.Update(crc, crcTable, p) }

// copyUpdate copies src to the start of dst, which must be at least as
// long, and returns crcUpdate(crc, src).
func copyUpdate(crc uint32, dst, src []byte) uint32 {
	copy(dst, src)
	return crcUpdate(crc, src)
}
