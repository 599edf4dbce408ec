package cmd

import (
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD, which package syscall does not
// name.
const rusageThread = 1

// threadCPUTime is the CPU time, user and system, of the calling thread,
// or 0 when the system does not say. codec-bench divides by it, its
// goroutine locked to the thread: wall time on a shared machine counts the
// time it waited for a core, and the process's time counts the collector's
// background work, which with the bench's small heap runs every few decodes,
// far more often than in a node that holds a model and its data.
func threadCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
