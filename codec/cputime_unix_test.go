//go:build unix

package codec

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time. Throughput benchmarks
// divide by it as well as by wall time, because wall time on a shared
// machine counts time the benchmark spent waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
