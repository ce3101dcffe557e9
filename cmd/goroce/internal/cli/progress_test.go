package cli

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// lockedBuffer is a strings.Builder for two goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A run shorter than the interval prints nothing; a longer one prints its
// latest step once per interval, with the time since the start, and
// nothing after Stop.
func TestProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		p := StartProgress(&out, "goroce x", 2*time.Second)
		p.Step("warming up")
		time.Sleep(1900 * time.Millisecond)
		synctest.Wait()
		if s := out.String(); s != "" {
			t.Fatalf("before the first interval: %q", s)
		}
		time.Sleep(200 * time.Millisecond)
		p.Step("size %d of %d", 3, 7)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		p.Stop()
		time.Sleep(10 * time.Second)
		want := "goroce x: warming up (2 s)\ngoroce x: size 3 of 7 (4 s)\n"
		if s := out.String(); s != want {
			t.Errorf("got %q, want %q", s, want)
		}
	})
}
