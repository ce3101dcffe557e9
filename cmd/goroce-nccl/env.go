//go:build cgo

package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/goroce/goroce/nccl"
)

// getenv reads the process's environment as it is now (C's getenv), not
// the copy the Go runtime took when the library was loaded: a variable
// the program set since (Python's os.environ, C's setenv) counts, as
// NCCL's getenv reads it when a communicator is created.
func getenv(k string) string {
	ck := C.CString(k)
	defer C.free(unsafe.Pointer(ck))
	if v := C.getenv(ck); v != nil {
		return C.GoString(v)
	}
	return ""
}

// options reads the library's settings from the process's environment as
// it is now (nccl.OptionsFromEnv): the functions that create
// communicators or unique IDs call it.
func options() (nccl.Options, error) {
	return nccl.OptionsFromEnv(getenv)
}
