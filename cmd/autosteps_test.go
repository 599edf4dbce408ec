package cmd

import (
	"flag"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/testnet"
)

// A joiner given --local-steps auto takes the mesh's local steps: auto is
// not an explicit setting, a count is.
func TestLocalStepsAutoIsNotExplicit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--local-steps", "auto", "--staleness", "3"}, []string{"staleness"}},
		{[]string{"--local-steps", "4"}, []string{"local-steps"}},
		{nil, nil},
	} {
		var f runFlags
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if got := explicitSettings(fs); !slices.Equal(got, tc.want) {
			t.Errorf("%v: explicit settings %v, want %v", tc.args, got, tc.want)
		}
	}
}

// auto resolves from the round and the step; a given count, sufficient
// factors and an unshaped link keep one step an exchange or the count.
func TestResolveAuto(t *testing.T) {
	for _, tc := range []struct {
		given   string
		round   time.Duration
		factors bool
		want    int
	}{
		{"auto", 0, false, 1},
		{"auto", 240 * time.Millisecond, false, 6},
		{"auto", 30 * time.Millisecond, false, 3},
		{"auto", 240 * time.Millisecond, true, 1},
		{"5", 240 * time.Millisecond, false, 5},
		{"5", 0, false, 5},
	} {
		var f exchangeFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.register(fs, "")
		if err := fs.Set("local-steps", tc.given); err != nil {
			t.Fatal(err)
		}
		f.resolveAuto(tc.round, 10*time.Millisecond, 100, tc.factors)
		if f.localSteps != tc.want {
			t.Errorf("--local-steps %s, round %v, factors %v: %d steps, want %d", tc.given, tc.round, tc.factors, f.localSteps, tc.want)
		}
	}
	geo3, err := testnet.ParseWAN("geo3")
	if err != nil {
		t.Fatal(err)
	}
	if got := linkRound(geo3); got != 240*time.Millisecond {
		t.Errorf("geo3's round %v, want 240ms (two hops of its longest latency)", got)
	}
}

// stepTime times a real step, stretched by the nodes sharing each core and
// lengthened by the emulated compute time.
func TestStepTime(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testnet.Config{Nodes: 4, Train: train, Training: netmodel.Training{
		Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.02, L2: 1e-4,
		Batch: 0.1,
	}}
	if got := stepTime(cfg); got <= 0 {
		t.Fatalf("step time %v, want > 0", got)
	}
	cfg.ComputeTime = time.Hour
	if got := stepTime(cfg); got <= time.Hour {
		t.Fatalf("step time %v with an hour of emulated compute, want more than an hour", got)
	}
	cfg.Train = &dataset.Dataset{Name: "empty"}
	if got := stepTime(cfg); got != time.Hour {
		t.Fatalf("step time %v without rows, want the emulated hour", got)
	}
}
