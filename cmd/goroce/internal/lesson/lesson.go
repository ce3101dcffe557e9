package lesson

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
)

// This file holds `goroce lesson NAME`: the scripted scenarios of the
// course "RDMA from the wire up" (docs/course). Each lesson stages, on
// demand, something a real command shows only by chance (a lost packet,
// a receiver without a posted receive, a bad rkey), between goroce devices
// on a simulated switch inside this process, in virtual time, narrates
// what it does, and ends with what to look for in the trace. The lab they
// run in is in lab.go, its clock in labclock.go; the lessons are in rc.go
// (the operations), faults.go (what goes wrong on RC) and unreliable.go
// (UC and UD).

const lessonAbout = `Runs one scripted scenario of the course "RDMA from the wire up"
(docs/course): goroce devices A and B (and for ud, C) on a simulated switch
inside this process, RC, UC or UD queue pairs between them, and a short
script of work requests. The lesson says what it does and what completed,
and ends with what to look for. --trace interleaves the packet trace of
every device (lines starting with the device's name: A, B, C) and the
switch's drops (lines starting with S), so you can watch every PSN, ACK,
NAK and retransmission.

The switch is rnic/simlink, with cables of 10 Gb/s and 1 µs each way; the
devices are the same code that runs over UDP. The lab runs in virtual
time: the devices, the switch and the script share one clock, which moves
on to the next timer (an RNR wait, an ACK timeout) only when everything in
the lab waits. So a lesson plays out the same way on any machine, however
busy, and the trace's times (seconds since the lesson started) are exact
and the same on every run: an RNR wait of 10.24 ms shows as 0.010240. The
--pcap file is stamped with the same virtual time, counted from midnight
UTC on 2000-01-01. PSNs start at 0x000a00 for A's requests and 0x000b00
for B's, so you can tell them apart; QPNs and keys are random, as on real
RNICs.

Lessons:
%s
The other chapters use the other commands:
  incast      goroce dcqcn incast --flows 4 --duration 300ms [--dcqcn=false]
  allreduce   NCCL_ALGO=Ring goroce nccl-perf all_reduce -np 3 -b 48K -e 48K -n 1 -w 0 --trace
  gpudirect   goroce nccl-perf all_reduce -np 2 -b 1M -e 1M --device --gdr=on|off

Exit status: 0 when the scenario played out as the lesson says, 1 when it
did not, 2 on bad flags or an unknown lesson.`

// A lesson is one scripted scenario.
type lesson struct {
	name    string
	summary string // one line for the list
	chapter string // the course chapter, under docs/course
	lab     labConfig
	// run plays the scenario in l and returns an error if it did not go
	// as the lesson says (a completion with the wrong status, a counter
	// that did not move).
	run func(ctx context.Context, l *lab) error
	// lookFor is printed at the end: what the trace shows, line by line.
	lookFor string
}

// lessons is the course's list, in chapter order. Which file holds each
// is said at the top of this file.
var lessons = []lesson{
	sendLesson, writeLesson, readLesson, atomicLesson,
	lostPacketLesson, rnrLesson, accessErrorLesson,
	ucLossLesson, udLesson,
}

// lessonTimeout bounds a whole lesson in real time: a lesson runs in
// virtual time (labClock) and takes a fraction of a second of CPU, so
// reaching it means the lab went round in circles without waiting. The
// lab's goroutines see it end (their waits include the context); one
// that hung outside the clock would keep the lab from ending, so play
// gives up hangGrace later.
const (
	lessonTimeout = 20 * time.Second
	hangGrace     = 5 * time.Second
)

// Run is `goroce lesson NAME`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var list strings.Builder
	for _, ls := range lessons {
		fmt.Fprintf(&list, "  %-13s %s\n", ls.name, ls.summary)
	}
	fs := cli.NewFlagSet("goroce lesson NAME [--trace] [--pcap FILE]", fmt.Sprintf(lessonAbout, list.String()))
	trace := fs.Bool("trace", os.Getenv("GOROCE_TRACE") != "",
		"interleave every packet the devices send and receive, their QP events and the switch's drops with the lesson, on stdout")
	pcapPath := fs.String("pcap", "", "write every packet device A sends or receives to this pcap `file` (Wireshark decodes it as RoCE), stamped with the lab's virtual time")
	pos, code, ok := cli.ParseWithHosts(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		fmt.Fprint(stderr, "goroce lesson: name a lesson\n\n")
		fs.Usage() // cli.ParseFlags left the output on stderr
		return cli.ExitUsage
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "goroce lesson: one lesson at a time, got %q\n", pos)
		return cli.ExitUsage
	}
	ls, ok := findLesson(pos[0])
	if !ok {
		fmt.Fprintf(stderr, "goroce lesson: unknown lesson %q; the lessons are:\n%s", pos[0], list.String())
		return cli.ExitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, lessonTimeout)
	defer cancel()
	return ls.play(ctx, *trace, *pcapPath, stdout, stderr)
}

// findLesson returns the lesson called name.
func findLesson(name string) (lesson, bool) {
	for _, ls := range lessons {
		if ls.name == name {
			return ls, true
		}
	}
	return lesson{}, false
}

// play runs the lesson on a new lab clock and returns the exit status.
func (ls *lesson) play(ctx context.Context, trace bool, pcapPath string, stdout, stderr io.Writer) int {
	clk := newLabClock()
	code := cli.ExitFail
	ran := make(chan error, 1)
	go func() {
		ran <- clk.Run(func() { code = ls.playOn(ctx, clk, trace, pcapPath, stdout, stderr) })
	}()
	hung := time.NewTimer(lessonTimeout + hangGrace)
	defer hung.Stop()
	select {
	case err := <-ran:
		if err != nil {
			fmt.Fprintf(stderr, "goroce lesson %s: %v\n", ls.name, err)
			return cli.ExitFail
		}
		return code
	case <-hung.C:
		fmt.Fprintf(stderr, "goroce lesson %s: the lab did not end within %v: a goroutine of it waits outside its clock\n",
			ls.name, lessonTimeout+hangGrace)
		return cli.ExitFail
	}
}

// playOn builds the lesson's lab on clk, runs the scenario and prints what
// to look for. It runs in clk's goroutine (inside clk.Run) and returns the
// exit status.
func (ls *lesson) playOn(ctx context.Context, clk *labClock, trace bool, pcapPath string, stdout, stderr io.Writer) int {
	out := &lessonOutput{w: stdout, clock: clk, start: clk.Now()}
	l, err := newLab(clk, ls.lab, out, trace, pcapPath)
	if err != nil {
		fmt.Fprintf(stderr, "goroce lesson %s: %v\n", ls.name, err)
		return cli.ExitFail
	}
	out.say("goroce lesson %s: %s", ls.name, ls.summary)
	l.introduce()
	if !trace {
		out.say("(run with --trace to see every packet)")
	}
	out.say("")
	runErr := ls.run(ctx, l)
	if err := l.close(); err != nil && runErr == nil {
		runErr = err
	}
	out.say("")
	if runErr != nil {
		out.say("The lesson did not go as planned: %v", runErr)
		fmt.Fprintf(stderr, "goroce lesson %s: %v\n", ls.name, runErr)
		return cli.ExitFail
	}
	out.say("What to look for (docs/course/%s):", ls.chapter)
	out.say("%s", strings.TrimRight(ls.lookFor, "\n"))
	return cli.ExitOK
}
