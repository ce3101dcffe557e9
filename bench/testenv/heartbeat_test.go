package testenv

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// One line per interval, with the time since the start, and none after
// stop.
func TestHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		stop := heartbeat(&out, "cmd/goroce-verbs", 30*time.Second)
		time.Sleep(65 * time.Second)
		stop()
		time.Sleep(time.Minute)
		want := "go test: cmd/goroce-verbs: still running (30s)\ngo test: cmd/goroce-verbs: still running (1m0s)\n"
		if got := out.b.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

// The package is named as go test lists it, from the module root.
func TestPackageName(t *testing.T) {
	if got := packageName(); got != "bench/testenv" {
		t.Errorf("packageName() = %q, want bench/testenv", got)
	}
}
