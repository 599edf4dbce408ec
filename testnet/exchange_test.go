package testnet

import (
	"testing"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// Real libp2p nodes with 4 local steps: 18 steps are 5 exchanges (the last
// of 2 steps), each member applies every member's 5 updates, views end
// identical, and the curve counts optimizer steps.
func TestTestnetLocalSteps(t *testing.T) {
	train, test := builtin(t, "rcv1")
	rep := run(t, Config{
		Nodes: 3, Train: train, Test: test, Training: netmodel.Training{
			Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.02, L2: 1e-4,
			Batch: 0.1, Iterations: 18, Seed: 1, Codec: "sketchml", ErrorFeedback: true,
			Exchange: netmodel.Exchange{LocalSteps: 4, Outer: node.OuterNesterov, OuterRate: 0.5},
		},
		Topology: "full",
	})
	if !rep.ViewsIdentical || len(rep.Rejected) != 0 || rep.LocalSteps != 4 {
		t.Fatalf("views identical %v, rejected %v, local steps %d", rep.ViewsIdentical, rep.Rejected, rep.LocalSteps)
	}
	for i, n := range rep.PerNode {
		if n.Clock != 5 || n.UpdatesApplied != 3*5 || n.UpdatesRelayed != 0 {
			t.Fatalf("node %d: clock %d, applied %d, relayed %d; want 5, 15 and 0", i, n.Clock, n.UpdatesApplied, n.UpdatesRelayed)
		}
	}
	if last := rep.Curve[len(rep.Curve)-1]; last.Iteration != 18 {
		t.Fatalf("the curve ends at iteration %d, want 18", last.Iteration)
	}
}
