package mesh

import (
	"testing"
	"time"
)

func TestLogEvery(t *testing.T) {
	l := logEvery{period: time.Second}
	t0 := time.Unix(1000, 0)
	for i, c := range []struct {
		at         time.Duration
		ok         bool
		suppressed int
	}{
		{0, true, 0},
		{100 * time.Millisecond, false, 0},
		{900 * time.Millisecond, false, 0},
		{time.Second, true, 2},
		{1500 * time.Millisecond, false, 0},
		{5 * time.Second, true, 1},
		{7 * time.Second, true, 0},
	} {
		ok, n := l.allow(t0.Add(c.at))
		if ok != c.ok || n != c.suppressed {
			t.Errorf("record %d at %v: allow = %v, %d; want %v, %d", i, c.at, ok, n, c.ok, c.suppressed)
		}
	}
}
