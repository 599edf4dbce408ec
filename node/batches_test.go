package node

import (
	"errors"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
)

// countingSource gives the same batch each time, then fails.
type countingSource struct {
	batch []dataset.Row
	calls int
	limit int
}

var errSourceDone = errors.New("source done")

func (s *countingSource) Next() ([]dataset.Row, error) {
	if s.calls == s.limit {
		return nil, errSourceDone
	}
	s.calls++
	return s.batch, nil
}

// A node with a batch source trains on what it gives, needs no shard, and
// stops with the source's error.
func TestTrainTakesBatchesFromTheSource(t *testing.T) {
	train := testData(t)
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: train.MaxFeature})
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := model.NewOptimizer(model.SGD, 1, mdl.NumParams())
	src := &countingSource{batch: train.Rows[:5], limit: 2}
	n, err := New(Config{ID: "a", Members: []string{"a"}, Model: mdl, Optimizer: opt, Codec: codec.Raw{}, Iterations: 10, BatchSize: 5, Batches: src})
	if err != nil {
		t.Fatal(err)
	}
	// The first step reads the zero view: its loss is the batch's there.
	_, wantLoss := mdl.Gradient(make([]float64, mdl.NumParams()), src.batch, &model.Scratch{})
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if got := n.Stats().LastLoss; got != wantLoss {
		t.Errorf("loss %v, want the source's batch's %v", got, wantLoss)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if src.calls != 2 || n.Clock() != 2 {
		t.Fatalf("%d calls, clock %d", src.calls, n.Clock())
	}
	if err := n.Train(); !errors.Is(err, errSourceDone) || n.Clock() != 2 {
		t.Errorf("third batch: %v at clock %d, want the source's error at clock 2", err, n.Clock())
	}
}
