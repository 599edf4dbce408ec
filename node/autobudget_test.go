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

// LinkRate: backlogged writes make samples once RateWindow of them is in;
// writes with nothing behind them never lower the estimate, and each
// RateWindow of them raises it by an eighth.
func TestLinkRate(t *testing.T) {
	var r LinkRate
	at := time.Unix(0, 0)
	step := func(bytes int, took time.Duration, backlogged bool) {
		at = at.Add(took)
		r.Observe(bytes, took, backlogged, at)
	}
	// Idle writes before any sample: still nothing known.
	for range 10 {
		step(1000, time.Millisecond, false)
		at = at.Add(time.Second)
	}
	if r.Rate() != 0 {
		t.Fatalf("rate %v from writes without a backlog, want 0 (unknown)", r.Rate())
	}
	// 250 KB/s: five writes of a fifth of RateWindow make the first sample.
	fifth := RateWindow / 5
	at250 := int(250_000 * fifth.Seconds())
	for range 4 {
		step(at250, fifth, true)
	}
	if r.Rate() != 0 {
		t.Fatalf("rate %v after four fifths of RateWindow of writing, want none yet", r.Rate())
	}
	step(at250, fifth, true)
	if got := r.Rate(); math.Abs(got-250_000) > 1e-6*250_000 {
		t.Fatalf("rate %v, want 250000 bytes/s", got)
	}
	// A slower sample (125 KB/s) moves the estimate halfway.
	for range 5 {
		step(at250/2, fifth, true)
	}
	if got := r.Rate(); math.Abs(got-187_500) > 1e-6*187_500 {
		t.Fatalf("rate %v, want 187500 (the mean of 250000 and 125000)", got)
	}
	// Fast writes without a backlog: the estimate grows by an eighth per
	// RateWindow, not to the speed of a socket buffer.
	before := r.Rate()
	step(1000, time.Microsecond, false)
	if r.Rate() != before {
		t.Fatalf("rate %v right after the last backlog, want %v", r.Rate(), before)
	}
	at = at.Add(RateWindow)
	step(1000, time.Microsecond, false)
	if r.Rate() != before*1.125 {
		t.Fatalf("rate %v after a RateWindow without a backlog, want %v", r.Rate(), before*1.125)
	}
	step(1000, time.Microsecond, false)
	if r.Rate() != before*1.125 {
		t.Fatalf("rate %v grew twice in one window", r.Rate())
	}
}

// SetBudget takes what Config.BudgetBytes takes and refuses the rest,
// changing nothing then.
func TestSetBudget(t *testing.T) {
	cl := newClusterWith(t, 2, 1, 4, "sketchml", 1, func(c *Config) { c.ErrorFeedback = false })
	n := cl.nodes[cl.ids[0]]
	least, err := MinBudgetBytes(n.cfg.Codec)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.SetBudget(least - 1); err == nil || n.Budget() != 0 {
		t.Fatalf("budget below one frame: err %v, budget %d", err, n.Budget())
	}
	if err := n.SetBudget(least); err == nil || n.Budget() != 0 {
		t.Fatalf("budget without error feedback: err %v, budget %d", err, n.Budget())
	}
	n = newClusterWith(t, 2, 1, 4, "sketchml", 1, func(c *Config) { c.ErrorFeedback = true }).nodes["node-00"]
	if err := n.SetBudget(least); err != nil || n.Budget() != least {
		t.Fatalf("budget of one frame: err %v, budget %d", err, n.Budget())
	}
	if err := n.SetBudget(0); err != nil || n.Budget() != 0 {
		t.Fatalf("no budget: err %v, budget %d", err, n.Budget())
	}
}
