package cmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Huge pages for the simulator's heap.
//
// A simulated mesh of P cores reads per-member state of one core after
// another: at P = 10,000 gigabytes, touched at random. With 4 KiB pages
// nearly every such read also misses the TLB, and the page tables of a
// heap that size do not fit the cache either, so each miss is a second
// walk to memory. 2 MiB pages make the tables 512 times smaller. Where the
// kernel gives them only on request (transparent_hugepage "madvise", a
// common default; the Go runtime asks for them only for its own metadata),
// the simulator asks for its large anonymous mappings, which are the Go
// heap: madvise(MADV_HUGEPAGE) so that later faults take huge pages, and
// MADV_COLLAPSE, once per 2 MiB block, for the pages faulted before it saw
// the mapping. Measured (README, "Recycled envelopes, a staleness probe
// without names, huge pages"): P = 4096 8 % faster, its peak resident
// memory within 1 % of 4 KiB pages. Under a soft memory limit the runtime
// gives free pages back 4 KiB at a time, which splits huge pages again, so
// a heap held at its limit keeps fewer of them.

// hugePageSize is the x86-64 and arm64 (4 KiB base) PMD size; the kernel
// says in transparent_hugepage/hpage_pmd_size, read in hugePageMode.
const hugePageSize = 2 << 20

// hugePageInterval is how often the mappings are read: the heap of a
// large mesh grows by gigabytes in its first minute.
const hugePageInterval = 100 * time.Millisecond

// hugePageMode returns the kernel's transparent huge page mode (always,
// madvise or never) and its PMD page size, or an error naming why it
// cannot tell.
func hugePageMode() (string, int64, error) {
	const dir = "/sys/kernel/mm/transparent_hugepage/"
	b, err := os.ReadFile(dir + "enabled")
	if err != nil {
		return "", 0, fmt.Errorf("huge pages: %w", err)
	}
	mode := selectedMode(string(b))
	if mode == "" {
		return "", 0, fmt.Errorf("huge pages: no mode selected in %q", strings.TrimSpace(string(b)))
	}
	size := int64(hugePageSize)
	if b, err := os.ReadFile(dir + "hpage_pmd_size"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
			size = n
		}
	}
	return mode, size, nil
}

// selectedMode returns the bracketed word of a sysfs choice list such as
// "always [madvise] never", "" for none.
func selectedMode(s string) string {
	for _, w := range strings.Fields(s) {
		if len(w) > 2 && w[0] == '[' && w[len(w)-1] == ']' {
			return w[1 : len(w)-1]
		}
	}
	return ""
}

// useHugePages asks for huge pages for the process's heap until ctx ends,
// when the kernel gives them only on request, and says what it does in
// the returned line ("" when there is nothing to say).
func useHugePages(ctx context.Context) string {
	mode, size, err := hugePageMode()
	switch {
	case err != nil:
		return fmt.Sprintf("memory: 4 KiB pages (%v)", err)
	case mode == "always":
		return "memory: 2 MiB pages where the heap allows (transparent_hugepage=always)"
	case mode != "madvise":
		return fmt.Sprintf("memory: 4 KiB pages (transparent_hugepage=%s)", mode)
	}
	a := &hugePageAdvisor{block: uintptr(size), advised: map[mapping]bool{}, collapsed: map[uintptr]bool{}}
	a.pass()
	go func() {
		t := time.NewTicker(hugePageInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				a.pass()
			}
		}
	}()
	return fmt.Sprintf("memory: %d MiB pages asked for the heap (transparent_hugepage=madvise; --huge-pages=false not to)", size>>20)
}

// mapping is one line of /proc/self/maps: [start, end).
type mapping struct{ start, end uintptr }

// hugePageAdvisor remembers what it asked for, so that each mapping is
// advised once and each block collapsed once: a block the runtime later
// gave back (scavenged) is not filled again.
type hugePageAdvisor struct {
	block     uintptr
	advised   map[mapping]bool
	collapsed map[uintptr]bool
}

// pass advises every large anonymous mapping not advised yet. Errors are
// the kernel's to give (a mapping gone in between, memory too fragmented
// to collapse): the pages stay as they are.
func (a *hugePageAdvisor) pass() {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	for _, m := range anonymousMappings(f, a.block) {
		if a.advised[m] {
			continue
		}
		a.advised[m] = true
		madvise(m.start, m.end-m.start, unix.MADV_HUGEPAGE)
		lo := (m.start + a.block - 1) / a.block * a.block
		for b := lo; b+a.block <= m.end; b += a.block {
			if !a.collapsed[b] {
				a.collapsed[b] = true
				madvise(b, a.block, unix.MADV_COLLAPSE)
			}
		}
	}
}

func madvise(addr, length uintptr, advice int) {
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, addr, length, uintptr(advice))
}

// anonymousMappings returns the private, writable, anonymous mappings of
// r (the format of /proc/self/maps) that hold at least one whole aligned
// block.
func anonymousMappings(r io.Reader, block uintptr) []mapping {
	var out []mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// start-end perms offset dev inode [path]
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[1] != "rw-p" || f[4] != "0" || len(f) > 5 && !strings.HasPrefix(f[5], "[anon") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		first := (uintptr(start) + block - 1) / block * block
		if first+block <= uintptr(end) {
			out = append(out, mapping{uintptr(start), uintptr(end)})
		}
	}
	return out
}
