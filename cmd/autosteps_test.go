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
	"github.com/sketchmesh/sketchmesh/node"
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

// auto resolves from the run's length alone, whatever the links; a given
// count stands, and sufficient factors keep one step an exchange.
func TestResolveAuto(t *testing.T) {
	for _, tc := range []struct {
		given      string
		iterations uint64
		factors    bool
		want       int
	}{
		{"auto", 100, false, 8},
		{"auto", 0, false, node.MaxAutoLocalSteps}, // run: no end
		{"auto", 30, false, 5},
		{"auto", 100, true, 1},
		{"5", 100, false, 5},
		{"5", 100, true, 5}, // the settings' check refuses it, with a cause
	} {
		var f exchangeFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.register(fs, "")
		if err := fs.Set("local-steps", tc.given); err != nil {
			t.Fatal(err)
		}
		f.resolveAuto(tc.iterations, tc.factors)
		if f.localSteps != tc.want {
			t.Errorf("--local-steps %s, %d iterations, factors %v: %d steps, want %d", tc.given, tc.iterations, tc.factors, f.localSteps, tc.want)
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

// --budget auto shares the slowest link's bytes of an exchange's period
// among the frames the link carries; unshaped links, a given budget,
// sufficient factors and no error feedback take none of it.
func TestResolveBudget(t *testing.T) {
	slow, err := testnet.ParseWAN("latency=50ms,bandwidth=2Mbit")
	if err != nil {
		t.Fatal(err)
	}
	lan, err := testnet.ParseWAN("")
	if err != nil {
		t.Fatal(err)
	}
	period := exchangePeriod(linkRound(slow), 10*time.Millisecond, 6) // the round: 100 ms
	for _, tc := range []struct {
		given    string
		link     netmodel.LinkProfile
		topology string
		ef, sfb  bool
		want     int
	}{
		{"auto", slow, "halton", true, false, 10714}, // 250 kB/s × 0.1 s over 7/3 frames a link
		{"auto", slow, "full", true, false, 25000},
		{"auto", lan, "halton", true, false, 0},
		{"auto", slow, "halton", false, false, 0},
		{"auto", slow, "halton", true, true, 0},
		{"4096", slow, "halton", true, false, 4096},
		{"0", slow, "halton", true, false, 0},
	} {
		var f exchangeFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.register(fs, "")
		if err := fs.Set("budget", tc.given); err != nil {
			t.Fatal(err)
		}
		f.resolveBudget(tc.link, period, 8, tc.topology, "sketchml", tc.ef, tc.sfb)
		if f.budget != tc.want {
			t.Errorf("--budget %s on %s (%s, error feedback %v, factors %v): %d bytes, want %d", tc.given, tc.link, tc.topology, tc.ef, tc.sfb, f.budget, tc.want)
		}
	}
	if got := exchangePeriod(linkRound(slow), 30*time.Millisecond, 6); got != 180*time.Millisecond {
		t.Errorf("six steps of 30 ms after a round of 100 ms: period %v, want 180ms", got)
	}
}
