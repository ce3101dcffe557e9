package main

// main is never run: the package is built with -buildmode=c-shared and
// loaded by the shim, which calls the exported goroce_* functions. A
// c-shared library's package main still needs it.
func main() {}
