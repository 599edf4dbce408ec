//go:build !linux

package cmd

import "time"

// threadCPUTime is not known here: codec-bench times by the wall clock.
func threadCPUTime() time.Duration { return 0 }
