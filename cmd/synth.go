package cmd

import (
	"fmt"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// synthData draws the synthetic sets `--data synth:...` names (see
// dataset.ParseSynth), hashed when hashBits is set. The test set's name
// carries the planted model's accuracy and log loss on it, the ceiling a
// run's test accuracy is read against.
func synthData(spec, testData, format string, hashBits uint) (train, test *dataset.Dataset, err error) {
	switch {
	case testData != "":
		return nil, nil, badInput("--test-data %s: synthetic data draws its own test split (set its size with test=N)", testData)
	case format != "auto":
		return nil, nil, badInput("--format %s: synthetic data has no file format", format)
	}
	c, err := dataset.ParseSynth(spec)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--data: %w", err)}
	}
	train, test, planted, err := dataset.Synthetic(c)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--data: %w", err)}
	}
	test.Name = fmt.Sprintf("%s (test split; the planted model scores accuracy %.4f, log loss %.4f)", train.Name, planted.Accuracy(test), planted.LogLoss(test))
	return fitData(train, test, hashBits, dataset.LIBSVM)
}
