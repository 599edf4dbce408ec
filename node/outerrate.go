package node

import (
	"sync"

	"github.com/sketchmesh/sketchmesh/codec"
)

// The adaptive outer step.
//
// With local steps each exchange moves a key by what its members' inner
// steps found over the exchange, averaged. Where a key is far from its
// optimum (the sparse, rarely seen features of text data) H inner steps
// move it only a little, and the same way exchange after exchange: a
// larger outer step is progress the rounds do not have to pay for. Where
// the inner steps already carry a key to its optimum (a9a's dense
// features), any step past 1 overshoots it, and one past 2 diverges. One
// rate for all keys cannot serve both: sgd at 2 reached news20.binary's
// target loss at iteration 56 of 100 instead of 100 over geo3, and cost
// a9a a point of accuracy; Nesterov at 0.7 broke a9a outright (README,
// "The adaptive outer step").
//
// So the rate is per key, and follows the sign of the key's combined
// change, the sum of a committed row's updates, in the spirit of
// delta-bar-delta and Rprop: each row in which a key keeps the sign of its
// previous row raises the key's rate by adaptiveRateStep, up to
// adaptiveRateMax; a row in which it flips (the key crossed its optimum,
// or oscillates around it) puts the rate back to 1. Capped at 2, a key
// overshoots by at most the distance the inner steps found, and a flip
// undoes the rate at once (a cap of 3 cost a9a up to two points).
//
// The rates come from committed rows, which every member holds alike, and
// change only the node's own update before it is coded: receivers apply
// what was sent, so views stay identical whatever a node's rates are. A
// late update (of a row already committed) counts for no row. The state is
// one byte a key (keyRates.level), kept only with local steps; with one
// step a node sends its inner step's change as it is, as before.

// adaptiveRateStep is the rise of a key's rate per row that keeps its
// sign; adaptiveRateMax its cap (see above). With these, rates take the
// values 1, 1.5 and 2.
const (
	adaptiveRateStep = 0.5
	adaptiveRateMax  = 2
	// adaptiveLevels is the number of rate values, 1 to adaptiveRateMax.
	adaptiveLevels = 1 + int8((adaptiveRateMax-1)/adaptiveRateStep)
)

// keyRates holds the adaptive outer step's per-key state.
type keyRates struct {
	// level is 0 for a key no committed row has changed; otherwise its
	// sign is that of the key's last combined change and |level| − 1
	// counts the rate's rises since its last flip.
	level []int8
	// row sums the row being committed, between add and endRow.
	row *rowSums
}

// rowSums is a row's combined change: sum per key, dense, over the keys in
// touched (a key may be listed twice; its sum is read once).
type rowSums struct {
	sum     []float64
	touched []uint64
}

// rowScratch lends rowSums from one commit to the next, and in the
// simulator from node to node: a dense sum per node would cost the
// simulator a model's worth of memory per simulated node, and a row is
// summed within one call of commit.
var rowScratch sync.Pool

func newKeyRates(size int) *keyRates { return &keyRates{level: make([]int8, size)} }

// add counts u as one of the updates of the row being committed; nil (no
// adaptive step) counts nothing.
func (r *keyRates) add(u codec.Sparse) {
	if r == nil {
		return
	}
	if r.row == nil {
		r.row, _ = rowScratch.Get().(*rowSums)
		if r.row == nil || len(r.row.sum) != len(r.level) {
			r.row = &rowSums{sum: make([]float64, len(r.level))}
		}
	}
	row := r.row
	if u.Dense() {
		for k, v := range u.Values[:min(len(u.Values), len(row.sum))] {
			if row.sum[k] == 0 {
				row.touched = append(row.touched, uint64(k))
			}
			row.sum[k] += float64(v)
		}
		return
	}
	for i, k := range u.Keys {
		if k >= uint64(len(row.sum)) {
			continue
		}
		if row.sum[k] == 0 {
			row.touched = append(row.touched, k)
		}
		row.sum[k] += float64(u.Values[i])
	}
}

// endRow moves each key's rate by the row's combined change.
func (r *keyRates) endRow() {
	if r == nil || r.row == nil {
		return
	}
	row := r.row
	for _, k := range row.touched {
		r.level[k] = nextLevel(r.level[k], row.sum[k])
		row.sum[k] = 0
	}
	row.touched = row.touched[:0]
	rowScratch.Put(row)
	r.row = nil
}

// nextLevel is a key's level after a row whose combined change is sum.
func nextLevel(level int8, sum float64) int8 {
	switch {
	case sum > 0 && level > 0:
		return min(level+1, adaptiveLevels)
	case sum < 0 && level < 0:
		return max(level-1, -adaptiveLevels)
	case sum > 0:
		return 1
	case sum < 0:
		return -1
	}
	return level // no change, or not a number: nothing learnt
}

// rate returns key k's outer rate.
func (r *keyRates) rate(k uint64) float64 {
	l := r.level[k]
	if l < 0 {
		l = -l
	}
	return 1 + adaptiveRateStep*float64(max(l-1, 0))
}

// scale multiplies each key's change by its rate, in place.
func (r *keyRates) scale(keys []uint64, change []float64) {
	for i, k := range keys {
		change[i] *= r.rate(k)
	}
}
