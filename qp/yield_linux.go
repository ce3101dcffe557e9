package qp

import "syscall"

// osYield gives the CPU to another runnable thread, of this process or
// another, if there is one (sched_yield). A spinning poller that shares a
// CPU with the process it waits for thus lets that process run, as Open
// MPI's pollers do when its ranks oversubscribe the CPUs.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
