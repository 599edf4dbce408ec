package netmodel

import (
	"errors"
	"fmt"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/node"
)

// ValidateRun checks what a testnet run and a simulation share, and defaults
// the topology to halton.
func ValidateRun(train, test *dataset.Dataset, iterations int, batch float64, staleness int, codecName string, topology *string) error {
	switch {
	case train == nil || len(train.Rows) == 0:
		return errors.New("no training data")
	case test == nil || len(test.Rows) == 0:
		return errors.New("no test data")
	case iterations < 1:
		return fmt.Errorf("iterations must be >= 1, got %d", iterations)
	case staleness < 0:
		return fmt.Errorf("staleness must be >= 0, got %d", staleness)
	}
	if err := node.CheckBatch(batch); err != nil {
		return err
	}
	if _, err := codec.ByName(codecName); err != nil {
		return err
	}
	return CheckTopology(topology)
}
