package exec

import "syscall"

// execProgram replaces goroce with the program at path, so that signals
// and the exit status are the program's own. It returns only on failure.
func execProgram(path string, argv, env []string) error {
	return syscall.Exec(path, argv, env)
}
