// Package lesson is `goroce lesson` (Run): the course's scripted scenarios
// (a SEND, a lost packet, an RNR NAK, ...) on two goroce devices behind a
// simulated switch (the lab), with their packet trace and what to look
// for in the chapter of docs/course that explains each. The lab runs in
// virtual time (rnic/clock), so every lesson plays out, and traces, the
// same way on every run, on any machine.
package lesson
