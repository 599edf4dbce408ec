package testnet

import (
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
)

func TestFinalElapsed(t *testing.T) {
	start := time.Unix(100, 0)
	wall := 3 * time.Second
	for _, c := range []struct {
		finished time.Time
		want     time.Duration
	}{
		{time.Time{}, wall},             // stopped: no finish time
		{start.Add(-time.Second), wall}, // not this run's
		{start.Add(1500 * time.Millisecond), 1500 * time.Millisecond},
		{start.Add(5 * time.Second), wall}, // never past the run
	} {
		if got := finalElapsed(c.finished, start, wall); got != c.want {
			t.Errorf("finalElapsed(%v) = %v, want %v", c.finished.Sub(start), got, c.want)
		}
	}
}

// Over 50 ms links the leave handshake at the end of a run takes at least
// a round trip (100 ms) after node 0 holds its final model: the curve's
// last point is stamped when node 0 held it, not when the run ended.
func TestFinalPointBeforeLeave(t *testing.T) {
	train, test := builtin(t, "rcv1")
	wan, err := netmodel.ParseLinkProfile("latency=50ms,bandwidth=1Gbit")
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, Config{
		Nodes: 3, Train: train, Test: test, Training: netmodel.Training{
			Model: model.LogisticRegression, Optimizer: model.Adam,
			LR: 0.02, L2: 1e-4, Batch: 0.1, Iterations: 6, Seed: 1, Codec: "raw", Staleness: 2,
		},
		Topology: "full", WAN: wan,
	})
	last := rep.Curve[len(rep.Curve)-1]
	if last.TestLoss != rep.FinalTestLoss {
		t.Fatalf("last point's loss %v, want the final %v", last.TestLoss, rep.FinalTestLoss)
	}
	if gap := rep.WallSeconds - last.WallSeconds; gap < 0.09 {
		t.Fatalf("last point at %.3f s, run ended at %.3f s: want the leave's round trip (0.1 s) between them", last.WallSeconds, rep.WallSeconds)
	}
}
