package sim

import (
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

func geo3SimConfig(t *testing.T) Config {
	t.Helper()
	cfg := simConfig(t, 6, 32, 3)
	cfg.Codec, cfg.ErrorFeedback, cfg.Staleness, cfg.Topology = "sketchml", true, 1, "full"
	wan, err := netmodel.ParseLinkProfile("geo3")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WAN = wan
	return cfg
}

// One local step with sgd at rate 1, spelled out, is the simulation of the
// defaults, event for event; local steps of 4 run the same 32 optimizer
// steps per node in 8 exchanges, with less than half the bytes (an
// exchange's update carries the union of its 4 steps' keys) and in less
// than half the simulated time on geo3's links.
func TestSimLocalSteps(t *testing.T) {
	base := simulate(t, geo3SimConfig(t))
	cfg := geo3SimConfig(t)
	cfg.Exchange = netmodel.Exchange{LocalSteps: 1, Outer: node.OuterSGD, OuterRate: 1}
	if r := simulate(t, cfg); r.TraceHash != base.TraceHash || r.FinalTestLoss != base.FinalTestLoss {
		t.Fatalf("explicit one step: trace %s loss %v, defaults %s %v", r.TraceHash, r.FinalTestLoss, base.TraceHash, base.FinalTestLoss)
	}
	cfg.Exchange = netmodel.Exchange{LocalSteps: 4}
	r := simulate(t, cfg)
	if r.NodeIterations != base.NodeIterations || r.NodeIterations != 6*32 {
		t.Fatalf("node iterations %d with 4 local steps, %d with 1, want %d", r.NodeIterations, base.NodeIterations, 6*32)
	}
	if 2*r.BytesPerNodePerIteration > base.BytesPerNodePerIteration || 2*r.SimulatedSeconds > base.SimulatedSeconds {
		t.Fatalf("4 local steps: %.0f bytes per node-iteration in %.2fs, 1 step: %.0f in %.2fs",
			r.BytesPerNodePerIteration, r.SimulatedSeconds, base.BytesPerNodePerIteration, base.SimulatedSeconds)
	}
	if r.StalenessObservedMax > 1 {
		t.Fatalf("staleness %d over a bound of 1 exchange", r.StalenessObservedMax)
	}
}

func TestSimRefusesBadExchange(t *testing.T) {
	for _, e := range []netmodel.Exchange{{LocalSteps: -1}, {OuterRate: -1}, {Outer: "adam"}} {
		cfg := geo3SimConfig(t)
		cfg.Exchange = e
		if _, err := Run(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "local-step") {
			t.Errorf("%+v: %v", e, err)
		}
	}
}

// A budget below the updates' size cuts every update to it, and the
// members still end with one view (the simulator checks views at the end).
func TestSimBudget(t *testing.T) {
	base := simulate(t, geo3SimConfig(t))
	cfg := geo3SimConfig(t)
	cfg.Exchange = netmodel.Exchange{BudgetBytes: 300, Priority: node.PriorityRelative}
	r := simulate(t, cfg)
	if r.NodeIterations != 6*32 || r.ViewDigestsCompared == 0 || r.Invariants.ViewDivergence != 0 || r.Invariants.AppliedTwice != 0 {
		t.Fatalf("node iterations %d, digests compared %d, invariants %+v", r.NodeIterations, r.ViewDigestsCompared, r.Invariants)
	}
	if 2*r.BytesPerNodePerIteration > base.BytesPerNodePerIteration {
		t.Fatalf("a 300-byte budget sends %.0f bytes per node-iteration, without %.0f", r.BytesPerNodePerIteration, base.BytesPerNodePerIteration)
	}
}
