package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
)

// traceHash runs a four-node cluster under a seeded delivery order with a
// lossy codec and error feedback, and hashes every view a node reads at a
// gate, every envelope sent and the final views: any change to what a node
// computes, sends or applies changes it.
func traceHash(t *testing.T, configure func(*Config)) string {
	t.Helper()
	cl := configuredCluster(t, 4, 1, 12, "sketchml", func(c *Config) {
		c.ErrorFeedback = true
		configure(c)
	})
	h := fnv.New64a()
	word := func(v uint64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	cl.runToEnd(func(id string) {
		n := cl.nodes[id]
		word(n.Clock())
		for _, v := range n.View() {
			word(math.Float64bits(v))
		}
	})
	for _, id := range cl.ids {
		st := cl.nodes[id].Stats()
		word(st.BytesSent)
		word(st.FrameBytes)
		for _, v := range cl.nodes[id].View() {
			word(math.Float64bits(v))
		}
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// configuredCluster is newCluster (seed 7) with every node's configuration
// changed by configure.
func configuredCluster(t *testing.T, p, staleness int, iterations uint64, cdc string, configure func(*Config)) *cluster {
	t.Helper()
	cl := newCluster(t, p, staleness, iterations, cdc, 7)
	for _, id := range cl.ids {
		cfg := cl.nodes[id].cfg
		configure(&cfg)
		fresh, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cl.nodes[id] = fresh
	}
	return cl
}

// hashBeforeLocalSteps is traceHash of the code before local steps existed.
const hashBeforeLocalSteps = "49eeb3c610d7371c"

// One local step with the outer sgd step at rate 1 is the training of
// before local steps, bit for bit: same views read, same bytes, same end.
func TestOneLocalStepIsExchangeEveryStep(t *testing.T) {
	for name, configure := range map[string]func(*Config){
		"defaults": func(*Config) {},
		"explicit": func(c *Config) { c.LocalSteps, c.Outer, c.OuterRate = 1, OuterSGD, 1 },
	} {
		if got := traceHash(t, configure); got != hashBeforeLocalSteps {
			t.Errorf("%s: trace hash %s, want %s", name, got, hashBeforeLocalSteps)
		}
	}
	if got := traceHash(t, func(c *Config) { c.OuterRate = 0.5 }); got == hashBeforeLocalSteps {
		t.Error("outer rate 0.5 gives the trace of rate 1")
	}
}

// With H local steps the clock counts exchanges: 10 steps in exchanges of
// 4 are 3 exchanges (4, 4 and the last 2), every member applies every
// member's 3 updates once, and views end identical.
func TestLocalStepsCountExchanges(t *testing.T) {
	for _, s := range []int{0, 2} {
		cl := configuredCluster(t, 4, s, 10, "sketchml", func(c *Config) { c.LocalSteps, c.ErrorFeedback = 4, true })
		reads := map[uint64][]float64{}
		cl.runToEnd(func(id string) {
			n := cl.nodes[id]
			if n.midExchange() {
				return
			}
			if stale := n.Clock() - min(n.Clock(), n.VectorClock().Min(n.Live())); stale > uint64(s) {
				t.Fatalf("s=%d: %s starts exchange %d with staleness %d", s, id, n.Clock()+1, stale)
			}
			if s == 0 {
				v := slices.Clone(n.View())
				if first, ok := reads[n.Clock()]; ok && !sameFloats(first, v) {
					t.Fatalf("%s starts exchange %d from a view another member did not", id, n.Clock()+1)
				}
				reads[n.Clock()] = v
			}
		})
		for _, id := range cl.ids {
			n := cl.nodes[id]
			st := n.Stats()
			if n.Clock() != 3 || n.Steps() != 10 || st.UpdatesApplied != 4*3 || len(st.Rejected) != 0 {
				t.Fatalf("s=%d: %s at clock %d after %d steps, applied %d, rejected %v; want clock 3, 10 steps, 12 applied",
					s, id, n.Clock(), n.Steps(), st.UpdatesApplied, st.Rejected)
			}
			if !sameFloats(n.View(), cl.nodes[cl.ids[0]].View()) {
				t.Fatalf("s=%d: %s ends with another view than %s", s, id, cl.ids[0])
			}
		}
		if s == 0 && len(reads) != 3 {
			t.Fatalf("exchanges started from %d distinct clocks, want 3", len(reads))
		}
	}
}

// soloView runs one node alone for steps optimizer steps with raw updates
// (float32 values, no error feedback) and returns its view.
func soloView(t *testing.T, steps uint64, configure func(*Config)) []float64 {
	t.Helper()
	cl := configuredCluster(t, 1, 0, steps, "raw", configure)
	cl.runToEnd(nil)
	return slices.Clone(cl.nodes[cl.ids[0]].View())
}

// The outer step scales the accumulated change: a node alone, one exchange
// of 3 steps from the zero view, applies float32(η·Δ) for sgd and
// float32(1.9·Δ) for Nesterov's first step (m = Δ, Δ + 0.9·m); and its
// inner steps see their own changes, so Δ is what 3 steps of one step each
// reach, up to the float32 rounding of every update.
func TestOuterStepScalesAccumulatedChange(t *testing.T) {
	sgd := soloView(t, 3, func(c *Config) { c.LocalSteps = 3; c.Optimizer = plainSGD(t, c) })
	half := soloView(t, 3, func(c *Config) { c.LocalSteps, c.OuterRate = 3, 0.5; c.Optimizer = plainSGD(t, c) })
	nesterov := soloView(t, 3, func(c *Config) { c.LocalSteps, c.Outer = 3, OuterNesterov; c.Optimizer = plainSGD(t, c) })
	stepwise := soloView(t, 3, func(c *Config) { c.Optimizer = plainSGD(t, c) })
	var moved int
	for k := range sgd {
		if sgd[k] != 0 {
			moved++
		}
		if 2*half[k] != sgd[k] {
			t.Fatalf("key %d: rate 0.5 applies %v, rate 1 applies %v", k, half[k], sgd[k])
		}
		if want := float64(float32(1.9 * sgd[k])); math.Abs(nesterov[k]-want) > 1e-6*math.Abs(want)+1e-12 {
			t.Fatalf("key %d: nesterov applies %v, want 1.9 × %v", k, nesterov[k], sgd[k])
		}
		if math.Abs(stepwise[k]-sgd[k]) > 1e-6*math.Abs(sgd[k])+1e-9 {
			t.Fatalf("key %d: 3 local steps reach %v, 3 exchanged steps %v", k, sgd[k], stepwise[k])
		}
	}
	if moved == 0 {
		t.Fatal("no key moved")
	}
}

func plainSGD(t *testing.T, c *Config) model.Optimizer {
	t.Helper()
	opt, err := model.NewOptimizer(model.SGD, 0.5, c.Model.NumParams())
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

func TestLocalStepSettingsRefused(t *testing.T) {
	train := testData(t)
	for name, bad := range map[string]func(*Config){
		"negative steps": func(c *Config) { c.LocalSteps = -1 },
		"too many steps": func(c *Config) { c.LocalSteps = MaxLocalSteps + 1 },
		"negative rate":  func(c *Config) { c.OuterRate = -0.1 },
		"NaN rate":       func(c *Config) { c.OuterRate = math.NaN() },
		"infinite rate":  func(c *Config) { c.OuterRate = math.Inf(1) },
		"unknown outer":  func(c *Config) { c.Outer = "adam" },
	} {
		cfg := soloConfig(t, train)
		bad(&cfg)
		if _, err := New(cfg); !errors.Is(err, ErrLocalSteps) {
			t.Errorf("%s: New returns %v, want ErrLocalSteps", name, err)
		}
	}
}

func soloConfig(t *testing.T, train *dataset.Dataset) Config {
	t.Helper()
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: train.MaxFeature})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := model.NewOptimizer(model.SGD, 0.5, mdl.NumParams())
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.ByName("raw")
	if err != nil {
		t.Fatal(err)
	}
	return Config{ID: "a", Members: []string{"a"}, Model: mdl, Optimizer: opt, Codec: c, Iterations: 5, BatchSize: 4, Shard: train.Rows[:40]}
}
