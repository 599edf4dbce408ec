package netmodel

import (
	"errors"
	"fmt"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// Training is what a run's nodes train and how, the same for the testnet
// and the simulator: the settings every member shares (checked by
// node.Settings.Validate), the mini-batch, the number of steps and the
// seed. The command line fills it once from the training flags.
type Training struct {
	Model     model.Kind
	Optimizer model.OptimizerKind
	// LR is the learning rate; L2 the regularisation strength.
	LR, L2 float64
	// Batch is the mini-batch per node: a fraction of the node's shard when
	// below 1 (rounded up), a row count otherwise (node.BatchRows).
	Batch float64
	// Iterations is the optimizer steps each node takes (at least 1).
	Iterations int
	// Seed seeds the shuffle of the data, the nodes' sampling and
	// everything else a run draws.
	Seed uint64
	// Codec names the update codec (codec.Names()).
	Codec         string
	ErrorFeedback bool
	// Staleness is the SSP bound in exchanges; 0 is bulk-synchronous.
	Staleness int
	// Exchange sets local steps, the outer step and the update budget;
	// the nodes' clocks count exchanges.
	Exchange Exchange
}

// Settings returns the node settings the training gives; the dimension and
// the classes are the data's, and are left zero.
func (t Training) Settings() node.Settings {
	return node.Settings{
		Model: t.Model, Optimizer: t.Optimizer, LearningRate: t.LR, L2: t.L2,
		Staleness: t.Staleness, Codec: t.Codec, ErrorFeedback: t.ErrorFeedback,
		Iterations: uint64(max(t.Iterations, 0)),
		LocalSteps: t.Exchange.LocalSteps, Outer: t.Exchange.Outer, OuterRate: t.Exchange.OuterRate,
	}
}

// Validate checks the training and the data it trains and is tested on:
// the settings (node.Settings.Validate), the batch (node.CheckBatch) and
// the number of steps.
func (t Training) Validate(train, test *dataset.Dataset) error {
	switch {
	case train == nil || len(train.Rows) == 0:
		return errors.New("no training data")
	case test == nil || len(test.Rows) == 0:
		return errors.New("no test data")
	case t.Iterations < 1:
		return fmt.Errorf("iterations must be >= 1, got %d", t.Iterations)
	}
	if err := t.Settings().Validate(); err != nil {
		return err
	}
	return node.CheckBatch(t.Batch)
}
