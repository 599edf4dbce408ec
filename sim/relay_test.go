package sim

import (
	"math"
	"math/bits"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/netmodel"
)

// TestSimRelaysBatch checks the overlay's promise at the defaults of
// `simulate` (adam, sketchml, halton with sites, staleness 2, a relay
// window of one compute time, a sync timeout of one window per hop of the
// overlay's diameter): at most 2⌈log2 P⌉ messages per node per iteration,
// updates and sync traffic counted, at P = 64 and 256 (64 alone under the
// race detector); at P = 64, relays forwarded at once send more than that.
// The count is a function of the seed.
func TestSimRelaysBatch(t *testing.T) {
	d, err := simData()
	if err != nil {
		t.Fatal(err)
	}
	run := func(p, iterations int, window time.Duration) float64 {
		cfg := Config{
			Nodes: p, Train: d[0].Hashed(12), Test: d[1].Hashed(12), Training: netmodel.Training{
				Model: "lr", Optimizer: "adam", LR: 0.02, L2: 1e-4, Batch: 0.1, Iterations: iterations,
				Seed: 1, Codec: "sketchml", ErrorFeedback: true, Staleness: 2,
			}, FlushDelay: window,
		}
		r := simulate(t, cfg)
		if !r.Invariants.OK {
			t.Fatalf("P = %d, window %v: invariants %+v", p, window, r.Invariants)
		}
		var split float64
		for _, v := range r.MessagesBy {
			split += v
		}
		if math.Abs(split-r.MessagesPerNodePerIteration) > 1e-9 {
			t.Errorf("P = %d, window %v: messages by cause %v add up to %v, not the %v sent", p, window, r.MessagesBy, split, r.MessagesPerNodePerIteration)
		}
		t.Logf("P = %d, window %v: %.2f messages per node per iteration, %v", p, window, r.MessagesPerNodePerIteration, r.MessagesBy)
		return r.MessagesPerNodePerIteration
	}
	for _, c := range []struct{ p, iterations int }{{64, 20}, {256, 10}} {
		if c.p > simRelaysLargestP {
			t.Logf("P = %d left out under the race detector", c.p)
			continue
		}
		bound := 2 * float64(bits.Len(uint(c.p-1)))
		if got := run(c.p, c.iterations, 10*time.Millisecond); got > bound || math.IsNaN(got) {
			t.Errorf("P = %d: %.2f messages per node per iteration, want at most 2⌈log2 %d⌉ = %v", c.p, got, c.p, bound)
		}
	}
	if got := run(64, 20, 0); got <= 12 {
		t.Errorf("relays forwarded at once: %.2f messages per node per iteration, within 12: the test no longer tells batching apart", got)
	}
}
