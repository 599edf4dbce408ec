package node

import (
	"math"
	"testing"
	"time"
)

// AutoBudget shares what the slowest link carries in a period among the
// frames it carries, at least one frame, and bounds nothing it cannot
// compute.
func TestAutoBudget(t *testing.T) {
	for _, tc := range []struct {
		bandwidth float64
		period    time.Duration
		frames    float64
		least     int
		want      int
	}{
		{250_000, 100 * time.Millisecond, 7.0 / 3, 20, 10714}, // 2 Mbit/s, 50 ms links, 8 members
		{250_000, 100 * time.Millisecond, 1, 20, 25_000},
		{12_500_000, 240 * time.Millisecond, 7.0 / 3, 20, 1_285_714}, // geo3's inter-site links
		{1_000, 10 * time.Millisecond, 2, 20, 20},                    // below one frame: one frame
		{0, 100 * time.Millisecond, 2, 20, 0},                        // bandwidth not known
		{250_000, 0, 2, 20, 0},                                       // period not known
		{250_000, 100 * time.Millisecond, 0, 20, 0},                  // a mesh of one
		{math.Inf(1), time.Second, 1, 20, 0},
		{1e12, time.Hour, 1, 20, 0}, // beyond any frame
	} {
		if got := AutoBudget(tc.bandwidth, tc.period, tc.frames, tc.least); got != tc.want {
			t.Errorf("AutoBudget(%g B/s, %v, %g frames, least %d) = %d, want %d", tc.bandwidth, tc.period, tc.frames, tc.least, got, tc.want)
		}
	}
}

func TestFramesPerLink(t *testing.T) {
	for _, tc := range []struct {
		p, degree int
		want      float64
	}{{8, 3, 7.0 / 3}, {8, 7, 1}, {8, 20, 1}, {1, 3, 0}, {8, 0, 0}, {1024, 10, 102.3}} {
		if got := FramesPerLink(tc.p, tc.degree); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("FramesPerLink(%d, %d) = %g, want %g", tc.p, tc.degree, got, tc.want)
		}
	}
}
