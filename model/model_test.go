package model

import (
	"math"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
)

var rows = []dataset.Row{
	{Label: 1, Keys: []uint64{1, 3}, Values: []float32{0.5, -1}},
	{Label: -1, Keys: []uint64{2}, Values: []float32{2}},
	{Label: 0, Keys: []uint64{1, 2, 3}, Values: []float32{1, 1, 1}},
	{Label: 1}, // a row without features still trains the bias
}

var softRows = []dataset.Row{
	{Label: 2, Keys: []uint64{1, 3}, Values: []float32{0.5, -1}},
	{Label: 5, Keys: []uint64{2}, Values: []float32{2}},
	{Label: 7, Keys: []uint64{1, 2, 3}, Values: []float32{1, 1, 1}},
}

func weights(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 0.1 * float64((i*7)%5-2)
	}
	return w
}

// lossAt is the regularised mean loss the gradient differentiates, with the
// L2 term on the coordinates the batch touches.
func lossAt(m *Model, w []float64, rs []dataset.Row, touched []uint64) float64 {
	l := m.Evaluate(w, rs).Loss
	for _, k := range touched {
		if k%m.stride != 0 {
			l += m.cfg.L2 / 2 * w[k] * w[k]
		}
	}
	return l
}

// The analytic gradient matches central differences of the loss for every
// model (SVM away from its hinge).
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	cases := []struct {
		cfg Config
		rs  []dataset.Row
	}{
		{Config{Kind: LogisticRegression, MaxFeature: 3, L2: 0.01}, rows},
		{Config{Kind: LinearRegression, MaxFeature: 3, L2: 0.01}, rows},
		{Config{Kind: LinearSVM, MaxFeature: 3}, rows},
		{Config{Kind: Softmax, MaxFeature: 3, Classes: []float64{2, 5, 7}, L2: 0.01}, softRows},
	}
	for _, c := range cases {
		m, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		w := weights(m.NumParams())
		var s Scratch
		g, _ := m.Gradient(w, c.rs, &s)
		keys := append([]uint64(nil), g.Keys...)
		vals := append([]float64(nil), g.Values...)
		for i, k := range keys {
			const h = 1e-6
			old := w[k]
			w[k] = old + h
			up := lossAt(m, w, c.rs, keys)
			w[k] = old - h
			down := lossAt(m, w, c.rs, keys)
			w[k] = old
			num := (up - down) / (2 * h)
			if math.Abs(num-vals[i]) > 1e-5 {
				t.Errorf("%s: d/dw[%d] = %v analytic, %v numeric", c.cfg.Kind, k, vals[i], num)
			}
		}
		for i := 1; i < len(keys); i++ {
			if keys[i] <= keys[i-1] {
				t.Fatalf("%s: keys not ascending: %v", c.cfg.Kind, keys)
			}
		}
	}
}

func TestLogisticLossExactValues(t *testing.T) {
	m, err := New(Config{Kind: LogisticRegression, MaxFeature: 3})
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float64, m.NumParams())
	met := m.Evaluate(w, rows)
	if math.Abs(met.Loss-math.Ln2) > 1e-12 {
		t.Fatalf("loss at w=0 is %v, want ln 2", met.Loss)
	}
	// Score 0 predicts the negative class: rows 2 and 3 are negative.
	if met.Accuracy != 0.5 {
		t.Fatalf("accuracy at w=0 is %v, want 0.5", met.Accuracy)
	}
	var s Scratch
	g, loss := m.Gradient(w, rows, &s)
	if math.Abs(loss-math.Ln2) > 1e-12 {
		t.Fatalf("batch loss %v", loss)
	}
	// Bias gradient: mean of p - y = 0.5 - mean(y) = 0.5 - 0.5.
	if g.Keys[0] != 0 || math.Abs(g.Values[0]) > 1e-15 {
		t.Fatalf("bias gradient %v at key %d, want 0", g.Values[0], g.Keys[0])
	}
}

