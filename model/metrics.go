package model

import (
	"cmp"
	"math"
	"slices"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// Metrics summarise a model on a data set. A figure that does not apply to
// the model, or that the rows cannot define, is NaN.
type Metrics struct {
	Loss     float64 // mean loss per row, without the L2 term
	Accuracy float64 // fraction classified correctly; NaN for regression
	// AUC is the area under the ROC curve of a binary model's margins (lr,
	// svm): the probability that a random positive row scores above a random
	// negative one, ties counting one half. NaN for the other models and
	// when the rows hold only one class.
	AUC float64
	// MacroF1 is the mean over classes of F1 for softmax (see Evaluator).
	MacroF1 float64
	// RMSE is the root mean squared error of linear regression.
	RMSE float64
	Rows int
}

// Evaluator accumulates a model's metrics row by row, so data larger than
// memory can be evaluated as a stream. Model.Evaluate is an Evaluator over
// a slice: both sum the same terms in the same order, so a stream and a
// slice of the same rows give bit-identical metrics.
//
// AUC needs every row's margin, so a binary model's Evaluator keeps 16
// bytes per row; the other metrics take constant memory.
type Evaluator struct {
	m       *Model
	w       []float64
	scores  []float64
	dz      []float64
	out     []float64
	rows    int
	loss    float64
	correct int
	sqErr   float64
	ranked  []scoredRow
	// Softmax: per class, rows predicted as it and correctly so, and rows
	// labelled with it.
	predicted, truePos, labelled []int
}

type scoredRow struct {
	score    float64
	positive bool
}

// NewEvaluator returns an Evaluator of the weights w.
func (m *Model) NewEvaluator(w []float64) *Evaluator {
	ev := &Evaluator{m: m, w: w, scores: make([]float64, m.blocks), dz: make([]float64, m.blocks), out: make([]float64, m.blocks)}
	if m.cfg.Kind == Softmax {
		ev.predicted = make([]int, m.blocks)
		ev.truePos = make([]int, m.blocks)
		ev.labelled = make([]int, m.blocks)
	}
	return ev
}

// Add accounts for one row and returns the model's output for it, valid
// until the next call: the probability of class 1 for lr, the margin for
// svm, the predicted value for linear, and each class's probability, in
// the order of Config.Classes, for softmax.
func (ev *Evaluator) Add(r *dataset.Row) []float64 {
	m := ev.m
	ev.rows++
	ev.loss += m.rowLoss(ev.w, r, ev.scores, ev.dz)
	switch m.cfg.Kind {
	case LogisticRegression, LinearSVM:
		z := m.dot(ev.w, 0, r)
		positive := r.Label > 0
		if (z > 0) == positive {
			ev.correct++
		}
		ev.ranked = append(ev.ranked, scoredRow{z, positive})
		ev.out[0] = z
		if m.cfg.Kind == LogisticRegression {
			ev.out[0] = sigmoid(z)
		}
	case LinearRegression:
		z := m.dot(ev.w, 0, r)
		ev.sqErr += (z - r.Label) * (z - r.Label)
		ev.out[0] = z
	case Softmax:
		// rowLoss filled scores for softmax.
		pred, y := argmax(ev.scores), m.classOf(r.Label)
		ev.predicted[pred]++
		if y >= 0 {
			ev.labelled[y]++
		}
		if pred == y {
			ev.correct++
			ev.truePos[pred]++
		}
		lse := logSumExp(ev.scores)
		for c, s := range ev.scores {
			ev.out[c] = math.Exp(s - lse)
		}
	}
	return ev.out
}

// Metrics returns the metrics of the rows added so far.
func (ev *Evaluator) Metrics() Metrics {
	met := Metrics{Rows: ev.rows, Loss: math.NaN(), Accuracy: math.NaN(), AUC: math.NaN(), MacroF1: math.NaN(), RMSE: math.NaN()}
	if ev.rows == 0 {
		return met
	}
	n := float64(ev.rows)
	met.Loss = ev.loss / n
	switch ev.m.cfg.Kind {
	case LogisticRegression, LinearSVM:
		met.Accuracy = float64(ev.correct) / n
		met.AUC = auc(ev.ranked)
	case LinearRegression:
		met.RMSE = math.Sqrt(ev.sqErr / n)
	case Softmax:
		met.Accuracy = float64(ev.correct) / n
		met.MacroF1 = macroF1(ev.truePos, ev.predicted, ev.labelled)
	}
	return met
}

// macroF1 is the mean F1 over the classes that occur among the labels or
// the predictions; F1 of a class is 2·TP / (predicted + labelled). A class
// neither labelled nor predicted has no F1 and is left out, rather than
// counted as 0, so the figure does not depend on classes a test set lacks.
func macroF1(truePos, predicted, labelled []int) float64 {
	var sum float64
	classes := 0
	for c := range truePos {
		d := predicted[c] + labelled[c]
		if d == 0 {
			continue
		}
		sum += 2 * float64(truePos[c]) / float64(d)
		classes++
	}
	if classes == 0 {
		return math.NaN()
	}
	return sum / float64(classes)
}

// AUC returns the area under the ROC curve of scores against the labels
// (true for the positive class): the Mann–Whitney statistic, computed
// exactly from ranks, with tied scores sharing the mean of their ranks so
// that a tie between a positive and a negative counts one half. It is NaN
// when either class is absent. scores and positive must have one entry per
// row.
func AUC(scores []float64, positive []bool) float64 {
	rows := make([]scoredRow, len(scores))
	for i := range rows {
		rows[i] = scoredRow{scores[i], positive[i]}
	}
	return auc(rows)
}

// auc sorts rows by score (in place) and returns their AUC.
func auc(rows []scoredRow) float64 {
	slices.SortFunc(rows, func(a, b scoredRow) int { return cmp.Compare(a.score, b.score) })
	var positives, negatives, rankSum float64
	for i := 0; i < len(rows); {
		j := i
		tiedPositives := 0.0
		for ; j < len(rows) && cmp.Compare(rows[j].score, rows[i].score) == 0; j++ {
			if rows[j].positive {
				tiedPositives++
			}
		}
		// Ranks i+1 .. j (1-based) are tied: each takes their mean.
		rankSum += tiedPositives * float64(i+1+j) / 2
		positives += tiedPositives
		negatives += float64(j-i) - tiedPositives
		i = j
	}
	if positives == 0 || negatives == 0 {
		return math.NaN()
	}
	return (rankSum - positives*(positives+1)/2) / (positives * negatives)
}
