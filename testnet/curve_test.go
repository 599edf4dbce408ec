package testnet

import (
	"math"
	"testing"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
)

// Node 0's progress points are scored off its training path, in order: the
// curve holds one point every EvalEvery steps from 0, each with its own
// view's test loss, at non-decreasing times, and ends at the final loss.
func TestCurveScoredInOrder(t *testing.T) {
	train, test := builtin(t, "rcv1")
	rep := run(t, Config{
		Nodes: 3, Train: train, Test: test, Training: netmodel.Training{
			Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.02, L2: 1e-4,
			Batch: 0.1, Iterations: 12, Seed: 1, Codec: "raw",
		}, Topology: "full", EvalEvery: 2,
	})
	if len(rep.Curve) < 7 {
		t.Fatalf("curve of %d points, want 7 or 8 (iterations 0, 2, ..., 12 and the final model)", len(rep.Curve))
	}
	for i, p := range rep.Curve[:7] {
		if p.Iteration != uint64(2*i) || !(p.TestLoss > 0) || math.IsInf(p.TestLoss, 0) {
			t.Fatalf("point %d: iteration %d, test loss %v; want iteration %d and a finite loss", i, p.Iteration, p.TestLoss, 2*i)
		}
		if i > 0 && (p.WallSeconds < rep.Curve[i-1].WallSeconds || p.TestLoss == rep.Curve[i-1].TestLoss) {
			t.Fatalf("point %d: %+v after %+v: want a later time and another model's loss", i, p, rep.Curve[i-1])
		}
	}
	if last := rep.Curve[len(rep.Curve)-1]; last.TestLoss != rep.FinalTestLoss {
		t.Fatalf("the curve ends at loss %v, the run at %v", last.TestLoss, rep.FinalTestLoss)
	}
}
