package netmodel

import (
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

func TestTrainingSettings(t *testing.T) {
	tr := Training{
		Model: model.Softmax, Optimizer: model.SGD, LR: 0.5, L2: 1e-3, Batch: 8, Iterations: 40, Seed: 7,
		Codec: "raw", ErrorFeedback: true, Staleness: 1,
		Exchange: Exchange{LocalSteps: 4, Outer: node.OuterNesterov, OuterRate: 0.7, BudgetBytes: 900},
	}
	got := tr.Settings()
	if got.Model != model.Softmax || got.Optimizer != model.SGD || got.LearningRate != 0.5 || got.L2 != 1e-3 ||
		got.Codec != "raw" || !got.ErrorFeedback || got.Staleness != 1 || got.Iterations != 40 ||
		got.LocalSteps != 4 || got.Outer != node.OuterNesterov || got.OuterRate != 0.7 {
		t.Fatalf("settings %+v", got)
	}
}

// Validate refuses what node.Settings.Validate refuses, by the setting's
// name, and what a run needs besides: data on both sides, a step, a batch.
func TestTrainingValidate(t *testing.T) {
	rows := &dataset.Dataset{Rows: []dataset.Row{{Label: 1}}}
	good := Training{Model: model.LogisticRegression, Optimizer: model.Adam, Batch: 0.5, Iterations: 1, Codec: "raw"}
	if err := good.Validate(rows, rows); err != nil {
		t.Fatalf("good training refused: %v", err)
	}
	for want, mutate := range map[string]func(*Training, **dataset.Dataset, **dataset.Dataset){
		"no training data": func(_ *Training, train, _ **dataset.Dataset) { *train = nil },
		"no test data":     func(_ *Training, _, test **dataset.Dataset) { *test = &dataset.Dataset{} },
		"iterations":       func(c *Training, _, _ **dataset.Dataset) { c.Iterations = 0 },
		"codec":            func(c *Training, _, _ **dataset.Dataset) { c.Codec = "gzip9" },
		"staleness":        func(c *Training, _, _ **dataset.Dataset) { c.Staleness = -1 },
		"model":            func(c *Training, _, _ **dataset.Dataset) { c.Model = "tree" },
		"batch":            func(c *Training, _, _ **dataset.Dataset) { c.Batch = 1.5 },
		"local-steps":      func(c *Training, _, _ **dataset.Dataset) { c.Exchange.LocalSteps = -1 },
		"outer":            func(c *Training, _, _ **dataset.Dataset) { c.Exchange.Outer = "adam" },
	} {
		c, train, test := good, rows, rows
		mutate(&c, &train, &test)
		if err := c.Validate(train, test); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v", want, err)
		}
	}
}
