//go:build !linux

package exec

import "errors"

// execProgram fails: LD_PRELOAD and the goroce-verbs shim are Linux-only.
func execProgram(path string, argv, env []string) error {
	return errors.New("goroce exec runs programs on Linux only")
}
