//go:build !linux

package shmlink

import "github.com/goroce/goroce/rnic/link"

// Link is a link.Link through shared memory; outside Linux Open never
// makes one.
type Link struct{ link.Link }

// Open returns ErrUnsupported outside Linux.
func Open(cfg Config) (*Link, error) {
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	return nil, ErrUnsupported
}
