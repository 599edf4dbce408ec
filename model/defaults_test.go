package model

import (
	"math"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
)

func TestDefaultRate(t *testing.T) {
	for _, c := range []struct {
		opt  OptimizerKind
		kind Kind
		norm float64
		want float64
	}{
		{Adam, Softmax, 14, 0.02},
		{Adam, LinearRegression, 0.5, 0.02},
		{SGD, LogisticRegression, 1, 1},
		{SGD, LinearSVM, 0.25, 1},
		{SGD, Softmax, 1, 10},
		{SGD, Softmax, 20, 0.5},
		{SGD, LinearRegression, 4, 0.125},
		{SGD, LogisticRegression, 0, 1},
	} {
		got, err := DefaultRate(c.opt, c.kind, c.norm)
		if err != nil || got != c.want {
			t.Errorf("DefaultRate(%s, %s, %v) = %v, %v; want %v", c.opt, c.kind, c.norm, got, err, c.want)
		}
	}
	if _, err := DefaultRate("rmsprop", Softmax, 1); err == nil {
		t.Error("unknown optimizer accepted")
	}
	if _, err := DefaultRate(SGD, "tree", 1); err == nil {
		t.Error("unknown model accepted")
	}
}

func TestMeanSquaredNorm(t *testing.T) {
	rows := []dataset.Row{{Keys: []uint64{1, 2}, Values: []float32{3, 4}}, {Keys: []uint64{5}, Values: []float32{1}}, {}}
	if got := MeanSquaredNorm(rows); got != 26.0/3 {
		t.Errorf("MeanSquaredNorm = %v, want %v", got, 26.0/3)
	}
	if MeanSquaredNorm(nil) != 0 {
		t.Error("MeanSquaredNorm(nil) != 0")
	}
}

func TestLossWatch(t *testing.T) {
	observe := func(losses ...float64) (at int, msg string) {
		var w LossWatch
		for i, l := range losses {
			if m := w.Observe(l); m != "" {
				if msg != "" {
					t.Errorf("second warning %q after %q", m, msg)
				}
				at, msg = i, m
			}
		}
		return at, msg
	}
	for _, c := range []struct {
		name   string
		losses []float64
		at     int
		want   string
	}{
		{"falls", []float64{0.69, 0.6, 0.5, 0.45, 0.42, 0.41, 0.405, 0.404, 0.404}, 0, ""},
		{"stuck", []float64{0.6931, 0.6930, 0.6929, 0.6931, 0.6925, 0.6920, 0.5}, 4, "has not moved by 1 % in 5 evaluations"},
		{"rises", []float64{0.69, 0.3, 0.35, 0.4, 0.45, 0.5}, 5, "rose at each of the last 4 evaluations (from 0.3 to 0.5)"},
		{"creeps up", []float64{0.69, 0.3, 0.305, 0.31, 0.315, 0.32, 0.325}, 0, ""},
		{"ends above the first", []float64{3, 40, 20, 39, 30}, 4, "higher after 5 evaluations than at the first (30, first 3)"},
		{"diverges", []float64{0.69, math.NaN()}, 1, "the test loss is NaN"},
		{"stalls only at the end", []float64{0.69, 0.5, 0.4, 0.4, 0.4, 0.4}, 0, ""},
	} {
		at, msg := observe(c.losses...)
		if (c.want == "") != (msg == "") || !strings.Contains(msg, c.want) || at != c.at {
			t.Errorf("%s: warning %q at evaluation %d; want %q at %d", c.name, msg, at, c.want, c.at)
		}
	}
}
