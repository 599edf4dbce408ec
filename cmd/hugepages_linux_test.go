package cmd

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

func TestSelectedMode(t *testing.T) {
	for in, want := range map[string]string{
		"always [madvise] never\n": "madvise",
		"[always] madvise never":   "always",
		"always madvise [never]":   "never",
		"always madvise never":     "",
		"[] x":                     "",
	} {
		if got := selectedMode(in); got != want {
			t.Errorf("selectedMode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAnonymousMappings(t *testing.T) {
	const maps = `00400000-0053f000 r-xp 00000000 fe:00 10003785   /usr/bin/sketchmesh
006d5000-0270d000 rw-p 00000000 00:00 0
3f8798000000-3f879b400000 ---p 00000000 00:00 0
3f879b400000-3f87ae400000 rw-p 00000000 00:00 0
3f87ae400000-3f87ae500000 rw-p 00000000 00:00 0
7fb940600000-7fb942600000 rw-p 00000000 00:00 0                          [anon: Go: heap]
7fb942600000-7fb942a00000 rw-p 00001000 fe:00 77   /tmp/data.bin
7ffd2b135000-7ffd2b556000 rw-p 00000000 00:00 0                          [stack]
7ffd2b600000-7ffd2b7ff000 rw-p 00000000 00:00 0
garbage line
`
	got := anonymousMappings(strings.NewReader(maps), 2<<20)
	want := []mapping{
		// 0x6d5000-0x270d000 holds the block at 0x800000.
		{0x6d5000, 0x270d000},
		{0x3f879b400000, 0x3f87ae400000},
		{0x7fb940600000, 0x7fb942600000},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("anonymousMappings = %x, want %x", got, want)
	}
}

// TestHugePagesAdvised checks, on a kernel that gives huge pages on
// request, that a pass marks a large heap mapping for them.
func TestHugePagesAdvised(t *testing.T) {
	mode, size, err := hugePageMode()
	if err != nil || mode != "madvise" {
		t.Skipf("transparent huge pages are not on request here (%q, %v)", mode, err)
	}
	buf := make([]byte, 64<<20)
	buf[0] = 1
	a := &hugePageAdvisor{block: uintptr(size), advised: map[mapping]bool{}, collapsed: map[uintptr]bool{}}
	a.pass()
	addr := uintptr(unsafe.Pointer(&buf[len(buf)/2]))
	flags, err := vmFlagsAt(addr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Fatalf("mapping of %#x has VmFlags %q, want hg (MADV_HUGEPAGE)", addr, flags)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if line := useHugePages(ctx); !strings.Contains(line, "transparent_hugepage=madvise") {
		t.Fatalf("useHugePages says %q", line)
	}
}

// vmFlagsAt returns the VmFlags line of the mapping holding addr, from
// /proc/self/smaps.
func vmFlagsAt(addr uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	return "", fmt.Errorf("no mapping holds %#x", addr)
}
