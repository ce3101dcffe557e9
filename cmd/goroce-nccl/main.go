package main

// main is never run: the package is built with -buildmode=c-shared and
// its exported nccl* functions are called by C programs. A c-shared
// library's package main still needs it.
func main() {}
