package codec

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// lrGradient is the logistic-regression gradient (1/B)·Σ (σ(w·x) − y01)·x
// over rows, with w given per feature (nil is w = 0); keys are the union of
// the rows' features.
func lrGradient(rows []dataset.Row, w map[uint64]float64) Sparse {
	g := map[uint64]float64{}
	for _, r := range rows {
		dot := 0.0
		for j, k := range r.Keys {
			dot += w[k] * float64(r.Values[j])
		}
		y01 := 0.0
		if r.Label > 0 {
			y01 = 1
		}
		d := 1/(1+math.Exp(-dot)) - y01
		for j, k := range r.Keys {
			g[k] += d * float64(r.Values[j]) / float64(len(rows))
		}
	}
	u := Sparse{}
	for k := range g {
		u.Keys = append(u.Keys, k)
	}
	slices.Sort(u.Keys)
	for _, k := range u.Keys {
		u.Values = append(u.Values, float32(g[k]))
	}
	return u
}

// realGradients are logistic-regression gradients of the built-in data
// sets over a 10% batch: at w = 0, and (rcv1) after 20 full-batch
// gradient steps, when the values have spread out.
func realGradients(t *testing.T) map[string]Sparse {
	t.Helper()
	out := map[string]Sparse{}
	for _, name := range []string{"rcv1", "a9a"} {
		train, _, err := dataset.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		rows := train.Shuffled(1).Rows
		batch := rows[:len(rows)/10]
		out[name+" first"] = lrGradient(batch, nil)
		if name != "rcv1" {
			continue
		}
		w := map[uint64]float64{}
		for range 20 {
			g := lrGradient(rows, w)
			for i, k := range g.Keys {
				w[k] -= 5 * float64(g.Values[i])
			}
		}
		out[name+" later"] = lrGradient(batch, w)
	}
	return out
}

// syntheticGradients are Laplace updates of several sizes, one with a few
// values a hundred times the rest (the heavy tail of real gradients).
func syntheticGradients() map[string]Sparse {
	tail := laplaceUpdate(3, 20000, 1_000_000, 1e-3)
	r := rand.New(rand.NewPCG(3, 3))
	for range 20 {
		tail.Values[r.IntN(len(tail.Values))] *= 100
	}
	return map[string]Sparse{
		"laplace 1k":   laplaceUpdate(1, 1000, 50_000, 1e-3),
		"laplace 50k":  laplaceUpdate(2, 50000, 1_000_000, 1e-3),
		"heavy tail":   tail,
		"two keys":     {Keys: []uint64{3, 9}, Values: []float32{1, -2}},
		"all one sign": laplaceAbs(laplaceUpdate(4, 5000, 100_000, 1)),
	}
}

func laplaceAbs(u Sparse) Sparse {
	for i, v := range u.Values {
		u.Values[i] = float32(math.Abs(float64(v)))
	}
	return u
}

func testGradients(t *testing.T) map[string]Sparse {
	gs := realGradients(t)
	for name, u := range syntheticGradients() {
		gs[name] = u
	}
	return gs
}

