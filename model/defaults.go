package model

import (
	"fmt"
	"math"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// sgdBaseRate is plain SGD's rate per model for rows of unit norm (tf-idf
// rows such as rcv1's and news20's). Softmax spreads each row's gradient
// over its classes and takes a larger step; least squares has an unbounded
// gradient and takes a smaller one.
var sgdBaseRate = map[Kind]float64{
	LogisticRegression: 1,
	LinearSVM:          1,
	Softmax:            10,
	LinearRegression:   0.5,
}

// AdamDefaultRate is Adam's default rate: its steps do not grow with the
// scale of the data, so one rate serves every model.
const AdamDefaultRate = 0.02

// DefaultRate is the learning rate an optimizer takes when none is given,
// for a model trained on rows whose mean squared L2 norm is
// meanSquaredNorm (MeanSquaredNorm). Adam takes AdamDefaultRate. SGD's
// step grows with the rows' norm, so its rate per model (1 for lr and svm,
// 10 for softmax, 0.5 for linear) is divided by the mean squared norm
// when that is above 1: a9a's rows (14 ones) take a 14th of rcv1's rate.
func DefaultRate(opt OptimizerKind, kind Kind, meanSquaredNorm float64) (float64, error) {
	switch opt {
	case Adam:
		return AdamDefaultRate, nil
	case SGD:
		base, ok := sgdBaseRate[kind]
		if !ok {
			return 0, fmt.Errorf("%w: unknown model %q", ErrConfig, kind)
		}
		if meanSquaredNorm > 1 && !math.IsInf(meanSquaredNorm, 0) {
			base /= meanSquaredNorm
		}
		return base, nil
	}
	return 0, fmt.Errorf("%w: unknown optimizer %q (known: sgd, adam)", ErrConfig, opt)
}

// MeanSquaredNorm is the mean over rows of the squared L2 norm of their
// features (0 for no rows).
func MeanSquaredNorm(rows []dataset.Row) float64 {
	if len(rows) == 0 {
		return 0
	}
	var sum float64
	for i := range rows {
		for _, v := range rows[i].Values {
			sum += float64(v) * float64(v)
		}
	}
	return sum / float64(len(rows))
}
