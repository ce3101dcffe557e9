// Package lesson is `goroce lesson` (Run): the course's scripted scenarios
// (a SEND, a lost packet, an RNR NAK, ...) on two goroce devices behind a
// simulated switch (the lab), with their packet trace and what to look
// for in the chapter of docs/course that explains each.
package lesson
