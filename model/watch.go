package model

import (
	"fmt"
	"math"
)

// LossWatch follows the test loss of successive evaluations and says once
// when training looks stuck: the loss is not finite, it has not moved by
// 1 % from the first evaluation after Patience more, or it stands above
// the first by more than 1 % then, or it rose at each of the last
// Patience evaluations, by more than a tenth of the first loss in all. Both usually mean a learning rate far
// from what the model and data need.
type LossWatch struct {
	// Patience is how many evaluations a stall or a rise must last; 0
	// takes DefaultPatience.
	Patience int

	n                     int
	first, last, riseFrom float64
	rises                 int
	warned                bool
}

// DefaultPatience is LossWatch's default: about half of the ten
// evaluations of a run with the default --eval-every.
const DefaultPatience = 4

// Observe records one evaluation's loss and returns a warning the first
// time the run looks stuck, "" otherwise.
func (w *LossWatch) Observe(loss float64) string {
	if w.warned {
		return ""
	}
	patience := w.Patience
	if patience <= 0 {
		patience = DefaultPatience
	}
	w.n++
	if w.n == 1 {
		w.first, w.last = loss, loss
	}
	if loss > w.last {
		if w.rises == 0 {
			w.riseFrom = w.last
		}
		w.rises++
	} else {
		w.rises = 0
	}
	w.last = loss
	switch {
	case math.IsNaN(loss) || math.IsInf(loss, 0):
		w.warned = true
		return fmt.Sprintf("the test loss is %v: training diverged; lower --lr", loss)
	case w.rises >= patience && loss-w.riseFrom > 0.1*math.Abs(w.first):
		w.warned = true
		return fmt.Sprintf("the test loss rose at each of the last %d evaluations (from %.4g to %.4g): the learning rate is probably too large (lower --lr), or the model overfits", w.rises, w.riseFrom, loss)
	case w.n > patience && loss > 1.01*w.first:
		w.warned = true
		return fmt.Sprintf("the test loss is higher after %d evaluations than at the first (%.4g, first %.4g): the learning rate is probably too large; lower --lr", w.n, loss, w.first)
	case w.n > patience && math.Abs(loss-w.first) < 0.01*math.Abs(w.first):
		w.warned = true
		return fmt.Sprintf("the test loss has not moved by 1 %% in %d evaluations (%.4g, first %.4g): the learning rate may be too small or too large; try another --lr", w.n, loss, w.first)
	}
	return ""
}
