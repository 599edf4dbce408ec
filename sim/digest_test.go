package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/node"
)

// Without faults every member commits every row from the same updates, so
// every view digest compared is equal; the model hashes every 24th row, so
// 50 iterations compare rows 24 and 48.
func TestSimViewDigestsAgreeWithoutFaults(t *testing.T) {
	for _, topology := range []string{"halton", "full"} {
		for _, staleness := range []int{0, 2} {
			cfg := simConfig(t, 6, 50, 3)
			cfg.Topology, cfg.Staleness = topology, staleness
			label := fmt.Sprintf("%s, s=%d", topology, staleness)
			s, r := runSim(t, cfg)
			if every := node.DigestEvery(s.mdl.NumParams()); every != 24 {
				t.Fatalf("%s: rows hashed every %d clocks; the test expects 24", label, every)
			}
			if r.ViewDigestsCompared == 0 || r.Invariants.ViewDivergence != 0 || len(r.Divergences) != 0 || !r.Invariants.OK {
				t.Fatalf("%s: %d digests compared, %d differed (%+v), invariants %+v", label, r.ViewDigestsCompared,
					r.Invariants.ViewDivergence, r.Divergences, r.Invariants)
			}
		}
	}
}

// In a split each side counts the other out and commits rows without the
// other side's updates, which are added to its rows after the heal. Here a
// split that ends at iteration 20 leaves no trace in the digests (the
// updates added late sum to the same bits), but one that lasts past row
// 24 does: each side hashed row 24 from its own side's updates only,
// and their digests of it differ. That is reported, and does not fail the
// run.
func TestSimViewDivergenceAfterASplitIsReported(t *testing.T) {
	sc, err := ParseScenario(strings.NewReader("at 4: partition 0-2 | 3-5\nat 30: heal\n"), "split.txt")
	if err != nil {
		t.Fatal(err)
	}
	cfg := simConfig(t, 6, 50, 1)
	cfg.Faults = sc
	s, r := runSim(t, cfg)
	if !r.Invariants.OK || r.Invariants.ViewDivergence == 0 || len(r.Divergences) == 0 {
		t.Fatalf("invariants %+v, %d digests compared, divergences %+v", r.Invariants, r.ViewDigestsCompared, r.Divergences)
	}
	t.Logf("%d digests compared, %d differed; first %+v", r.ViewDigestsCompared, r.Invariants.ViewDivergence, r.Divergences[0])
	side := func(id string) int { return int(s.index[id]) / 3 }
	every := node.DigestEvery(s.mdl.NumParams())
	for _, d := range r.Divergences {
		if d.Row%every != 0 || side(d.Node) == side(d.Member) {
			t.Errorf("divergence %+v: want a hashed row, between the two sides", d)
		}
	}
}
