//go:build !linux

package udpceiling

import (
	"errors"
	"fmt"
)

// GSO measures UDP GSO send and GRO receive; they are Linux features, so
// here it returns an error wrapping errors.ErrUnsupported.
func GSO(Config) (Throughput, error) {
	return Throughput{}, fmt.Errorf("%w: UDP GSO/GRO are Linux only", errors.ErrUnsupported)
}
