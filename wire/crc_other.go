//go:build !amd64

package wire

import "github.com/klauspost/crc32"

// crcUpdate is crc32.Update(crc, crcTable, p).
func crcUpdate(crc uint32, p []byte) uint32 { return crc32.Update(crc, crcTable, p) }
