package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/wire"
	"github.com/sketchmesh/sketchmesh/wire/wiretest"
)

// traceHash runs a four-node cluster under a seeded delivery order with a
// lossy codec and error feedback, and hashes every view a node reads at a
// gate, every envelope sent and the final views: any change to what a node
// computes, sends or applies changes it. The codec writes the sketch frame
// alone, as it did when the hash below was taken (sketchml now writes the
// built-in set's small updates as uniform8 frames).
func traceHash(t *testing.T, configure func(*Config)) string {
	t.Helper()
	cl := configuredCluster(t, 4, 1, 12, "sketchml:fallback=off", func(c *Config) {
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
		// The adaptive step has no rates to apply without local steps.
		"adaptive": func(c *Config) { c.LocalSteps, c.Outer = 1, OuterAdaptive },
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
// member's 3 updates once, and views end identical, whatever rates the
// adaptive outer step gives each member's keys.
func TestLocalStepsCountExchanges(t *testing.T) {
	for _, tc := range []struct {
		s     int
		outer OuterKind
	}{{0, OuterSGD}, {2, OuterSGD}, {0, OuterAdaptive}, {2, OuterAdaptive}} {
		s := tc.s
		cl := configuredCluster(t, 4, s, 10, "sketchml", func(c *Config) { c.LocalSteps, c.ErrorFeedback, c.Outer = 4, true, tc.outer })
		reads := map[uint64][]float64{}
		cl.runToEnd(func(id string) {
			n := cl.nodes[id]
			if n.midExchange() {
				return
			}
			if stale := n.Clock() - min(n.Clock(), n.VectorClock().Min(n.Live())); stale > uint64(s) {
				t.Fatalf("s=%d, %s: %s starts exchange %d with staleness %d", s, tc.outer, id, n.Clock()+1, stale)
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
				t.Fatalf("s=%d, %s: %s at clock %d after %d steps, applied %d, rejected %v; want clock 3, 10 steps, 12 applied",
					s, tc.outer, id, n.Clock(), n.Steps(), st.UpdatesApplied, st.Rejected)
			}
			if !sameFloats(n.View(), cl.nodes[cl.ids[0]].View()) {
				t.Fatalf("s=%d, %s: %s ends with another view than %s", s, tc.outer, id, cl.ids[0])
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

// Inner steps are whole steps on the node's own copy, and the exchange
// sends the node's share (1/k) of their sum, as DiLoCo's workers average
// their models: four members that draw the same batches from the same rows
// end where one member alone does, 2 exchanges of 3 steps each, up to the
// float32 rounding of every update. Inner steps of a 1/k share each (the
// first form) read a copy that moved a quarter as far: the gradients of
// steps 2 and 3 were taken at other points and the views part.
func TestLocalStepsAverageWholeSteps(t *testing.T) {
	rows := testData(t).Rows
	configure := func(c *Config) {
		c.LocalSteps, c.Batches = 3, &sequenceSource{rows: rows, size: 10}
		c.Optimizer = plainSGD(t, c)
	}
	solo := soloView(t, 6, configure)
	cl := configuredCluster(t, 4, 0, 6, "raw", configure)
	cl.runToEnd(nil)
	var moved int
	for _, id := range cl.ids {
		view := cl.nodes[id].View()
		for k, want := range solo {
			if want != 0 {
				moved++
			}
			if math.Abs(view[k]-want) > 1e-5*math.Abs(want)+1e-7 {
				t.Fatalf("%s key %d: %v after 6 steps in exchanges of 3, one member alone %v", id, k, view[k], want)
			}
		}
	}
	if moved == 0 {
		t.Fatal("no key moved")
	}
}

// sequenceSource gives consecutive batches of size rows from the start.
type sequenceSource struct {
	rows []dataset.Row
	size int
	next int
}

func (s *sequenceSource) Next() ([]dataset.Row, error) {
	lo := s.next * s.size % len(s.rows)
	s.next++
	return s.rows[lo:min(lo+s.size, len(s.rows))], nil
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

func localSettings() Settings {
	s := testSettings()
	s.Codec, s.Factors, s.LocalSteps, s.Outer, s.OuterRate = "sketchml", FactorsOff, 16, OuterNesterov, 0.7
	return s
}

// Local-step settings travel in three more fields, the hash bits then
// written as 0; the defaults keep the eleven fields of before.
func TestLocalSettingsRoundTrip(t *testing.T) {
	s := localSettings()
	data := encodeSettings(s)
	if data[0] != 0x9f {
		t.Fatalf("settings with local steps start %#x, want an array of 15 (0x9f)", data[0])
	}
	got, err := readSettings(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.LocalSteps != 16 || got.Outer != OuterNesterov || got.OuterRate != 0.7 || got.HashBits != 0 || got.Iterations != 500 {
		t.Fatalf("read %+v", got)
	}
	hashed := s
	hashed.HashBits, hashed.MaxFeature = 18, 1<<18
	if got, err := readSettings(encodeSettings(hashed)); err != nil || got.HashBits != 18 || got.LocalSteps != 16 {
		t.Fatalf("hashed local settings read as %+v, %v", got, err)
	}
	// The defaults, spelled out, are the zero values on the wire.
	spelled := testSettings()
	spelled.LocalSteps, spelled.Outer, spelled.OuterRate = 1, OuterSGD, 1
	if !bytes.Equal(encodeSettings(spelled), encodeSettings(testSettings())) {
		t.Fatal("explicit defaults encode differently from the zero values")
	}
	for _, name := range []string{SettingLocalSteps, SettingOuter, SettingOuterRate} {
		if spelled.Value(name) != testSettings().Value(name) {
			t.Errorf("%s: %q and %q", name, spelled.Value(name), testSettings().Value(name))
		}
	}
	if _, _, _, err := s.Build(); err != nil {
		t.Fatalf("build: %v", err)
	}
	s.Factors = FactorsAuto
	if _, _, _, err := s.Build(); !errors.Is(err, ErrFactorConfig) {
		t.Fatalf("factors with 16 local steps build: %v", err)
	}
}

// A joiner given local steps the mesh does not train with is refused by
// name.
func TestLocalSettingsConflict(t *testing.T) {
	mesh, joiner := localSettings(), localSettings()
	joiner.LocalSteps = 8
	err := joiner.Conflict(mesh, []string{SettingLocalSteps})
	if err == nil || err.Error() != "setting local-steps differs: this node was given 8, the mesh trains with 16" {
		t.Fatalf("conflict: %v", err)
	}
	if err := joiner.Conflict(mesh, []string{SettingOuter}); err != nil {
		t.Fatalf("outer agrees, got %v", err)
	}
}

func TestLocalSettingsRefused(t *testing.T) {
	good := localSettingsParts(localSettings())
	for name, tc := range map[string]struct {
		part int
		data func(w *wire.Writer)
		want string
	}{
		"zero steps":    {13, func(w *wire.Writer) { w.Uint(0) }, "local steps 0"},
		"too many":      {13, func(w *wire.Writer) { w.Uint(MaxLocalSteps + 1) }, "local steps 4097"},
		"unknown outer": {14, func(w *wire.Writer) { w.String("adam") }, `outer step "adam"`},
		"zero rate":     {15, func(w *wire.Writer) { w.Float(0) }, "outer rate 0"},
		"negative rate": {15, func(w *wire.Writer) { w.Float(-1) }, "outer rate -1"},
	} {
		ps := slices.Clone(good)
		ps[tc.part] = partOf(ps[tc.part].Name, tc.data)
		_, err := readSettings(wiretest.Join(ps))
		if !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want malformed %q", name, err, tc.want)
		}
	}
	// Bad settings a founder gives itself are refused when it builds them.
	for _, bad := range []Settings{{LocalSteps: -1}, {OuterRate: -0.5}, {Outer: "adam"}} {
		s := localSettings()
		s.LocalSteps, s.Outer, s.OuterRate = bad.LocalSteps, bad.Outer, bad.OuterRate
		if _, _, _, err := s.Build(); !errors.Is(err, ErrLocalSteps) {
			t.Errorf("%+v builds: %v", bad, err)
		}
	}
}

func localSettingsParts(s Settings) []wiretest.Part {
	ps := settingsParts(s)
	ps[0] = partOf("settings", func(w *wire.Writer) { w.Array(15) })
	return append(ps,
		partOf("hash bits", func(w *wire.Writer) { w.Uint(uint64(s.HashBits)) }),
		partOf("local steps", func(w *wire.Writer) { w.Uint(uint64(s.LocalSteps)) }),
		partOf("outer step", func(w *wire.Writer) { w.String(string(s.Outer)) }),
		partOf("outer rate", func(w *wire.Writer) { w.Float(s.OuterRate) }))
}

// A copy taken while a row is in flight holds the node's own update once
// for each live member whose update of that clock is missing: exactly
// view + missing × own, 3, then 2, then nothing once all are in.
func TestStandInForMissingExact(t *testing.T) {
	cl := configuredCluster(t, 4, 1, 9, "raw", func(c *Config) { c.LocalSteps = 3 })
	a, b := cl.nodes[cl.ids[0]], cl.nodes[cl.ids[1]]
	for range 3 {
		if err := a.Train(); err != nil {
			t.Fatal(err)
		}
	}
	own, ok := a.pendingOf(1, a.ID())
	if !ok || len(own.Keys) == 0 {
		t.Fatalf("a holds no update of its own at clock 1")
	}
	check := func(missing int) {
		t.Helper()
		view := a.View()
		copied := slices.Clone(view)
		a.standInForMissing(copied)
		want := slices.Clone(view)
		for i, k := range own.Keys {
			if missing > 0 {
				want[k] += float64(missing) * float64(own.Values[i])
			}
		}
		if !sameFloats(copied, want) {
			t.Fatalf("%d missing: the copy is not view + %d × own update", missing, missing)
		}
	}
	check(3)
	for range 3 {
		if err := b.Train(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range b.Ready().Messages {
		if m.To == a.ID() {
			a.Receive(b.ID(), m.Data)
		}
	}
	check(2)
	for _, id := range cl.ids[2:] {
		n := cl.nodes[id]
		for range 3 {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range n.Ready().Messages {
			if m.To == a.ID() {
				a.Receive(n.ID(), m.Data)
			}
		}
	}
	if a.committedClock != 1 {
		t.Fatalf("row 1 not committed at a with every update in")
	}
	check(0)
}

// With the stand-in, staleness 1 costs members that draw the same batches
// nothing: each member's update stands in exactly for the others', so four
// members end where one member alone does, though exchanges started with
// the others' updates still in flight. Without it such a copy held the
// others' last steps not at all, and the members' steps parted from one
// member's.
func TestStandInHidesTheRound(t *testing.T) {
	rows := testData(t).Rows
	configure := func(c *Config) {
		c.LocalSteps, c.Batches = 3, &sequenceSource{rows: rows, size: 10}
		c.Optimizer = plainSGD(t, c)
	}
	solo := soloView(t, 9, configure)
	for seed := uint64(1); seed <= 3; seed++ {
		cl := newCluster(t, 4, 1, 9, "raw", seed)
		for _, id := range cl.ids {
			cfg := cl.nodes[id].cfg
			configure(&cfg)
			fresh, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cl.nodes[id] = fresh
		}
		inFlight := 0
		cl.runToEnd(func(id string) {
			n := cl.nodes[id]
			if !n.midExchange() && n.VectorClock().Min(n.Live()) < n.Clock() {
				inFlight++
			}
		})
		if inFlight == 0 {
			t.Fatalf("seed %d: no exchange started with an update in flight", seed)
		}
		for _, id := range cl.ids {
			view := cl.nodes[id].View()
			for k, want := range solo {
				if math.Abs(view[k]-want) > 1e-5*math.Abs(want)+1e-7 {
					t.Fatalf("seed %d: %s key %d: %v after 9 steps at s = 1, one member alone %v", seed, id, k, view[k], want)
				}
			}
		}
	}
}
