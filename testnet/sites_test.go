package testnet

import (
	"testing"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
)

// The testnet measures round trips over its emulated WAN and finds geo3's
// three sites; on loopback it finds one and keeps the flat overlay. Either
// way every node applies every update once and the views end identical.
func TestTestnetFindsSitesByRoundTrip(t *testing.T) {
	train, test := builtin(t, "rcv1")
	wan, err := ParseWAN("geo3")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		wan   netmodel.LinkProfile
		sites int
	}{{wan, 3}, {netmodel.LinkProfile{}, 1}} {
		rep := run(t, Config{
			Nodes: 6, Train: train, Test: test, Training: netmodel.Training{
				Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.02, L2: 1e-4,
				Batch: 0.2, Iterations: 6, Seed: 2, Codec: "raw",
			}, WAN: c.wan,
		})
		if rep.Sites != c.sites || !rep.ViewsIdentical || len(rep.Rejected) != 0 {
			t.Fatalf("%s: %d sites (want %d), views identical %v, rejected %v", rep.WAN, rep.Sites, c.sites, rep.ViewsIdentical, rep.Rejected)
		}
		for _, n := range rep.PerNode {
			if n.UpdatesApplied != 6*6 {
				t.Fatalf("%s: node %s applied %d updates, want 36", rep.WAN, n.ID, n.UpdatesApplied)
			}
		}
	}
}
