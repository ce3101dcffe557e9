package vtime

import (
	"errors"
	"io"
	"reflect"
	"regexp"
	"time"
)

// corpusEntry is the testing package's fuzzing corpus entry: an alias of an
// unnamed struct there, so an identical struct here is the same type.
type corpusEntry = struct {
	Parent     string
	Path       string
	Data       []byte
	Values     []any
	Generation int
	IsSeed     bool
}

// deps is what testing.MainStart needs from a test binary (the testDeps of
// Go 1.26's testing.go; testing/internal/testdeps is the real one). Run's
// single test uses none of it beyond matching its own name: no profiles,
// no coverage, no fuzzing, no test log.
type deps struct{}

var errNotSupported = errors.New("vtime: not supported outside go test")

func (deps) ImportPath() string { return "github.com/goroce/goroce/dcqcn/experiment/vtime" }
func (deps) ModulePath() string { return "github.com/goroce/goroce" }
func (deps) MatchString(pat, str string) (bool, error) {
	return regexp.MatchString(pat, str)
}
func (deps) SetPanicOnExit0(bool)                        {}
func (deps) StartCPUProfile(io.Writer) error             { return errNotSupported }
func (deps) StopCPUProfile()                             {}
func (deps) StartTestLog(io.Writer)                      {}
func (deps) StopTestLog() error                          { return nil }
func (deps) WriteProfileTo(string, io.Writer, int) error { return errNotSupported }
func (deps) CoordinateFuzzing(time.Duration, int64, time.Duration, int64, int, []corpusEntry, []reflect.Type, string, string) error {
	return errNotSupported
}
func (deps) RunFuzzWorker(func(corpusEntry) error) error { return errNotSupported }
func (deps) ReadCorpus(string, []reflect.Type) ([]corpusEntry, error) {
	return nil, errNotSupported
}
func (deps) CheckCorpus([]any, []reflect.Type) error { return errNotSupported }
func (deps) ResetCoverage()                          {}
func (deps) SnapshotCoverage()                       {}
func (deps) InitRuntimeCoverage() (mode string, tearDown func(string, string) (string, error), snapcov func() float64) {
	return "", nil, nil
}
