package sim

import (
	"fmt"
	"strings"
	"testing"
)

// TestSimSplitNearHistory heals splits of 5 to 15 iterations against a
// frame history of 8, over both topologies and s ∈ {0, 2}, and checks that
// every run ends with one view. Splits about as long as the history are
// where each side's members fall on either side of the lines the catch-up
// rules draw (README, status): before the side rule looked past what a
// node lacks, and before a member that took a cut-off member's updates
// kept them for the rest of its side, 12 of these 528 runs (6 seeds) ended
// with two views.
func TestSimSplitNearHistory(t *testing.T) {
	seeds := simNearHistorySeeds
	if seeds == 0 {
		t.Skip("a sweep of the core's decisions, not of concurrency: it runs without the race detector")
	}
	if testing.Short() {
		seeds = 1
	}
	for _, split := range []string{"0-3 | 4-7", "0-6 | 7"} {
		for heal := 8; heal <= 18; heal++ {
			text := fmt.Sprintf("at 3: partition %s\nat %d: heal", split, heal)
			sc, err := ParseScenario(strings.NewReader(text), "split.txt")
			if err != nil {
				t.Fatal(err)
			}
			eachLongSplitRun(t, sc, seeds, func(cfg Config, label string) {
				label = fmt.Sprintf("partition %s healed at %d, %s", split, heal, label)
				s, r := runSim(t, cfg)
				if !r.Invariants.OK {
					t.Errorf("%s: invariants %+v, %d rejoined", label, r.Invariants, r.Rejoined)
					return
				}
				checkConverged(t, label, s)
			})
		}
	}
}