func TestSoftmaxUnknownLabelContributesNothing(t *testing.T) {
	m, err := New(Config{Kind: Softmax, MaxFeature: 3, Classes: []float64{2, 5}})
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	g, loss := m.Gradient(make([]float64, m.NumParams()), []dataset.Row{{Label: 9, Keys: []uint64{1}, Values: []float32{1}}}, &s)
	if len(g.Keys) != 0 || loss != 0 {
		t.Fatalf("gradient %v loss %v for a label outside the classes", g, loss)
	}
}

func TestFeaturesAboveDimensionAreIgnored(t *testing.T) {
	m, err := New(Config{Kind: LogisticRegression, MaxFeature: 2})
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	g, _ := m.Gradient(make([]float64, m.NumParams()), rows[:1], &s)
	for _, k := range g.Keys {
		if k > 2 {
			t.Fatalf("gradient has key %d above the dimension", k)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	bad := []Config{
		{Kind: "tree", MaxFeature: 3},
		{Kind: LogisticRegression},
		{Kind: LogisticRegression, MaxFeature: 3, L2: -1},
		{Kind: LogisticRegression, MaxFeature: 3, L2: math.NaN()},
		{Kind: Softmax, MaxFeature: 3, Classes: []float64{1}},
		{Kind: Softmax, MaxFeature: 3, Classes: []float64{2, 1}},
		{Kind: Softmax, MaxFeature: 1 << 40, Classes: []float64{1, 2}},
		{Kind: LogisticRegression, MaxFeature: math.MaxUint64},
		{Kind: LogisticRegression, MaxFeature: 1 << 31},
	}
	for _, c := range bad {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestOptimizers(t *testing.T) {
	g := Gradient{Keys: []uint64{1, 4}, Values: []float64{2, -0.5}}
	sgd, err := NewOptimizer(SGD, 0.1, 5)
	if err != nil {
		t.Fatal(err)
	}
	if d := sgd.Update(g, 0.5); d[0] != -0.1 || d[1] != 0.025 {
		t.Fatalf("sgd update %v, want [-0.1 0.025]", d)
	}
	adam, err := NewOptimizer(Adam, 0.1, 5)
	if err != nil {
		t.Fatal(err)
	}
	// Adam's first bias-corrected step is lr·sign(g) (up to epsilon).
	d := adam.Update(g, 1)
	if math.Abs(d[0]+0.1) > 1e-6 || math.Abs(d[1]-0.1) > 1e-6 {
		t.Fatalf("adam first step %v, want [-0.1 0.1]", d)
	}
	if _, err := NewOptimizer("lbfgs", 0.1, 5); err == nil {
		t.Fatal("unknown optimizer accepted")
	}
	if _, err := NewOptimizer(SGD, 0, 5); err == nil {
		t.Fatal("zero learning rate accepted")
	}
}

// A restored optimizer continues exactly where the saved one stopped.
func TestOptimizerStateRoundTrip(t *testing.T) {
	g := Gradient{Keys: []uint64{0, 3}, Values: []float64{0.5, -2}}
	for _, kind := range []OptimizerKind{SGD, Adam} {
		a, _ := NewOptimizer(kind, 0.1, 5)
		a.Update(g, 1)
		b, _ := NewOptimizer(kind, 0.1, 5)
		if err := b.Restore(a.State()); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		ua, ub := a.Update(g, 1), b.Update(g, 1)
		for i := range ua {
			if ua[i] != ub[i] {
				t.Fatalf("%s: restored update %v, want %v", kind, ub, ua)
			}
		}
	}
	adam, _ := NewOptimizer(Adam, 0.1, 5)
	for name, s := range map[string]OptimizerState{
		"other kind": {Kind: SGD},
		"short":      {Kind: Adam, M: make([]float64, 4), V: make([]float64, 5)},
		"negative v": {Kind: Adam, M: make([]float64, 5), V: []float64{0, 0, -1, 0, 0}},
	} {
		if err := adam.Restore(s); err == nil {
			t.Errorf("%s: Restore accepted it", name)
		}
	}
}