// TestTargetErrorMet checks that a frame written for a target error decodes
// within it, and that a looser target never costs more bytes. The heavy
// tail is the exception doc.go names: equal-count buckets put its few
// large values with ordinary ones even at 4096 quantiles, so a tight
// target is out of reach; its frames must still be no worse than the
// default frame and improve as the target tightens.
func TestTargetErrorMet(t *testing.T) {
	for name, u := range testGradients(t) {
		def, err := Measure(mustSketchML(t, DefaultSketchMLConfig()), u)
		if err != nil {
			t.Fatal(err)
		}
		prevBytes, prevErr := math.MaxInt, 0.0
		for _, target := range []float64{0.05, 0.1, 0.2, 0.3, 0.5} {
			cfg := DefaultSketchMLConfig()
			cfg.TargetError = target
			m, err := Measure(mustSketchML(t, cfg), u)
			if err != nil {
				t.Fatalf("%s target %v: %v", name, target, err)
			}
			switch {
			case name == "heavy tail" && (m.RelL2Error > def.RelL2Error || m.RelL2Error < prevErr):
				t.Errorf("%s: target %v, relative L2 error %.4f; default frame %.4f, tighter target %.4f", name, target, m.RelL2Error, def.RelL2Error, prevErr)
			case name != "heavy tail" && m.RelL2Error > target:
				t.Errorf("%s: target %v, relative L2 error %.4f", name, target, m.RelL2Error)
			}
			prevErr = m.RelL2Error
			if m.Bytes > prevBytes {
				t.Errorf("%s: target %v takes %d bytes, more than the %d of a tighter target", name, target, m.Bytes, prevBytes)
			}
			if m.SignFlips != 0 || m.Overestimates != 0 {
				t.Errorf("%s target %v: %d sign flips, %d overestimates", name, target, m.SignFlips, m.Overestimates)
			}
			prevBytes = m.Bytes
		}
	}
}

// TestTargetErrorSavesBytes checks that a target above the default frame's
// error takes fewer bytes than the default frame on a large real gradient:
// the search drops columns the error does not need.
func TestTargetErrorSavesBytes(t *testing.T) {
	u := realGradients(t)["rcv1 first"]
	def, err := Measure(mustSketchML(t, DefaultSketchMLConfig()), u)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultSketchMLConfig()
	cfg.TargetError = min(0.99, def.RelL2Error*1.2)
	m, err := Measure(mustSketchML(t, cfg), u)
	if err != nil {
		t.Fatal(err)
	}
	if m.Bytes >= def.Bytes || m.RelL2Error > cfg.TargetError {
		t.Errorf("target %.3f: %d bytes at error %.4f; default frame %d bytes at error %.4f", cfg.TargetError, m.Bytes, m.RelL2Error, def.Bytes, def.RelL2Error)
	}
}

// TestByteBudgetMet checks that frames written for a byte budget fit it,
// decode, and lose no more as the budget grows; a budget below the
// smallest frame is refused.
func TestByteBudgetMet(t *testing.T) {
	for name, u := range testGradients(t) {
		def, err := mustSketchML(t, DefaultSketchMLConfig()).Encode(nil, u)
		if err != nil {
			t.Fatal(err)
		}
		prevErr := math.Inf(1)
		smallest := 0
		for _, frac := range []float64{0.5, 0.8, 0.9, 1, 1.2, 2, 4} {
			cfg := DefaultSketchMLConfig()
			cfg.ByteBudget = int(frac * float64(len(def)))
			m, err := Measure(mustSketchML(t, cfg), u)
			if errors.Is(err, ErrBadInput) && strings.Contains(err.Error(), "smallest sketchml frame") {
				if smallest != 0 {
					t.Errorf("%s: budget %d refused after a budget of %d fitted", name, cfg.ByteBudget, smallest)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s budget %d: %v", name, cfg.ByteBudget, err)
			}
			if smallest == 0 {
				smallest = cfg.ByteBudget
			}
			if m.Bytes > cfg.ByteBudget {
				t.Errorf("%s: budget %d bytes, frame %d", name, cfg.ByteBudget, m.Bytes)
			}
			if m.RelL2Error > prevErr {
				t.Errorf("%s: budget %d gives error %.4f, above the %.4f of a smaller budget", name, cfg.ByteBudget, m.RelL2Error, prevErr)
			}
			prevErr = m.RelL2Error
		}
		if smallest == 0 || smallest > len(def) {
			t.Errorf("%s: no budget up to the default frame's %d bytes fitted", name, len(def))
		}
	}
	cfg := DefaultSketchMLConfig()
	cfg.ByteBudget = 10
	_, err := mustSketchML(t, cfg).Encode(nil, realGradients(t)["rcv1 first"])
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "byte budget 10 is below") {
		t.Errorf("budget of 10 bytes: error %v, want ErrBadInput naming the budget", err)
	}
}
