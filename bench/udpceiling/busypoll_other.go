//go:build !unix

package udpceiling

import (
	"errors"
	"fmt"
	"net"
	"time"
)

func spinReader(*net.UDPConn, time.Duration) (func([]byte) (int, error), error) {
	return nil, fmt.Errorf("%w: busy polling uses read(2)", errors.ErrUnsupported)
}
