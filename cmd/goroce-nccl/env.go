//go:build cgo

package main

/*
extern char **environ;
static char *envAt(int i) { return environ[i]; }
*/
import "C"

import (
	"os"
	"strings"
)

// syncEnv makes the Go runtime's copy of the environment, taken when the
// library was loaded, the process's environment as it is now, so that a
// variable the program set after loading it (Python's os.environ, C's
// setenv) counts when a communicator is created, as NCCL's getenv reads
// it then. The functions that create communicators or unique IDs call it.
func syncEnv() {
	now := map[string]string{}
	for i := 0; ; i++ {
		p := C.envAt(C.int(i))
		if p == nil {
			break
		}
		if k, v, ok := strings.Cut(C.GoString(p), "="); ok {
			now[k] = v
		}
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "" {
			if _, ok := now[k]; !ok {
				os.Unsetenv(k)
			}
		}
	}
	for k, v := range now {
		if old, ok := os.LookupEnv(k); !ok || old != v {
			os.Setenv(k, v)
		}
	}
}
