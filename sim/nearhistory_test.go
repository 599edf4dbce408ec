package sim

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// nearHistoryEnv turns TestSimSplitNearHistory on.
const nearHistoryEnv = "SKETCHMESH_NEAR_HISTORY"

// TestSimSplitNearHistory heals splits of 5 to 15 iterations against a
// frame history of 8, over 6 seeds, both topologies and s ∈ {0, 2}, and
// checks that every run ends with one view. It fails today: 3 of its 528
// runs (partition 0-3 | 4-7 healed at 9, halton, s = 0, seeds 1 to 3; 12
// before the side rule looked past what a node lacks) end with updates
// of the rejoined side's old incarnations that some keeping members took
// late and the others, the rejoiners' donor among them, did not (README,
// status: a split about as long as the history). It therefore runs only
// when SKETCHMESH_NEAR_HISTORY is set; a fix of the late-update rule makes
// it pass, and then it belongs in the default run.
func TestSimSplitNearHistory(t *testing.T) {
	if os.Getenv(nearHistoryEnv) == "" {
		t.Skipf("a known failure (README, status); set %s=1 to run it", nearHistoryEnv)
	}
	failed := 0
	for _, split := range []string{"0-3 | 4-7", "0-6 | 7"} {
		for heal := 8; heal <= 18; heal++ {
			text := fmt.Sprintf("at 3: partition %s\nat %d: heal", split, heal)
			sc, err := ParseScenario(strings.NewReader(text), "split.txt")
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(1); seed <= 6; seed++ {
				for _, topology := range []string{"halton", "full"} {
					for _, staleness := range []int{0, 2} {
						cfg := simConfig(t, 8, 40, seed)
						cfg.Faults, cfg.Topology, cfg.Staleness = sc, topology, staleness
						cfg.Sync.History = 8
						label := fmt.Sprintf("partition %s healed at %d, seed %d (%s, s=%d)", split, heal, seed, topology, staleness)
						s, r := runSim(t, cfg)
						if !r.Invariants.OK {
							failed++
							t.Errorf("%s: invariants %+v, %d rejoined", label, r.Invariants, r.Rejoined)
							continue
						}
						checkConverged(t, label, s)
					}
				}
			}
		}
	}
	if failed > 0 {
		t.Logf("%d runs broke the invariants", failed)
	}
}
