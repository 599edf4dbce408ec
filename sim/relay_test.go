package sim

import (
	"math"
	"math/bits"
	"testing"
	"time"
)

// TestSimRelaysBatch checks the overlay's promise at the defaults of
// `simulate` (adam, sketchml, halton with sites, staleness 2, a relay
// window of one compute time): at most 2⌈log2 P⌉ messages per node per
// iteration, updates and sync traffic counted; with a 1 ms window the same
// run sends more than that. The count is a function of the seed.
func TestSimRelaysBatch(t *testing.T) {
	d, err := simData()
	if err != nil {
		t.Fatal(err)
	}
	const p = 64
	bound := 2 * float64(bits.Len(uint(p-1)))
	run := func(window time.Duration) float64 {
		cfg := Config{
			Nodes: p, Train: d[0].Hashed(12), Test: d[1].Hashed(12), Model: "lr", Optimizer: "adam",
			LR: 0.02, L2: 1e-4, Batch: 0.1, Iterations: 20, Seed: 1, Codec: "sketchml", ErrorFeedback: true,
			Staleness: 2, FlushDelay: window,
		}
		r := simulate(t, cfg)
		if !r.Invariants.OK {
			t.Fatalf("window %v: invariants %+v", window, r.Invariants)
		}
		var split float64
		for _, v := range r.MessagesBy {
			split += v
		}
		if math.Abs(split-r.MessagesPerNodePerIteration) > 1e-9 {
			t.Errorf("window %v: messages by cause %v add up to %v, not the %v sent", window, r.MessagesBy, split, r.MessagesPerNodePerIteration)
		}
		return r.MessagesPerNodePerIteration
	}
	batched := run(10 * time.Millisecond)
	t.Logf("P = %d: %.2f messages per node per iteration with a 10ms relay window", p, batched)
	if got := batched; got > bound || math.IsNaN(got) {
		t.Errorf("relay window 10ms: %.2f messages per node per iteration, want at most 2⌈log2 %d⌉ = %v", got, p, bound)
	}
	eager := run(time.Millisecond)
	t.Logf("P = %d: %.2f with 1ms", p, eager)
	if got := eager; got <= bound {
		t.Errorf("relay window 1ms: %.2f messages per node per iteration, within %v: the test no longer tells the windows apart", got, bound)
	}
}
