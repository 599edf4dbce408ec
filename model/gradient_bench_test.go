package model

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// sparseBatch is a batch shaped like news20.binary's at 8 nodes and batch
// 0.1: 141 rows of 133 features drawn from 47,539.
func sparseBatch(rng *rand.Rand) []dataset.Row {
	const features, perRow, batch = 47539, 133, 141
	out := make([]dataset.Row, batch)
	for i := range out {
		keys := make([]uint64, 0, perRow)
		for len(keys) < perRow {
			k := 1 + rng.Uint64N(features)
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		vals := make([]float32, perRow)
		for j := range vals {
			vals[j] = float32(rng.Float64())
		}
		out[i] = dataset.Row{Label: float64(2*(i%2) - 1), Keys: keys, Values: vals}
	}
	return out
}

// BenchmarkGradientSparse times one logistic-regression gradient of a
// news20.binary-shaped batch, the compute of a local step.
func BenchmarkGradientSparse(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, err := New(Config{Kind: LogisticRegression, MaxFeature: 47539, L2: 1e-4})
	if err != nil {
		b.Fatal(err)
	}
	batches := [][]dataset.Row{sparseBatch(rng), sparseBatch(rng), sparseBatch(rng)}
	w := weights(m.NumParams())
	var s Scratch
	b.ResetTimer()
	for i := range b.N {
		m.Gradient(w, batches[i%len(batches)], &s)
	}
}

// Gradient lists its keys in ascending order, each once, with the sums a
// dense accumulation in row order gives, bit for bit, the L2 term added
// to every key but the bias; and a second gradient with the same scratch
// starts from zero.
func TestGradientMatchesDenseSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m, err := New(Config{Kind: LogisticRegression, MaxFeature: 47539, L2: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	w := weights(m.NumParams())
	var s Scratch
	for round := range 3 {
		batch := sparseBatch(rng)[:20+round]
		g, _ := m.Gradient(w, batch, &s)
		dense := make([]float64, m.NumParams())
		touched := make([]bool, m.NumParams())
		dz := make([]float64, 1)
		inv := 1 / float64(len(batch))
		for i := range batch {
			r := &batch[i]
			m.rowLoss(w, r, make([]float64, 1), dz)
			dense[0] += dz[0] * inv
			touched[0] = true
			for j, k := range r.Keys {
				dense[k] += dz[0] * inv * float64(r.Values[j])
				touched[k] = true
			}
		}
		var want []uint64
		for k, ok := range touched {
			if ok {
				want = append(want, uint64(k))
			}
		}
		if !slices.Equal(g.Keys, want) {
			t.Fatalf("round %d: %d keys, want the %d the batch touched, ascending", round, len(g.Keys), len(want))
		}
		for i, k := range g.Keys {
			v := dense[k]
			if k != 0 {
				v += 1e-4 * w[k]
			}
			if g.Values[i] != v {
				t.Fatalf("round %d key %d: %v, want %v", round, k, g.Values[i], v)
			}
		}
	}
}
