package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// ProgressEnv, set to 1, makes a command report progress (see
// ProgressWriter) where its stderr is not a terminal, and set to 0 keeps
// it quiet on one. goroce run and -np pass it to ranks, whose stderr is a
// pipe to the launcher, when the launcher's is a terminal.
const ProgressEnv = "GOROCE_PROGRESS"

// ProgressWriter returns where a command's progress lines go: stderr when
// it is a terminal, as a person watching the run wants, nothing when it is
// a file or a pipe (a log, a test comparing output), either way unless
// $GOROCE_PROGRESS says otherwise.
func ProgressWriter(stderr io.Writer) io.Writer {
	switch os.Getenv(ProgressEnv) {
	case "1":
		return stderr
	case "0":
		return io.Discard
	}
	if IsTerminal(stderr) {
		return stderr
	}
	return io.Discard
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ProgressEvery is how long a step of a long run may go unreported: a
// command that takes longer than this says on stderr what it is doing,
// once per ProgressEvery, and a shorter run prints nothing.
const ProgressEvery = 2 * time.Second

// A Progress says, on its writer, which step a long run is at and how
// long the run has taken: one line "PREFIX: STEP (12 s)" each interval,
// from the first interval on. Step may be called from any goroutine, as
// often as the run likes; it only records the text.
type Progress struct {
	w      io.Writer
	prefix string
	start  time.Time
	stop   chan struct{}
	done   chan struct{}

	mu   sync.Mutex
	step string
}

// StartProgress starts reporting on w every interval, until Stop.
func StartProgress(w io.Writer, prefix string, every time.Duration) *Progress {
	p := &Progress{w: w, prefix: prefix, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(every)
	return p
}

// Step records what the run is doing now.
func (p *Progress) Step(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	p.mu.Lock()
	p.step = s
	p.mu.Unlock()
}

// Stop ends the reports; none is printed after it returns.
func (p *Progress) Stop() {
	close(p.stop)
	<-p.done
}

func (p *Progress) run(every time.Duration) {
	defer close(p.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.mu.Lock()
			step := p.step
			p.mu.Unlock()
			if step == "" {
				step = "running"
			}
			fmt.Fprintf(p.w, "%s: %s (%.0f s)\n", p.prefix, step, now.Sub(p.start).Seconds())
		}
	}
}
