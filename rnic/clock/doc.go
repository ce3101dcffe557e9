// Package clock is where goroce's device (rnic), its simulated network
// (simlink) and the DCQCN experiments (bench/experiment) get their time: the
// current time, timers, goroutines and the waits of those goroutines. Real
// is the time package; Virtual runs a whole simulation in virtual time in
// an ordinary program, without the testing package.
//
// Where it sits: below rnic and simlink (rnic.Config.Clock,
// simlink.Config.Clock), beside package time; it imports nothing of
// goroce's.
//
// # How Virtual knows that everything waits
//
// Virtual time may jump to the next timer only when every goroutine of the
// simulation is blocked. The runtime knows that (testing/synctest asks it),
// but offers it to nothing outside the testing package. There were two
// ways to know it without the runtime:
//
//   - drive the devices step by step from one event loop (the qp engines
//     have Receive, Transmit, Advance and Deadline), which means a second
//     way to run rnic.Device, with no goroutines, beside the real one, and
//     experiments written as callbacks; or
//   - have every goroutine of the simulation block only through the clock,
//     so that it can count who waits.
//
// Package clock does the second: the device keeps its goroutines and its
// code, and the real clock costs one interface call where the time package
// was called directly. The rules that make the count right:
//
//   - Goroutines of the simulation are started with Clock.Go (Virtual.Run
//     starts the first). Run counts them: live, and of those, running.
//   - A goroutine waits for another, or for time, only in Waiter.Wait, on
//     channels that are signals: buffered doorbells (Signal) or channels
//     that get closed. It parks: it stops counting as running. It does
//     not receive from the channels itself; Run does, on its behalf, and
//     counts it as running again before it wakes it. So no goroutine is
//     ever awake while the count says it waits.
//   - Timers (AfterFunc) fire in Run's goroutine, only when every
//     goroutine is parked and none of their channels is ready; time then
//     jumps to the earliest timer (timers due at the same instant fire in
//     the order they were set).
//
// Run wakes one parked goroutine at a time, and only when none runs: the
// first ready one in the order the Waiters were made. So a simulation runs
// as one thread whose order depends on nothing but the simulation, and the
// same inputs (simlink's seed included) give the same results every time,
// which testing/synctest, whose goroutines run in parallel, does not
// promise. The cost is parallelism: a simulation uses one CPU at a time.
//
// A goroutine that blocks in any other way (a sync.Mutex, a
// sync.WaitGroup, a channel outside a Waiter) still counts as running, so
// time stands still while it blocks; if what it waits for is a parked
// goroutine, the simulation hangs. Mutexes are safe: with one goroutine
// running at a time, nobody holds one while parked, as long as nobody
// waits with a lock held.
package clock
