package nccl

import (
	"os"
	"testing"

	"github.com/goroce/goroce/bench/testenv"
)

// TestMain says on the terminal, while the package's long tests run, that
// they still do (testenv.Heartbeat).
func TestMain(m *testing.M) {
	stop := testenv.Heartbeat()
	code := m.Run()
	stop()
	os.Exit(code)
}
