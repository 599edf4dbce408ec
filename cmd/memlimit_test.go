package cmd

import (
	"strings"
	"testing"
)

func TestMemAvailable(t *testing.T) {
	got, err := memAvailable(strings.NewReader("MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   20000000 kB\nBuffers: 1 kB\n"))
	if err != nil || got != 20000000*1024 {
		t.Fatalf("got %d, %v; want %d bytes", got, err, 20000000*1024)
	}
	for _, bad := range []string{
		"MemTotal: 1 kB\n",
		"MemAvailable: 12 MB\n",
		"MemAvailable: -5 kB\n",
		"MemAvailable: 0 kB\n",
		"MemAvailable: x kB\n",
		"MemAvailable: 99999999999999999 kB\n",
		"",
	} {
		if n, err := memAvailable(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: got %d bytes, want an error", bad, n)
		}
	}
}
