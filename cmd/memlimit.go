package cmd

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// limitMemory sets the Go runtime's soft memory limit to nine tenths of the
// memory available when the simulator starts, unless GOMEMLIMIT sets one,
// and returns the limit set (0 for none). The collector lets the heap grow
// to twice what is live (GOGC=100); a simulated mesh of thousands holds
// gigabytes live, so that doubling is more than the machine has, and a
// process killed for it after half an hour loses the run. Near the limit
// the collector runs more often instead.
func limitMemory() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0 // not Linux: the runtime's default
	}
	defer f.Close()
	avail, err := memAvailable(f)
	if err != nil {
		return 0
	}
	limit := avail / 10 * 9
	debug.SetMemoryLimit(limit)
	return limit
}

// memAvailable reads MemAvailable, in bytes, from /proc/meminfo's format.
func memAvailable(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "MemAvailable" {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("meminfo: MemAvailable %q: want a count of kB", rest)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 || kb > 1<<40 {
			return 0, fmt.Errorf("meminfo: MemAvailable %q: want a positive count of kB", rest)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	return 0, fmt.Errorf("meminfo: no MemAvailable line")
}
