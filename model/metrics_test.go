package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// pairAUC counts, over every positive–negative pair, wins as 1 and ties as
// one half: the definition AUC's rank formula must reproduce.
func pairAUC(scores []float64, positive []bool) float64 {
	var wins, pairs float64
	for i := range scores {
		for j := range scores {
			if !positive[i] || positive[j] {
				continue
			}
			pairs++
			switch {
			case scores[i] > scores[j]:
				wins++
			case scores[i] == scores[j]:
				wins += 0.5
			}
		}
	}
	return wins / pairs
}

func TestAUCExactValues(t *testing.T) {
	cases := []struct {
		name     string
		scores   []float64
		positive []bool
		want     float64
	}{
		{"separated", []float64{0.1, 0.2, 0.8, 0.9}, []bool{false, false, true, true}, 1},
		{"reversed", []float64{0.1, 0.2, 0.8, 0.9}, []bool{true, true, false, false}, 0},
		{"all tied", []float64{3, 3, 3, 3, 3}, []bool{true, false, true, false, false}, 0.5},
		{"one swap", []float64{0.1, 0.4, 0.35, 0.8}, []bool{false, false, true, true}, 0.75},
		{"ties across classes", []float64{1, 1, 2, 2}, []bool{false, true, false, true}, 0.5},
		{"ties within a class", []float64{1, 1, 2, 2}, []bool{false, false, true, true}, 1},
	}
	for _, c := range cases {
		if got := AUC(c.scores, c.positive); got != c.want {
			t.Errorf("%s: AUC = %v, want %v", c.name, got, c.want)
		}
	}
	if got := AUC([]float64{1, 2}, []bool{true, true}); !math.IsNaN(got) {
		t.Errorf("AUC of positives only = %v, want NaN", got)
	}
	if got := AUC(nil, nil); !math.IsNaN(got) {
		t.Errorf("AUC of no rows = %v, want NaN", got)
	}
}

// On random scores with many ties the rank formula equals the pair count.
func TestAUCMatchesPairCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 50; trial++ {
		n := 2 + rng.IntN(60)
		scores := make([]float64, n)
		positive := make([]bool, n)
		for i := range scores {
			scores[i] = float64(rng.IntN(5)) // few distinct values: many ties
			positive[i] = rng.IntN(3) == 0
		}
		positive[0], positive[1] = true, false
		want := pairAUC(scores, positive)
		if got := AUC(scores, positive); math.Abs(got-want) > 1e-12 {
			t.Fatalf("trial %d: AUC %v, pair count %v", trial, got, want)
		}
	}
}

func TestEvaluateMetricsPerModel(t *testing.T) {
	lr, _ := New(Config{Kind: LogisticRegression, MaxFeature: 2})
	w := []float64{0, 1, -1} // margin = x1 - x2
	binRows := []dataset.Row{
		{Label: 1, Keys: []uint64{1}, Values: []float32{2}},  // z 2, right
		{Label: -1, Keys: []uint64{2}, Values: []float32{1}}, // z -1, right
		{Label: 1, Keys: []uint64{2}, Values: []float32{3}},  // z -3, wrong
		{Label: -1, Keys: []uint64{1}, Values: []float32{1}}, // z 1, wrong
	}
	met := lr.Evaluate(w, binRows)
	// Positives score 2 and -3, negatives -1 and 1: 2 of 4 pairs won.
	if met.Accuracy != 0.5 || met.AUC != 0.5 || met.Rows != 4 || !math.IsNaN(met.RMSE) || !math.IsNaN(met.MacroF1) {
		t.Errorf("lr metrics = %+v", met)
	}
	wantLoss := (softplus(2) - 2 + softplus(-1) + softplus(-3) + 3 + softplus(1)) / 4
	if math.Abs(met.Loss-wantLoss) > 1e-15 {
		t.Errorf("lr loss %v, want %v", met.Loss, wantLoss)
	}

	lin, _ := New(Config{Kind: LinearRegression, MaxFeature: 2})
	met = lin.Evaluate(w, []dataset.Row{
		{Label: 1, Keys: []uint64{1}, Values: []float32{2}}, // error 1
		{Label: 0, Keys: []uint64{2}, Values: []float32{3}}, // error -3
	})
	if met.RMSE != math.Sqrt(5) || !math.IsNaN(met.Accuracy) || !math.IsNaN(met.AUC) {
		t.Errorf("linear metrics = %+v", met)
	}

	sm, _ := New(Config{Kind: Softmax, MaxFeature: 2, Classes: []float64{0, 1, 2}})
	// Class c scores x_{c+1} for c < 2 and nothing for class 2.
	ws := []float64{0, 1, 0, 0, 0, 1, -1, 0, 0}
	met = sm.Evaluate(ws, []dataset.Row{
		{Label: 0, Keys: []uint64{1}, Values: []float32{5}}, // predicted 0
		{Label: 1, Keys: []uint64{2}, Values: []float32{5}}, // predicted 1
		{Label: 2, Keys: []uint64{1}, Values: []float32{5}}, // predicted 0
		{Label: 1, Keys: []uint64{1}, Values: []float32{5}}, // predicted 0
	})
	// F1: class 0 2·1/(3+1), class 1 2·1/(1+2), class 2 0/(0+1).
	wantF1 := (0.5 + 2.0/3 + 0) / 3
	if met.Accuracy != 0.5 || math.Abs(met.MacroF1-wantF1) > 1e-15 || !math.IsNaN(met.AUC) {
		t.Errorf("softmax metrics = %+v, want macro F1 %v", met, wantF1)
	}
}

// A stream through an Evaluator and Evaluate over the slice agree bit for
// bit, and Add returns each model's output.
func TestEvaluatorMatchesEvaluate(t *testing.T) {
	for _, cfg := range []Config{
		{Kind: LogisticRegression, MaxFeature: 3},
		{Kind: LinearSVM, MaxFeature: 3},
		{Kind: LinearRegression, MaxFeature: 3},
	} {
		m, _ := New(cfg)
		w := weights(m.NumParams())
		ev := m.NewEvaluator(w)
		for i := range rows {
			out := ev.Add(&rows[i])
			z := m.dot(w, 0, &rows[i])
			want := z
			if cfg.Kind == LogisticRegression {
				want = sigmoid(z)
			}
			if len(out) != 1 || out[0] != want {
				t.Errorf("%s row %d: output %v, want %v", cfg.Kind, i, out, want)
			}
		}
		a, b := ev.Metrics(), m.Evaluate(w, rows)
		if math.Float64bits(a.Loss) != math.Float64bits(b.Loss) || math.Float64bits(a.AUC) != math.Float64bits(b.AUC) {
			t.Errorf("%s: stream %+v, slice %+v", cfg.Kind, a, b)
		}
	}
	sm, _ := New(Config{Kind: Softmax, MaxFeature: 3, Classes: []float64{2, 5, 7}})
	ev := sm.NewEvaluator(weights(sm.NumParams()))
	out := ev.Add(&softRows[0])
	var sum float64
	for _, p := range out {
		sum += p
	}
	if len(out) != 3 || math.Abs(sum-1) > 1e-12 {
		t.Errorf("softmax output %v does not sum to 1", out)
	}
}
